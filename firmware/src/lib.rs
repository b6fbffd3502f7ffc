//! Locate, verify and parse amdgpu firmware blobs, and say what the PSP loads, in which
//! order.
//!
//! - [`Locator`] finds a file on the search path (`$AM_FIRMWARE_PATH`, then
//!   `/lib/firmware/amdgpu`; plain or `.zst`) and checks optional SHA-256 [`Pins`].
//! - [`IpVersions::files`] is the list of files the driver loads for a set of IP versions.
//! - [`parse()`] reads the common header and the versioned header of a file into an
//!   [`Image`] whose regions are checked against the file.
//! - [`FirmwareSet::plan`] turns a device's files into the ordered [`PspStep`]s the PSP
//!   loads.
//! - [`synth`] writes synthetic files with valid headers (for MI350X, whose GC 9.5.0
//!   firmware Debian lacks, and for tests that should not depend on the host).
//!
//! Nothing here panics on file content: every offset and size read from a header is
//! checked against the file length, and a bad one is a [`FirmwareError`] naming the file
//! and the offset.

mod error;
pub mod ip;
pub mod locate;
pub mod parse;
pub mod plan;
pub mod set;
pub mod synth;
pub mod types;

pub use error::{FirmwareError, Result};
pub use ip::{FileSpec, IpVersion, IpVersions, Role};
pub use locate::{Locator, Pins, RawFile};
pub use parse::{Body, Image, Kind, Region, SosVariant, parse, parse_as};
pub use plan::{LoadPlan, Payload, PlanOptions, PspStep};
pub use set::{FirmwareSet, LoadedFile};
pub use types::{BootloaderCmd, GfxFwType, PspFwType};
