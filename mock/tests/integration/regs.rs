//! The register file: placement from the generated tables, reset values, strictness with
//! names, per-instance apertures, state that outlives a driver instance, resets.

use am_autogen::regs::{IpVersion, RegIp, table};
use am_driver::PciDevice;
use am_mock::{Access, MockGpu, PROFILES, Space};

/// BAR5 byte offset of a register, computed from the generated table and the profile's
/// discovery bases (independently of the mock's own map).
fn addr(gpu: &MockGpu, ip: RegIp, ver: IpVersion, hw_id: u16, inst: u8, name: &str) -> u64 {
    let r = table(ip, ver).unwrap().by_name(name).unwrap();
    let i = gpu
        .profile()
        .instances(hw_id)
        .find(|i| i.instance == inst)
        .unwrap();
    (i.bases[usize::from(r.base_idx())] + u64::from(r.offset())) * 4
}

const GC11: IpVersion = IpVersion::new(11, 0, 0);
const GC943: IpVersion = IpVersion::new(9, 4, 3);
use am_autogen::hwid::{GC_HWID, MMHUB_HWID, MP0_HWID};

#[test]
fn registers_start_at_their_linux_defaults() {
    let gpu = MockGpu::new("navi31").unwrap();
    let mmio = gpu.open().bar(5).unwrap();
    // Values of gc_11_0_0_default.h.
    for (name, default) in [
        ("CP_HQD_PQ_CONTROL", 0x0030_8509),
        ("GB_ADDR_CONFIG", 0x545),
        ("CP_MEC_CNTL", 0x5000_0000),
    ] {
        let a = addr(&gpu, RegIp::Gc, GC11, GC_HWID, 0, name);
        assert_eq!(
            mmio.read32(a).unwrap(),
            default,
            "{name} at dword {:#x}",
            a / 4
        );
    }
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
}

#[test]
fn scratch_register_outlives_a_driver_instance() {
    let gpu = MockGpu::new("navi31").unwrap();
    let a = addr(&gpu, RegIp::Gc, GC11, GC_HWID, 0, "SCRATCH_REG7");
    let first = gpu.open();
    first.bar(5).unwrap().write32(a, 0xA000_0008).unwrap();
    drop(first);
    let second = gpu.open();
    assert_eq!(second.bar(5).unwrap().read32(a).unwrap(), 0xA000_0008);
    assert_eq!(gpu.peek(RegIp::Gc, "SCRATCH_REG7", 0), Some(0xA000_0008));
}

#[test]
fn unknown_register_inside_a_segment_names_the_segment() {
    let gpu = MockGpu::new("navi31").unwrap();
    let map = gpu.register_map();
    // A dword in GC segment 1 (0xA000) that gc_11_0_0 does not define.
    let hole = (0xA000u64..0x10000).find(|&d| map.at(d).is_none()).unwrap();
    let mmio = gpu.open().bar(5).unwrap();
    assert!(mmio.write32(hole * 4, 1).is_err());
    let v = gpu.violations();
    assert_eq!(v.len(), 1);
    assert_eq!(
        (v[0].space, v[0].offset, v[0].access),
        (Space::Bar(5), hole * 4, Access::Write)
    );
    let want = format!(
        "hw_id {GC_HWID} instance 0 segment 1 + {:#x}",
        hole - 0xA000
    );
    assert!(v[0].reason.contains(&want), "{} lacks {want}", v[0].reason);
}

#[test]
fn violation_on_a_known_register_carries_its_name() {
    let gpu = MockGpu::new("navi31").unwrap();
    let mmio = gpu.open().bar(5).unwrap();
    let a = addr(&gpu, RegIp::Gc, GC11, GC_HWID, 0, "SCRATCH_REG7");
    assert!(mmio.read8(a).is_err(), "registers are dword-wide");
    let v = gpu.violations();
    assert_eq!(
        v[0].register.as_deref(),
        Some("SCRATCH_REG7 (GC 11.0.0 instance 0)")
    );
}

#[test]
fn mi300x_xcc_instances_have_their_own_registers() {
    let gpu = MockGpu::new("mi300x").unwrap();
    let mmio = gpu.open().bar(5).unwrap();
    let addrs: Vec<u64> = (0..8)
        .map(|x| addr(&gpu, RegIp::Gc, GC943, GC_HWID, x, "SCRATCH_REG7"))
        .collect();
    let mut unique = addrs.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), 8);
    mmio.write32(addrs[5], 55).unwrap();
    for (x, &a) in addrs.iter().enumerate() {
        assert_eq!(
            mmio.read32(a).unwrap(),
            if x == 5 { 55 } else { 0 },
            "XCC {x}"
        );
    }
    assert_eq!(gpu.peek(RegIp::Gc, "SCRATCH_REG7", 5), Some(55));
}

