//! IH model: rings programmed through BAR5, entries read back through BAR0.

use std::sync::Arc;

use am_autogen::regs::{RegIp, table};
use am_driver::mm::{MapFlags, PageTables, PteFormat, TableAlloc, VramAccess};
use am_driver::{Bar, PciDevice, Vram};
use am_mock::ip::gmc::{FB_BASE, Hub};
use am_mock::ip::ih::{IhEntry, Posted};
use am_mock::walker::Access;
use am_mock::{MockDevice, MockGpu};

const RING: u64 = 0x90_0000;

struct Rig {
    gpu: MockGpu,
    dev: Arc<MockDevice>,
    bar0: Arc<dyn Bar>,
    bar5: Arc<dyn Bar>,
}

impl Rig {
    fn new(profile: &str) -> Self {
        let gpu = MockGpu::new(profile).unwrap();
        let dev = gpu.open();
        let bar0 = dev.bar(0).unwrap();
        let bar5 = dev.bar(5).unwrap();
        Rig {
            gpu,
            dev,
            bar0,
            bar5,
        }
    }

    fn addr(&self, name: &str) -> u64 {
        let map = self.gpu.register_map();
        map.info(map.find(RegIp::Osssys, name, 0).unwrap()).addr * 4
    }

    fn fields(&self, name: &str, fields: &[(&str, u32)]) -> u32 {
        let map = self.gpu.register_map();
        let info = map.info(map.find(RegIp::Osssys, name, 0).unwrap());
        let reg = table(info.table, info.version)
            .unwrap()
            .by_name(name)
            .unwrap();
        fields
            .iter()
            .fold(0, |v, (f, x)| reg.field(f).unwrap().set(v, *x))
    }

    fn wr(&self, name: &str, v: u32) {
        self.bar5.write32(self.addr(name), v).unwrap();
    }

    fn rd(&self, name: &str) -> u32 {
        self.bar5.read32(self.addr(name)).unwrap()
    }

    /// RING1 of `entries` entries at VRAM offset `RING`, through the FB aperture.
    fn enable_ring1(&self, entries: u32) {
        let mc = FB_BASE + RING;
        self.wr("IH_RB_BASE_RING1", (mc >> 8) as u32);
        self.wr("IH_RB_BASE_HI_RING1", (mc >> 40) as u32);
        let log2_dwords = (entries * 8).trailing_zeros();
        let cntl = self.fields(
            "IH_RB_CNTL_RING1",
            &[
                ("RB_ENABLE", 1),
                ("RB_SIZE", log2_dwords),
                ("MC_SPACE", 4),
                ("WPTR_OVERFLOW_ENABLE", 1),
            ],
        );
        self.wr("IH_RB_CNTL_RING1", cntl);
    }

    fn entry(&self, index: u64) -> IhEntry {
        let mut dw = [0u32; 8];
        for (i, d) in dw.iter_mut().enumerate() {
            *d = self.bar0.read32(RING + index * 32 + i as u64 * 4).unwrap();
        }
        IhEntry::from_dwords(dw)
    }
}

fn sq(n: u32) -> IhEntry {
    IhEntry {
        client_id: am_autogen::ih::SOC15_IH_CLIENTID_GRBM_CP as u8,
        src_id: am_autogen::ih::gfx_9_0::GFX_9_0__SRCID__SQ_INTERRUPT_ID as u8,
        ring_id: 0,
        vmid: 3,
        pasid: 0x1234,
        node_id: 2,
        timestamp: 0,
        src_data: [n, 0xdead_beef, 0, 0],
    }
}

