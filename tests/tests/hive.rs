//! XGMI hives on the mock: the driver reads each member's place in its hive, refuses a member
//! that runs foreign firmware, and `am_driver::hive::reset_all` resets a whole hive so that
//! every member boots afterwards.
//!
//! Some of these tests depend on the PSP/SMU blocks (`Psp::is_sos_alive`, `Smu::is_alive`,
//! `Smu::mode1_reset`): they assume their real semantics — sOS alive when `C2PMSG_81 != 0`,
//! SMU alive when it answers `GetSmuVersion`, mode1 reset through `GfxDriverReset` on
//! MP1 13.0.6 — and the mock's `run_foreign_firmware` state gives exactly that.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use am_driver::hive::{ResetResult, VF_CANNOT_RESET, reset_all};
use am_driver::regs::Regs;
use am_driver::{AmDevice, BootKind, Discovery, Error, Options, PciDevice, read_mc_layout};
use am_mock::MockGpu;

const HIVE: &str = "mi300x-hive4";
const SEG: u64 = 192 << 30;
const FB_BASE: u64 = 0x80_0000_0000;

fn opts() -> Options {
    let mut o = Options::from_env("test").unwrap();
    o.force_reset = false;
    o.power_limit_w = None;
    o
}

/// Members `first..first + 4` of a 4-device hive (`first` a multiple of 4).
fn hive(first: u32) -> Vec<MockGpu> {
    (first..first + 4)
        .map(|i| am_mock::gpu(HIVE, i).unwrap())
        .collect()
}

fn pcis(gpus: &[MockGpu]) -> Vec<Arc<dyn PciDevice>> {
    gpus.iter()
        .map(|g| {
            let d: Arc<dyn PciDevice> = g.open();
            d
        })
        .collect()
}

#[test]
fn each_member_reads_its_region_of_the_hive() {
    for (r, gpu) in hive(220).iter().enumerate() {
        let pci = gpu.open();
        // Without opening the device (what `am info` does)...
        let d = Discovery::read(&*pci).unwrap();
        let mc = read_mc_layout(&Regs::new(&*pci, &d).unwrap()).unwrap();
        assert!(mc.is_hive());
        assert_eq!(mc.xgmi_region(), Some(r as u32));
        assert_eq!(mc.xgmi_regions, 4);
        assert_eq!(mc.xgmi_seg_size, SEG);
        assert_eq!(mc.xgmi_paddr_base, r as u64 * SEG);
        assert_eq!(mc.fb_base, FB_BASE);
        assert_eq!(mc.fb_top, FB_BASE + 4 * SEG - 1);
        assert_eq!(mc.mc(0x1000), FB_BASE + r as u64 * SEG + 0x1000);
        // ...and through the open.
        let dev = AmDevice::open_with(pci, opts()).unwrap();
        assert_eq!(dev.mc_layout(), mc);
        dev.fini().unwrap();
        assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
    }
    // A device outside a hive has no layout.
    let pci = am_mock::open("mi300x", 220).unwrap();
    let d = Discovery::read(&*pci).unwrap();
    let mc = read_mc_layout(&Regs::new(&*pci, &d).unwrap()).unwrap();
    assert!(!mc.is_hive());
    assert_eq!(mc.xgmi_region(), None);
    assert_eq!((mc.xgmi_regions, mc.xgmi_paddr_base), (0, 0));
}

