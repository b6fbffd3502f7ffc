//! PCI-level behaviour of the mock: config space, BARs, VRAM, system memory, strictness.

use am_driver::PciDevice;
use am_driver::pci::{PCI_COMMAND, PCI_COMMAND_MASTER, SYSMEM_PAGE_SIZE};
use am_mock::{Access, MockGpu, Mode, PROFILES, Space};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

fn dev(profile: &str) -> (MockGpu, std::sync::Arc<am_mock::MockDevice>) {
    let gpu = MockGpu::new(profile).unwrap();
    let dev = gpu.open();
    (gpu, dev)
}

#[test]
fn config_space_identifies_each_profile() {
    for (profile, device_id, subclass) in [
        ("navi31", 0x744c, 0x00),
        ("navi31-smallbar", 0x744c, 0x00),
        ("navi48", 0x7550, 0x00),
        ("navi44", 0x7590, 0x00),
        ("mi300x", 0x74a1, 0x80),
        ("mi350x-vf", 0x75b0, 0x80),
    ] {
        let (_gpu, d) = dev(profile);
        assert_eq!(d.vendor_id().unwrap(), 0x1002, "{profile}: vendor");
        assert_eq!(d.device_id().unwrap(), device_id, "{profile}: device id");
        assert_eq!(
            d.config_read(0x0b, 1).unwrap(),
            0x03,
            "{profile}: class must be display (0x03)"
        );
        assert_eq!(
            d.config_read(0x0a, 1).unwrap(),
            subclass,
            "{profile}: subclass"
        );
        assert_eq!(
            d.config_read(0x2c, 2).unwrap(),
            0x1002,
            "{profile}: subsystem vendor"
        );
        let status = d.config_read(0x06, 2).unwrap();
        assert_ne!(status & 0x10, 0, "{profile}: capability list bit");
    }
    assert_eq!(PROFILES.len(), 6);
}

#[test]
fn capability_list_reaches_pcie_and_msi_and_rebar() {
    let (_gpu, d) = dev("navi31");
    let mut ids = Vec::new();
    let mut ptr = d.config_read(0x34, 1).unwrap() as u16;
    while ptr != 0 && ids.len() < 16 {
        ids.push(d.config_read(ptr, 1).unwrap());
        ptr = d.config_read(ptr + 1, 1).unwrap() as u16;
    }
    assert_eq!(ids, vec![0x01, 0x10, 0x05, 0x11], "PM, PCIe, MSI, MSI-X");
    let mut ext = Vec::new();
    let mut ptr = 0x100u16;
    while ptr != 0 && ext.len() < 16 {
        let hdr = d.config_read(ptr, 4).unwrap();
        ext.push((ptr, hdr & 0xffff));
        ptr = (hdr >> 20) as u16;
    }
    let rebar = ext
        .iter()
        .find(|e| e.1 == 0x15)
        .expect("Resizable BAR extended capability")
        .0;
    let cap = d.config_read(rebar + 4, 4).unwrap();
    // Bit n+4 = 2^n MiB: 256 MiB (n=8) up to 32 GiB (n=15).
    assert_eq!(cap, (8..=15).map(|n| 1u32 << (n + 4)).sum::<u32>());
    let ctrl = d.config_read(rebar + 8, 4).unwrap();
    assert_eq!(ctrl & 7, 0, "BAR index 0");
    assert_eq!((ctrl >> 8) & 0x3f, 8, "current size 256 MiB");
}

#[test]
fn bar_sizes_and_sizing_probe() {
    let (_gpu, d) = dev("navi31");
    assert_eq!(d.bar_info(0).unwrap().size, 256 * MIB);
    assert_eq!(d.bar_info(2).unwrap().size, 2 * MIB);
    assert_eq!(d.bar_info(5).unwrap().size, MIB);
    assert!(d.bar_info(1).is_err() && d.bar_info(3).is_err() && d.bar_info(4).is_err());
    // Standard sizing: write all-ones, read back the address mask.
    let old = d.config_read(0x24, 4).unwrap();
    d.config_write(0x24, 4, 0xffff_ffff).unwrap();
    assert_eq!(d.config_read(0x24, 4).unwrap(), !(MIB as u32 - 1));
    d.config_write(0x24, 4, old).unwrap();
    assert_eq!(d.bar_info(5).unwrap().bus_addr, u64::from(old));
    let lo = d.config_read(0x10, 4).unwrap();
    assert_eq!(lo & 0xf, 0xc, "BAR0 is 64-bit prefetchable memory");
}