#[test]
fn entries_wrap_and_a_full_ring_overflows_until_cleared() {
    let r = Rig::new("mi300x");
    r.enable_ring1(8);
    for n in 0..7 {
        assert_eq!(
            r.gpu.post_interrupt(1, sq(n)).unwrap(),
            Posted::Written {
                offset: u64::from(n) * 32
            }
        );
    }
    // Seven entries in an eight-entry ring: one more would make wptr == rptr.
    assert_eq!(r.gpu.post_interrupt(1, sq(7)).unwrap(), Posted::Overflow);
    let wptr = r.rd("IH_RB_WPTR_RING1");
    assert_eq!(wptr & 1, 1, "RB_OVERFLOW");
    assert_eq!(wptr & !3, 7 * 32);
    let e = r.entry(3);
    assert_eq!(
        (
            e.client_id,
            e.src_id,
            e.vmid,
            e.pasid,
            e.node_id,
            e.src_data[0]
        ),
        (20, 0xef, 3, 0x1234, 2, 3)
    );
    assert_eq!(e.src_data[1], 0xdead_beef);

    // The driver consumed three entries: the ring wraps to offset 0.
    r.wr("IH_RB_RPTR_RING1", 3 * 32);
    let cntl = r.rd("IH_RB_CNTL_RING1");
    let clear = r.fields("IH_RB_CNTL_RING1", &[("WPTR_OVERFLOW_CLEAR", 1)]);
    r.wr("IH_RB_CNTL_RING1", cntl | clear);
    assert_eq!(r.rd("IH_RB_WPTR_RING1") & 1, 0, "overflow cleared");
    assert_eq!(
        r.rd("IH_RB_CNTL_RING1") & clear,
        0,
        "the clear bit does not stick"
    );
    for (n, offset) in [(10, 7 * 32), (11, 0), (12, 32)] {
        assert_eq!(
            r.gpu.post_interrupt(1, sq(n)).unwrap(),
            Posted::Written { offset }
        );
    }
    assert_eq!(r.entry(0).src_data[0], 11);
    assert_eq!(r.entry(1).src_data[0], 12);
    assert_eq!(r.gpu.post_interrupt(1, sq(13)).unwrap(), Posted::Overflow);
    assert!(r.gpu.violations().is_empty(), "{:?}", r.gpu.violations());
}

#[test]
fn a_disabled_ring_drops_and_an_unreachable_ring_is_a_violation() {
    let r = Rig::new("navi31");
    assert_eq!(r.gpu.post_interrupt(0, sq(0)).unwrap(), Posted::Disabled);
    // Ring 0 at MC 256 MiB: outside the FB and AGP apertures, and VM context 0 of MMHUB 0
    // was never set up.
    r.wr("IH_RB_BASE", 0x10_0000);
    let cntl = r.fields(
        "IH_RB_CNTL",
        &[("RB_ENABLE", 1), ("RB_SIZE", 6), ("MC_SPACE", 4)],
    );
    r.wr("IH_RB_CNTL", cntl);
    assert!(r.gpu.post_interrupt(0, sq(0)).is_err());
    assert_eq!(r.gpu.take_violations().len(), 1);
}

#[test]
fn an_injected_page_fault_lands_in_ring0_with_the_vmc_client() {
    let _ = injected_page_fault_lands_in_ring0("mi300x", 2);
}

/// IH 7 (OSSSYS 7.0.0, navi48): the same ring registers and entry layout, MMHUB 4.1 faults.
#[test]
fn navi48_ih7_ring0_takes_an_mmhub_page_fault() {
    let r = injected_page_fault_lands_in_ring0("navi48", 0);
    // MMHUB 4.1 latches the fault in the low half of its split status register.
    let lo = r
        .gpu
        .peek(RegIp::Mmhub, "MMVM_L2_PROTECTION_FAULT_STATUS_LO32", 0)
        .unwrap();
    assert_ne!(lo, 0, "MMVM_L2_PROTECTION_FAULT_STATUS_LO32 latched");
}

fn injected_page_fault_lands_in_ring0(profile: &str, hub: u8) -> Rig {
    let r = Rig::new(profile);
    let mc = FB_BASE + RING;
    r.wr("IH_RB_BASE", (mc >> 8) as u32);
    r.wr("IH_RB_BASE_HI", (mc >> 40) as u32);
    let cntl = r.fields(
        "IH_RB_CNTL",
        &[("RB_ENABLE", 1), ("RB_SIZE", 6), ("MC_SPACE", 4)],
    );
    r.wr("IH_RB_CNTL", cntl);
    let va = 0x7fff_1234_5000;
    r.gpu
        .inject_page_fault(Hub::mm(hub), 5, va, Access::Read)
        .unwrap();
    let e = r.entry(0);
    assert_eq!(e.client_id as u32, am_autogen::ih::SOC15_IH_CLIENTID_VMC);
    assert_eq!(
        e.src_id as u32,
        am_autogen::ih::vmc_1_0::VMC_1_0__SRCID__VM_FAULT
    );
    assert_eq!((e.vmid, e.node_id), (5, hub), "{profile}");
    assert_eq!(
        u64::from(e.src_data[0]) << 12 | u64::from(e.src_data[1] & 0xf) << 44,
        va
    );
    assert_eq!(r.rd("IH_RB_WPTR") & !3, 32);
    r
}

