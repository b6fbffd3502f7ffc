//! XGMI hives on the mock: the driver reads each member's place in its hive, refuses a member
//! that runs foreign firmware, `am_driver::hive::reset_all` resets a whole hive so that
//! every member boots afterwards, and a member maps another's VRAM (`AmDevice::map_peer`)
//! for its engines to reach over XGMI — and is refused a device outside its hive.
//!
//! Some of these tests depend on the PSP/SMU blocks (`Psp::is_sos_alive`, `Smu::is_alive`,
//! `Smu::mode1_reset`): they assume their real semantics — sOS alive when `C2PMSG_81 != 0`,
//! SMU alive when it answers `GetSmuVersion`, mode1 reset through `GfxDriverReset` on
//! MP1 13.0.6 — and the mock's `run_foreign_firmware` state gives exactly that.

use std::sync::Arc;
use std::time::Duration;

use am_driver::hive::{ResetResult, VF_CANNOT_RESET, reset_all};
use am_driver::mm::MapFlags;
use am_driver::regs::Regs;
use am_driver::{AmDevice, BootKind, Discovery, Error, ErrorKind, PciDevice, read_mc_layout};
use am_mock::MockGpu;
use am_tests::rig::{Rig, opts};
use am_tests::sdma;

const HIVE: &str = "mi300x-hive4";
const SEG: u64 = 192 << 30;
const FB_BASE: u64 = 0x80_0000_0000;

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
        assert_eq!(dev.ctx().mc, mc);
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
        matches!(
            err,
            Error {
                kind: ErrorKind::HiveMalformed { regions: 4, .. },
                ..
            }
        ),
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
    assert_eq!(dev.boot_report().kind, BootKind::ResetOnly);
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
        assert!(
            matches!(
                err,
                Error {
                    kind: ErrorKind::HiveMalformed { .. },
                    ..
                }
            ),
            "{err}"
        );
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
        assert!(dev.ctx().mc.is_hive());
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
        .write(broken.profile().vram_size - (64 << 10), &[0u8; 10 << 10])
        .unwrap();
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
            ResetResult::Failed(Error {
                kind: ErrorKind::DiscoverySignature { .. },
                ..
            })
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

/// Two booted members of a fresh 2-device hive.
fn booted_pair() -> (Rig, Rig) {
    let mut gpus = MockGpu::new_hive("mi300x", 2).unwrap().into_iter();
    let mut boot = || {
        let gpu = gpus.next().unwrap();
        let dev = AmDevice::open_with(gpu.open(), opts()).unwrap();
        Rig { gpu, dev }
    };
    (boot(), boot())
}

#[test]
fn an_sdma_engine_reads_and_writes_a_peers_vram_through_the_page_tables() {
    let (mut a, b) = booted_pair();
    let mine = a.sysmem(0x3000);
    let out = a.vram(0x1000);
    let mut q = a.sdma_queue(0, 0x1000);
    let before = a.dev.ctx().mm().free_lists();
    // Member 1's buffer, written by its CPU and flushed through its HDP.
    let theirs = b.vram(0x3000);
    let pattern: Vec<u8> = (0..0x3000u32).map(|i| (i * 13 + 5) as u8).collect();
    b.write(&theirs, 0, &pattern);
    // Member 0 maps it: the entries hold region 1's hive addresses.
    let peer = b.dev.peer_vram(&theirs.mapping);
    let m = a.dev.map_peer(&peer).unwrap();
    assert_eq!((m.size, m.flags), (0x3000, MapFlags::PEER_VRAM));
    let t = a
        .dev
        .ctx()
        .mm()
        .tables
        .walk(&a.dev.ctx().vram, m.va + 0x1234)
        .unwrap()
        .unwrap();
    assert_eq!(
        (t.peer_region, t.phys, t.page.addr),
        (
            Some(1),
            theirs.mapping.paddrs[0].0 + 0x1234,
            SEG + theirs.mapping.paddrs[0].0 + 0x1000
        )
    );
    // Member 0's SDMA copies out of member 1's VRAM, and writes and fills into it.
    let mut p = sdma::copy(m.va, mine.va, 0x3000);
    p.extend(sdma::write(m.va + 0x10, &[0x1111_2222, 0x3333_4444]));
    p.extend(sdma::fill(m.va + 0x2000, 0x5a5a_a5a5, 0x100));
    p.extend(sdma::fence(out.va, 1));
    q.submit(&a, &p);
    a.wait_u32(&out, 0, |v| v == 1, Duration::from_secs(10));
    assert_eq!(
        a.read(&mine, 0, 0x3000),
        pattern,
        "copied out of the peer's VRAM"
    );
    let mut want = pattern.clone();
    want[0x10..0x18].copy_from_slice(&[0x22, 0x22, 0x11, 0x11, 0x44, 0x44, 0x33, 0x33]);
    for i in (0x2000..0x2100).step_by(4) {
        want[i..i + 4].copy_from_slice(&0x5a5a_a5a5u32.to_le_bytes());
    }
    assert_eq!(
        b.read(&theirs, 0, 0x3000),
        want,
        "member 1's VRAM as its CPU reads it"
    );
    // Member 0's own VRAM at those addresses is not what was written.
    let mut own = vec![0u8; 8];
    a.gpu
        .vram()
        .read(theirs.mapping.paddrs[0].0 + 0x10, &mut own);
    assert_ne!(own, want[0x10..0x18]);
    for g in [&a.gpu, &b.gpu] {
        assert!(
            g.violations().is_empty(),
            "{}: {:?}",
            g.name(),
            g.violations()
        );
    }
    // Unmapped, the virtual range and the tables go back.
    a.dev.unmap_borrowed(&m).unwrap();
    assert_eq!(a.dev.ctx().mm().free_lists(), before);
}

#[test]
fn map_peer_refuses_devices_outside_one_hive_naming_both() {
    let open = |profile: &str, index: u32| {
        let gpu = MockGpu::with_mode(profile, index, am_mock::Mode::Strict).unwrap();
        let dev = AmDevice::open_with(gpu.open(), opts()).unwrap();
        Rig { gpu, dev }
    };
    for (a, b) in [
        (open("navi31", 1), open("navi31", 2)),
        (open("mi300x", 3), booted_pair().1),
    ] {
        let theirs = b.dev.valloc(0x1000, true).unwrap();
        let err = a.dev.map_peer(&b.dev.peer_vram(&theirs)).unwrap_err();
        assert!(
            matches!(
                err,
                Error {
                    kind: ErrorKind::NotInOneHive { .. },
                    ..
                }
            ),
            "{err}"
        );
        let msg = err.to_string();
        for name in [a.gpu.name(), b.gpu.name()] {
            assert!(msg.contains(name), "{name} not named: {msg}");
        }
        assert!(msg.contains("is in no XGMI hive"), "{msg}");
    }
}
