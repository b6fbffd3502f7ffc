use crate::{Error, ErrorKind};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;

use super::*;

/// Sparse host-side stand-in for VRAM: 8-byte words in a hash map, zero until
/// written, bounds-checked against `size`.
#[derive(Debug, Default)]
pub struct HostMemory {
    size: u64,
    words: RefCell<HashMap<u64, u64>>,
}

impl HostMemory {
    /// `size` bytes of zeroed memory.
    pub fn new(size: u64) -> Self {
        HostMemory {
            size,
            words: RefCell::default(),
        }
    }
    /// Number of non-zero words (tests use it to see that tables were cleared; a zero
    /// written is not stored).
    pub fn nonzero_words(&self) -> usize {
        self.words.borrow().len()
    }
    fn check(&self, paddr: u64) -> Result<()> {
        if !paddr.is_multiple_of(8) || paddr.checked_add(8).is_none_or(|e| e > self.size) {
            return Err(Error::new(
                "host memory",
                ErrorKind::OutOfRange {
                    what: "VRAM".into(),
                    offset: paddr,
                    size: 8,
                    len: self.size,
                },
            ));
        }
        Ok(())
    }
}

impl VramAccess for HostMemory {
    fn read64(&self, paddr: u64) -> Result<u64> {
        self.check(paddr)?;
        Ok(self.words.borrow().get(&paddr).copied().unwrap_or(0))
    }
    fn write64(&self, paddr: u64, value: u64) -> Result<()> {
        self.check(paddr)?;
        let mut words = self.words.borrow_mut();
        if value == 0 {
            words.remove(&paddr);
        } else {
            words.insert(paddr, value);
        }
        Ok(())
    }
}

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const FORMATS: [PteFormat; 3] = [PteFormat::Gfx9, PteFormat::Gfx10, PteFormat::Gfx12];

fn setup(format: PteFormat, vram_size: u64) -> (HostMemory, MemoryManager) {
    let mem = HostMemory::new(vram_size);
    let mut mm =
        MemoryManager::new("test", 0..vram_size, format, &McLayout::default(), &mem).unwrap();
    mm.finish_boot();
    (mem, mm)
}

fn entry(mem: &HostMemory, table: u64, level: VmLevel, rel_va: u64) -> u64 {
    mem.read64(table + ((rel_va >> level.shift()) & 511) * 8)
        .unwrap()
}

#[test]
fn gfx9_tree_entries_for_a_known_page() {
    let (mem, mut mm) = setup(PteFormat::Gfx9, 4 * GIB);
    let rel = GIB + 3 * 2 * MIB + 5 * PAGE_SIZE;
    mm.map(
        &mem,
        VA_BASE + rel,
        &[(0x1234_5000, PAGE_SIZE)],
        MapFlags::VRAM,
        false,
    )
    .unwrap();
    // The three tables below the root come from the page-table pool, in allocation order.
    let (pdb1, pdb0, ptb) = (
        mm.ptable.range().start,
        mm.ptable.range().start + PAGE_SIZE,
        mm.ptable.range().start + 2 * PAGE_SIZE,
    );
    let root = mm.tables.root;
    assert_eq!(
        entry(&mem, root, VmLevel::Pdb2, rel),
        pdb1 | 1,
        "PDB2 → PDB1: VALID only"
    );
    assert_eq!(
        entry(&mem, pdb1, VmLevel::Pdb1, rel),
        pdb0 | 1 | (9 << 59),
        "PDB1 → PDB0: BFS 9"
    );
    assert_eq!(
        entry(&mem, pdb0, VmLevel::Pdb0, rel),
        ptb | 1 | (1 << 56),
        "PDB0 → PTB: TF"
    );
    assert_eq!(
        entry(&mem, ptb, VmLevel::Ptb, rel),
        0x1234_5000 | 0x71,
        "PTE: VALID|EXE|READ|WRITE"
    );
    let t = mm
        .tables
        .walk(&mem, VA_BASE + rel + 0x123)
        .unwrap()
        .unwrap();
    assert_eq!(
        (t.phys, t.level, t.page_size, t.page.frag),
        (0x1234_5123, VmLevel::Ptb, PAGE_SIZE, 0)
    );
}

