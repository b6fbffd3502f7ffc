//! The boot state machine on the mock: cold, warm, malformed state, and the SOC/GMC/IH
//! programming each boot leaves behind.

use am_driver::PciDevice;
use am_driver::irq::{IrqEvent, SqError, SqKind};
use am_driver::{AmDevice, BootKind};
use am_mock::MockGpu;
use am_tests::rig::opts;

fn open(gpu: &MockGpu) -> AmDevice {
    AmDevice::open_with(gpu.open(), opts()).unwrap()
}

fn assert_clean(gpu: &MockGpu) {
    let v = gpu.violations();
    assert!(v.is_empty(), "violations: {v:#?}");
    let w = gpu.warnings();
    assert!(w.is_empty(), "warnings: {w:#?}");
}

#[test]
fn navi31_cold_then_warm() {
    let gpu = am_mock::gpu("navi31", 40).unwrap();
    let dev = open(&gpu);
    assert_eq!(dev.boot_report().kind, BootKind::Cold);
    dev.fini().unwrap();
    assert_eq!(
        gpu.peek(am_mock::profile::RegIp::Gc, "SCRATCH_REG6", 0),
        Some(0)
    );
    let dev = open(&gpu);
    assert_eq!(dev.boot_report().kind, BootKind::Warm);
    drop(dev);
    assert_clean(&gpu);
}

#[test]
fn rdna4_cold_then_warm() {
    for (profile, index) in [("navi48", 54), ("navi44", 55)] {
        let gpu = am_mock::gpu(profile, index).unwrap();
        let dev = open(&gpu);
        assert_eq!(dev.boot_report().kind, BootKind::Cold, "{profile}");
        dev.fini().unwrap();
        let dev = open(&gpu);
        assert_eq!(dev.boot_report().kind, BootKind::Warm, "{profile}");
        drop(dev);
        assert_clean(&gpu);
    }
}

#[test]
fn mi300x_cold_boot_programs_every_hub() {
    let gpu = am_mock::gpu("mi300x", 41).unwrap();
    let dev = open(&gpu);
    assert_eq!(dev.boot_report().kind, BootKind::Cold);
    drop(dev);
    assert_clean(&gpu);
}

#[test]
fn a_mapping_is_visible_to_the_mm_hub_after_the_flush() {
    use am_mock::ip::gmc::Hub;
    use am_mock::walker::{Access, PhysTarget};
    for (profile, index) in [("navi31", 42), ("mi300x", 43), ("navi48", 56)] {
        let gpu = am_mock::gpu(profile, index).unwrap();
        let dev = open(&gpu);
        let m = dev.valloc(3 << 20, false).unwrap();
        for hub in 0..dev.ctx().discovery.aid_count() as u8 {
            let t = gpu
                .gpu_access(Hub::mm(hub), 0, m.va + 0x1234, Access::Read, 0)
                .unwrap()
                .unwrap_or_else(|f| {
                    panic!("{profile}: MMHUB{hub} faults on a flushed mapping: {f:?}")
                });
            assert_eq!(
                t.target,
                PhysTarget::Vram(m.paddrs[0].0 + 0x1234),
                "{profile}"
            );
        }
        dev.vfree(&m).unwrap();
        let after = gpu
            .gpu_access(Hub::mm(0), 0, m.va, Access::Read, 0)
            .unwrap();
        assert!(after.is_err(), "{profile}: freed mapping still translates");
        // The fault was posted to the IH: the driver decodes it and enters its error state.
        drop(dev);
        assert_clean(&gpu);
    }
}

#[test]
fn injected_page_fault_is_decoded_and_recover_clears_the_error_state() {
    use am_mock::ip::gmc::Hub;
    use am_mock::walker::Access;
    let gpu = am_mock::gpu("navi31", 44).unwrap();
    let mut dev = open(&gpu);
    assert!(dev.handle_interrupts().unwrap().is_empty());
    gpu.inject_page_fault(Hub::mm(0), 3, 0x7_1234_5000, Access::Write)
        .unwrap();
    let err = dev.handle_interrupts().unwrap_err().to_string();
    assert!(err.contains("page fault at VA 0x712345000"), "{err}");
    assert!(err.contains("MMHUB0"), "{err}");
    assert!(err.contains("VMID=0x3") && err.contains("RW=0x1"), "{err}");
    assert!(dev.error_state().is_some());
    // The status was cleared after it was read.
    assert_eq!(
        gpu.peek(
            am_mock::profile::RegIp::Mmhub,
            "MMVM_L2_PROTECTION_FAULT_STATUS",
            0
        ),
        Some(0)
    );
    dev.recover().unwrap();
    assert!(dev.error_state().is_none());
    assert!(dev.handle_interrupts().unwrap().is_empty());
    drop(dev);
    assert_clean(&gpu);
}

