//! The AM driver: a userspace driver for AMD GPUs, brought up from the PCI BARs.

pub mod discovery;
mod error;
pub mod hwip;
pub mod mm;
pub mod mmio;
pub mod pci;
pub mod regs;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod testutil;
pub mod vf;

pub use discovery::{Discovery, IpVersion};
pub use error::{Error, Result};
pub use hwip::HwIp;
pub use pci::{Bar, BarInfo, PciDevice, SysMem};