#[test]
fn gfx12_ptes_carry_is_pte_and_system_flags() {
    let (mem, mut mm) = setup(PteFormat::Gfx12, GIB);
    let flags = MapFlags {
        uncached: true,
        ..MapFlags::SYSTEM
    };
    mm.map(&mem, VA_BASE, &[(0xdead_0000, PAGE_SIZE)], flags, false)
        .unwrap();
    let t = mm.tables.walk(&mem, VA_BASE).unwrap().unwrap();
    // VALID|SYSTEM|SNOOPED|EXE|READ|WRITE = 0x77, MTYPE_UC 3 << 54, IS_PTE 1 << 63.
    assert_eq!(t.entry, 0xdead_0000 | 0x77 | (3 << 54) | (1 << 63));
    assert_eq!((t.phys, t.page.flags), (0xdead_0000, flags));
}

#[test]
fn fragments_follow_aligned_contiguous_runs() {
    let (mem, mut mm) = setup(PteFormat::Gfx10, GIB);
    let frags = |mm: &MemoryManager, va: u64, pages: u64| -> Vec<u8> {
        (0..pages)
            .map(|i| {
                mm.tables
                    .walk(&mem, va + i * PAGE_SIZE)
                    .unwrap()
                    .unwrap()
                    .page
                    .frag
            })
            .collect()
    };
    // 64 KiB, VA and PA 64 KiB-aligned: one fragment of 16 pages.
    mm.map(
        &mem,
        VA_BASE,
        &[(0x10_0000, 0x1_0000)],
        MapFlags::VRAM,
        false,
    )
    .unwrap();
    assert_eq!(frags(&mm, VA_BASE, 16), vec![4; 16]);
    // 3 pages at a 16 KiB-aligned VA: a 2-page run, then a single page.
    mm.map(
        &mem,
        VA_BASE + 0x4_0000,
        &[(0x20_0000, 0x3000)],
        MapFlags::VRAM,
        false,
    )
    .unwrap();
    assert_eq!(frags(&mm, VA_BASE + 0x4_0000, 3), vec![1, 1, 0]);
    // PA off by one page from the VA's alignment: no fragment at all.
    mm.map(
        &mem,
        VA_BASE + 0x8_0000,
        &[(0x30_1000, 0x1_0000)],
        MapFlags::VRAM,
        false,
    )
    .unwrap();
    assert_eq!(frags(&mm, VA_BASE + 0x8_0000, 16), vec![0; 16]);
    // Two physical ranges that continue each other form one fragment.
    mm.map(
        &mem,
        VA_BASE + 0x10_0000,
        &[(0x40_0000, 0x4000), (0x40_4000, 0x4000)],
        MapFlags::VRAM,
        false,
    )
    .unwrap();
    assert_eq!(frags(&mm, VA_BASE + 0x10_0000, 8), vec![3; 8]);
}

#[test]
fn huge_pages_for_aligned_2mib_and_1gib_runs() {
    for f in FORMATS {
        let (mem, mut mm) = setup(f, 4 * GIB);
        let pt_free = mm.ptable.free_bytes();
        mm.map(
            &mem,
            VA_BASE + 2 * MIB,
            &[(6 * MIB, 2 * MIB)],
            MapFlags::VRAM,
            false,
        )
        .unwrap();
        let t = mm.tables.walk(&mem, VA_BASE + 3 * MIB).unwrap().unwrap();
        assert_eq!(
            (t.level, t.page_size, t.phys, t.page.frag),
            (VmLevel::Pdb0, 2 * MIB, 7 * MIB, 9),
            "{f:?}"
        );
        assert_eq!(
            pt_free - mm.ptable.free_bytes(),
            2 * PAGE_SIZE,
            "{f:?}: only PDB1 and PDB0 tables, no PTB"
        );

        mm.map(
            &mem,
            VA_BASE + GIB,
            &[(2 * GIB, GIB)],
            MapFlags::VRAM,
            false,
        )
        .unwrap();
        let t = mm
            .tables
            .walk(&mem, VA_BASE + GIB + 12345 * PAGE_SIZE)
            .unwrap()
            .unwrap();
        assert_eq!(
            (t.level, t.page_size, t.phys, t.page.frag),
            (VmLevel::Pdb1, GIB, 2 * GIB + 12345 * PAGE_SIZE, 18),
            "{f:?}"
        );

        // A 2 MiB run whose PA is not 2 MiB-aligned stays in a PTB.
        mm.map(
            &mem,
            VA_BASE + 8 * MIB,
            &[(9 * MIB, 2 * MIB)],
            MapFlags::VRAM,
            false,
        )
        .unwrap();
        assert_eq!(
            mm.tables
                .walk(&mem, VA_BASE + 8 * MIB)
                .unwrap()
                .unwrap()
                .level,
            VmLevel::Ptb,
            "{f:?}"
        );
    }
}

