//! The remote PCI backend: a device on another machine, reached over TCP with the protocol
//! of tinygrad's `REMOTE=host:port` (`docs/REMOTE.md`).
//!
//! [`protocol`] frames requests and responses, [`RemotePciDevice`] is the client backend,
//! [`serve`] exports any [`PciDevice`](crate::PciDevice) — a real one or the mock — and
//! [`ratelimit`] bounds the log lines its peers (and the mock they reach) can trigger.

mod client;
pub mod protocol;
pub mod ratelimit;
mod server;

pub use client::{RemoteOptions, RemotePciDevice, probe, probe_amd};
pub use protocol::{DEFAULT_PORT, ProbeEntry};
pub use server::{Cidr, ServeOptions, default_max_sysmem_total, serve};