#[test]
fn resize_bar_makes_navi31_large_but_not_the_smallbar_variant() {
    let (_gpu, d) = dev("navi31");
    d.resize_bar(0).unwrap();
    assert_eq!(d.bar_info(0).unwrap().size, 32 * GIB);
    assert!(
        d.bar(0).unwrap().len() >= d.gpu().profile().vram_size,
        "large BAR covers VRAM"
    );
    let (_gpu, s) = dev("navi31-smallbar");
    s.resize_bar(0).unwrap();
    assert_eq!(s.bar_info(0).unwrap().size, 256 * MIB);
}

#[test]
fn resize_after_mapping_is_refused() {
    let (_gpu, d) = dev("navi31");
    let _bar = d.bar(0).unwrap();
    assert!(d.resize_bar(0).is_err());
}

#[test]
fn command_register_keeps_only_writable_bits() {
    let (_gpu, d) = dev("navi31");
    let master = u32::from(PCI_COMMAND_MASTER);
    assert_eq!(
        d.config_read(PCI_COMMAND, 2).unwrap() & master,
        0,
        "bus master starts off"
    );
    d.set_bus_master(true).unwrap();
    assert_eq!(d.config_read(PCI_COMMAND, 2).unwrap(), 0x6);
    d.config_write(PCI_COMMAND, 2, 0xffff).unwrap();
    assert_eq!(d.config_read(PCI_COMMAND, 2).unwrap(), 0x0547);
    d.config_write(0x00, 2, 0x1234).unwrap();
    assert_eq!(d.vendor_id().unwrap(), 0x1002, "vendor id is read-only");
}

#[test]
fn malformed_config_access_is_a_violation() {
    let (gpu, d) = dev("navi31");
    assert!(d.config_read(0x03, 2).is_err());
    assert!(d.config_read(0x1000, 1).is_err());
    let v = gpu.violations();
    assert_eq!(v.len(), 2);
    assert_eq!(v[0].space, Space::Config);
    assert_eq!(v[0].offset, 3);
}

#[test]
fn memsize_and_vf_bit_at_fixed_dwords() {
    for (profile, mib, vf) in [
        ("navi31", 24 * 1024, 0),
        ("mi300x", 192 * 1024, 0),
        ("mi350x-vf", 288 * 1024, 1),
    ] {
        let (_gpu, d) = dev(profile);
        let mmio = d.bar(5).unwrap();
        assert_eq!(
            mmio.read32(0xde5 * 4).unwrap() & 1,
            vf,
            "{profile}: RCC_IOV_FUNC_IDENTIFIER"
        );
        if vf == 0 {
            assert_eq!(
                mmio.read32(0xde3 * 4).unwrap(),
                mib,
                "{profile}: RCC_CONFIG_MEMSIZE"
            );
        }
    }
}

/// `RCC_CONFIG_MEMSIZE` reports the strapped VRAM size; no source says a write is refused,
/// so it does not land and is counted as a warning naming the register.
#[test]
fn memsize_is_read_only() {
    let (gpu, d) = dev("navi31");
    let mmio = d.bar(5).unwrap();
    mmio.write32(0xde3 * 4, 1).unwrap();
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
    let w = gpu.warnings();
    assert_eq!(w.len(), 1);
    let name = w[0].register.as_deref().unwrap();
    assert!(
        name.starts_with("RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE"),
        "{:?}",
        w[0]
    );
    assert!(w[0].reason.contains("read-only"), "{}", w[0].reason);
    assert_eq!((w[0].space, w[0].offset), (Space::Bar(5), 0xde3 * 4));
    assert_eq!(mmio.read32(0xde3 * 4).unwrap(), 24 * 1024);
}

#[test]
fn mm_index_window_reads_and_writes_vram() {
    let (gpu, d) = dev("navi31-smallbar");
    let mmio = d.bar(5).unwrap();
    // Above 4 GiB and beyond the 256 MiB BAR0: only reachable through the window.
    let addr: u64 = 20 * GIB + 0x1234_5670;
    gpu.vram().write32(addr, 0xdead_beef).unwrap();
    mmio.write32(0x06 * 4, (addr >> 31) as u32).unwrap();
    mmio.write32(0, (addr as u32 & 0x7fff_ffff) | 0x8000_0000)
        .unwrap();
    assert_eq!(mmio.read32(4).unwrap(), 0xdead_beef);
    mmio.write32(4, 0x0bad_f00d).unwrap();
    assert_eq!(gpu.vram().read32(addr), 0x0bad_f00d);
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
}

