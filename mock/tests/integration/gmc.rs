//! GMC model: VM context 0 programmed through BAR5 with tables the driver's `PageTables`
//! writes into VRAM through BAR0; translation, TLB snapshot, faults, semaphore.

use std::sync::Arc;

use am_autogen::regs::{RegIp, table};
use am_driver::mm::{MapFlags, PageTables, PteFormat, TableAlloc, VramAccess};
use am_driver::{Bar, PciDevice, Vram};
use am_mock::ip::gmc::{FB_BASE, Hub};
use am_mock::ip::ih::IhEntry;
use am_mock::walker::{Access, FaultKind, PhysTarget};
use am_mock::{MockDevice, MockGpu};

pub(crate) const VA: u64 = 0x2000_0000_0000;
const ROOT: u64 = 0x40_0000;
const IH_RING: u64 = 0x80_0000;
const IH_WB: u64 = 0x81_0000;

struct Bump(u64);

impl TableAlloc for Bump {
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

pub(crate) struct Rig {
    pub(crate) gpu: MockGpu,
    pub(crate) _dev: Arc<MockDevice>,
    bar0: Arc<dyn Bar>,
    bar5: Arc<dyn Bar>,
    /// VRAM as far as BAR0 reaches, for the page tables.
    vram: Vram,
    pt: PageTables,
    alloc: Bump,
}

impl Rig {
    pub(crate) fn new(profile: &str, format: PteFormat) -> Self {
        let gpu = MockGpu::new(profile).unwrap();
        let dev = gpu.open();
        let bar0 = dev.bar(0).unwrap();
        let bar5 = dev.bar(5).unwrap();
        let vram = Vram::new("mock", bar0.clone(), bar5.clone(), bar0.len());
        let mut alloc = Bump(ROOT);
        let root = alloc.alloc_table(&vram).unwrap();
        let pt = PageTables {
            format,
            root,
            vram_offset: 0,
            xgmi_seg_size: 0,
            va_base: VA,
        };
        Rig {
            gpu,
            _dev: dev,
            bar0,
            bar5,
            vram,
            pt,
            alloc,
        }
    }

    fn name(&self, hub: Hub, base: &str) -> String {
        let prefix = if hub.ip == RegIp::Gc { "GC" } else { "MM" };
        let pref = format!("{prefix}{base}");
        if self
            .gpu
            .register_map()
            .find(hub.ip, &pref, hub.instance)
            .is_some()
        {
            pref
        } else {
            base.to_string()
        }
    }

    fn addr(&self, ip: RegIp, name: &str, inst: u8) -> u64 {
        let map = self.gpu.register_map();
        let id = map.find(ip, name, inst).unwrap_or_else(|| panic!("{name}"));
        map.info(id).addr * 4
    }

    fn wr(&self, hub: Hub, base: &str, v: u32) {
        let a = self.addr(hub.ip, &self.name(hub, base), hub.instance);
        self.bar5.write32(a, v).unwrap();
    }

    fn rd(&self, hub: Hub, base: &str) -> u32 {
        let a = self.addr(hub.ip, &self.name(hub, base), hub.instance);
        self.bar5.read32(a).unwrap()
    }

    /// A register value with the named fields set, from the generated sh_mask.
    fn fields(&self, hub: Hub, base: &str, fields: &[(&str, u32)]) -> u32 {
        let name = self.name(hub, base);
        let map = self.gpu.register_map();
        let info = map.info(map.find(hub.ip, &name, hub.instance).unwrap());
        let reg = table(info.table, info.version)
            .unwrap()
            .by_name(&name)
            .unwrap();
        fields.iter().fold(0, |v, (f, x)| {
            reg.field(f)
                .unwrap_or_else(|| panic!("{name}.{f}"))
                .set(v, *x)
        })
    }

    fn field(&self, hub: Hub, base: &str, f: &str) -> u32 {
        let v = self.rd(hub, base);
        let one = self.fields(hub, base, &[(f, u32::MAX)]);
        (v & one) >> one.trailing_zeros()
    }

