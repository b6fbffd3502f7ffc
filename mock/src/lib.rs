//! A strict mock of an AMD GPU on the PCI bus.
//!
//! A [`MockGpu`] is the device: PCI config space, BAR0 (VRAM, backed sparsely), BAR2
//! (doorbells), BAR5 (registers routed to per-IP models), the discovery binary generated
//! from its [`Profile`], and system memory it can reach by DMA. Driver instances open
//! [`MockDevice`] handles on it, which implement the driver's [`am_driver::PciDevice`];
//! the device's state outlives them. Every access outside the hardware contract is a
//! [`Violation`]: recorded, and returned to the driver as an error. The contract is written
//! down in `docs/MOCK.md`.

pub mod config;
mod device;
pub mod discovery;
mod error;
pub mod hive;
pub mod ip;
pub mod profile;
pub mod regs;
pub mod sysmem;
mod tables;
pub mod vf_pf;
pub mod vram;
pub mod walker;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

pub use device::{
    Access, DoorbellOwner, DoorbellRing, MockBar, MockDevice, MockGpu, Mode, Space, Violation,
};
pub use error::{Error, Result};
pub use profile::{PROFILES, Profile};

/// Devices opened through [`open`], per (profile, index), kept for the life of the process
/// so that a second `open` of the same spec reaches the same device, as a second driver
/// instance reaches the same hardware.
fn registry() -> &'static Mutex<HashMap<(String, u32), MockGpu>> {
    static REGISTRY: OnceLock<Mutex<HashMap<(String, u32), MockGpu>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// The process-wide mock device `mock:PROFILE:INDEX`, created strict on first use.
pub fn gpu(profile: &str, index: u32) -> Result<MockGpu> {
    let mut reg = registry().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(g) = reg.get(&(profile.to_string(), index)) {
        return Ok(g.clone());
    }
    let g = MockGpu::with_mode(profile, index, Mode::Strict)?;
    reg.insert((profile.to_string(), index), g.clone());
    Ok(g)
}

/// Open a driver handle on the process-wide device `mock:PROFILE:INDEX`.
pub fn open(profile: &str, index: u32) -> am_driver::Result<Arc<dyn am_driver::PciDevice>> {
    let dev: Arc<dyn am_driver::PciDevice> = gpu(profile, index)?.open();
    Ok(dev)
}

/// Open a device given as `mock:PROFILE[:INDEX]` (the spec the tools accept).
pub fn open_spec(spec: &str) -> am_driver::Result<Arc<dyn am_driver::PciDevice>> {
    let bad = |reason: &str| am_driver::Error::BadDeviceSpec {
        spec: spec.to_string(),
        reason: reason.to_string(),
    };
    let rest = spec
        .strip_prefix("mock:")
        .ok_or_else(|| bad("a mock device is written mock:PROFILE[:INDEX]"))?;
    let (profile, index) = match rest.split_once(':') {
        Some((p, i)) => (p, i.parse().map_err(|_| bad("the index must be a number"))?),
        None => (rest, 0),
    };
    open(profile, index)
}