#[test]
fn map_over_a_mapping_fails_and_changes_nothing() {
    let (mem, mut mm) = setup(PteFormat::Gfx9, GIB);
    mm.map(
        &mem,
        VA_BASE + 0x5000,
        &[(0x10_0000, 0x1000)],
        MapFlags::VRAM,
        false,
    )
    .unwrap();
    let before = mm.tables.mappings(&mem).unwrap();
    let e = mm
        .map(&mem, VA_BASE, &[(0x20_0000, 0x8000)], MapFlags::VRAM, false)
        .unwrap_err();
    assert!(e.to_string().contains("already mapped"), "{e}");
    assert_eq!(mm.tables.mappings(&mem).unwrap(), before);
}

#[test]
fn unmap_refuses_holes_and_split_runs() {
    let (mem, mut mm) = setup(PteFormat::Gfx10, GIB);
    mm.map(&mem, VA_BASE, &[(0, 2 * MIB)], MapFlags::VRAM, false)
        .unwrap();
    mm.map(
        &mem,
        VA_BASE + 4 * MIB,
        &[(0x40_0000, 0x4000)],
        MapFlags::VRAM,
        false,
    )
    .unwrap();
    let before = mm.tables.mappings(&mem).unwrap();
    for (va, size, what) in [
        (VA_BASE, MIB, "huge page"),
        (VA_BASE + 4 * MIB, PAGE_SIZE, "fragment"),
        (VA_BASE + 4 * MIB, 0x5000, "not mapped"),
    ] {
        let e = mm.unmap(&mem, va, size).unwrap_err().to_string();
        assert!(e.contains(what), "unmap {va:#x}+{size:#x}: {e}");
    }
    assert_eq!(mm.tables.mappings(&mem).unwrap(), before);
}

#[test]
fn pools_start_at_paddr_base_and_name_themselves_when_full() {
    let mem = HostMemory::new(GIB);
    let mut mm = MemoryManager::new(
        "mock:mi350x-vf",
        MIB..GIB,
        PteFormat::Gfx9,
        &McLayout::default(),
        &mem,
    )
    .unwrap();
    assert_eq!(
        mm.tables.root, MIB,
        "the root table is the first boot allocation"
    );
    assert_eq!(mm.boot.range(), MIB..BOOT_POOL_SIZE);
    assert_eq!(mm.ptable.range(), BOOT_POOL_SIZE..BOOT_POOL_SIZE + 2 * MIB);
    assert_eq!(mm.main.range().end, GIB);
    let e = mm
        .palloc(BOOT_POOL_SIZE, PAGE_SIZE, Pool::Boot)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("mock:mi350x-vf boot pool") && e.contains("0x2000000"),
        "{e}"
    );
}

#[test]
fn valloc_and_vfree_return_everything() {
    let (mem, mut mm) = setup(PteFormat::Gfx12, GIB);
    let (main, pt, va) = (
        mm.main.free_blocks(),
        mm.ptable.free_blocks(),
        mm.va.free_blocks(),
    );
    let m = mm.valloc(&mem, 5 * MIB + 0x1000, false).unwrap();
    assert_eq!(
        m.va % (4 * MIB),
        0,
        "VA aligned to the largest power of two in the size"
    );
    assert_eq!(m.paddrs.iter().map(|p| p.1).sum::<u64>(), 5 * MIB + 0x1000);
    assert_eq!(
        mm.tables.walk(&mem, m.va).unwrap().unwrap().level,
        VmLevel::Pdb0,
        "the first 4 MiB piece uses 2 MiB pages"
    );
    mm.vfree(&mem, &m).unwrap();
    assert_eq!(
        (
            mm.main.free_blocks(),
            mm.ptable.free_blocks(),
            mm.va.free_blocks()
        ),
        (main, pt, va)
    );
    assert_eq!(mem.nonzero_words(), 0, "every table entry cleared");
}

// Property test: random map/unmap sequences against a page → (phys, flags) model.