#[test]
fn the_driver_reaches_unaligned_vram_bytes_past_bar0_through_the_window() {
    let (gpu, d) = dev("navi31-smallbar");
    let (bar0, mmio) = (d.bar(0).unwrap(), d.bar(5).unwrap());
    let vram = am_driver::Vram::new("mock", bar0, mmio, 24 * GIB);
    let base: u64 = 20 * GIB + 0x1230;
    gpu.vram().write(base, &[0xaa; 16]).unwrap();
    // Seven bytes from byte 3 of a dword: a partial dword at each end, one whole in between.
    vram.write(base + 3, b"seven!!").unwrap();
    let mut all = [0u8; 16];
    gpu.vram().read(base, &mut all);
    let mut want = [0xaa; 16];
    want[3..10].copy_from_slice(b"seven!!");
    assert_eq!(all, want);
    let mut back = [0u8; 6];
    vram.read(base + 5, &mut back).unwrap();
    assert_eq!(&back, b"ven!!\xaa");
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
}

#[test]
fn mm_data_without_memory_select_is_a_violation() {
    let (gpu, d) = dev("navi31");
    let mmio = d.bar(5).unwrap();
    mmio.write32(0, 0x1000).unwrap();
    assert!(mmio.read32(4).is_err());
    let v = gpu.violations();
    assert_eq!(v.len(), 1);
    assert_eq!(
        (v[0].space, v[0].offset, v[0].access),
        (Space::Bar(5), 4, Access::Read)
    );
    assert!(v[0].reason.contains("bit 31"), "{}", v[0].reason);
}

#[test]
fn bar0_window_reaches_vram_and_stops_at_its_end() {
    let (gpu, d) = dev("navi31");
    let vram = d.bar(0).unwrap();
    vram.write_bytes(0x1000, b"hello").unwrap();
    let mut b = [0u8; 5];
    gpu.vram().read(0x1000, &mut b);
    assert_eq!(&b, b"hello");
    assert!(vram.read32(256 * MIB).is_err(), "beyond the 256 MiB BAR");
}

#[test]
fn vram_is_sparse() {
    let (gpu, d) = dev("navi31");
    d.resize_bar(0).unwrap();
    let vram = d.bar(0).unwrap();
    let before = gpu.vram().resident_bytes();
    assert_eq!(
        vram.read32(23 * GIB).unwrap(),
        0,
        "untouched VRAM reads zero"
    );
    assert_eq!(
        gpu.vram().resident_bytes(),
        before,
        "reads allocate nothing"
    );
    vram.write32(23 * GIB, 7).unwrap();
    vram.write32(23 * GIB + 4, 8).unwrap();
    assert_eq!(gpu.vram().resident_bytes(), before + 2 * MIB);
    assert_eq!(vram.read64(23 * GIB).unwrap(), 8 << 32 | 7);
    // Inside the 32 GiB BAR but beyond the 24 GiB of memory.
    assert!(vram.read32(24 * GIB).is_err());
}

#[test]
fn unknown_register_is_a_violation_with_its_offset() {
    let (gpu, d) = dev("navi31");
    let mmio = d.bar(5).unwrap();
    // Dword 0x3ffff: the last dword of BAR5, in no register of navi31's.
    let err = mmio.read32(0x3ffff * 4).unwrap_err();
    assert!(err.to_string().contains("0x3ffff"), "{err}");
    assert!(mmio.write32(0x3ffff * 4, 5).is_err());
    let v = gpu.take_violations();
    assert_eq!(v.len(), 2);
    assert_eq!(
        (v[0].offset, v[0].access, v[0].value),
        (0xffffc, Access::Read, None)
    );
    assert_eq!((v[1].access, v[1].value), (Access::Write, Some(5)));
    assert!(
        gpu.violations().is_empty(),
        "take_violations clears the list"
    );
}

