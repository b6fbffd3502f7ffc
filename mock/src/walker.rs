//! The GPU's page-table walker: a VM context's virtual address to VRAM or a system bus
//! address, as the UTCL2 finds it.
//!
//! Written from the entry layouts of `amdgpu_vm.h` and the `VM_CONTEXTn_CNTL` fields
//! (`PAGE_TABLE_DEPTH`, `PAGE_TABLE_BLOCK_SIZE`), independently of the driver's encoder, so
//! a disagreement between them shows up in the tests rather than being shared.
//!
//! The walk: `depth + 1` tables of 512 entries; the last of them indexes VA bits from
//! `12 + block_size`, each level above 9 bits higher (depth 3, block size 0: shifts
//! 39/30/21/12; depth 2, block size 9: 39/30/21). An entry above the last level is a page
//! when it says so (`PDE_PTE` bit 54 on GFX9/10/11, bit 63 on GFX12), else it points to the
//! next table (address bits 47:6). On GFX9 with a non-zero block size an entry of the last
//! level carrying `TF` (bit 56) points to one more table of `2^block_size` 4 KiB entries
//! ("translate further"); without it, it maps a page of `2^(12 + block_size)` bytes. `FRAG`
//! (bits 11:7) and `PDE_BFS` (bits 63:59) only tune the TLB: they do not change where an
//! address lands, so the walker reports `FRAG` and otherwise ignores both. A page's address
//! need not be aligned to its size: the offset in the page is added to the address as written
//! (see [`page_of`]).

use crate::vram::Vram;

const VALID: u64 = 1 << 0;
const SYSTEM: u64 = 1 << 1;
const EXECUTABLE: u64 = 1 << 4;
const READABLE: u64 = 1 << 5;
const WRITEABLE: u64 = 1 << 6;
const FRAG_SHIFT: u32 = 7;
const FRAG_BITS: u64 = 0x1f;
const PDE_PTE_GFX9_10: u64 = 1 << 54;
const TRANSLATE_FURTHER: u64 = 1 << 56;
const PDE_PTE_GFX12: u64 = 1 << 63;
/// Page address bits 47:12.
const PAGE_ADDR: u64 = 0x0000_ffff_ffff_f000;
/// Table address bits 47:6.
const TABLE_ADDR: u64 = 0x0000_ffff_ffff_ffc0;

/// Entry format of a GC generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PteFormat {
    /// GC 9.x: `PDE_PTE` huge pages above PDB0, translate-further below it.
    Gfx9,
    /// GC 10.x and 11.x: `PDE_PTE` on any leaf above the last level.
    Gfx10,
    /// GC 12.x: bit 63 marks a leaf above the last level.
    Gfx12,
}

impl PteFormat {
    /// The format of a GC major version.
    pub fn for_gc(major: u8) -> Self {
        match major {
            12.. => PteFormat::Gfx12,
            10 | 11 => PteFormat::Gfx10,
            _ => PteFormat::Gfx9,
        }
    }

    fn is_leaf(self, entry: u64) -> bool {
        match self {
            PteFormat::Gfx9 | PteFormat::Gfx10 => entry & PDE_PTE_GFX9_10 != 0,
            PteFormat::Gfx12 => entry & PDE_PTE_GFX12 != 0,
        }
    }
}

/// What an access wants: a GPU memory access through the page tables, or (read and write
/// only) a host access that broke the hardware contract ([`crate::Violation`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A read.
    Read,
    /// A write.
    Write,
    /// An instruction fetch.
    Execute,
}

/// Where a translated address lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhysTarget {
    /// Byte offset in this device's VRAM.
    Vram(u64),
    /// System memory bus address.
    System(u64),
    /// Byte offset in the VRAM of another member of the device's XGMI hive (reached over the
    /// fabric).
    Peer {
        /// The member's region (`PF_LFB_REGION`).
        region: u8,
        /// Offset in its VRAM.
        offset: u64,
    },
}

impl PhysTarget {
    /// The target `n` bytes further on.
    pub fn offset_by(self, n: u64) -> PhysTarget {
        match self {
            PhysTarget::Vram(v) => PhysTarget::Vram(v + n),
            PhysTarget::System(b) => PhysTarget::System(b + n),
            PhysTarget::Peer { region, offset } => PhysTarget::Peer {
                region,
                offset: offset + n,
            },
        }
    }
}

