//! `am reset DEVICE [--json]`: mode1 reset of the whole ASIC through the SMU.
//!
//! The driver is opened in reset mode (discovery, registers and `init_sw`, nothing brought
//! up) and asks the SMU for a mode1 reset, with bus mastering off around it. Whatever ran on
//! the device — firmware, queues — is gone afterwards. If the SMU firmware is not running
//! there is nothing to reset, and the report says so.

use std::sync::Arc;
use std::time::Instant;

use am_driver::{AmDevice, Options, PciDevice};
use serde::Serialize;

use crate::device::open_device;
use crate::init::{BootSummary, Membership, kind_words, ms};

/// Arguments of `am reset`.
#[derive(Debug, clap::Args)]
pub struct ResetArgs {
    /// Device: a PCI BDF (0000:03:00.0), mock:PROFILE[:N] or remote:HOST:PORT[:N].
    pub device: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Everything `am reset` reports.
#[derive(Debug, Serialize)]
pub struct ResetReport {
    /// The device spec.
    pub device: String,
    /// Backend (`sysfs`, `vfio`, `remote`, `mock`).
    pub backend: String,
    /// What opening the device (before the reset) did.
    pub open: BootSummary,
    /// VF/PF, MC layout, hive.
    #[serde(flatten)]
    pub membership: Membership,
    /// Whether the SMU firmware was running: a mode1 reset was done. `false`: nothing to
    /// reset, the device is already as a reset leaves it.
    pub smu_was_running: bool,
    /// Wall time of `mode1_reset` (the SMU probe, the message and its settle time),
    /// milliseconds.
    pub reset_ms: f64,
}

/// Open in reset mode with `opts` and mode1-reset the device.
pub fn reset_once(pci: Arc<dyn PciDevice>, mut opts: Options) -> anyhow::Result<ResetReport> {
    opts.reset_mode = true;
    let backend = pci.backend().to_string();
    let dev = AmDevice::open_with(pci, opts)?;
    let membership = Membership::of(dev.ctx().is_vf, dev.ctx().mc);
    if let Some(h) = &membership.hive {
        // One member reset alone leaves the others with a hive whose links and shared
        // memory went away under them.
        anyhow::bail!(
            "{}: member of an XGMI hive of {} devices: the whole hive is reset together \
             (`am hive-reset`), not one member",
            dev.name(),
            h.regions
        );
    }
    let report = ResetReport {
        device: dev.name().to_string(),
        backend,
        open: BootSummary::from_report(dev.boot_report()),
        membership,
        smu_was_running: false,
        reset_ms: 0.0,
    };
    let t = Instant::now();
    let smu_was_running = dev.mode1_reset()?;
    Ok(ResetReport {
        smu_was_running,
        reset_ms: ms(t.elapsed()),
        ..report
    })
}

/// Run `am reset`.
pub fn run(args: ResetArgs) -> anyhow::Result<()> {
    let pci = open_device(&args.device)?;
    let opts = Options::from_env(pci.name())?;
    let r = reset_once(pci, opts)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        if r.smu_was_running {
            println!(
                "{}  mode1 reset through the SMU in {:.3} ms: firmware and queues are gone",
                r.device, r.reset_ms
            );
        } else {
            println!(
                "{}  the SMU firmware is not running: nothing to reset (checked in {:.3} ms)",
                r.device, r.reset_ms
            );
        }
        println!("  backend      {}", r.backend);
        println!("  function     {}", r.membership.describe());
        println!(
            "  opened       {} in {:.3} ms, {} register accesses",
            kind_words(&r.open.boot_kind),
            r.open.duration_ms,
            r.open.reg_accesses
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::init::init_once;
    use crate::init::tests::opts;

    #[test]
    fn reset_mode_brings_nothing_up_and_the_report_says_what_the_smu_did() {
        // Index 302: this test's own device, brought up and finalised first so that its
        // firmware runs.
        let pci = am_mock::open("navi31", 302).unwrap();
        assert!(init_once(pci.clone(), opts()).unwrap().finalised);
        let gpu = am_mock::gpu("navi31", 302).unwrap();
        let r = reset_once(pci, opts()).unwrap();
        assert_eq!(r.open.boot_kind, "reset-only");
        let names: Vec<&str> = r.open.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["init_sw"]);
        assert_eq!(r.membership.function, "PF");
        // A mode1 reset leaves the mock's SMU firmware dead until the PSP runs again: the
        // report claims a reset exactly when the device went through one.
        assert_eq!(r.smu_was_running, !gpu.with_smu(|s| s.alive()));
        assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
    }

    #[test]
    fn the_open_after_a_reset_is_a_full_boot_even_after_a_clean_fini() {
        // A clean fini leaves SCRATCH_REG7/6 asking for a warm boot, and the scratch
        // registers survive the reset; the firmware does not.
        let pci = am_mock::open("navi31", 305).unwrap();
        assert!(init_once(pci.clone(), opts()).unwrap().finalised);
        assert!(reset_once(pci.clone(), opts()).unwrap().smu_was_running);
        let next = init_once(pci, opts()).unwrap();
        assert_eq!(next.boot.boot_kind, "cold");
        let why = next.boot.full_boot_reason.unwrap();
        assert!(why.contains("SCRATCH_REG7 = 0x0"), "{why}");
        assert!(!next.boot.firmware.is_empty());
        let gpu = am_mock::gpu("navi31", 305).unwrap();
        assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
    }

    #[test]
    fn a_hive_member_is_left_to_the_hive_reset() {
        let pci = am_mock::open("mi300x-hive2", 304).unwrap();
        let e = reset_once(pci, opts()).unwrap_err().to_string();
        assert!(e.contains("XGMI hive of 2 devices"), "{e}");
        assert!(e.contains("am hive-reset"), "{e}");
        // Refused before any SMU message: nothing was reset.
        let gpu = am_mock::gpu("mi300x-hive2", 304).unwrap();
        assert!(gpu.with_smu(|s| s.alive()));
    }

    #[test]
    fn a_vf_cannot_reset_the_gpu() {
        let pci = am_mock::open("mi350x-vf", 303).unwrap();
        let e = reset_once(pci, opts()).unwrap_err().to_string();
        assert!(e.contains("PF owns the SMU"), "{e}");
    }
}
