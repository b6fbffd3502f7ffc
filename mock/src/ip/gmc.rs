//! GMC: the GC and MM hubs (VM contexts, system aperture, FB location, invalidation
//! engines).
//!
//! Modelled now: the frame-buffer location firmware programs at power-on, so the driver
//! finds VRAM at a non-zero MC address as on real parts (a driver that mixes up MC and
//! physical addresses fails on the mock too). Otherwise registers hold their values; the
//! invalidation engines, TLB snapshot semantics and page faults of `mock-device.md` item 5
//! are the bring-up's.

use super::{Hw, IpModel};
use crate::profile::RegIp;
use am_autogen::hwid::{GC_HWID, MMHUB_HWID};

/// MC address of VRAM byte 0 as firmware programs it on these dGPUs (512 GiB, the value
/// Linux reports as the start of the "VRAM:" range on Navi and MI300 parts).
pub const FB_BASE: u64 = 0x80_0000_0000;

/// FB location registers of every hub generation: (table, base register, top register).
const FB_LOCATION: &[(RegIp, &str, &str)] = &[
    (
        RegIp::Gc,
        "GCMC_VM_FB_LOCATION_BASE",
        "GCMC_VM_FB_LOCATION_TOP",
    ),
    (RegIp::Gc, "MC_VM_FB_LOCATION_BASE", "MC_VM_FB_LOCATION_TOP"),
    (
        RegIp::Mmhub,
        "MMMC_VM_FB_LOCATION_BASE",
        "MMMC_VM_FB_LOCATION_TOP",
    ),
    (
        RegIp::Mmhub,
        "MC_VM_FB_LOCATION_BASE",
        "MC_VM_FB_LOCATION_TOP",
    ),
];

/// GMC model state.
#[derive(Debug, Default)]
pub struct Gmc {}

impl Gmc {
    /// What firmware leaves in the hubs at power-on (and again after a reset): the FB
    /// location, in 16 MiB units, on every GC and MM hub instance.
    pub fn power_on(hw: &mut Hw<'_>) {
        let base = (FB_BASE >> 24) as u32;
        let top = ((FB_BASE + hw.profile.vram_size - 1) >> 24) as u32;
        let hubs: Vec<(RegIp, u8)> = hw
            .profile
            .ips
            .iter()
            .filter_map(|i| match i.hw_id {
                GC_HWID => Some((RegIp::Gc, i.instance)),
                MMHUB_HWID => Some((RegIp::Mmhub, i.instance)),
                _ => None,
            })
            .collect();
        for (ip, instance) in hubs {
            for &(table, base_reg, top_reg) in FB_LOCATION.iter().filter(|f| f.0 == ip) {
                if hw.set(table, base_reg, instance, base) {
                    hw.set(table, top_reg, instance, top);
                }
            }
        }
    }
}

impl IpModel for Gmc {}