/// A hive member's view of the hive's frame-buffer aperture, from its hub's
/// `MC_VM_XGMI_LFB_CNTL` and `MC_VM_XGMI_LFB_SIZE`: segment `r` is region `r`'s VRAM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XgmiLayout {
    /// This member's region (`PF_LFB_REGION`).
    pub region: u8,
    /// Regions in the hive (`PF_MAX_REGION + 1`).
    pub regions: u8,
    /// Bytes per segment (`PF_LFB_SIZE << 24`).
    pub segment_size: u64,
}

impl XgmiLayout {
    /// The region and offset in its segment of the hive-physical address `addr` (an offset
    /// from the start of the aperture); `None` past the last segment.
    pub fn locate(&self, addr: u64) -> Option<(u8, u64)> {
        if self.segment_size == 0 {
            return None;
        }
        let r = addr / self.segment_size;
        (r < u64::from(self.regions)).then(|| (r as u8, addr % self.segment_size))
    }

    /// Where a VRAM address that is not this member's lands: another member's VRAM, or
    /// `None` (this member's own segment, or past the last).
    pub fn peer(&self, addr: u64) -> Option<PhysTarget> {
        match self.locate(addr)? {
            (r, _) if r == self.region => None,
            (region, offset) => Some(PhysTarget::Peer { region, offset }),
        }
    }
}

/// A VM context as the registers program it, plus the hub's TLB snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Context {
    /// Entry format.
    pub format: PteFormat,
    /// Root table address as in `PAGE_TABLE_BASE_ADDR` (PDE space: VRAM physical address
    /// plus `vram_offset`; flag bits below bit 6 are ignored).
    pub root: u64,
    /// `PAGE_TABLE_DEPTH`.
    pub depth: u32,
    /// `PAGE_TABLE_BLOCK_SIZE`.
    pub block_size: u32,
    /// First virtual page (`PAGE_TABLE_START_ADDR`, 4 KiB units).
    pub start_page: u64,
    /// Last virtual page (`PAGE_TABLE_END_ADDR`, 4 KiB units, inclusive).
    pub end_page: u64,
    /// XGMI `paddr_base`: subtracted from addresses in entries to reach local VRAM.
    pub vram_offset: u64,
    /// The hive layout of the hub, `None` outside a hive: a page entry with an address in
    /// another member's segment maps that member's VRAM.
    pub xgmi: Option<XgmiLayout>,
    /// VRAM write generation of the hub's last invalidation: a table page written later is
    /// not in the snapshot.
    pub flush_generation: u64,
}

/// Why a translation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// The address is outside `[start, end]` of the context.
    OutOfRange,
    /// An entry on the way is not `VALID`.
    Invalid,
    /// The page lacks the permission the access needs.
    Permission,
    /// A table on the way was written after the hub's last invalidation.
    Stale,
    /// An entry points outside VRAM (or a table into system memory), or the context is
    /// programmed with a depth/block size the walker cannot follow.
    BadAddress,
    /// The address is in the segment of a hive member that does not exist or is gone (found
    /// when the access reaches the fabric; latched as a walker error).
    NoMember,
}

/// A failed translation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageFault {
    /// The faulting virtual address.
    pub va: u64,
    /// What went wrong.
    pub kind: FaultKind,
    /// VA shift of the level where it went wrong (39 = PDB2, 30 = PDB1, 21 = PDB0, 12 = PTB).
    pub shift: u32,
    /// The entry found there (0 when none was read).
    pub entry: u64,
}

impl PageFault {
    /// Name of the level, as `enum amdgpu_vm_level`.
    pub fn level_name(&self) -> &'static str {
        level_name(self.shift)
    }
}

/// `amdgpu_vm_level` name of the level indexing VA bits from `shift`.
pub fn level_name(shift: u32) -> &'static str {
    match shift {
        39 => "PDB2",
        30 => "PDB1",
        21 => "PDB0",
        12 => "PTB",
        _ => "level",
    }
}