#[test]
fn misaligned_and_odd_sized_register_accesses_are_violations() {
    let (gpu, d) = dev("navi31");
    let mmio = d.bar(5).unwrap();
    assert!(mmio.read32(0xde3 * 4 + 2).is_err());
    assert!(mmio.read64(0xde3 * 4).is_err());
    assert!(
        mmio.read8(0xde3 * 4).is_err(),
        "RCC_CONFIG_MEMSIZE is dword-wide"
    );
    assert_eq!(gpu.violations().len(), 3);
}

#[test]
fn lenient_mode_records_without_failing() {
    let gpu = MockGpu::with_mode("navi31", 0, Mode::Lenient).unwrap();
    let mmio = gpu.open().bar(5).unwrap();
    mmio.write32(0x3fff0 * 4, 42).unwrap();
    assert_eq!(mmio.read32(0x3fff0 * 4).unwrap(), 42);
    assert_eq!(gpu.violations().len(), 2);
}

/// Hardware drops a doorbell outside every queue's range; the mock takes the write, rings
/// nothing and counts a warning.
#[test]
fn doorbell_nobody_owns_is_a_warning() {
    let (gpu, d) = dev("navi31");
    let db = d.bar(2).unwrap();
    db.write64(3 * 8, 0x40).unwrap();
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
    assert!(gpu.doorbell_rings().is_empty());
    let w = gpu.warnings();
    assert_eq!(w.len(), 1);
    assert_eq!(
        (w[0].space, w[0].offset, w[0].value),
        (Space::Bar(2), 24, Some(0x40))
    );
    assert!(w[0].reason.contains("index 0x3"), "{}", w[0].reason);
    assert_eq!(gpu.warning_count(), 1);
}

#[test]
fn register_access_with_memory_decoding_off_is_a_violation() {
    let (gpu, d) = dev("navi31");
    d.config_write(PCI_COMMAND, 2, 0).unwrap();
    assert!(d.bar(5).unwrap().read32(0xde3 * 4).is_err());
    assert!(gpu.violations()[0].reason.contains("memory decoding"));
}

#[test]
fn vf_is_gated_until_access_is_granted() {
    let (gpu, d) = dev("mi350x-vf");
    let mmio = d.bar(5).unwrap();
    let vram = d.bar(0).unwrap();
    let disc = gpu.profile().vram_size - 64 * 1024;
    assert_eq!(
        mmio.read32(0xde5 * 4).unwrap() & 1,
        1,
        "the VF bit is readable while gated"
    );
    assert_eq!(mmio.read32(0xde3 * 4).unwrap(), 0xffff_ffff);
    assert_eq!(
        vram.read32(disc).unwrap(),
        0xffff_ffff,
        "discovery reads all-ones"
    );
    assert_eq!(
        mmio.read8(0xe5e * 4 + 1).unwrap(),
        0,
        "mailbox control answers while gated"
    );
    assert!(
        vram.write32(0, 1).is_err(),
        "writes while gated are violations"
    );
    gpu.grant_vf_access(true);
    assert_eq!(mmio.read32(0xde3 * 4).unwrap(), 288 * 1024);
    assert_eq!(vram.read32(disc).unwrap(), 0x2821_1407, "binary_signature");
    // A reset takes the access away again, as on the real VM.
    d.reset().unwrap();
    assert_eq!(vram.read32(disc).unwrap(), 0xffff_ffff);
}

#[test]
fn sysmem_bus_addresses_resolve_for_device_dma() {
    let (gpu, d) = dev("navi31");
    let mem = d.alloc_sysmem(3 * SYSMEM_PAGE_SIZE, false).unwrap();
    assert_eq!(mem.len(), 3 * SYSMEM_PAGE_SIZE);
    let bus = mem.bus_addrs().to_vec();
    assert_eq!(bus.len(), 3);
    assert!(
        bus[0] > bus[1],
        "non-contiguous memory is not handed out in order"
    );
    mem.write32(SYSMEM_PAGE_SIZE as u64 + 8, 0x1122_3344)
        .unwrap();
    let mut b = [0u8; 4];
    assert!(
        gpu.dma_read(bus[1] + 8, &mut b).is_err(),
        "DMA before bus mastering is refused"
    );
    d.set_bus_master(true).unwrap();
    gpu.dma_read(bus[1] + 8, &mut b).unwrap();
    assert_eq!(u32::from_le_bytes(b), 0x1122_3344);
    gpu.dma_write(bus[2], &[9, 9]).unwrap();
    let mut c = [0u8; 2];
    mem.read_bytes(2 * SYSMEM_PAGE_SIZE as u64, &mut c).unwrap();
    assert_eq!(c, [9, 9]);
    let contiguous = d.alloc_sysmem(2 * SYSMEM_PAGE_SIZE, true).unwrap();
    assert_eq!(
        contiguous.bus_addrs()[1],
        contiguous.bus_addrs()[0] + SYSMEM_PAGE_SIZE as u64
    );
    let freed = bus[0];
    drop(mem);
    assert!(gpu.dma_read(freed, &mut b).is_err(), "DMA to freed memory");
    assert!(gpu.violations().iter().all(|v| v.space == Space::Dma));
}