    pub(crate) fn program_context0(&self, hub: Hub) {
        let (depth, block) = (
            self.pt.format.page_table_depth(),
            self.pt.format.page_table_block_size(),
        );
        self.wr(
            hub,
            "VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32",
            self.pt.root as u32 | 1,
        );
        self.wr(
            hub,
            "VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32",
            (self.pt.root >> 32) as u32,
        );
        self.wr(
            hub,
            "VM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32",
            (VA >> 12) as u32,
        );
        self.wr(
            hub,
            "VM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32",
            (VA >> 44) as u32,
        );
        let end = (VA + (1 << 40) - 1) >> 12;
        self.wr(hub, "VM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32", end as u32);
        self.wr(
            hub,
            "VM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32",
            (end >> 32) as u32,
        );
        let cntl = self.fields(
            hub,
            "VM_CONTEXT0_CNTL",
            &[
                ("ENABLE_CONTEXT", 1),
                ("PAGE_TABLE_DEPTH", depth),
                ("PAGE_TABLE_BLOCK_SIZE", block),
                ("RANGE_PROTECTION_FAULT_ENABLE_INTERRUPT", 1),
                ("PDE0_PROTECTION_FAULT_ENABLE_INTERRUPT", 1),
                ("VALID_PROTECTION_FAULT_ENABLE_INTERRUPT", 1),
                ("READ_PROTECTION_FAULT_ENABLE_INTERRUPT", 1),
                ("WRITE_PROTECTION_FAULT_ENABLE_INTERRUPT", 1),
                ("EXECUTE_PROTECTION_FAULT_ENABLE_INTERRUPT", 1),
            ],
        );
        self.wr(hub, "VM_CONTEXT0_CNTL", cntl);
    }

    pub(crate) fn flush(&self, hub: Hub) {
        let req = self.fields(
            hub,
            "VM_INVALIDATE_ENG17_REQ",
            &[("PER_VMID_INVALIDATE_REQ", 1)],
        );
        self.wr(hub, "VM_INVALIDATE_ENG17_REQ", req);
        assert_eq!(
            self.field(hub, "VM_INVALIDATE_ENG17_ACK", "PER_VMID_INVALIDATE_ACK") & 1,
            1
        );
    }

    pub(crate) fn map(&mut self, va: u64, pa: u64, len: u64, flags: MapFlags) {
        self.pt
            .map(&self.vram, &mut self.alloc, va, &[(pa, len)], flags, false)
            .unwrap();
    }

    fn access(
        &self,
        hub: Hub,
        va: u64,
        access: Access,
    ) -> Result<am_mock::walker::Translation, am_mock::walker::PageFault> {
        self.gpu.gpu_access(hub, 0, va, access, 0).unwrap()
    }

    /// IH ring 0 of 8 KiB in VRAM, reached through the FB aperture, with write-back.
    fn enable_ih(&self) {
        let ih = |n: &str| self.addr(RegIp::Osssys, n, 0);
        let ring = FB_BASE + IH_RING;
        self.bar5
            .write32(ih("IH_RB_BASE"), (ring >> 8) as u32)
            .unwrap();
        self.bar5
            .write32(ih("IH_RB_BASE_HI"), (ring >> 40) as u32)
            .unwrap();
        let wb = FB_BASE + IH_WB;
        self.bar5
            .write32(ih("IH_RB_WPTR_ADDR_LO"), wb as u32)
            .unwrap();
        self.bar5
            .write32(ih("IH_RB_WPTR_ADDR_HI"), (wb >> 32) as u32)
            .unwrap();
        let map = self.gpu.register_map();
        let info = map.info(map.find(RegIp::Osssys, "IH_RB_CNTL", 0).unwrap());
        let reg = table(info.table, info.version)
            .unwrap()
            .by_name("IH_RB_CNTL")
            .unwrap();
        let cntl = [
            ("RB_ENABLE", 1),
            ("RB_SIZE", 11), // 2^11 dwords = 8 KiB
            ("MC_SPACE", 4),
            ("WPTR_WRITEBACK_ENABLE", 1),
            ("WPTR_OVERFLOW_ENABLE", 1),
        ]
        .iter()
        .fold(0, |v, (f, x)| reg.field(f).unwrap().set(v, *x));
        self.bar5.write32(ih("IH_RB_CNTL"), cntl).unwrap();
    }

