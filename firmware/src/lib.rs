//! Locate, verify and parse amdgpu firmware blobs, and say what the PSP loads, in which
//! order.
//!
//! - [`Locator`] finds a file on the search path (`$AM_FIRMWARE_PATH`, then
//!   `/lib/firmware/amdgpu`; plain or `.zst`) and checks optional SHA-256 [`Pins`].
//! - [`IpVersions::files`] is the list of files the driver loads for a set of IP versions.
//!
//! Nothing here panics on file content: every offset and size read from a header is
//! checked against the file length, and a bad one is a [`FirmwareError`] naming the file
//! and the offset.

mod error;
pub mod ip;
pub mod locate;
pub mod types;

pub use error::{FirmwareError, Result};
pub use ip::{FileSpec, IpVersion, IpVersions, Role};
pub use locate::{Locator, Pins, RawFile};
pub use types::{BootloaderCmd, GfxFwType, PspFwType};
