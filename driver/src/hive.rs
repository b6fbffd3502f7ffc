//! XGMI hives: another member's VRAM ([`PeerVram`], mapped by
//! [`AmDevice::map_peer`]) and resetting every member (`am hive-reset`).
//!
//! Members of a hive share one frame-buffer aperture: member `r`'s VRAM is segment `r`
//! (`MC_VM_XGMI_LFB_CNTL.PF_LFB_REGION`, segments of `MC_VM_XGMI_LFB_SIZE`), so a VRAM page
//! entry holding another member's `paddr_base` plus an address of its VRAM reaches that
//! member's memory over XGMI (Linux: `vram_base_offset = physical_node_id ×
//! node_segment_size`, added to a peer buffer's address in `amdgpu_vm_bo_update`).
//! [`check_one_hive`] decides from the two devices' layouts whether that can work. What the
//! registers cannot tell apart is two hives of the same shape: Linux asks the PSP's XGMI
//! trusted application for a hive id, which this driver does not load.
//!
//! A hive member that runs another driver's firmware cannot be brought up on its own (the
//! open refuses it with [`crate::ErrorKind::HiveMalformed`]): its XGMI links only come back when every
//! member is reset. [`reset_all`] opens each device in reset mode ([`Options::reset_mode`],
//! which leaves such a member untouched instead of refusing it) and then mode1-resets them
//! all through their SMUs. It is all or nothing: if any device cannot be opened, none is
//! reset, since a hive with some members reset and others not is no better than before.
//!
//! A VF is never reset (its PF owns the SMU): it is reported as skipped, without opening it.

use std::sync::Arc;

use crate::*;

/// VRAM of one device, described for another member of its hive to map
/// ([`AmDevice::peer_vram`], [`AmDevice::map_peer`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerVram {
    /// The device whose VRAM it is.
    pub device: String,
    /// Its layout (its region and the hive's shape).
    pub layout: McLayout,
    /// Its VRAM physical `(addr, len)` ranges, in the order they are to be mapped.
    pub paddrs: Vec<(u64, u64)>,
}

impl PeerVram {
    /// The ranges as hive physical addresses: the peer's `paddr_base` plus each address.
    pub fn hive_ranges(&self) -> Vec<(u64, u64)> {
        self.paddrs
            .iter()
            .map(|&(p, n)| (self.layout.xgmi_paddr_base + p, n))
            .collect()
    }
}

/// Whether `device` (layout `local`) can reach the VRAM of `peer` over XGMI: both members of
/// a hive of the same number of devices, segment size and aperture base, in different
/// regions, and every range inside the peer's segment. The error names both devices and
/// what their layouts say.
pub fn check_one_hive(device: &str, local: &McLayout, peer: &PeerVram) -> Result<()> {
    let p = &peer.layout;
    let place = |name: &str, mc: &McLayout| match mc.xgmi_region() {
        Some(r) => format!(
            "{name} is region {r} of a hive of {} devices ({} GiB segments, aperture at {:#x})",
            mc.xgmi_regions,
            mc.xgmi_seg_size >> 30,
            mc.fb_base
        ),
        None => format!("{name} is in no XGMI hive"),
    };
    let shape = |mc: &McLayout| (mc.xgmi_regions, mc.xgmi_seg_size, mc.fb_base);
    let beyond =
        (peer.paddrs.iter()).find(|&&(a, n)| a.checked_add(n).is_none_or(|e| e > p.xgmi_seg_size));
    let reason = match (local.xgmi_region(), p.xgmi_region()) {
        (Some(r), Some(pr)) if shape(local) == shape(p) => match beyond {
            _ if r == pr => format!(
                "both are region {r} of a hive of {} devices: not one hive (or one device twice)",
                local.xgmi_regions
            ),
            Some((a, n)) => format!(
                "VRAM range {a:#x}+{n:#x} is beyond its {:#x}-byte segment",
                p.xgmi_seg_size
            ),
            None => return Ok(()),
        },
        _ => format!(
            "not members of one XGMI hive: {}; {}",
            place(device, local),
            place(&peer.device, p)
        ),
    };
    Err(Error::new(
        device,
        ErrorKind::NotInOneHive {
            peer: peer.device.clone(),
            reason,
        },
    ))
}

/// What happened to one device.
#[derive(Debug, Default)]
pub enum ResetResult {
    /// The SMU took the mode1 reset.
    #[default]
    Reset,
    /// Not reset, and why (a VF; another device could not be opened).
    Skipped(String),
    /// Opening or resetting failed.
    Failed(Error),
}

/// One device of a hive reset.
#[derive(Debug, Default)]
pub struct MemberReset {
    /// Device name.
    pub device: String,
    /// Whether the function is an SR-IOV VF.
    pub is_vf: bool,
    /// The XGMI layout read when the device was opened (`None` if it was not opened).
    pub layout: Option<McLayout>,
    /// What the reset-mode open found: the boot kind's name and its reason (foreign
    /// firmware left for the reset, a previous AM instance, …); `None` if not opened.
    pub found: Option<String>,
    /// The outcome.
    pub result: ResetResult,
}

/// Why a VF is left alone.
pub const VF_CANNOT_RESET: &str = "a VF cannot reset the GPU: its PF owns the SMU";