/// VA window: 8 MiB straddling a 1 GiB boundary, so PDB1 and PDB0 tables come and go.
const WIN: u64 = VA_BASE + GIB - 4 * MIB;
const WIN_PAGES: u64 = 2048;

#[derive(Clone, Debug)]
enum Op {
    /// Map `pages` at window page `at`; the PA either keeps the VA's 2 MiB alignment (so huge
    /// pages and long fragments appear) or is any page; optionally split into two ranges.
    Map {
        at: u64,
        pages: u64,
        pa_page: u64,
        keep_alignment: bool,
        split: Option<u64>,
        flags: u8,
    },
    /// Unmap one earlier mapping entirely.
    UnmapWhole(usize),
    /// Unmap an arbitrary range (may be refused).
    UnmapRange { at: u64, pages: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..WIN_PAGES, prop_oneof![1u64..40, 1u64..1100], 0u64..32768, any::<bool>(), proptest::option::of(1u64..1100), 0u8..8)
            .prop_map(|(at, pages, pa_page, keep_alignment, split, flags)| Op::Map { at, pages, pa_page, keep_alignment, split, flags }),
        2 => any::<usize>().prop_map(Op::UnmapWhole),
        1 => (0..WIN_PAGES, 1u64..600).prop_map(|(at, pages)| Op::UnmapRange { at, pages }),
    ]
}

fn flags_of(bits: u8) -> MapFlags {
    MapFlags {
        readable: true,
        writable: bits & 1 != 0,
        executable: bits & 2 != 0,
        system: bits & 4 != 0,
        snooped: bits & 4 != 0,
        uncached: bits & 2 == 0,
    }
}

type Model = BTreeMap<u64, (u64, MapFlags)>;