#[test]
fn mi300x_has_an_mmhub_per_aid() {
    let gpu = MockGpu::new("mi300x").unwrap();
    let mmio = gpu.open().bar(5).unwrap();
    let v18 = IpVersion::new(1, 8, 0);
    for aid in 0..4u8 {
        let a = addr(&gpu, RegIp::Mmhub, v18, MMHUB_HWID, aid, "VM_CONTEXT0_CNTL");
        mmio.write32(a, u32::from(aid) + 1).unwrap();
    }
    for aid in 0..4u8 {
        assert_eq!(
            gpu.peek(RegIp::Mmhub, "VM_CONTEXT0_CNTL", aid),
            Some(u32::from(aid) + 1)
        );
    }
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
}

#[test]
fn no_register_of_one_ip_instance_lands_on_another() {
    for name in PROFILES {
        let gpu = MockGpu::new(name).unwrap();
        let map = gpu.register_map();
        for a in map.aliases() {
            let first = map.info(a.reg);
            assert_eq!(
                (first.table, first.instance),
                (a.table, a.instance),
                "{name}: {} ({} {}) shares dword {:#x} with {} ({} {})",
                first.name,
                first.table,
                first.instance,
                first.addr,
                a.name,
                a.table,
                a.instance
            );
        }
    }
}

#[test]
fn vf_must_not_touch_the_psp() {
    let gpu = MockGpu::new("mi350x-vf").unwrap();
    gpu.grant_vf_access(true);
    let mmio = gpu.open().bar(5).unwrap();
    let a = addr(
        &gpu,
        RegIp::Mp,
        IpVersion::new(13, 0, 14),
        MP0_HWID,
        0,
        "MP0_SMN_C2PMSG_81",
    );
    assert!(mmio.read32(a).is_err());
    let v = gpu.violations();
    assert!(
        v[0].register
            .as_deref()
            .unwrap()
            .starts_with("MP0_SMN_C2PMSG_81")
    );
    assert!(v[0].reason.contains("belongs to the PF"), "{}", v[0].reason);
}

#[test]
fn vf_register_writes_before_access_are_violations() {
    let gpu = MockGpu::new("mi350x-vf").unwrap();
    let mmio = gpu.open().bar(5).unwrap();
    let a = addr(
        &gpu,
        RegIp::Gc,
        IpVersion::new(9, 5, 0),
        GC_HWID,
        0,
        "SCRATCH_REG0",
    );
    assert_eq!(
        mmio.read32(a).unwrap(),
        u32::MAX,
        "gated reads are all-ones"
    );
    assert!(mmio.write32(a, 1).is_err());
    gpu.grant_vf_access(true);
    assert_eq!(mmio.read32(a).unwrap(), 0, "the gated write did not land");
}

#[test]
fn flr_resets_registers_but_keeps_scratch() {
    let gpu = MockGpu::new("navi31").unwrap();
    let d = gpu.open();
    let mmio = d.bar(5).unwrap();
    let scratch = addr(&gpu, RegIp::Gc, GC11, GC_HWID, 0, "SCRATCH_REG6");
    let pq = addr(&gpu, RegIp::Gc, GC11, GC_HWID, 0, "CP_HQD_PQ_CONTROL");
    mmio.write32(scratch, 1).unwrap();
    mmio.write32(pq, 0x1234).unwrap();
    d.config_write(0x04, 2, 0x6).unwrap();
    d.reset().unwrap();
    assert_eq!(mmio.read32(scratch).unwrap(), 1);
    assert_eq!(mmio.read32(pq).unwrap(), 0x0030_8509);
    assert_eq!(
        d.config_read(0x04, 2).unwrap(),
        0x6,
        "the OS restores config space around FLR"
    );
}

#[test]
fn rsmu_reaches_registers_past_bar5_and_refuses_holes() {
    let gpu = MockGpu::new("navi31").unwrap();
    let mmio = gpu.open().bar(5).unwrap();
    let v43 = IpVersion::new(4, 3, 0);
    let nbio = am_autogen::hwid::NBIF_HWID;
    let index = addr(&gpu, RegIp::Nbio, v43, nbio, 0, "BIF_BX_PF0_RSMU_INDEX");
    let data = addr(&gpu, RegIp::Nbio, v43, nbio, 0, "BIF_BX_PF0_RSMU_DATA");
    let strap = addr(&gpu, RegIp::Nbio, v43, nbio, 0, "RCC_DEV0_EPF2_STRAP2");
    assert!(strap >= mmio.len(), "the strap register lies past BAR5");
    mmio.write32(index, strap as u32).unwrap();
    mmio.write32(data, 0xabc).unwrap();
    assert_eq!(mmio.read32(data).unwrap(), 0xabc);
    assert_eq!(
        gpu.peek(RegIp::Nbio, "RCC_DEV0_EPF2_STRAP2", 0),
        Some(0xabc)
    );
    // An index where no register lives is a violation, not a stored value.
    mmio.write32(index, 0xffff_fff0).unwrap();
    assert!(mmio.read32(data).is_err());
    let v = gpu.violations();
    assert!(
        v.last().unwrap().reason.contains("no register there"),
        "{}",
        v.last().unwrap()
    );
}