/// Open every device in reset mode, then mode1-reset each PF, in the order given. Devices
/// are opened with `opts` (its `reset_mode` is set here). Returns one entry per device, in
/// order.
pub fn reset_all(devices: &[Arc<dyn PciDevice>], opts: &Options) -> Vec<MemberReset> {
    let opts = Options {
        reset_mode: true,
        ..opts.clone()
    };
    let mut opened = vec![];
    let mut out = vec![];
    for pci in devices {
        let mut m = MemberReset {
            device: pci.name().to_string(),
            ..MemberReset::default()
        };
        match pci.bar(5).and_then(|mmio| vf::is_vf(&*mmio)) {
            Ok(true) => {
                m.is_vf = true;
                m.result = ResetResult::Skipped(VF_CANNOT_RESET.into());
            }
            Ok(false) => match AmDevice::open_with(pci.clone(), opts.clone()) {
                Ok(dev) => {
                    let r = dev.boot_report();
                    let reason = r.reason.as_ref().map(|r| format!(": {r}"));
                    m.found = Some(format!("{} boot{}", r.kind, reason.unwrap_or_default()));
                    m.layout = Some(dev.ctx().mc);
                    opened.push((out.len(), dev));
                }
                Err(e) => m.result = ResetResult::Failed(e),
            },
            Err(e) => m.result = ResetResult::Failed(e),
        }
        out.push(m);
    }
    let failed = (out.iter())
        .filter(|m| matches!(m.result, ResetResult::Failed(_)))
        .map(|m| m.device.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    for (i, dev) in opened {
        out[i].result = match failed.is_empty() {
            // Dropped untouched: a reset-mode open has nothing to finalise.
            false => ResetResult::Skipped(format!(
                "not reset: {failed} could not be opened, and a hive is reset whole or not at all"
            )),
            true => {
                tracing::info!("{}: mode1 reset", out[i].device);
                match dev.mode1_reset() {
                    Ok(true) => ResetResult::Reset,
                    Ok(false) => ResetResult::Skipped(
                        "the SMU firmware was not running: nothing to reset (the device is as a reset leaves it)".into(),
                    ),
                    Err(e) => ResetResult::Failed(e),
                }
            }
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEG: u64 = 192 << 30;

    fn member(region: u64, regions: u32) -> McLayout {
        McLayout {
            fb_base: 0x80_0000_0000,
            fb_top: 0x80_0000_0000 + u64::from(regions) * SEG - 1,
            xgmi_paddr_base: region * SEG,
            xgmi_seg_size: SEG,
            xgmi_regions: regions,
        }
    }

    fn alone() -> McLayout {
        McLayout {
            fb_base: 0x80_0000_0000,
            fb_top: 0x80_0000_0000 + SEG - 1,
            ..McLayout::default()
        }
    }

    fn peer(layout: McLayout, paddrs: Vec<(u64, u64)>) -> PeerVram {
        PeerVram {
            device: "mock:b".into(),
            layout,
            paddrs,
        }
    }

    fn refusal(local: McLayout, p: &PeerVram) -> String {
        match check_one_hive("mock:a", &local, p) {
            Err(
                e @ Error {
                    kind: ErrorKind::NotInOneHive { .. },
                    ..
                },
            ) => e.to_string(),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn members_of_one_hive_map_each_others_vram_at_hive_addresses() {
        let p = peer(
            member(3, 4),
            vec![(0x20_0000, 0x1000), (0x40_0000, 0x20_0000)],
        );
        check_one_hive("mock:a", &member(1, 4), &p).unwrap();
        assert_eq!(
            p.hive_ranges(),
            vec![
                (3 * SEG + 0x20_0000, 0x1000),
                (3 * SEG + 0x40_0000, 0x20_0000)
            ]
        );
    }

    #[test]
    fn devices_outside_one_hive_are_refused_naming_both() {
        let mem = vec![(0x1000, 0x1000)];
        // Neither in a hive (two navi31).
        let e = refusal(alone(), &peer(alone(), mem.clone()));
        assert_eq!(
            e,
            "mock:a: cannot map VRAM of mock:b: not members of one XGMI hive: mock:a is in no \
             XGMI hive; mock:b is in no XGMI hive"
        );
        // One in a hive, one not.
        let e = refusal(member(0, 2), &peer(alone(), mem.clone()));
        assert!(
            e.contains("mock:a is region 0 of a hive of 2 devices (192 GiB segments"),
            "{e}"
        );
        assert!(e.contains("mock:b is in no XGMI hive"), "{e}");
        // Hives of different sizes.
        let e = refusal(member(0, 2), &peer(member(1, 4), mem.clone()));
        assert!(
            e.contains("hive of 2 devices") && e.contains("hive of 4 devices"),
            "{e}"
        );
        // The same region: two hives, or one device twice.
        let e = refusal(member(1, 4), &peer(member(1, 4), mem));
        assert!(e.contains("both are region 1"), "{e}");
        // A range past the peer's segment.
        let e = refusal(
            member(0, 2),
            &peer(member(1, 2), vec![(SEG - 0x1000, 0x2000)]),
        );
        assert!(e.contains("beyond its"), "{e}");
    }
}