#[test]
fn an_unclean_previous_instance_forces_a_full_boot() {
    use am_mock::ip::gmc::Hub;
    use am_mock::walker::Access;
    let gpu = am_mock::gpu("navi31", 45).unwrap();
    let mut dev = open(&gpu);
    gpu.inject_page_fault(Hub::mm(0), 0, 0x1000, Access::Read)
        .unwrap();
    assert!(dev.handle_interrupts().is_err());
    // Finalised in the error state: SCRATCH_REG6 says so.
    dev.fini().unwrap();
    assert_eq!(
        gpu.peek(am_mock::profile::RegIp::Gc, "SCRATCH_REG6", 0),
        Some(1)
    );
    let dev = open(&gpu);
    assert_ne!(dev.boot_report().kind, BootKind::Warm);
    let reason = dev.boot_report().reason.clone().unwrap();
    assert!(
        reason.contains("malformed state: SCRATCH_REG6 = 0x1"),
        "{reason}"
    );
    dev.fini().unwrap();
    // A process that died without fini leaves SCRATCH_REG6 = 1 too.
    let dev = open(&gpu);
    assert_eq!(dev.boot_report().kind, BootKind::Warm);
    std::mem::forget(dev);
    let dev = open(&gpu);
    assert!(
        dev.boot_report()
            .reason
            .as_deref()
            .unwrap()
            .contains("did not finish cleanly")
    );
    drop(dev);
    assert_clean(&gpu);
}

#[test]
fn am_reset_forces_a_full_boot() {
    let gpu = am_mock::gpu("navi31", 46).unwrap();
    open(&gpu).fini().unwrap();
    let mut o = opts();
    o.force_reset = true;
    let dev = AmDevice::open_with(gpu.open(), o).unwrap();
    assert_ne!(dev.boot_report().kind, BootKind::Warm);
    assert_eq!(dev.boot_report().reason.as_deref(), Some("AM_RESET=1"));
    drop(dev);
    assert_clean(&gpu);
}

#[test]
fn sq_interrupts_are_decoded_and_only_errors_are_fatal() {
    use am_mock::ip::ih::IhEntry;
    let gpu = am_mock::gpu("navi31", 47).unwrap();
    let mut dev = open(&gpu);
    let sq = |c0: u32, c1: u32| IhEntry {
        client_id: am_autogen::ih::SOC21_IH_CLIENTID_GFX as u8,
        src_id: am_autogen::ih::gfx_11_0_0::GFX_11_0_0__SRCID__SQ_INTERRUPT_ID as u8,
        node_id: 0,
        src_data: [c0, c1, 0, 0],
        ..IhEntry::default()
    };
    // A wave message (encoding 1 in context dword 1 bits 7:6): reported, not fatal.
    gpu.post_interrupt(0, sq(0, 1 << 6)).unwrap();
    let ev = dev.handle_interrupts().unwrap();
    assert_eq!(ev.len(), 1);
    assert!(ev[0].to_string().contains("SQ wave interrupt"), "{}", ev[0]);
    assert!(dev.error_state().is_none());
    // An error (encoding 2) of type 2 (bits 24:21 of dword 0): MEMVIOL, fatal.
    gpu.post_interrupt(0, sq(2 << 21, 2 << 6)).unwrap();
    let err = dev.handle_interrupts().unwrap_err().to_string();
    assert!(
        err.contains("SQ error interrupt on node 0: MEMVIOL"),
        "{err}"
    );
    assert!(matches!(
        dev.error_state(),
        Some(IrqEvent::Sq {
            kind: SqKind::Error(SqError::Memviol),
            ..
        })
    ));
    dev.recover().unwrap();
    drop(dev);
    assert_clean(&gpu);
}

#[test]
fn mi300x_sq_error_uses_the_gfx9_layout() {
    use am_mock::ip::ih::IhEntry;
    let gpu = am_mock::gpu("mi300x", 48).unwrap();
    let mut dev = open(&gpu);
    // GC 9: encoding in dword 0 bits 27:26; error type in bits 23:20 of
    // (c0 & 0xfff) | (c0 >> 16 & 0xf000) | (c1 << 16 & 0xff0000): here bits 23:20 come from
    // c1 bits 7:4 = 1 (ILLEGAL_INST).
    gpu.post_interrupt(
        0,
        IhEntry {
            client_id: am_autogen::ih::SOC15_IH_CLIENTID_GRBM_CP as u8,
            src_id: am_autogen::ih::gfx_9_0::GFX_9_0__SRCID__SQ_INTERRUPT_ID as u8,
            node_id: 5,
            src_data: [2 << 26, 1 << 4, 0, 0],
            ..IhEntry::default()
        },
    )
    .unwrap();
    let err = dev.handle_interrupts().unwrap_err().to_string();
    assert!(
        err.contains("SQ error interrupt on node 5: ILLEGAL_INST"),
        "{err}"
    );
    drop(dev);
    assert_clean(&gpu);
}