/// A successful translation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Translation {
    /// Where the byte at `va` lands.
    pub target: PhysTarget,
    /// Size of the page that mapped it.
    pub page_size: u64,
    /// `FRAG` of that page.
    pub frag: u8,
    /// The page entry.
    pub entry: u64,
    /// The last-level table the walk ended in, when the page is one of its 4 KiB pages:
    /// the other pages of that table translate with one entry read ([`translate_in`]).
    pub leaf_table: Option<LeafTable>,
}

/// A last-level page table a walk went through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafTable {
    /// VRAM offset of the table.
    pub table: u64,
    /// First virtual address it maps.
    pub first_va: u64,
    /// Last virtual address it maps.
    pub last_va: u64,
}

impl Translation {
    /// Whether the page allows read, write and execute.
    pub fn perms(&self) -> [bool; 3] {
        [
            self.entry & READABLE != 0,
            self.entry & WRITEABLE != 0,
            self.entry & EXECUTABLE != 0,
        ]
    }
}

/// Translate `va` through `ctx`, reading tables from `vram`.
pub fn translate(
    ctx: &Context,
    vram: &Vram,
    va: u64,
    access: Access,
) -> Result<Translation, PageFault> {
    let fault = |kind, shift, entry| PageFault {
        va,
        kind,
        shift,
        entry,
    };
    let top_shift = 12 + ctx.block_size + 9 * ctx.depth;
    if ctx.depth > 3 || top_shift > 63 {
        return Err(fault(FaultKind::BadAddress, top_shift.min(63), 0));
    }
    let page = va >> 12;
    if page < ctx.start_page || page > ctx.end_page {
        return Err(fault(FaultKind::OutOfRange, top_shift, 0));
    }
    let rel = va - (ctx.start_page << 12);
    let local = |addr: u64, shift: u32, entry: u64| {
        addr.checked_sub(ctx.vram_offset)
            .filter(|a| vram.contains(*a, 8))
            .ok_or(fault(FaultKind::BadAddress, shift, entry))
    };
    let mut table = local(ctx.root & TABLE_ADDR, top_shift, ctx.root)?;
    let mut shift = top_shift;
    let mut last_shift = 12 + ctx.block_size;
    loop {
        let at = table + ((rel >> shift) & 511) * 8;
        let mut e = [0u8; 8];
        if vram.read_as_of(at, &mut e, ctx.flush_generation).is_none() {
            return Err(fault(FaultKind::Stale, shift, 0));
        }
        let entry = u64::from_le_bytes(e);
        if entry & VALID == 0 {
            return Err(fault(FaultKind::Invalid, shift, entry));
        }
        let further = ctx.format == PteFormat::Gfx9
            && shift == last_shift
            && ctx.block_size > 0
            && entry & TRANSLATE_FURTHER != 0;
        let leaf = if shift == last_shift {
            !further
        } else {
            ctx.format.is_leaf(entry)
        };
        if leaf {
            let leaf_table = (shift == 12).then(|| {
                let first = va - (rel & ((1u64 << 21) - 1));
                LeafTable {
                    table,
                    first_va: first,
                    last_va: first + (1u64 << 21) - 1,
                }
            });
            let (addr, size) =
                page_of(entry, shift, rel, access).map_err(|kind| fault(kind, shift, entry))?;
            return Ok(Translation {
                leaf_table,
                target: page_target(ctx, vram, entry, addr).ok_or(fault(
                    FaultKind::BadAddress,
                    shift,
                    entry,
                ))?,
                page_size: size,
                frag: ((entry >> FRAG_SHIFT) & FRAG_BITS) as u8,
                entry,
            });
        }
        if entry & SYSTEM != 0 {
            // Tables in system memory exist on hardware; the mock does not follow them.
            return Err(fault(FaultKind::BadAddress, shift, entry));
        }
        table = local(entry & TABLE_ADDR, shift, entry)?;
        if further {
            shift = 12;
            last_shift = 12;
        } else {
            shift -= 9;
        }
    }
}