#[test]
fn sysmem_cpu_access_is_bounds_checked() {
    let (_gpu, d) = dev("navi31");
    let mem = d.alloc_sysmem(100, true).unwrap();
    assert_eq!(mem.len(), SYSMEM_PAGE_SIZE);
    assert!(mem.read32(SYSMEM_PAGE_SIZE as u64 - 2).is_err());
}

#[test]
fn open_returns_the_same_device_for_the_same_spec() {
    let a = am_mock::open("navi31", 7).unwrap();
    let b = am_mock::open("navi31", 7).unwrap();
    assert_eq!(a.name(), "mock:navi31:7");
    a.bar(0).unwrap().write32(0x100, 77).unwrap();
    assert_eq!(b.bar(0).unwrap().read32(0x100).unwrap(), 77);
    assert!(am_mock::open("navi99", 0).is_err());
}

#[test]
fn open_spec_parses_profile_and_index() {
    assert_eq!(
        am_mock::open_spec("mock:mi300x:3").unwrap().name(),
        "mock:mi300x:3"
    );
    assert_eq!(
        am_mock::open_spec("mock:navi31").unwrap().name(),
        "mock:navi31:0"
    );
    assert!(am_mock::open_spec("navi31").is_err());
    assert!(am_mock::open_spec("mock:navi31:x").is_err());
    assert!(am_mock::open_spec("mock:nope:0").is_err());
}

#[test]
fn accesses_crossing_chunk_and_page_boundaries() {
    let (gpu, d) = dev("navi31");
    let vram = d.bar(0).unwrap();
    let at = 2 * MIB - 3;
    vram.write_bytes(at, &[1, 2, 3, 4, 5, 6]).unwrap();
    let mut b = [0u8; 6];
    vram.read_bytes(at, &mut b).unwrap();
    assert_eq!(b, [1, 2, 3, 4, 5, 6]);
    assert_eq!(gpu.vram().resident_bytes() % (2 * MIB), 0);
    let mem = d.alloc_sysmem(2 * SYSMEM_PAGE_SIZE, true).unwrap();
    d.set_bus_master(true).unwrap();
    let edge = mem.bus_addrs()[0] + SYSMEM_PAGE_SIZE as u64 - 2;
    gpu.dma_write(edge, &[7, 8, 9, 10]).unwrap();
    let mut c = [0u8; 4];
    mem.read_bytes(SYSMEM_PAGE_SIZE as u64 - 2, &mut c).unwrap();
    assert_eq!(c, [7, 8, 9, 10]);
    // One byte past the allocation is the guard page.
    let end = mem.bus_addrs()[1] + SYSMEM_PAGE_SIZE as u64;
    assert!(gpu.dma_read(end, &mut c).is_err());
}

/// System memory the device can reach lies inside the 44-bit DMA mask Linux gives GC 10-12
/// parts (and so inside MI300's 48 bits): a driver that checks the mask when it maps a bus
/// address finds every page the mock hands out inside it.
#[test]
fn system_memory_bus_addresses_lie_inside_the_dma_mask() {
    for profile in ["navi31", "mi300x"] {
        let gpu = MockGpu::new(profile).unwrap();
        let dev = gpu.open();
        for size in [4096, 3 << 20] {
            let m = dev.alloc_sysmem(size, size > 4096).unwrap();
            for &b in m.bus_addrs() {
                assert!(b + 4096 <= 1 << 44, "{profile}: bus address {b:#x}");
                assert!(b >= 1 << 32, "{profile}: above 4 GiB, so truncation shows");
            }
        }
    }
}