/// The tables hold exactly the model: every leaf expands to pages the model has, with the
/// same PA and flags, the counts match, and every FRAG run is really contiguous and
/// aligned in both VA and PA.
fn check(mem: &HostMemory, mm: &MemoryManager, model: &Model) -> Result<(), TestCaseError> {
    let mut pages = 0;
    for t in mm.tables.mappings(mem).unwrap() {
        for i in 0..t.page_size / PAGE_SIZE {
            let va = t.va + i * PAGE_SIZE;
            prop_assert_eq!(
                model.get(&va),
                Some(&(t.phys + i * PAGE_SIZE, t.page.flags)),
                "page {:#x}",
                va
            );
            pages += 1;
        }
        let run = PAGE_SIZE << t.page.frag;
        let start = VA_BASE + ((t.va - VA_BASE) & !(run - 1));
        let Some(&(pa0, f0)) = model.get(&start) else {
            return Err(TestCaseError::fail(format!(
                "FRAG {} run at {start:#x} is not mapped",
                t.page.frag
            )));
        };
        prop_assert_eq!(
            pa0 % run,
            0,
            "FRAG {} run at {:#x} has PA {:#x}, not aligned to the run",
            t.page.frag,
            start,
            pa0
        );
        for va in (start..start + run).step_by(PAGE_SIZE as usize) {
            prop_assert_eq!(
                model.get(&va),
                Some(&(pa0 + (va - start), f0)),
                "FRAG {} run at {:#x} broken at {:#x}",
                t.page.frag,
                start,
                va
            );
        }
    }
    prop_assert_eq!(pages, model.len());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn random_map_unmap_matches_model(fmt in 0usize..3, xgmi in any::<bool>(), ops in prop::collection::vec(op(), 1..30)) {
        let (mem, mut mm) = setup(FORMATS[fmt], 4 * GIB);
        if xgmi {
            mm.tables.vram_offset = 64 * GIB;
        }
        let pt_initial = mm.ptable.free_blocks();
        let mut model = Model::new();
        let mut mappings: Vec<(u64, u64)> = vec![];
        for op in ops {
            match op {
                Op::Map { at, pages, pa_page, keep_alignment, split, flags } => {
                    let pages = pages.min(WIN_PAGES - at);
                    let va = WIN + at * PAGE_SIZE;
                    let pa = if keep_alignment { (pa_page & !511) * PAGE_SIZE + (va % (2 * MIB)) } else { pa_page * PAGE_SIZE };
                    let ranges = match split {
                        Some(s) if s < pages => vec![(pa, s * PAGE_SIZE), (pa + (s + 3) * PAGE_SIZE, (pages - s) * PAGE_SIZE)],
                        _ => vec![(pa, pages * PAGE_SIZE)],
                    };
                    let flags = flags_of(flags);
                    let free = (0..pages).all(|i| !model.contains_key(&(va + i * PAGE_SIZE)));
                    let r = mm.map(&mem, va, &ranges, flags, false);
                    prop_assert_eq!(r.is_ok(), free, "map {:#x}+{} pages: {:?}", va, pages, r);
                    if r.is_ok() {
                        let mut v = va;
                        for (p, l) in ranges {
                            for i in 0..l / PAGE_SIZE {
                                model.insert(v + i * PAGE_SIZE, (p + i * PAGE_SIZE, flags));
                            }
                            v += l;
                        }
                        mappings.push((va, va + pages * PAGE_SIZE));
                    }
                }
                Op::UnmapWhole(i) if !mappings.is_empty() => {
                    let (s, e) = mappings.swap_remove(i % mappings.len());
                    mm.unmap(&mem, s, e - s).unwrap();
                    (s..e).step_by(PAGE_SIZE as usize).for_each(|p| { model.remove(&p); });
                }
                Op::UnmapWhole(_) => {}
                Op::UnmapRange { at, pages } => {
                    let pages = pages.min(WIN_PAGES - at);
                    let (s, e) = (WIN + at * PAGE_SIZE, WIN + (at + pages) * PAGE_SIZE);
                    let all_mapped = (s..e).step_by(PAGE_SIZE as usize).all(|p| model.contains_key(&p));
                    let r = mm.unmap(&mem, s, e - s);
                    if !all_mapped {
                        prop_assert!(r.is_err(), "unmap of a range with holes succeeded");
                    }
                    if r.is_ok() {
                        (s..e).step_by(PAGE_SIZE as usize).for_each(|p| { model.remove(&p); });
                        mappings = mappings.into_iter().flat_map(|(ms, me)| [(ms, me.min(s)), (ms.max(e), me)]).filter(|(a, b)| a < b).collect();
                    }
                }
            }
            check(&mem, &mm, &model)?;
        }
        // Walk every page of the window and some outside it.
        for p in (WIN - 4 * PAGE_SIZE..WIN + (WIN_PAGES + 4) * PAGE_SIZE).step_by(PAGE_SIZE as usize) {
            let got = mm.tables.walk(&mem, p + 8).unwrap().map(|t| (t.phys - 8, t.page.flags));
            prop_assert_eq!(got, model.get(&p).copied(), "walk {:#x}", p);
        }
        for (s, e) in mappings {
            mm.unmap(&mem, s, e - s).unwrap();
        }
        prop_assert_eq!(mm.ptable.free_blocks(), pt_initial, "page-table pool back to its initial free block");
        prop_assert_eq!(mem.nonzero_words(), 0, "no entry left in any table");
    }
}