/// Makes every table of `ctx`'s tree (as `vram` holds it now) watched
/// ([`Vram::watch`]): the GMC does this when it invalidates the context's TLB, the
/// snapshot `ctx.flush_generation` it walks from then on. A table written after the
/// snapshot then keeps the version the snapshot saw, and a walk at that snapshot reads it —
/// also when no walk had read the table before the write (a mapping flushed and not used
/// yet, and the next mapping's entries written into its table before their own flush). Tables
/// the tree does not reach, in system memory, or outside VRAM are left alone: no walk at
/// this snapshot reads them (it faults before).
pub fn watch_tables(ctx: &Context, vram: &Vram) {
    let top_shift = 12 + ctx.block_size + 9 * ctx.depth;
    if ctx.depth > 3 || top_shift > 63 {
        return;
    }
    let local = |addr: u64| {
        addr.checked_sub(ctx.vram_offset)
            .filter(|a| vram.contains(*a, 8))
    };
    let Some(root) = local(ctx.root & TABLE_ADDR) else {
        return;
    };
    let first_last = 12 + ctx.block_size;
    // (table, its shift, the last level's shift); a table is read once however many
    // entries point to it.
    let mut todo = vec![(root, top_shift, first_last)];
    let mut seen = std::collections::HashSet::new();
    let mut entries = vec![0u8; 512 * 8];
    while let Some((table, shift, last_shift)) = todo.pop() {
        if !seen.insert((table, shift)) {
            continue;
        }
        // The 512 entries a walk may read there, on one page or two.
        let end = table.saturating_add(512 * 8 - 1);
        vram.watch(table);
        if end / crate::vram::GEN_PAGE != table / crate::vram::GEN_PAGE {
            vram.watch(end);
        }
        let further = ctx.format == PteFormat::Gfx9 && ctx.block_size > 0;
        if shift == last_shift && !(further && last_shift > 12) {
            continue;
        }
        vram.read(table, &mut entries);
        for e in entries.chunks_exact(8) {
            let entry = u64::from_le_bytes(e.try_into().unwrap_or_default());
            if entry & VALID == 0 || entry & SYSTEM != 0 {
                continue;
            }
            let child = if shift == last_shift {
                // The last level: only a translate-further entry points to a table.
                (entry & TRANSLATE_FURTHER != 0).then_some((12, 12))
            } else {
                (!ctx.format.is_leaf(entry)).then_some((shift - 9, last_shift))
            };
            if let (Some((s, l)), Some(t)) = (child, local(entry & TABLE_ADDR)) {
                todo.push((t, s, l));
            }
        }
    }
}

/// Translate `va` through a last-level table an earlier walk of the same context found
/// (`lt`, from [`Translation::leaf_table`]): one entry read instead of a walk from the root.
/// `va` must lie in the table's range. The entry is read as the context's TLB snapshot
/// sees it, as in [`translate`].
pub fn translate_in(
    ctx: &Context,
    vram: &Vram,
    lt: &LeafTable,
    va: u64,
    access: Access,
) -> Result<Translation, PageFault> {
    let fault = |kind, entry| PageFault {
        va,
        kind,
        shift: 12,
        entry,
    };
    if va < lt.first_va || va > lt.last_va {
        return Err(fault(FaultKind::OutOfRange, 0));
    }
    let at = lt.table + ((va - lt.first_va) >> 12) * 8;
    let mut e = [0u8; 8];
    if vram.read_as_of(at, &mut e, ctx.flush_generation).is_none() {
        return Err(fault(FaultKind::Stale, 0));
    }
    let entry = u64::from_le_bytes(e);
    if entry & VALID == 0 {
        return Err(fault(FaultKind::Invalid, entry));
    }
    let (addr, size) = page_of(entry, 12, va, access).map_err(|k| fault(k, entry))?;
    let target = page_target(ctx, vram, entry, addr).ok_or(fault(FaultKind::BadAddress, entry))?;
    Ok(Translation {
        target,
        page_size: size,
        frag: ((entry >> FRAG_SHIFT) & FRAG_BITS) as u8,
        entry,
        leaf_table: Some(*lt),
    })
}

