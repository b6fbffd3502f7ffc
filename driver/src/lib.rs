//! The AM driver: a userspace driver for AMD GPUs, brought up from the PCI BARs.

pub mod ctx;
mod device;
pub mod discovery;
mod error;
pub mod hive;
pub mod hwip;
pub mod ip;
pub mod irq;
pub mod mm;
mod mmio;
pub mod pci;
pub mod regs;
pub mod trace;
pub mod vf;

pub use ctx::{Ctx, McLayout, Timeouts, Vram};
pub use device::{AM_VERSION, AmDevice, BootKind, BootReport, Options, Phase, read_mc_layout};
pub use discovery::{Discovery, IpVersion};
pub use error::{Error, ErrorKind, Result};
pub use hwip::HwIp;
pub use pci::{Bar, BarInfo, ExecutedCode, IndexStep, Ownership, PciDevice, SysMem};

// Names most modules use besides the public ones above; a module takes them all with
// `use crate::*`.
use mmio::{access32, hi32, lo32};

#[cfg(test)]
mod testutil;
