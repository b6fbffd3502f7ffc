//! `am reset DEVICE [--json]`: mode1 reset of the whole ASIC through the SMU.
//!
//! The driver is opened in reset mode (a hive member with foreign firmware is not refused)
//! and then asks the SMU for a mode1 reset. Whatever ran on the device — firmware, queues —
//! is gone afterwards; the next open does a full boot.

use std::sync::Arc;
use std::time::Instant;

use am_driver::{AmDevice, Options, PciDevice};
use serde::Serialize;

use crate::device::open_device;
use crate::init::{BootSummary, Membership, kind_words, ms, print_boot};

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
    /// Wall time of the mode1 reset (including the SMU's settle time), milliseconds.
    pub reset_ms: f64,
}

/// Open in reset mode with `opts` and mode1-reset the device.
pub fn reset_once(pci: Arc<dyn PciDevice>, mut opts: Options) -> anyhow::Result<ResetReport> {
    opts.reset_mode = true;
    let backend = pci.backend().to_string();
    let dev = AmDevice::open_with(pci, opts)?;
    let membership = Membership::of(dev.is_vf(), dev.mc_layout());
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
        reset_ms: 0.0,
    };
    let t = Instant::now();
    dev.mode1_reset()?;
    Ok(ResetReport {
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
        println!(
            "{}  mode1 reset through the SMU in {:.3} ms: the next open does a full boot",
            r.device, r.reset_ms
        );
        println!("  backend      {}", r.backend);
        println!("  function     {}", r.membership.describe());
        println!(
            "  opened by    {} in {:.3} ms, {} register accesses",
            kind_words(&r.open.boot_kind),
            r.open.duration_ms,
            r.open.reg_accesses
        );
        print_boot(&r.open);
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::init::init_once;

    fn opts() -> Options {
        let mut o = Options::from_env("test").unwrap();
        o.force_reset = false;
        o.power_limit_w = None;
        o
    }

    #[test]
    fn after_a_reset_the_next_open_is_a_full_boot() {
        // Index 302: this test's own device. A clean init first, so that without the reset
        // the next open would be warm.
        let pci = am_mock::open("navi31", 302).unwrap();
        assert!(init_once(pci.clone(), opts()).unwrap().finalised);
        let r = reset_once(pci.clone(), opts()).unwrap();
        assert_eq!(r.open.boot_kind, "warm");
        assert_eq!(r.membership.function, "PF");
        let next = init_once(pci, opts()).unwrap();
        assert_ne!(next.boot.boot_kind, "warm");
        assert!(next.boot.full_boot_reason.is_some());
        let gpu = am_mock::gpu("navi31", 302).unwrap();
        assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
    }

    #[test]
    fn a_vf_cannot_reset_the_gpu() {
        let pci = am_mock::open("mi350x-vf", 303).unwrap();
        let e = reset_once(pci, opts()).unwrap_err().to_string();
        assert!(e.contains("PF owns the SMU"), "{e}");
    }
}