/// How many bytes past the 4 KiB page `t` maps (the translation of `va`, with its leaf
/// table) the same mapping goes on without a break: the entries after `t.entry` in its leaf
/// table (those on the same 4 KiB page of the table, at most `max_pages`), read as the
/// context's TLB snapshot sees them, that carry the same flags (`FRAG` aside) and map the
/// following pages to the same kind of memory. Each of those pages translates, by a walk of
/// its own, to where `t` continues: an engine's TLB may take them in one entry. 0 when `t`
/// is not a 4 KiB page of a leaf table.
pub fn run_after(ctx: &Context, vram: &Vram, t: &Translation, va: u64, max_pages: u64) -> u64 {
    let Some(lt) = t.leaf_table else {
        return 0;
    };
    if t.page_size != 0x1000 || va < lt.first_va || va > lt.last_va {
        return 0;
    }
    let at = lt.table + ((va - lt.first_va) >> 12) * 8;
    // Entries after this one on the same page of the table, in the table's range.
    let left_in_table = (lt.last_va - va) >> 12;
    let left_in_page = (0x1000 - (at + 8) % 0x1000) % 0x1000 / 8;
    let n = max_pages.min(left_in_table).min(left_in_page) as usize;
    if n == 0 {
        return 0;
    }
    let mut buf = [0u8; 8 * 64];
    let buf = &mut buf[..8 * n.min(64)];
    if vram.read_as_of(at + 8, buf, ctx.flush_generation).is_none() {
        return 0;
    }
    // The flags but `FRAG`, which changes no translation (the driver writes smaller
    // fragments at a mapping's unaligned ends).
    let flags_of = |e: u64| e & !PAGE_ADDR & !(FRAG_BITS << FRAG_SHIFT);
    let flags = flags_of(t.entry);
    let base = t.entry & PAGE_ADDR;
    let mut run = 0u64;
    for (k, e) in buf.chunks_exact(8).enumerate() {
        let entry = u64::from_le_bytes(e.try_into().unwrap_or_default());
        let next = 0x1000 * (k as u64 + 1);
        if flags_of(entry) != flags || entry & PAGE_ADDR != base + next {
            break;
        }
        let offset = va & 0xfff;
        if page_target(ctx, vram, entry, base + next) != Some(t.target.offset_by(next - offset)) {
            break;
        }
        run = next;
    }
    run
}

/// Where the byte at `addr` of the page `entry` maps lands: system memory (`SYSTEM`), this
/// device's VRAM (the address minus `vram_offset`), or in a hive another member's VRAM (an
/// address in its segment, as Linux maps a peer's memory: its `vram_base_offset` plus the
/// offset, VRAM-style). `None`: an address no VRAM answers.
fn page_target(ctx: &Context, vram: &Vram, entry: u64, addr: u64) -> Option<PhysTarget> {
    if entry & SYSTEM != 0 {
        return Some(PhysTarget::System(addr));
    }
    if let Some(local) = addr
        .checked_sub(ctx.vram_offset)
        .filter(|a| vram.contains(*a, 8))
    {
        return Some(PhysTarget::Vram(local));
    }
    ctx.xgmi?.peer(addr)
}

/// Address and size of the page `entry` maps at `shift`, checked against `access`.
fn page_of(entry: u64, shift: u32, rel: u64, access: Access) -> Result<(u64, u64), FaultKind> {
    let need = match access {
        Access::Read => READABLE,
        Access::Write => WRITEABLE,
        Access::Execute => EXECUTABLE,
    };
    if entry & need == 0 {
        return Err(FaultKind::Permission);
    }
    let size = 1u64 << shift;
    // The page's address is taken as written, aligned to 4 KiB only: the offset inside the
    // page is added to it. Linux never writes a huge-page entry with an address that is not
    // a multiple of its size, but tinygrad's AM driver maps 4 KiB-aligned VRAM (its kernel
    // arguments) with 2 MiB entries and runs kernels that read it on real Navi 31 and MI300X,
    // and no AMD document says the walker drops those bits.
    let base = entry & PAGE_ADDR;
    Ok((base + (rel & (size - 1)), size))
}

#[cfg(test)]
mod tests {
    use super::*;
    use am_driver::mm::{self, MapFlags, PageTables, TableAlloc, VramAccess};

