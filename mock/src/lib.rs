//! A strict mock of an AMD GPU on the PCI bus.
//!
//! A [`MockGpu`] is the device: PCI config space, BAR0 (VRAM, backed sparsely), BAR2
//! (doorbells), BAR5 (registers routed to per-IP models), the discovery binary generated
//! from its [`Profile`], and system memory it can reach by DMA. Driver instances open
//! [`MockDevice`] handles on it, which implement the driver's [`am_driver::PciDevice`];
//! the device's state outlives them. Every access outside the hardware contract is a
//! [`Violation`]: recorded, and returned to the driver as an error. The contract is written
//! down in `docs/MOCK.md`.

pub mod bus;
pub mod config;
mod device;
pub mod discovery;
pub mod engine;
mod error;
pub mod hive;
pub mod ip;
mod log;
pub mod profile;
pub mod regs;
pub mod sysmem;
mod tables;
pub mod vf_pf;
pub mod vram;
pub mod walker;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use am_isa::sync::lock;

pub use device::{
    DOORBELL_RECORD, DoorbellOwner, DoorbellRing, MAX_VIOLATIONS, MockBar, MockDevice, MockGpu,
    Mode, Space, Violation,
};
pub use engine::{QueueKey, QueueKind, QueueStatus, ShaderStatistics};
pub use error::{Error, Result};
pub use hive::{Hive, Member};
pub use profile::{PROFILES, Profile};
pub use walker::Access;

/// Devices opened through [`open`], per (profile, index), kept for the life of the process
/// so that a second `open` of the same spec reaches the same device, as a second driver
/// instance reaches the same hardware.
fn registry() -> &'static Mutex<HashMap<(String, u32), MockGpu>> {
    static REGISTRY: OnceLock<Mutex<HashMap<(String, u32), MockGpu>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// Hives of the process-wide devices, per (hive profile name, hive id), so that every member
/// of one hive holds the same [`hive::Hive`].
type HiveRegistry = Mutex<HashMap<(String, u32), Arc<hive::Hive>>>;

fn hives() -> &'static HiveRegistry {
    static HIVES: OnceLock<HiveRegistry> = OnceLock::new();
    HIVES.get_or_init(Default::default)
}

/// Environment variable: when `1`, process-wide PF devices start as `amdgpu` leaves them
/// ([`MockGpu::run_foreign_firmware`]), so a command run in its own process (the CLI tests)
/// meets foreign firmware.
pub const FOREIGN_FIRMWARE_ENV: &str = "AM_MOCK_FOREIGN_FIRMWARE";

/// Environment variable: a file that process-wide devices ([`gpu`]) write their shader
/// statistics to after every dispatch, with statistics on from the start (so that
/// `am serve mock:…` can be measured from outside: `am bench kernels --tinygrad`). Devices of
/// other profiles or indices write the same file; serve one.
pub const SHADER_STATISTICS_ENV: &str = "AM_MOCK_SHADER_STATISTICS";

/// A new strict device for the registry: a plain profile, or member `index % N` of hive
/// `index / N` for a hive profile `PROFILE-hiveN`.
fn create(profile: &str, index: u32) -> Result<MockGpu> {
    let Some((base, n)) = hive::parse_profile(profile) else {
        return MockGpu::with_mode(profile, index, Mode::Strict);
    };
    let members: u8 = n.parse().map_err(|_| Error::BadHive {
        name: profile.to_string(),
        reason: format!("{n:?} after -hive is not a member count"),
    })?;
    let m = hive::Hive::new(base, members, 0)?.num_devices;
    let id = index / u32::from(m);
    let region = (index % u32::from(m)) as u8;
    let h = {
        let mut hives = lock(hives());
        match hives.get(&(profile.to_string(), id)) {
            Some(h) => h.clone(),
            None => {
                let h = Arc::new(hive::Hive::new(base, m, id)?);
                hives.insert((profile.to_string(), id), h.clone());
                h
            }
        }
    };
    MockGpu::build(
        Profile::by_name(base)?,
        index,
        Mode::Strict,
        Some(hive::Member { hive: h, region }),
    )
}

/// The process-wide mock device `mock:PROFILE:INDEX`, created strict on first use.
/// `PROFILE` may name a hive (`mi300x-hive4`, see [`hive`]): index `i` is then region
/// `i % 4` of hive `i / 4`.
pub fn gpu(profile: &str, index: u32) -> Result<MockGpu> {
    let mut reg = lock(registry());
    if let Some(g) = reg.get(&(profile.to_string(), index)) {
        return Ok(g.clone());
    }
    let g = create(profile, index)?;
    if std::env::var(FOREIGN_FIRMWARE_ENV).is_ok_and(|v| v.trim() == "1") && !g.profile().is_vf {
        g.run_foreign_firmware();
    }
    if let Some(path) = std::env::var_os(SHADER_STATISTICS_ENV).filter(|p| !p.is_empty()) {
        g.write_shader_statistics_to(Some(path.into()));
        g.set_shader_statistics(true);
    }
    reg.insert((profile.to_string(), index), g.clone());
    Ok(g)
}

/// Open a driver handle on the process-wide device `mock:PROFILE:INDEX`.
pub fn open(profile: &str, index: u32) -> am_driver::Result<Arc<dyn am_driver::PciDevice>> {
    let dev: Arc<dyn am_driver::PciDevice> = gpu(profile, index)?.open();
    Ok(dev)
}

/// Let [`am_driver::pci::open_spec`] open `mock:PROFILE[:INDEX]` specs (as [`open`] does).
/// Idempotent.
pub fn register() {
    am_driver::pci::register_mock(open);
}

/// Open a device given as `mock:PROFILE[:INDEX]` (the spec the tools accept; `PROFILE` may
/// be a hive profile such as `mi300x-hive4`).
pub fn open_spec(spec: &str) -> am_driver::Result<Arc<dyn am_driver::PciDevice>> {
    match am_driver::pci::DeviceSpec::parse(spec)? {
        am_driver::pci::DeviceSpec::Mock { profile, index } => open(&profile, index),
        _ => Err(am_driver::Error::from(
            am_driver::ErrorKind::BadDeviceSpec {
                spec: spec.to_string(),
                reason: "a mock device is written mock:PROFILE[:INDEX]".into(),
            },
        )),
    }
}