struct OnePage(u64);

impl TableAlloc for OnePage {
    fn alloc_table(&mut self, mem: &dyn VramAccess) -> am_driver::Result<u64> {
        let a = self.0;
        self.0 += 0x1000;
        mem.zero(a, 0x1000)?;
        Ok(a)
    }
    fn free_table(&mut self, _paddr: u64) -> am_driver::Result<()> {
        Ok(())
    }
}

#[test]
fn rings_in_system_memory_through_the_agp_aperture_and_the_gart() {
    let r = Rig::new("navi31");
    r.dev.config_write(4, 2, 0x6).unwrap(); // memory + bus master
    let mem = r.dev.alloc_sysmem(0x2000, true).unwrap();
    let bus = mem.bus_addrs()[0];
    let mm = |n: &str| {
        let map = r.gpu.register_map();
        map.info(map.find(RegIp::Mmhub, n, 0).unwrap()).addr * 4
    };
    // AGP: the 16 MiB at MC 64 GiB are the 16 MiB of bus space holding the allocation.
    r.bar5.write32(mm("MMMC_VM_AGP_BOT"), 0x1000).unwrap();
    r.bar5.write32(mm("MMMC_VM_AGP_TOP"), 0x1000).unwrap();
    r.bar5
        .write32(mm("MMMC_VM_AGP_BASE"), (bus >> 24) as u32)
        .unwrap();
    let ring = (0x1000u64 << 24) + (bus & 0xff_ffff);
    r.wr("IH_RB_BASE", (ring >> 8) as u32);
    r.wr("IH_RB_BASE_HI", (ring >> 40) as u32);
    let cntl = r.fields(
        "IH_RB_CNTL",
        &[("RB_ENABLE", 1), ("RB_SIZE", 6), ("MC_SPACE", 4)],
    );
    r.wr("IH_RB_CNTL", cntl);
    assert_eq!(
        r.gpu.post_interrupt(0, sq(42)).unwrap(),
        Posted::Written { offset: 0 }
    );
    assert_eq!(mem.read32(16).unwrap(), 42);

    // GART: VM context 0 of MMHUB 0 maps VA 1 TiB to the second system page.
    let va = 1u64 << 40;
    let pt = PageTables {
        format: PteFormat::Gfx10,
        root: 0x40_0000,
        vram_offset: 0,
        xgmi_seg_size: 0,
        va_base: va,
    };
    let mut alloc = OnePage(0x40_1000);
    let vram = Vram::new("mock", r.bar0.clone(), r.bar5.clone(), r.bar0.len());
    vram.zero(pt.root, 0x1000).unwrap();
    pt.map(
        &vram,
        &mut alloc,
        va,
        &[(bus + 0x1000, 0x1000)],
        MapFlags::SYSTEM,
        false,
    )
    .unwrap();
    let ctx = |n: &str, v: u32| {
        r.bar5
            .write32(mm(&format!("MMVM_CONTEXT0_{n}")), v)
            .unwrap()
    };
    ctx("PAGE_TABLE_BASE_ADDR_LO32", pt.root as u32 | 1);
    ctx("PAGE_TABLE_START_ADDR_LO32", (va >> 12) as u32);
    ctx("PAGE_TABLE_END_ADDR_LO32", ((va >> 12) + 0xff) as u32);
    ctx("CNTL", 1 | 3 << 1); // ENABLE_CONTEXT, PAGE_TABLE_DEPTH 3
    r.bar5.write32(mm("MMVM_INVALIDATE_ENG17_REQ"), 1).unwrap();
    r.wr("IH_RB_BASE", (va >> 8) as u32);
    r.wr("IH_RB_BASE_HI", (va >> 40) as u32);
    r.wr("IH_RB_WPTR", 0);
    assert_eq!(
        r.gpu.post_interrupt(0, sq(43)).unwrap(),
        Posted::Written { offset: 0 }
    );
    assert_eq!(mem.read32(0x1000 + 16).unwrap(), 43);
    assert!(r.gpu.violations().is_empty(), "{:?}", r.gpu.violations());
}