    struct Mem<'a>(&'a Vram);

    impl VramAccess for Mem<'_> {
        fn read64(&self, paddr: u64) -> am_driver::Result<u64> {
            Ok(u64::from(self.0.read32(paddr)) | u64::from(self.0.read32(paddr + 4)) << 32)
        }
        fn write64(&self, paddr: u64, value: u64) -> am_driver::Result<()> {
            self.0.write(paddr, &value.to_le_bytes()).map_err(|full| {
                am_driver::Error::new(
                    "vram",
                    am_driver::ErrorKind::Backend {
                        message: full.to_string(),
                    },
                )
            })
        }
    }

    struct Bump(u64);

    impl TableAlloc for Bump {
        fn alloc_table(&mut self, mem: &dyn VramAccess) -> am_driver::Result<u64> {
            self.0 += 0x1000;
            mem.zero(self.0, 0x1000)?;
            Ok(self.0)
        }
        fn free_table(&mut self, _paddr: u64) -> am_driver::Result<()> {
            Ok(())
        }
    }

    /// The three entry formats, as the driver and the walker name them.
    const FORMATS: [(mm::PteFormat, PteFormat); 3] = [
        (mm::PteFormat::Gfx9, PteFormat::Gfx9),
        (mm::PteFormat::Gfx10, PteFormat::Gfx10),
        (mm::PteFormat::Gfx12, PteFormat::Gfx12),
    ];

    /// The driver's tree at `root` mapping from `va0`, outside any hive.
    fn tables(drv: mm::PteFormat, root: u64, va0: u64) -> PageTables {
        PageTables {
            format: drv,
            root,
            vram_offset: 0,
            xgmi_seg_size: 0,
            va_base: va0,
        }
    }

    /// The VM context that walks that tree, with the TLB snapshot of now.
    fn context(drv: mm::PteFormat, fmt: PteFormat, root: u64, va0: u64, vram: &Vram) -> Context {
        Context {
            format: fmt,
            root,
            depth: drv.page_table_depth(),
            block_size: drv.page_table_block_size(),
            start_page: va0 >> 12,
            end_page: (va0 >> 12) + (1 << 28),
            vram_offset: 0,
            xgmi: None,
            flush_generation: vram.snapshot(),
        }
    }

    /// The walker and the driver's own reading agree on every page of a mix of 4 KiB,
    /// fragment, 2 MiB, 1 GiB and system mappings, in all three formats; unmapped pages
    /// fault.
    #[test]
    fn agrees_with_the_driver_tables_in_every_format() {
        for (drv, fmt) in FORMATS {
            let vram = Vram::new(4 << 30);
            let mem = Mem(&vram);
            let mut alloc = Bump(0x10_0000);
            let root = alloc.alloc_table(&mem).unwrap();
            let va0 = 0x2000_0000_0000u64;
            let pt = tables(drv, root, va0);
            let maps: [(u64, u64, u64, MapFlags); 5] = [
                (0, 0x80_0000, 0x1000, MapFlags::VRAM),
                (0x10_0000, 0x90_0000, 0x8000, MapFlags::VRAM),
                (0x40_0000, 0x120_0000, 0x20_0000, MapFlags::VRAM),
                (1 << 30, 1 << 30, 1 << 30, MapFlags::VRAM),
                (0x80_0000, 0x0a00_0000_0000, 0x3000, MapFlags::SYSTEM),
            ];
            for (off, pa, len, flags) in maps {
                pt.map(&mem, &mut alloc, va0 + off, &[(pa, len)], flags, false)
                    .unwrap();
            }
            let ctx = context(drv, fmt, root, va0, &vram);
            for (off, _, len, _) in maps {
                for va in [va0 + off, va0 + off + len - 8, va0 + off + len / 2 + 0x123] {
                    let d = pt.walk(&mem, va).unwrap().unwrap();
                    let t = translate(&ctx, &vram, va, Access::Read).unwrap();
                    let want = if d.page.flags.system {
                        PhysTarget::System(d.phys)
                    } else {
                        PhysTarget::Vram(d.phys)
                    };
                    assert_eq!(
                        (t.target, t.page_size),
                        (want, d.page_size),
                        "{fmt:?} {va:#x}"
                    );
                }
            }
            let f = translate(&ctx, &vram, va0 + 0x2000, Access::Read).unwrap_err();
            assert_eq!(
                (f.kind, f.level_name()),
                (FaultKind::Invalid, "PTB"),
                "{fmt:?}"
            );
            let f = translate(&ctx, &vram, va0 + (5 << 30), Access::Read).unwrap_err();
            assert_eq!(
                (f.kind, f.level_name()),
                (FaultKind::Invalid, "PDB1"),
                "{fmt:?}"
            );
        }
    }

    /// `run_after` takes the following 4 KiB pages of a leaf table while they map the next
    /// physical pages with the same flags, up to its limit and the table page's end, and
    /// each page it takes translates by its own walk to where the run says; a page that maps
    /// elsewhere, another kind of page or an unmapped one ends the run.
    #[test]
    fn runs_follow_contiguous_entries_of_one_leaf_table() {
        for (drv, fmt) in FORMATS {
            let vram = Vram::new(1 << 30);
            let mem = Mem(&vram);
            let mut alloc = Bump(0x10_0000);
            let root = alloc.alloc_table(&mem).unwrap();
            let va0 = 0x2000_0000_0000u64;
            let pt = tables(drv, root, va0);
            let map = |off: u64, pa: u64, len: u64, flags: MapFlags, alloc: &mut Bump| {
                pt.map(&mem, alloc, va0 + off, &[(pa, len)], flags, false)
                    .unwrap()
            };
            // Pages 0..6 contiguous, page 6 elsewhere, 7..9 contiguous read-only, 10 none,
            // 11..40 contiguous.
            map(0, 0x80_0000, 0x6000, MapFlags::VRAM, &mut alloc);
            map(0x6000, 0x90_0000, 0x1000, MapFlags::VRAM, &mut alloc);
            let ro = MapFlags {
                writable: false,
                ..MapFlags::VRAM
            };
            map(0x7000, 0x90_1000, 0x3000, ro, &mut alloc);
            map(0xb000, 0xa0_0000, 0x1e000, MapFlags::VRAM, &mut alloc);
            let ctx = context(drv, fmt, root, va0, &vram);
            let run = |off: u64, max: u64| {
                let va = va0 + off;
                let t = translate(&ctx, &vram, va, Access::Read).unwrap();
                (t, run_after(&ctx, &vram, &t, va, max))
            };
            assert_eq!(run(0x10, 15).1, 0x5000, "{fmt:?}: pages 1..6");
            assert_eq!(run(0x3000, 15).1, 0x2000, "{fmt:?}: pages 4..6");
            assert_eq!(
                run(0x6000, 15).1,
                0,
                "{fmt:?}: the next page has other flags"
            );
            assert_eq!(
                run(0x7000, 15).1,
                0x2000,
                "{fmt:?}: read-only pages 8 and 9"
            );
            assert_eq!(run(0x9000, 15).1, 0, "{fmt:?}: page 10 is unmapped");
            assert_eq!(run(0xb000, 15).1, 0xf000, "{fmt:?}: the limit");
            assert_eq!(run(0xb000, 3).1, 0x3000, "{fmt:?}: a smaller limit");
            // Every page of a run translates by its own walk where the run says.
            for off in [0x123u64, 0xb008] {
                let (t, len) = run(off, 15);
                for k in (0x1000..=len).step_by(0x1000) {
                    let own = translate(&ctx, &vram, va0 + off + k, Access::Read).unwrap();
                    assert_eq!(
                        own.target,
                        t.target.offset_by(k),
                        "{fmt:?} {off:#x} + {k:#x}"
                    );
                }
            }
        }
    }

    /// In a hive, an entry's VRAM address says whose memory it is: this member's segment is
    /// its VRAM, another member's segment that member's VRAM (4 KiB pages and a 2 MiB page,
    /// as the driver's `map` with `hive` writes them, and the driver's walk agrees), an address
    /// past the last segment is no memory at all.
    #[test]
    fn hive_entries_reach_the_member_whose_segment_holds_them() {
        const SEG: u64 = 4 << 30;
        let vram = Vram::new(SEG);
        let mem = Mem(&vram);
        let mut alloc = Bump(0x10_0000);
        let root = alloc.alloc_table(&mem).unwrap();
        let va0 = 0x2000_0000_0000u64;
        // Region 1 of a hive of 3.
        let pt = PageTables {
            format: mm::PteFormat::Gfx9,
            root,
            vram_offset: SEG,
            xgmi_seg_size: SEG,
            va_base: va0,
        };
        pt.map(
            &mem,
            &mut alloc,
            va0,
            &[(0x80_0000, 0x1000)],
            MapFlags::VRAM,
            false,
        )
        .unwrap();
        let peer = MapFlags::PEER_VRAM;
        pt.map(
            &mem,
            &mut alloc,
            va0 + 0x10_0000,
            &[(0x30_0000, 0x2000)],
            peer,
            true,
        )
        .unwrap();
        pt.map(
            &mem,
            &mut alloc,
            va0 + 0x40_0000,
            &[(2 * SEG + 0x20_0000, 0x20_0000)],
            peer,
            true,
        )
        .unwrap();
        pt.map(
            &mem,
            &mut alloc,
            va0 + 0x80_0000,
            &[(3 * SEG + 0x1000, 0x1000)],
            peer,
            true,
        )
        .unwrap();
        let ctx = Context {
            format: PteFormat::Gfx9,
            root: root + SEG,
            depth: 2,
            block_size: 9,
            start_page: va0 >> 12,
            end_page: (va0 >> 12) + (1 << 28),
            vram_offset: SEG,
            xgmi: Some(XgmiLayout {
                region: 1,
                regions: 3,
                segment_size: SEG,
            }),
            flush_generation: vram.snapshot(),
        };
        let cases = [
            (va0 + 0x10, PhysTarget::Vram(0x80_0010), 0x1000, None),
            (
                va0 + 0x10_1008,
                PhysTarget::Peer {
                    region: 0,
                    offset: 0x30_1008,
                },
                0x1000,
                Some(0),
            ),
            (
                va0 + 0x4a_bcd0,
                PhysTarget::Peer {
                    region: 2,
                    offset: 0x2a_bcd0,
                },
                0x20_0000,
                Some(2),
            ),
        ];
        for (va, want, size, region) in cases {
            let t = translate(&ctx, &vram, va, Access::Write).unwrap();
            assert_eq!((t.target, t.page_size), (want, size), "{va:#x}");
            let d = pt.walk(&mem, va).unwrap().unwrap();
            let offset = match want {
                PhysTarget::Vram(o) | PhysTarget::Peer { offset: o, .. } => o,
                PhysTarget::System(_) => unreachable!(),
            };
            assert_eq!(
                (d.peer_region, d.phys),
                (region, offset),
                "driver walk {va:#x}"
            );
        }
        let f = translate(&ctx, &vram, va0 + 0x80_0000, Access::Read).unwrap_err();
        assert_eq!((f.kind, f.level_name()), (FaultKind::BadAddress, "PTB"));
    }

    /// A 2 MiB entry above the last level whose address is 4 KiB-aligned only (tinygrad's AM
    /// maps its kernel-argument buffer at VRAM 0x2034000 this way, and kernels read it on real
    /// Navi 31): every byte of the page lands at the address as written plus its offset in
    /// the page, in every entry format.
    #[test]
    fn a_huge_page_address_not_aligned_to_its_size_is_used_as_written() {
        for (drv, fmt) in FORMATS {
            let vram = Vram::new(256 << 20);
            let mem = Mem(&vram);
            let mut alloc = Bump(0x10_0000);
            let root = alloc.alloc_table(&mem).unwrap();
            let va0 = 0x2000_0000_0000u64;
            let pt = tables(drv, root, va0);
            pt.map(
                &mem,
                &mut alloc,
                va0,
                &[(0x200_0000, 0x20_0000)],
                MapFlags::VRAM,
                false,
            )
            .unwrap();
            let d = pt.walk(&mem, va0).unwrap().unwrap();
            assert_eq!(
                d.page_size, 0x20_0000,
                "{fmt:?}: the driver maps one 2 MiB page"
            );
            // The same entry moved to 0x2034000: the address field holds bits 47:12.
            mem.write64(d.entry_addr, d.entry + 0x3_4000).unwrap();
            let ctx = context(drv, fmt, root, va0, &vram);
            for off in [0u64, 8, 0x1234, 0x1f_fff8] {
                let t = translate(&ctx, &vram, va0 + off, Access::Read).unwrap();
                assert_eq!(
                    (t.target, t.page_size),
                    (PhysTarget::Vram(0x203_4000 + off), 0x20_0000),
                    "{fmt:?} offset {off:#x}"
                );
            }
        }
    }
}