#[test]
fn pcie_index2_gives_each_aid_its_own_registers() {
    let gpu = MockGpu::new("mi300x").unwrap();
    let mmio = gpu.open().bar(5).unwrap();
    let v79 = IpVersion::new(7, 9, 0);
    let nbio = am_autogen::hwid::NBIF_HWID;
    let index = addr(&gpu, RegIp::Nbio, v79, nbio, 0, "BIF_BX0_PCIE_INDEX2");
    let index_hi = addr(&gpu, RegIp::Nbio, v79, nbio, 0, "BIF_BX0_PCIE_INDEX2_HI");
    let data = addr(&gpu, RegIp::Nbio, v79, nbio, 0, "BIF_BX0_PCIE_DATA2");
    let fence = addr(&gpu, RegIp::Nbio, v79, nbio, 0, "XCC_DOORBELL_FENCE");
    // AID 0: the plain byte address.
    mmio.write32(index, fence as u32).unwrap();
    mmio.write32(index_hi, 0).unwrap();
    mmio.write32(data, 0x5).unwrap();
    // AID 2: bit 34 plus the AID in bits 33:32.
    mmio.write32(index_hi, (1 << 2) | 2).unwrap();
    mmio.write32(data, 0x100).unwrap();
    assert_eq!(mmio.read32(data).unwrap(), 0x100);
    assert_eq!(
        gpu.peek(RegIp::Nbio, "XCC_DOORBELL_FENCE", 0),
        Some(0x5),
        "AID 0 keeps its own value"
    );
    mmio.write32(index_hi, (1 << 2) | 1).unwrap();
    assert_eq!(
        mmio.read32(data).unwrap(),
        0,
        "AID 1 starts at the reset default"
    );
    mmio.write32(index_hi, 1).unwrap();
    assert!(
        mmio.read32(data).is_err(),
        "high bits without the AID-select bit"
    );
}

#[test]
fn hdp_flush_goes_through_the_remapped_register() {
    let gpu = MockGpu::new("navi31").unwrap();
    let mmio = gpu.open().bar(5).unwrap();
    let v43 = IpVersion::new(4, 3, 0);
    let nbio = am_autogen::hwid::NBIF_HWID;
    let remap = addr(
        &gpu,
        RegIp::Nbio,
        v43,
        nbio,
        0,
        "BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL",
    );
    let target = u64::from(mmio.read32(remap).unwrap());
    assert_eq!(
        target,
        addr(
            &gpu,
            RegIp::Nbio,
            v43,
            nbio,
            0,
            "BIF_BX_PF0_HDP_MEM_COHERENCY_FLUSH_CNTL"
        )
    );
    assert_eq!(gpu.hdp_flushes(), 0);
    gpu.open().bar(0).unwrap().write32(0x1000, 7).unwrap();
    assert_eq!(gpu.vram().unflushed(0x1000, 4), Some((0x1000, 0x1004)));
    mmio.write32(target, 0).unwrap();
    assert_eq!(gpu.hdp_flushes(), 1);
    assert_eq!(gpu.vram().unflushed(0x1000, 4), None);
}

#[test]
fn firmware_leaves_a_non_zero_fb_location_on_every_hub() {
    let gpu = MockGpu::new("mi300x").unwrap();
    let fb_mib16 = (am_mock::ip::gmc::FB_BASE >> 24) as u32;
    let top = ((am_mock::ip::gmc::FB_BASE + gpu.profile().vram_size - 1) >> 24) as u32;
    assert_ne!(fb_mib16, 0);
    for xcc in 0..8 {
        assert_eq!(
            gpu.peek(RegIp::Gc, "MC_VM_FB_LOCATION_BASE", xcc),
            Some(fb_mib16)
        );
        assert_eq!(gpu.peek(RegIp::Gc, "MC_VM_FB_LOCATION_TOP", xcc), Some(top));
    }
    for aid in 0..4 {
        assert_eq!(
            gpu.peek(RegIp::Mmhub, "MC_VM_FB_LOCATION_BASE", aid),
            Some(fb_mib16)
        );
    }
    let navi = MockGpu::new("navi31").unwrap();
    assert_eq!(
        navi.peek(RegIp::Mmhub, "MMMC_VM_FB_LOCATION_BASE", 0),
        Some(fb_mib16)
    );
    assert_eq!(
        navi.peek(RegIp::Gc, "GCMC_VM_FB_LOCATION_BASE", 0),
        Some(fb_mib16)
    );
    // A function reset leaves it programmed.
    let d = navi.open();
    d.reset().unwrap();
    assert_eq!(
        navi.peek(RegIp::Gc, "GCMC_VM_FB_LOCATION_BASE", 0),
        Some(fb_mib16)
    );
}