// Needs the real `Psp::is_sos_alive`/`Smu::is_alive` (helper "pspsmu").
#[test]
fn a_member_running_foreign_firmware_is_refused_naming_hive_reset() {
    let gpus = hive(224);
    gpus[1].run_foreign_firmware();
    let err = AmDevice::open_with(gpus[1].open(), opts()).unwrap_err();
    assert!(
        matches!(err, Error::HiveMalformed { regions: 4, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("am hive-reset"), "{err}");
    // The refusal leaves the firmware as it was.
    assert!(gpus[1].with_psp(|p| p.sos_alive()));
    assert!(gpus[1].with_smu(|s| s.alive()));

    // In reset mode the same member opens, untouched, and dropping it touches nothing.
    let mut o = opts();
    o.reset_mode = true;
    let dev = AmDevice::open_with(gpus[1].open(), o).unwrap();
    assert!(dev.left_for_reset());
    let smu_log = gpus[1].with_smu(|s| s.log().len());
    let scratch6 = gpus[1].peek(am_autogen::regs::RegIp::Gc, "SCRATCH_REG6", 0);
    drop(dev);
    assert_eq!(
        gpus[1].with_smu(|s| s.log().len()),
        smu_log,
        "no SMU message on drop"
    );
    assert_eq!(
        gpus[1].peek(am_autogen::regs::RegIp::Gc, "SCRATCH_REG6", 0),
        scratch6
    );
    assert!(gpus[1].with_psp(|p| p.sos_alive()));
    assert!(
        gpus[1].violations().is_empty(),
        "{:?}",
        gpus[1].violations()
    );
}

// The refusal before the reset, the state after it and the "found" text need the real PSP and
// SMU blocks (helper "pspsmu"); the rest checks `reset_all` itself.
#[test]
fn hive_reset_resets_every_member_and_each_boots_afterwards() {
    let gpus = hive(228);
    for g in &gpus {
        g.run_foreign_firmware();
    }
    for g in &gpus {
        let err = AmDevice::open_with(g.open(), opts()).unwrap_err();
        assert!(matches!(err, Error::HiveMalformed { .. }), "{err}");
    }
    let out = reset_all(&pcis(&gpus), &opts());
    assert_eq!(out.len(), 4);
    for (r, (m, g)) in out.iter().zip(&gpus).enumerate() {
        assert_eq!(m.device, g.name());
        assert!(!m.is_vf);
        assert!(matches!(m.result, ResetResult::Reset), "{m:?}");
        let layout = m.layout.unwrap();
        assert_eq!(layout.xgmi_paddr_base, r as u64 * SEG);
        assert!(
            m.found
                .as_deref()
                .unwrap()
                .contains("opened for a reset: nothing initialised"),
            "{m:?}"
        );
        // The reset reached the device: firmware down, the SMU message in its log.
        assert!(!g.with_psp(|p| p.sos_alive()), "{}", g.name());
        assert!(!g.with_smu(|s| s.alive()), "{}", g.name());
    }
    for g in &gpus {
        let dev = AmDevice::open_with(g.open(), opts()).unwrap();
        assert_eq!(dev.boot_report().kind, BootKind::Cold);
        assert!(dev.mc_layout().is_hive());
        dev.fini().unwrap();
        assert!(
            g.violations().is_empty(),
            "{}: {:?}",
            g.name(),
            g.violations()
        );
    }
}

#[test]
fn hive_reset_skips_vfs_and_resets_nothing_when_a_device_cannot_be_opened() {
    let gpus = hive(232);
    let vf = am_mock::gpu("mi350x-vf", 232).unwrap();
    let broken = am_mock::gpu("mi300x", 233).unwrap();
    // A PF whose discovery table was never written cannot be opened.
    broken
        .vram()
        .write(broken.profile().vram_size - (64 << 10), &[0u8; 10 << 10]);
    let devices: Vec<Arc<dyn PciDevice>> =
        vec![gpus[0].open(), vf.open(), broken.open(), gpus[1].open()];
    let out = reset_all(&devices, &opts());
    assert_eq!(out.len(), 4);

    assert!(out[1].is_vf);
    assert!(
        matches!(&out[1].result, ResetResult::Skipped(why) if why == VF_CANNOT_RESET),
        "{:?}",
        out[1]
    );
    assert!(out[1].layout.is_none(), "the VF is not opened");
    assert!(
        vf.with_vf_pf(|pf| pf.log().is_empty()).unwrap(),
        "no mailbox request"
    );

    assert!(
        matches!(
            &out[2].result,
            ResetResult::Failed(Error::DiscoverySignature { .. })
        ),
        "{:?}",
        out[2]
    );
    for i in [0, 3] {
        match &out[i].result {
            ResetResult::Skipped(why) => {
                assert!(why.contains(broken.name()), "{why}");
                assert!(why.contains("whole or not at all"), "{why}");
            }
            other => panic!("{}: {other:?}", out[i].device),
        }
    }
    // Nothing was reset: no mode1 message reached any SMU.
    for g in [&gpus[0], &gpus[1], &broken] {
        assert!(
            g.with_smu(|s| s.log().iter().all(|m| m.msg != RESET_MSG)),
            "{}",
            g.name()
        );
    }
}

/// `PPSMC_MSG_GfxDriverReset` of MP1 13.0.6 (the MI300X mode1 reset).
const RESET_MSG: u32 = am_autogen::smu::v13_0_6::PPSMC_MSG_GfxDriverReset;
