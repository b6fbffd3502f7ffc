//! XGMI hives: members share the hive's LFB layout, each is its own device, a reset of one
//! resets that member only, `AM_MOCK_FOREIGN_FIRMWARE`'s hook leaves firmware running, and
//! an engine of one member reaches another member's VRAM over the fabric (and faults where no
//! member answers).

use std::sync::Arc;

use am_autogen::hwid::MP0_HWID;
use am_autogen::regs::{RegIp, table};
use am_autogen::smu::v13_0_6 as s6;
use am_driver::PciDevice;
use am_mock::engine::mem::MemError;
use am_mock::ip::gmc::{FB_BASE, Hub};
use am_mock::walker::{Access, FaultKind, PageFault};
use am_mock::{Error, MockGpu};

const SEG_UNITS: u32 = (192u64 << 30 >> 24) as u32; // MI300X VRAM in 16 MiB units
const SEG: u64 = (SEG_UNITS as u64) << 24;

fn lfb(gpu: &MockGpu, ip: RegIp, inst: u8) -> (u32, u32) {
    (
        gpu.peek(ip, "MC_VM_XGMI_LFB_CNTL", inst).unwrap(),
        gpu.peek(ip, "MC_VM_XGMI_LFB_SIZE", inst).unwrap(),
    )
}

/// BAR5 byte offset of an MP register of MP0's instance (MP1 registers share its bases).
fn mp(gpu: &MockGpu, name: &str) -> u64 {
    let ver = gpu.profile().version(MP0_HWID).unwrap();
    let r = table(RegIp::Mp, ver).unwrap().by_name(name).unwrap();
    let i = gpu.profile().instances(MP0_HWID).next().unwrap();
    (i.bases[usize::from(r.base_idx())] + u64::from(r.offset())) * 4
}

#[test]
fn members_carry_region_max_region_and_segment_size_in_every_hub() {
    let hive = MockGpu::new_hive("mi300x", 4).unwrap();
    assert_eq!(hive.len(), 4);
    for (region, gpu) in hive.iter().enumerate() {
        let m = gpu.hive_member().unwrap();
        assert_eq!(usize::from(m.region), region);
        assert!(Arc::ptr_eq(&m.hive, &hive[0].hive_member().unwrap().hive));
        assert_eq!(gpu.name(), format!("mock:mi300x-hive4:{region}"));
        // PF_LFB_REGION bits 3:0, PF_MAX_REGION bits 7:4 (mmhub_1_8_0_sh_mask.h), on every
        // MMHUB (AID) and every GC hub (XCC): firmware programs them all.
        let want = (region as u32, 3 << 4 | region as u32);
        for inst in 0..4 {
            let (cntl, size) = lfb(gpu, RegIp::Mmhub, inst);
            assert_eq!((cntl & 0xf, cntl), want, "MMHUB {inst}");
            assert_eq!(size, SEG_UNITS);
        }
        for xcc in 0..8 {
            assert_eq!(lfb(gpu, RegIp::Gc, xcc), (want.1, SEG_UNITS), "XCC {xcc}");
        }
        // The FB aperture spans the four segments.
        let top = gpu.peek(RegIp::Mmhub, "MC_VM_FB_LOCATION_TOP", 0).unwrap();
        assert_eq!(
            u64::from(top),
            (FB_BASE + 4 * (u64::from(SEG_UNITS) << 24) - 1) >> 24
        );
        assert!(gpu.violations().is_empty());
    }
}

#[test]
fn a_device_outside_a_hive_reads_no_layout() {
    let gpu = MockGpu::new("mi300x").unwrap();
    assert!(gpu.hive().is_none());
    assert_eq!(lfb(&gpu, RegIp::Mmhub, 0), (0, 0));
    let top = gpu.peek(RegIp::Mmhub, "MC_VM_FB_LOCATION_TOP", 0).unwrap();
    assert_eq!(u64::from(top), (FB_BASE + (192 << 30) - 1) >> 24);
}

