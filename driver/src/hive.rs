//! XGMI hives: resetting every member (`am hive-reset`).
//!
//! A hive member that runs another driver's firmware cannot be brought up on its own (the
//! open refuses it with [`Error::HiveMalformed`]): its XGMI links only come back when every
//! member is reset. [`reset_all`] opens each device in reset mode ([`Options::reset_mode`],
//! which leaves such a member untouched instead of refusing it) and then mode1-resets them
//! all through their SMUs. It is all or nothing: if any device cannot be opened, none is
//! reset, since a hive with some members reset and others not is no better than before.
//!
//! A VF is never reset (its PF owns the SMU): it is reported as skipped, without opening it.

use std::sync::Arc;

use crate::ctx::McLayout;
use crate::device::{AmDevice, Options};
use crate::pci::PciDevice;
use crate::{Error, discovery};

/// What happened to one device.
#[derive(Debug)]
pub enum ResetResult {
    /// The SMU took the mode1 reset.
    Reset,
    /// Not reset, and why (a VF; another device could not be opened).
    Skipped(String),
    /// Opening or resetting failed.
    Failed(Error),
}

/// One device of a hive reset.
#[derive(Debug)]
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

impl MemberReset {
    fn new(device: &str, is_vf: bool, result: ResetResult) -> Self {
        MemberReset {
            device: device.to_string(),
            is_vf,
            layout: None,
            found: None,
            result,
        }
    }
}

/// Why a PF whose SMU firmware does not run is not reset.
pub const SMU_NOT_RUNNING: &str =
    "the SMU firmware was not running: nothing to reset (the device is as a reset leaves it)";

/// Why a VF is left alone.
pub const VF_CANNOT_RESET: &str = "a VF cannot reset the GPU: its PF owns the SMU";

/// Open every device in reset mode, then mode1-reset each PF, in the order given. Devices
/// are opened with `opts` (its `reset_mode` is set here). Returns one entry per device, in
/// order.
pub fn reset_all(devices: &[Arc<dyn PciDevice>], opts: &Options) -> Vec<MemberReset> {
    let mut opts = opts.clone();
    opts.reset_mode = true;
    let mut opened: Vec<(usize, AmDevice)> = Vec::new();
    let mut out: Vec<MemberReset> = Vec::with_capacity(devices.len());
    for (i, pci) in devices.iter().enumerate() {
        let name = pci.name();
        match discovery::is_vf(&**pci) {
            Ok(true) => {
                out.push(MemberReset::new(
                    name,
                    true,
                    ResetResult::Skipped(VF_CANNOT_RESET.into()),
                ));
                continue;
            }
            Ok(false) => {}
            Err(e) => {
                out.push(MemberReset::new(name, false, ResetResult::Failed(e)));
                continue;
            }
        }
        match AmDevice::open_with(pci.clone(), opts.clone()) {
            Ok(dev) => {
                let report = dev.boot_report();
                let mut m = MemberReset::new(name, false, ResetResult::Reset);
                m.layout = Some(dev.mc_layout());
                m.found = Some(match &report.reason {
                    Some(r) => format!("{} boot: {r}", report.kind.name()),
                    None => format!("{} boot", report.kind.name()),
                });
                out.push(m);
                opened.push((i, dev));
            }
            Err(e) => out.push(MemberReset::new(name, false, ResetResult::Failed(e))),
        }
    }
    let failed: Vec<&str> = out
        .iter()
        .filter(|m| matches!(m.result, ResetResult::Failed(_)))
        .map(|m| m.device.as_str())
        .collect();
    if !failed.is_empty() {
        let why = format!(
            "not reset: {} could not be opened, and a hive is reset whole or not at all",
            failed.join(", ")
        );
        for (i, _) in &opened {
            out[*i].result = ResetResult::Skipped(why.clone());
        }
        // Dropping finalises what the open brought up; members left for the reset are
        // dropped untouched.
        return out;
    }
    for (i, dev) in opened {
        tracing::info!("{}: mode1 reset", out[i].device);
        match dev.mode1_reset() {
            Ok(true) => {}
            Ok(false) => {
                out[i].result = ResetResult::Skipped(SMU_NOT_RUNNING.into());
            }
            Err(e) => out[i].result = ResetResult::Failed(e),
        }
    }
    out
}
