//! The AM driver: a userspace driver for AMD GPUs, brought up from the PCI BARs.

mod error;
pub mod mm;
pub mod mmio;
pub mod pci;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod testutil;
pub mod vf;

pub use error::{Error, Result};
pub use pci::{Bar, BarInfo, PciDevice, SysMem};