#[test]
fn hive_specs_share_one_hive_per_group_of_indices() {
    // Indices 200..203 are hive 50, 204 starts hive 51.
    let members: Vec<MockGpu> = (200..205)
        .map(|i| am_mock::gpu("mi300x-hive4", i).unwrap())
        .collect();
    let hive = members[0].hive().unwrap().clone();
    assert_eq!((hive.id, hive.num_devices), (50, 4));
    for (i, g) in members[..4].iter().enumerate() {
        assert!(Arc::ptr_eq(g.hive().unwrap(), &hive));
        assert_eq!(usize::from(g.hive_member().unwrap().region), i);
        assert_eq!(g.name(), format!("mock:mi300x-hive4:{}", 200 + i));
        assert_eq!(lfb(g, RegIp::Mmhub, 0).0, 0x30 | i as u32);
    }
    let next = members[4].hive_member().unwrap();
    assert_eq!((next.hive.id, next.region), (51, 0));
    assert!(!Arc::ptr_eq(&next.hive, &hive));
    // The spec opens the same device.
    let d = am_mock::open_spec("mock:mi300x-hive4:202").unwrap();
    assert_eq!(d.name(), "mock:mi300x-hive4:202");
    // A plain profile of the same index is another device.
    assert!(am_mock::gpu("mi300x", 200).unwrap().hive().is_none());
}

#[test]
fn bad_hive_specs_say_what_is_wrong() {
    let reason = |p: &str| match am_mock::gpu(p, 210) {
        Err(Error::BadHive { reason, .. }) => reason,
        other => panic!("{p}: {other:?}"),
    };
    assert!(reason("navi31-hive2").contains("no XGMI"));
    assert!(reason("mi350x-vf-hive2").contains("PFs"));
    assert!(reason("mi300x-hive9").contains("2 to 8"));
    assert!(reason("mi300x-hive1").contains("2 to 8"));
    assert!(reason("mi300x-hivex").contains("member count"));
    assert!(matches!(
        am_mock::gpu("nope-hive2", 210),
        Err(Error::UnknownProfile { .. })
    ));
}

/// Drivers only read the layout firmware programs; no source says what a write does, so it
/// does not land and is counted as a warning.
#[test]
fn a_write_of_the_hive_layout_does_not_land() {
    let hive = MockGpu::new_hive("mi300x", 2).unwrap();
    let gpu = &hive[1];
    let id = gpu
        .register_map()
        .find(RegIp::Mmhub, "MC_VM_XGMI_LFB_CNTL", 0)
        .unwrap();
    let addr = gpu.register_map().info(id).addr * 4;
    let mmio = gpu.open().bar(5).unwrap();
    assert_eq!(mmio.read32(addr).unwrap(), 0x11);
    mmio.write32(addr, 0).unwrap();
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
    let w = gpu.take_warnings();
    assert_eq!(w.len(), 1);
    assert!(w[0].reason.contains("hive layout"), "{}", w[0].reason);
    assert_eq!(mmio.read32(addr).unwrap(), 0x11, "the write did not land");
}

#[test]
fn mode1_reset_of_one_member_resets_that_member_only() {
    let hive = MockGpu::new_hive("mi300x", 4).unwrap();
    for g in &hive {
        g.run_foreign_firmware();
    }
    let victim = &hive[2];
    let mmio = victim.open().bar(5).unwrap();
    assert_eq!(
        mmio.read32(mp(victim, "MP0_SMN_C2PMSG_81")).unwrap(),
        0x0031_0024
    );
    // GfxDriverReset(mode 1) as the driver sends it (smu_v13_0_6).
    mmio.write32(mp(victim, "MP1_SMN_C2PMSG_90"), 0).unwrap();
    mmio.write32(
        mp(victim, "MP1_SMN_C2PMSG_82"),
        s6::PPSMC_RESET_TYPE_DRIVER_MODE_1_RESET,
    )
    .unwrap();
    mmio.write32(
        mp(victim, "MP1_SMN_C2PMSG_66"),
        s6::PPSMC_MSG_GfxDriverReset,
    )
    .unwrap();
    // Answered first (smu_v13_0_6_mode1_reset waits for it); the reset follows that read.
    assert_eq!(
        mmio.read32(mp(victim, "MP1_SMN_C2PMSG_90")).unwrap(),
        s6::PPSMC_Result_OK
    );
    assert!(!victim.with_psp(|p| p.sos_alive()));
    assert!(!victim.with_smu(|s| s.alive()));
    assert_eq!(mmio.read32(mp(victim, "MP0_SMN_C2PMSG_81")).unwrap(), 0);
    // Firmware programs the layout again after the reset.
    assert_eq!(lfb(victim, RegIp::Mmhub, 0), (0x32, SEG_UNITS));
    for (i, g) in hive.iter().enumerate().filter(|(i, _)| *i != 2) {
        assert!(g.with_psp(|p| p.sos_alive()), "member {i}");
        assert!(g.with_smu(|s| s.alive()), "member {i}");
    }
    assert!(victim.violations().is_empty(), "{:?}", victim.violations());
}