#[test]
fn ras_status_is_a_fatal_event_and_is_cleared() {
    let gpu = am_mock::gpu("mi300x", 49).unwrap();
    let mut dev = open(&gpu);
    // STATUS (index 1) with VAL and UC set, IPID (index 5) naming hardware id 0x2e.
    let mut bank = [0u64; 8];
    bank[1] = (1 << 63) | (1 << 61) | 0x1234;
    bank[5] = 0x2e << 32;
    gpu.with_smu(|s| s.push_aca_bank(true, bank));
    assert!(gpu.raise_ras(false, true));
    let err = dev.handle_interrupts().unwrap_err().to_string();
    assert!(err.contains("RAS fatal hardware error: RAS_CNTLR"), "{err}");
    assert!(
        err.contains("UE bank 0: STATUS=0xa000000000001234"),
        "{err}"
    );
    assert!(err.contains("IPID=0x0000002e00000000"), "{err}");
    let reg = gpu
        .peek(
            am_mock::profile::RegIp::Nbio,
            "BIF_BX0_BIF_DOORBELL_INT_CNTL",
            0,
        )
        .unwrap();
    assert_eq!(reg, 0, "status cleared by the driver");
    dev.recover().unwrap();
    assert!(dev.handle_interrupts().unwrap().is_empty());
    drop(dev);
    assert_clean(&gpu);
}

#[test]
fn eop_and_sdma_traps_are_not_errors() {
    use am_mock::ip::ih::IhEntry;
    let gpu = am_mock::gpu("navi31", 50).unwrap();
    let mut dev = open(&gpu);
    for src in [
        am_autogen::ih::gfx_11_0_0::GFX_11_0_0__SRCID__CP_EOP_INTERRUPT,
        am_autogen::ih::gfx_11_0_0::GFX_11_0_0__SRCID__SDMA_TRAP,
    ] {
        gpu.post_interrupt(
            0,
            IhEntry {
                client_id: am_autogen::ih::SOC21_IH_CLIENTID_GFX as u8,
                src_id: src as u8,
                ..IhEntry::default()
            },
        )
        .unwrap();
    }
    let ev = dev.handle_interrupts().unwrap();
    assert_eq!(ev.len(), 2);
    assert!(dev.error_state().is_none());
    // An interrupt nobody expects is reported with its ids and is fatal.
    gpu.post_interrupt(
        0,
        IhEntry {
            client_id: 0x16,
            src_id: 0x42,
            ..IhEntry::default()
        },
    )
    .unwrap();
    let err = dev.handle_interrupts().unwrap_err().to_string();
    assert!(err.contains("client 22 source 0x42"), "{err}");
    drop(dev);
    assert_clean(&gpu);
}

#[test]
fn foreign_firmware_is_mode1_reset_then_a_full_boot() {
    let profiles = [
        ("navi31", 51),
        ("mi300x", 52),
        ("navi48", 57),
        ("navi44", 58),
    ];
    for (profile, index) in profiles {
        let gpu = am_mock::gpu(profile, index).unwrap();
        // As amdgpu leaves a device: its sOS and SMU run; SCRATCH_REG7 is not ours.
        gpu.run_foreign_firmware();
        let dev = open(&gpu);
        assert_eq!(
            dev.boot_report().kind,
            BootKind::AfterMode1Reset,
            "{profile}"
        );
        let phases: Vec<&str> = dev.boot_report().phases.iter().map(|p| p.name).collect();
        let reset = phases.iter().position(|&p| p == "mode1_reset").unwrap();
        let psp = phases.iter().position(|&p| p == "psp").unwrap();
        assert!(reset < psp, "{profile}: {phases:?}");
        // Bus mastering is back on after the reset.
        assert_ne!(
            gpu.open().config_read(0x04, 2).unwrap() & 0x4,
            0,
            "{profile}"
        );
        assert!(!dev.boot_report().firmware.is_empty());
        dev.fini().unwrap();
        assert_clean(&gpu);
    }
}

#[test]
fn an_overflowed_interrupt_ring_is_drained_counted_and_cleared() {
    use am_mock::ip::ih::{IhEntry, Posted};
    let gpu = am_mock::gpu("navi31", 53).unwrap();
    let mut dev = open(&gpu);
    let eop = IhEntry {
        client_id: am_autogen::ih::SOC21_IH_CLIENTID_GFX as u8,
        src_id: am_autogen::ih::gfx_11_0_0::GFX_11_0_0__SRCID__CP_EOP_INTERRUPT as u8,
        ..IhEntry::default()
    };
    // 256 KiB of 32-byte entries: the ring holds 8191 before it is full.
    let mut written = 0;
    loop {
        match gpu.post_interrupt(0, eop).unwrap() {
            Posted::Written { .. } => written += 1,
            Posted::Overflow => break,
            Posted::Disabled => panic!("ring 0 is not enabled"),
        }
    }
    assert_eq!(written, 8191);
    let events = dev.handle_interrupts().unwrap();
    assert_eq!(events.len(), 8191);
    assert_eq!(dev.ih_overflows(), 1);
    // Cleared: the ring takes entries again and the next drain sees exactly those.
    assert!(matches!(
        gpu.post_interrupt(0, eop).unwrap(),
        Posted::Written { .. }
    ));
    assert_eq!(dev.handle_interrupts().unwrap().len(), 1);
    assert_eq!(dev.ih_overflows(), 1);
    drop(dev);
    assert_clean(&gpu);
}