#[test]
fn running_out_of_tables_undoes_the_partial_map() {
    // 34 MiB: a 1 MiB page-table pool (256 tables) and a 1 MiB main pool, which is used up.
    let (mem, mut mm) = setup(PteFormat::Gfx10, 34 * MIB);
    while mm.palloc(PAGE_SIZE, PAGE_SIZE, Pool::Main).is_ok() {}
    let pt = mm.ptable.free_blocks();
    // 1 GiB with a PA one page off 2 MiB alignment needs 512 PTBs.
    let e = mm
        .map(&mem, VA_BASE, &[(PAGE_SIZE, GIB)], MapFlags::VRAM, false)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error {
                kind: ErrorKind::OutOfMemory { .. },
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(mm.tables.mappings(&mem).unwrap(), vec![]);
    assert_eq!(mm.ptable.free_blocks(), pt);
    assert_eq!(mem.nonzero_words(), 0);
}

#[test]
fn tables_come_from_the_boot_pool_while_booting() {
    let mem = HostMemory::new(GIB);
    let mut mm =
        MemoryManager::new("t", 0..GIB, PteFormat::Gfx9, &McLayout::default(), &mem).unwrap();
    mm.map(
        &mem,
        VA_BASE,
        &[(0x10_0000, PAGE_SIZE)],
        MapFlags::VRAM,
        false,
    )
    .unwrap();
    let t = mm.tables.walk(&mem, VA_BASE).unwrap().unwrap();
    assert!(
        mm.boot.range().contains(&t.entry_addr),
        "PTB at {:#x} is not in the boot pool",
        t.entry_addr
    );
    mm.finish_boot();
    mm.map(
        &mem,
        VA_BASE + GIB,
        &[(0x10_0000, PAGE_SIZE)],
        MapFlags::VRAM,
        false,
    )
    .unwrap();
    let t = mm.tables.walk(&mem, VA_BASE + GIB).unwrap().unwrap();
    assert!(
        mm.ptable.range().contains(&t.entry_addr),
        "PTB at {:#x} is not in the page-table pool",
        t.entry_addr
    );
}

/// The GPU reaches system memory only inside its DMA mask (44 bits on GC 10/11/12, 48 on
/// GC 9.4.3+): mapping a bus address beyond it is refused, naming the range.
#[test]
fn system_pages_beyond_the_dma_mask_are_refused() {
    for (format, bits) in [
        (PteFormat::Gfx10, 44),
        (PteFormat::Gfx12, 44),
        (PteFormat::Gfx9, 48),
    ] {
        let (mem, mut mm) = setup(format, GIB);
        let inside = (1u64 << bits) - PAGE_SIZE;
        mm.map(
            &mem,
            VA_BASE,
            &[(inside, PAGE_SIZE)],
            MapFlags::SYSTEM,
            false,
        )
        .unwrap();
        if bits < 48 {
            let beyond = 1u64 << bits;
            let e = mm
                .map(
                    &mem,
                    VA_BASE + PAGE_SIZE,
                    &[(beyond, PAGE_SIZE)],
                    MapFlags::SYSTEM,
                    false,
                )
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("{bits}-bit DMA range")),
                "{format:?}: {e}"
            );
            assert!(e.contains(&format!("{beyond:#x}")), "{format:?}: {e}");
        }
        // VRAM addresses are not bus addresses: the mask does not apply to them.
        mm.map(
            &mem,
            VA_BASE + 2 * PAGE_SIZE,
            &[(1 << 20, PAGE_SIZE)],
            MapFlags::VRAM,
            false,
        )
        .unwrap();
    }
}

/// Another hive member's page: the entry holds its hive physical address as given (not this
/// device's XGMI offset plus it), VRAM-style (no `SYSTEM`), snooped, `MTYPE_NC`; the walk
/// names the member's region and its VRAM address. `SYSTEM` flags are refused.
#[test]
fn a_peer_page_holds_its_hive_address_vram_style() {
    const SEG: u64 = 192 * GIB;
    let (mem, mut mm) = setup(PteFormat::Gfx9, 4 * GIB);
    mm.tables.vram_offset = 2 * SEG; // this device is region 2
    mm.tables.xgmi_seg_size = SEG;
    let va = VA_BASE + 4 * MIB;
    let hive_addr = SEG + 0x1234_5000; // region 1, VRAM 0x1234_5000
    mm.map(
        &mem,
        va,
        &[(hive_addr, PAGE_SIZE)],
        MapFlags::PEER_VRAM,
        true,
    )
    .unwrap();
    let t = mm.tables.walk(&mem, va + 0x10).unwrap().unwrap();
    // VALID | SNOOPED | EXECUTABLE | READABLE | WRITEABLE, MTYPE 0 (NC), no SYSTEM.
    assert_eq!(t.entry, hive_addr | 0x75);
    assert_eq!((t.peer_region, t.phys), (Some(1), 0x1234_5010));
    assert_eq!(t.page.flags, MapFlags::PEER_VRAM);
    // This device's own pages still walk to its own VRAM.
    mm.map(
        &mem,
        va + PAGE_SIZE,
        &[(0x8000, PAGE_SIZE)],
        MapFlags::VRAM,
        false,
    )
    .unwrap();
    let own = mm.tables.walk(&mem, va + PAGE_SIZE).unwrap().unwrap();
    assert_eq!(
        (own.peer_region, own.phys, own.page.addr),
        (None, 0x8000, 2 * SEG + 0x8000)
    );
    let e = mm
        .map(
            &mem,
            va + 2 * PAGE_SIZE,
            &[(hive_addr, PAGE_SIZE)],
            MapFlags::SYSTEM,
            true,
        )
        .unwrap_err();
    assert!(e.to_string().contains("not mapped SYSTEM"), "{e}");
}