#[test]
fn foreign_firmware_hook_leaves_sos_and_smu_running() {
    let gpu = MockGpu::new("mi300x").unwrap();
    let mmio = gpu.open().bar(5).unwrap();
    assert_eq!(mmio.read32(mp(&gpu, "MP0_SMN_C2PMSG_81")).unwrap(), 0);
    gpu.run_foreign_firmware();
    assert_ne!(mmio.read32(mp(&gpu, "MP0_SMN_C2PMSG_81")).unwrap(), 0);
    // The SMU answers GetSmuVersion.
    mmio.write32(mp(&gpu, "MP1_SMN_C2PMSG_90"), 0).unwrap();
    mmio.write32(mp(&gpu, "MP1_SMN_C2PMSG_82"), 0).unwrap();
    mmio.write32(mp(&gpu, "MP1_SMN_C2PMSG_66"), s6::PPSMC_MSG_GetSmuVersion)
        .unwrap();
    assert_eq!(mmio.read32(mp(&gpu, "MP1_SMN_C2PMSG_90")).unwrap(), 1);
    assert_eq!(
        mmio.read32(mp(&gpu, "MP1_SMN_C2PMSG_82")).unwrap(),
        0x0055_4000
    );
    // No load is logged: this driver loaded nothing.
    assert!(gpu.with_psp(|p| p.log().is_empty()));
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
}

/// Send one SMU message the way the driver does and return (response, result).
fn smu_msg(gpu: &MockGpu, mmio: &dyn am_driver::Bar, msg: u32, param: u32) -> (u32, u32) {
    mmio.write32(mp(gpu, "MP1_SMN_C2PMSG_90"), 0).unwrap();
    mmio.write32(mp(gpu, "MP1_SMN_C2PMSG_82"), param).unwrap();
    mmio.write32(mp(gpu, "MP1_SMN_C2PMSG_66"), msg).unwrap();
    (
        mmio.read32(mp(gpu, "MP1_SMN_C2PMSG_90")).unwrap(),
        mmio.read32(mp(gpu, "MP1_SMN_C2PMSG_82")).unwrap(),
    )
}

#[test]
fn firmware_reaches_a_members_vram_through_its_own_segment() {
    let hive = MockGpu::new_hive("mi300x", 4).unwrap();
    let gpu = &hive[1];
    let dev = gpu.open();
    let mmio = dev.bar(5).unwrap();
    let table = 0x40_0000u64;
    let seg = u64::from(SEG_UNITS) << 24;
    let metrics = |mc: u64| {
        smu_msg(
            gpu,
            &*mmio,
            s6::PPSMC_MSG_SetDriverDramAddrHigh,
            (mc >> 32) as u32,
        );
        smu_msg(gpu, &*mmio, s6::PPSMC_MSG_SetDriverDramAddrLow, mc as u32);
        smu_msg(gpu, &*mmio, s6::PPSMC_MSG_GetMetricsTable, 0).0
    };
    // Region 1: VRAM offset `table` is MC address fb_base + 1 × segment + table.
    assert_eq!(metrics(FB_BASE + seg + table), 1);
    let mut head = [0u8; 4];
    dev.bar(0).unwrap().read_bytes(table, &mut head).unwrap();
    assert_ne!(
        head, [0; 4],
        "the metrics table landed at the member's own offset"
    );
    // Region 0's segment is another GPU's memory: the SMU (firmware, not an engine) does not
    // write over XGMI, and this member's VRAM is not touched.
    gpu.vram().write(table, &[0u8; 64]).unwrap();
    assert_eq!(metrics(FB_BASE + table), s6::PPSMC_Result_Failed);
    dev.bar(0).unwrap().read_bytes(table, &mut head).unwrap();
    assert_eq!(head, [0; 4]);
}

/// The fault an engine's access of `addr` got, or a panic naming what it got instead.
fn fault_of(r: Result<(), MemError>, addr: u64) -> (FaultKind, Access) {
    match r {
        Err(MemError::Fault {
            fault: PageFault { va, kind, .. },
            access,
        }) if va == addr => (kind, access),
        other => panic!("{addr:#x}: expected a page fault, got {other:?}"),
    }
}