    fn ih_entry(&self, index: u64) -> IhEntry {
        let mut dw = [0u32; 8];
        for (i, d) in dw.iter_mut().enumerate() {
            *d = self
                .bar0
                .read32(IH_RING + index * 32 + i as u64 * 4)
                .unwrap();
        }
        IhEntry::from_dwords(dw)
    }
}

const RO: MapFlags = MapFlags {
    readable: true,
    writable: false,
    executable: false,
    system: false,
    snooped: false,
    uncached: false,
};

#[test]
fn navi31_translates_4k_frag_huge_and_system_pages_after_flush() {
    translates_4k_frag_huge_and_system_pages("navi31", PteFormat::Gfx10);
}

/// GC 12 (navi48): the same mappings in the GFX12 PTE format (leaf bit 63 above the last
/// level, moved MTYPE/FRAG fields), walked by the mock's walker on the GC 12 hub.
#[test]
fn navi48_translates_gfx12_page_tables_after_flush() {
    translates_4k_frag_huge_and_system_pages("navi48", PteFormat::Gfx12);
}

fn translates_4k_frag_huge_and_system_pages(profile: &str, format: PteFormat) {
    let mut r = Rig::new(profile, format);
    let hub = Hub::gc(0);
    r.program_context0(hub);
    r.map(VA, 0x100_0000, 0x4000, MapFlags::VRAM);
    r.map(VA + 0x20_0000, 0x120_0000, 0x20_0000, MapFlags::VRAM);
    r.map(VA + 0x10_0000, 0x7654_3000, 0x1000, MapFlags::SYSTEM);
    r.flush(hub);

    let t = r.access(hub, VA + 0x1234, Access::Read).unwrap();
    assert_eq!(t.target, PhysTarget::Vram(0x100_1234));
    assert_eq!(t.page_size, 0x1000);
    assert_eq!(t.frag, 2, "16 KiB aligned run = 2^2 pages");
    let t = r
        .access(hub, VA + 0x20_0000 + 0x12_3456, Access::Write)
        .unwrap();
    assert_eq!(t.target, PhysTarget::Vram(0x132_3456));
    assert_eq!(t.page_size, 0x20_0000);
    let t = r.access(hub, VA + 0x10_0010, Access::Execute).unwrap();
    assert_eq!(t.target, PhysTarget::System(0x7654_3010));

    // The walker agrees with the driver's reading of its own tables.
    for va in [VA + 0x3000, VA + 0x20_0000 + 0x1f_f000, VA + 0x10_0000] {
        let d = r.pt.walk(&r.vram, va).unwrap().unwrap();
        let m = r.access(hub, va, Access::Read).unwrap();
        let want = if d.page.flags.system {
            PhysTarget::System(d.phys)
        } else {
            PhysTarget::Vram(d.phys)
        };
        assert_eq!(m.target, want, "va {va:#x}");
    }
    assert!(r.gpu.violations().is_empty(), "{:?}", r.gpu.violations());
}

#[test]
fn a_mapping_written_after_the_flush_faults_until_the_next_flush() {
    let mut r = Rig::new("navi31", PteFormat::Gfx10);
    let hub = Hub::mm(0);
    r.program_context0(hub);
    // Never invalidated: no translation at all.
    r.map(VA, 0x100_0000, 0x1000, MapFlags::VRAM);
    assert!(r.access(hub, VA, Access::Read).is_err());
    r.flush(hub);
    assert!(r.access(hub, VA, Access::Read).is_ok());
    // A new entry in a table the walker has read: the snapshot still sees the table as it
    // was at the flush (an invalid entry there), while the unchanged entry beside it keeps
    // translating, as a TLB that was not invalidated does.
    r.map(VA + 0x1000, 0x200_0000, 0x1000, MapFlags::VRAM);
    let f = r.access(hub, VA + 0x1000, Access::Read).unwrap_err();
    assert_eq!(f.kind, FaultKind::Invalid);
    assert!(r.access(hub, VA, Access::Read).is_ok());
    // A new table (another 2 MiB range) written after the flush is not in the snapshot:
    // the directory entry that now points to it was invalid at the flush.
    r.map(VA + 0x40_0000, 0x300_0000, 0x1000, MapFlags::VRAM);
    let f = r.access(hub, VA + 0x40_0000, Access::Read).unwrap_err();
    assert_eq!((f.kind, f.level_name()), (FaultKind::Invalid, "PDB0"));
    r.flush(hub);
    assert!(r.access(hub, VA + 0x40_0000, Access::Read).is_ok());
    let t = r.access(hub, VA + 0x1000, Access::Read).unwrap();
    assert_eq!(t.target, PhysTarget::Vram(0x200_0000));
    // Another hub keeps its own snapshot: the GC hub was never flushed.
    r.program_context0(Hub::gc(0));
    assert!(r.access(Hub::gc(0), VA, Access::Read).is_err());
}

/// A mapping made and flushed, whose tables no walk has read yet, keeps translating when
/// another entry is then written into its table (the next mapping, before its own flush):
/// the entry it needs is the same in the table as at the flush, and a TLB that was not
/// invalidated translates it. The new entry stays out of the snapshot until the next flush.
#[test]
fn an_entry_written_beside_a_mapping_not_walked_yet_leaves_it_translating() {
    let mut r = Rig::new("navi31", PteFormat::Gfx10);
    let hub = Hub::mm(0);
    r.program_context0(hub);
    r.map(VA, 0x100_0000, 0x1000, MapFlags::VRAM);
    r.flush(hub);
    r.map(VA + 0x1000, 0x200_0000, 0x1000, MapFlags::VRAM);
    let t = r
        .access(hub, VA + 0x10, Access::Read)
        .expect("the flushed mapping translates");
    assert_eq!(t.target, PhysTarget::Vram(0x100_0010));
    let f = r.access(hub, VA + 0x1000, Access::Read).unwrap_err();
    assert_eq!(
        f.kind,
        FaultKind::Invalid,
        "the new entry is not in the snapshot"
    );
    r.flush(hub);
    let t = r.access(hub, VA + 0x1000, Access::Read).unwrap();
    assert_eq!(t.target, PhysTarget::Vram(0x200_0000));
    assert!(r.gpu.violations().is_empty(), "{:?}", r.gpu.violations());
}

#[test]
fn a_fault_fills_the_status_registers_and_posts_an_ih_entry() {
    let mut r = Rig::new("navi31", PteFormat::Gfx10);
    let hub = Hub::gc(0);
    r.enable_ih();
    r.program_context0(hub);
    r.map(VA, 0x100_0000, 0x1000, RO);
    r.flush(hub);
    let va = VA + 0x5_6789_a000;
    let f = r.access(hub, va, Access::Write).unwrap_err();
    assert_eq!(f.kind, FaultKind::Invalid);
    assert_eq!(
        r.field(hub, "VM_L2_PROTECTION_FAULT_STATUS", "MAPPING_ERROR"),
        1
    );
    assert_eq!(r.field(hub, "VM_L2_PROTECTION_FAULT_STATUS", "RW"), 1);
    assert_eq!(r.field(hub, "VM_L2_PROTECTION_FAULT_STATUS", "VMID"), 0);
    assert_eq!(
        r.rd(hub, "VM_L2_PROTECTION_FAULT_ADDR_LO32"),
        (va >> 12) as u32
    );
    assert_eq!(
        r.rd(hub, "VM_L2_PROTECTION_FAULT_ADDR_HI32"),
        (va >> 44) as u32
    );
    let e = r.ih_entry(0);
    assert_eq!(e.client_id as u32, am_autogen::ih::SOC21_IH_CLIENTID_GFX);
    assert_eq!(
        e.src_id as u32,
        am_autogen::ih::gfx_11_0_0::GFX_11_0_0__SRCID__UTCL2_FAULT
    );
    let fault_va = u64::from(e.src_data[0]) << 12 | u64::from(e.src_data[1] & 0xf) << 44;
    assert_eq!(fault_va, va);
    assert_eq!(e.src_data[1] & 0x20, 0x20, "write fault");
    assert_eq!(r.bar0.read32(IH_WB).unwrap(), 32, "wptr written back");

    // A second fault only adds MORE_FAULTS; clearing the status lets the next one latch.
    let f = r.access(hub, VA, Access::Write).unwrap_err();
    assert_eq!(f.kind, FaultKind::Permission);
    assert_eq!(
        r.field(hub, "VM_L2_PROTECTION_FAULT_STATUS", "MORE_FAULTS"),
        1
    );
    assert_eq!(
        r.rd(hub, "VM_L2_PROTECTION_FAULT_ADDR_LO32"),
        (va >> 12) as u32
    );
    let clear = r.fields(
        hub,
        "VM_L2_PROTECTION_FAULT_CNTL",
        &[("CLEAR_PROTECTION_FAULT_STATUS_ADDR", 1)],
    );
    r.wr(hub, "VM_L2_PROTECTION_FAULT_CNTL", clear);
    assert_eq!(r.rd(hub, "VM_L2_PROTECTION_FAULT_STATUS"), 0);
    r.access(hub, VA, Access::Write).unwrap_err();
    assert_eq!(
        r.field(hub, "VM_L2_PROTECTION_FAULT_STATUS", "PERMISSION_FAULTS"),
        4
    );
    assert_eq!(
        r.rd(hub, "VM_L2_PROTECTION_FAULT_ADDR_LO32"),
        (VA >> 12) as u32
    );
    assert_eq!(r.ih_entry(2).src_data[0], (VA >> 12) as u32);
}

#[test]
fn invalid_entries_fault_at_their_level() {
    let mut r = Rig::new("navi31", PteFormat::Gfx10);
    let hub = Hub::gc(0);
    r.program_context0(hub);
    r.map(VA, 0x100_0000, 0x1000, MapFlags::VRAM);
    r.map(VA + (1 << 30), 0x200_0000, 0x1000, MapFlags::VRAM);
    r.flush(hub);
    // PTB entry of VA.
    let leaf = r.pt.walk(&r.vram, VA).unwrap().unwrap();
    r.bar0.write64(leaf.entry_addr, 0).unwrap();
    // PDB1 entry of the second GiB: root entry 0 → PDB1 table, index 1.
    let pdb1 = r.bar0.read64(r.pt.root).unwrap() & 0x0000_ffff_ffff_f000;
    r.bar0.write64(pdb1 + 8, 0).unwrap();
    r.flush(hub);
    let f = r.access(hub, VA, Access::Read).unwrap_err();
    assert_eq!((f.kind, f.level_name()), (FaultKind::Invalid, "PTB"));
    let f = r.access(hub, VA + (1 << 30), Access::Read).unwrap_err();
    assert_eq!((f.kind, f.level_name()), (FaultKind::Invalid, "PDB1"));
    let f = r.access(hub, VA + (1 << 39), Access::Read).unwrap_err();
    assert_eq!((f.kind, f.level_name()), (FaultKind::Invalid, "PDB2"));
}

#[test]
fn mi300x_gfx9_translate_further_on_every_xcc_hub() {
    let mut r = Rig::new("mi300x", PteFormat::Gfx9);
    r.map(VA, 0x100_0000, 0x2000, MapFlags::VRAM);
    r.map(VA + 0x40_0000, 0x160_0000, 0x20_0000, MapFlags::VRAM);
    for hub in [Hub::gc(0), Hub::gc(7), Hub::mm(3)] {
        r.program_context0(hub);
        r.flush(hub);
        let t = r.access(hub, VA + 0x1008, Access::Read).unwrap();
        assert_eq!(
            (t.target, t.page_size),
            (PhysTarget::Vram(0x100_1008), 0x1000)
        );
        let t = r.access(hub, VA + 0x4f_0000, Access::Read).unwrap();
        assert_eq!(
            (t.target, t.page_size),
            (PhysTarget::Vram(0x16f_0000), 0x20_0000)
        );
        let f = r.access(hub, VA + 0x3000, Access::Read).unwrap_err();
        assert_eq!((f.kind, f.level_name()), (FaultKind::Invalid, "PTB"));
    }
    // GC hubs of other XCCs were not flushed.
    r.program_context0(Hub::gc(1));
    assert!(r.access(Hub::gc(1), VA, Access::Read).is_err());
}

#[test]
fn mm_hub_semaphore_is_acquired_once_until_released() {
    let r = Rig::new("mi300x", PteFormat::Gfx9);
    let hub = Hub::mm(1);
    assert_eq!(r.rd(hub, "VM_INVALIDATE_ENG17_SEM") & 1, 1);
    assert_eq!(r.rd(hub, "VM_INVALIDATE_ENG17_SEM") & 1, 0, "held");
    assert_eq!(
        r.rd(Hub::mm(2), "VM_INVALIDATE_ENG17_SEM") & 1,
        1,
        "per hub"
    );
    r.wr(hub, "VM_INVALIDATE_ENG17_SEM", 0);
    assert_eq!(r.rd(hub, "VM_INVALIDATE_ENG17_SEM") & 1, 1);
}

#[test]
fn a_fault_without_its_interrupt_enabled_latches_the_status_but_posts_nothing() {
    let mut r = Rig::new("navi31", PteFormat::Gfx10);
    let hub = Hub::gc(0);
    r.enable_ih();
    r.program_context0(hub);
    r.map(VA, 0x100_0000, 0x1000, RO);
    // Keep the context but drop WRITE_PROTECTION_FAULT_ENABLE_INTERRUPT.
    let cntl = r.rd(hub, "VM_CONTEXT0_CNTL");
    let write_int = r.fields(
        hub,
        "VM_CONTEXT0_CNTL",
        &[("WRITE_PROTECTION_FAULT_ENABLE_INTERRUPT", 1)],
    );
    r.wr(hub, "VM_CONTEXT0_CNTL", cntl & !write_int);
    r.flush(hub);
    let f = r.access(hub, VA, Access::Write).unwrap_err();
    assert_eq!(f.kind, FaultKind::Permission);
    assert_eq!(
        r.field(hub, "VM_L2_PROTECTION_FAULT_STATUS", "PERMISSION_FAULTS"),
        4
    );
    let wptr = r.gpu.peek(RegIp::Osssys, "IH_RB_WPTR", 0).unwrap();
    assert_eq!(wptr, 0, "no IH entry");
    // A read of an unmapped page still interrupts (VALID_ is enabled).
    r.access(hub, VA + 0x1000, Access::Read).unwrap_err();
    assert_eq!(r.gpu.peek(RegIp::Osssys, "IH_RB_WPTR", 0).unwrap(), 32);
}