#[test]
fn an_engine_write_through_the_aperture_lands_in_the_peers_vram() {
    let hive = MockGpu::new_hive("mi300x", 2).unwrap();
    let at = 0x20_1000u64;
    let mc = FB_BASE + SEG + at; // region 1's segment
    let before = hive[1].vram().page_generation(at);
    let data = [0xa5u8, 0x5a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
    // An SDMA engine of member 0 (behind MMHUB 1) writes region 1's segment...
    hive[0].engine_write(Hub::mm(1), 0, mc, &data).unwrap();
    // ...which is member 1's VRAM, not member 0's.
    let mut got = [0u8; 12];
    hive[1].vram().read(at, &mut got);
    assert_eq!(
        got, data,
        "member 1's VRAM holds what member 0's engine wrote"
    );
    hive[0].vram().read(at, &mut got);
    assert_eq!(
        got, [0; 12],
        "member 0's own VRAM at that offset is untouched"
    );
    // Member 1's write generations saw the write (its TLB snapshots and program cache
    // depend on them).
    assert!(hive[1].vram().page_generation(at) > before);
    // A shader of member 0 (GC hub of XCC 5) reads it back the same way, and member 1's own
    // engine finds it at the same MC address, in its own segment.
    let mut back = [0u8; 12];
    hive[0].engine_read(Hub::gc(5), 0, mc, &mut back).unwrap();
    assert_eq!(back, data);
    let mut own = [0u8; 12];
    hive[1].engine_read(Hub::mm(0), 0, mc, &mut own).unwrap();
    assert_eq!(own, data);
    for g in &hive {
        assert!(
            g.violations().is_empty(),
            "{}: {:?}",
            g.name(),
            g.violations()
        );
    }
}

#[test]
fn a_peers_unflushed_bar0_write_is_stale_to_other_members_too() {
    let hive = MockGpu::new_hive("mi300x", 2).unwrap();
    let at = 0x40_0000u64;
    // Member 1's CPU writes through member 1's BAR0: the bytes sit in member 1's HDP.
    hive[1].vram().cpu_write(at, &[7u8; 16]).unwrap();
    let mut buf = [0u8; 16];
    match hive[0].engine_read(Hub::mm(0), 0, FB_BASE + SEG + at, &mut buf) {
        Err(MemError::Unflushed {
            range,
            peer: Some(1),
            ..
        }) => assert_eq!(range, (at, at + 16)),
        other => panic!("expected the unflushed range of region 1, got {other:?}"),
    }
    // Member 1's HDP flush makes them visible to every member.
    hive[1].vram().hdp_flush();
    hive[0]
        .engine_read(Hub::mm(0), 0, FB_BASE + SEG + at, &mut buf)
        .unwrap();
    assert_eq!(buf, [7u8; 16]);
}

#[test]
fn a_member_that_is_gone_or_never_made_faults() {
    let mut hive = MockGpu::new_hive("mi300x", 2).unwrap();
    let shared = hive[0].hive().unwrap().clone();
    assert_eq!(shared.live_regions(), vec![0, 1]);
    // Member 1 goes (its last handle drops): the fabric no longer reaches it.
    drop(hive.pop());
    assert_eq!(shared.live_regions(), vec![0]);
    let mc = FB_BASE + SEG + 0x1000;
    assert_eq!(
        fault_of(hive[0].engine_write(Hub::mm(0), 0, mc, &[1; 4]), mc),
        (FaultKind::NoMember, Access::Write)
    );
    let mut buf = [0u8; 4];
    assert_eq!(
        fault_of(hive[0].engine_read(Hub::gc(0), 0, mc, &mut buf), mc),
        (FaultKind::NoMember, Access::Read)
    );
    // A process-wide hive whose region 1 was never opened: the same.
    let alone = am_mock::gpu("mi300x-hive2", 360).unwrap();
    assert_eq!(alone.hive().unwrap().live_regions(), vec![0]);
    assert_eq!(
        fault_of(alone.engine_read(Hub::mm(0), 0, mc, &mut buf), mc),
        (FaultKind::NoMember, Access::Read)
    );
}

#[test]
fn addresses_outside_the_hives_aperture_are_not_another_members() {
    // Past the last segment: outside the FB aperture, so VM context 0 (not set up: no
    // translation at all).
    let hive = MockGpu::new_hive("mi300x", 2).unwrap();
    let past = FB_BASE + 2 * SEG + 0x1000;
    assert_eq!(
        fault_of(hive[0].engine_write(Hub::mm(0), 0, past, &[1; 4]), past),
        (FaultKind::Invalid, Access::Write)
    );
    // A device outside any hive: right after its VRAM is not a peer's segment either.
    let single = MockGpu::new("mi300x").unwrap();
    let after = FB_BASE + SEG + 0x1000;
    assert_eq!(
        fault_of(single.engine_write(Hub::mm(0), 0, after, &[1; 4]), after),
        (FaultKind::Invalid, Access::Write)
    );
    // The same address from a hive member is its peer's memory.
    hive[0].engine_write(Hub::mm(0), 0, after, &[1; 4]).unwrap();
}
