//! The page-table tree in VRAM: map, unmap, walk.
//!
//! The table bytes are the only state: every operation reads the entries it needs through
//! [`VramAccess`], so what the driver believes is mapped is exactly what the GPU will find.

use super::pte::{PageEntry, PtEntry, PteFormat};
use super::{MapFlags, VmLevel, VramAccess};
use crate::{Error, ErrorKind, Result};

/// Bits of GPU virtual address the tree translates (PDB2 covers bits 47:39).
pub const VA_BITS: u32 = 48;
/// Entries in every table.
pub const ENTRIES: u64 = 512;
/// Size of a table and of the smallest page.
pub const PAGE_SIZE: u64 = 0x1000;

/// Where page tables come from and go back to.
pub trait TableAlloc {
    /// A zero-filled 4 KiB table; returns its VRAM physical address.
    fn alloc_table(&mut self, mem: &dyn VramAccess) -> Result<u64>;
    /// Returns a table that no longer holds a valid entry.
    fn free_table(&mut self, paddr: u64) -> Result<()>;
}

/// What a walk found for one virtual address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Translation {
    /// The address asked about.
    pub va: u64,
    /// Where it lands: a VRAM physical address (of this device, or of the hive member
    /// `peer_region`), or a system bus address if `flags.system`.
    pub phys: u64,
    /// The hive region whose VRAM the page is, when it is another member's (mapped with
    /// [`PageTables::map_hive`]).
    pub peer_region: Option<u32>,
    /// Level of the entry that mapped it.
    pub level: VmLevel,
    /// Size of that page (4 KiB, 2 MiB, 1 GiB).
    pub page_size: u64,
    /// Decoded entry.
    pub page: PageEntry,
    /// Raw entry value.
    pub entry: u64,
    /// VRAM physical address of the entry itself.
    pub entry_addr: u64,
}

/// A page-table tree rooted at a PDB2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageTables {
    /// Entry format.
    pub format: PteFormat,
    /// VRAM physical address of the root (PDB2) table.
    pub root: u64,
    /// Added to VRAM physical addresses written into entries (the XGMI segment offset
    /// `paddr_base` of GMC; 0 outside a hive).
    pub vram_offset: u64,
    /// Size of each member's segment of the hive (0 outside a hive): an entry address
    /// outside this device's segment is another member's VRAM.
    pub xgmi_seg_size: u64,
    /// Virtual address translated by entry 0 of the root (`VM_CONTEXT0_PAGE_TABLE_START_ADDR`).
    pub va_base: u64,
}

enum Visit {
    Hole {
        va: u64,
    },
    Leaf {
        va: u64,
        level: VmLevel,
        page: PageEntry,
    },
}

/// The fragment run being written: entries up to `run_end` carry `frag`.
struct Frag {
    piece_end: u64,
    run_end: u64,
    frag: u8,
}

/// Largest fragment the 5-bit `FRAG` field holds.
const MAX_FRAG: u32 = 31;

/// Largest aligned, physically contiguous power-of-two run starting at `va`/`pa` within
/// `len` bytes, as a `FRAG` value (log2 of 4 KiB pages).
fn frag_at(va: u64, pa: u64, len: u64) -> u8 {
    let pages = (len / PAGE_SIZE).max(1);
    let f = (va / PAGE_SIZE)
        .trailing_zeros()
        .min((pa / PAGE_SIZE).trailing_zeros())
        .min(63 - pages.leading_zeros());
    f.min(MAX_FRAG) as u8
}

fn err(va: u64, size: u64, reason: impl Into<String>) -> Error {
    Error::from(ErrorKind::Mapping {
        va,
        size,
        reason: reason.into(),
    })
}

/// The level under `level`: a table entry in a PTB is a corrupt tree.
fn below(level: VmLevel, va: u64) -> Result<VmLevel> {
    level
        .child()
        .ok_or_else(|| err(va, 0, "a PTB entry decoded as a table"))
}

impl PageTables {
    fn rel(&self, va: u64, size: u64) -> Result<(u64, u64)> {
        let r = va
            .checked_sub(self.va_base)
            .filter(|r| r.is_multiple_of(PAGE_SIZE) && size.is_multiple_of(PAGE_SIZE) && size > 0);
        let r = r.ok_or_else(|| err(va, size, "not 4 KiB aligned, empty, or below the VM base"))?;
        match r.checked_add(size) {
            Some(end) if end <= 1 << VA_BITS => Ok((r, end)),
            _ => Err(err(va, size, format!("beyond the {VA_BITS}-bit VM"))),
        }
    }

    fn vram_addr(&self, addr: u64) -> Result<u64> {
        addr.checked_sub(self.vram_offset).ok_or_else(|| {
            err(
                0,
                0,
                format!(
                    "entry address {addr:#x} is below the XGMI offset {:#x}",
                    self.vram_offset
                ),
            )
        })
    }

    fn entry_addr(table: u64, level: VmLevel, rel: u64) -> u64 {
        table + ((rel >> level.shift()) & (ENTRIES - 1)) * 8
    }

    /// Translates `va`, or `None` if it is not mapped.
    pub fn walk(&self, mem: &dyn VramAccess, va: u64) -> Result<Option<Translation>> {
        let (rel, _) = self.rel(va & !(PAGE_SIZE - 1), PAGE_SIZE)?;
        let (mut table, mut level) = (self.root, VmLevel::Pdb2);
        loop {
            let at = Self::entry_addr(table, level, rel);
            let entry = mem.read64(at)?;
            match self.format.decode(level, entry) {
                PtEntry::Invalid => return Ok(None),
                PtEntry::Table { addr } => {
                    let child = below(level, va)?;
                    (table, level) = (self.vram_addr(addr)?, child);
                }
                PtEntry::Page(page) => {
                    let seg = self.xgmi_seg_size;
                    let own = page.addr.checked_sub(self.vram_offset).filter(|&a| a < seg);
                    let (base, peer_region) = if page.flags.system {
                        (page.addr, None)
                    } else if seg > 0 && own.is_none() {
                        (page.addr % seg, Some((page.addr / seg) as u32))
                    } else {
                        (self.vram_addr(page.addr)?, None)
                    };
                    let page_size = level.entry_size();
                    let phys = base + (va - self.va_base) % page_size;
                    return Ok(Some(Translation {
                        va,
                        phys,
                        peer_region,
                        level,
                        page_size,
                        page,
                        entry,
                        entry_addr: at,
                    }));
                }
            }
        }
    }

    fn visit(
        &self,
        mem: &dyn VramAccess,
        table: u64,
        level: VmLevel,
        mut va: u64,
        end: u64,
        f: &mut dyn FnMut(Visit) -> Result<()>,
    ) -> Result<()> {
        let size = level.entry_size();
        while va < end {
            let chunk_end = end.min((va | (size - 1)) + 1);
            match self
                .format
                .decode(level, mem.read64(Self::entry_addr(table, level, va))?)
            {
                PtEntry::Invalid => f(Visit::Hole { va })?,
                PtEntry::Page(page) => f(Visit::Leaf {
                    va: va & !(size - 1),
                    level,
                    page,
                })?,
                PtEntry::Table { addr } => {
                    let child = below(level, va)?;
                    self.visit(mem, self.vram_addr(addr)?, child, va, chunk_end, f)?;
                }
            }
            va = chunk_end;
        }
        Ok(())
    }

    /// Every page entry of the tree as `(va, translation of va)`, in VA order.
    pub fn mappings(&self, mem: &dyn VramAccess) -> Result<Vec<Translation>> {
        let mut leaves = vec![];
        self.visit(mem, self.root, VmLevel::Pdb2, 0, 1 << VA_BITS, &mut |v| {
            if let Visit::Leaf { va, .. } = v {
                leaves.push(self.va_base + va);
            }
            Ok(())
        })?;
        leaves
            .into_iter()
            .filter_map(|va| self.walk(mem, va).transpose())
            .collect()
    }

    /// Maps `[va, va + Σ len)` to the `(addr, len)` ranges in order: VRAM physical
    /// addresses, or system bus addresses when `flags.system`. Uses 1 GiB and 2 MiB pages and
    /// `FRAG` where the ranges allow. Refuses to touch a page that is already mapped.
    pub fn map(
        &self,
        mem: &dyn VramAccess,
        alloc: &mut dyn TableAlloc,
        va: u64,
        ranges: &[(u64, u64)],
        flags: MapFlags,
    ) -> Result<()> {
        let offset = if flags.system { 0 } else { self.vram_offset };
        self.map_at(mem, alloc, va, ranges, flags, offset)
    }

    /// Maps `[va, va + Σ len)` to ranges of the hive's memory, given as hive physical
    /// addresses (a member's `paddr_base` plus its VRAM address) and written into the
    /// entries as they are, VRAM-style (no `SYSTEM`): how another member's VRAM is mapped
    /// (Linux adds that member's `vram_base_offset` to its VRAM address the same way).
    pub fn map_hive(
        &self,
        mem: &dyn VramAccess,
        alloc: &mut dyn TableAlloc,
        va: u64,
        ranges: &[(u64, u64)],
        flags: MapFlags,
    ) -> Result<()> {
        if flags.system {
            return Err(err(va, 0, "hive memory is VRAM: it is not mapped SYSTEM"));
        }
        self.map_at(mem, alloc, va, ranges, flags, 0)
    }

    /// [`map`](Self::map) with `offset` added to every range's address.
    fn map_at(
        &self,
        mem: &dyn VramAccess,
        alloc: &mut dyn TableAlloc,
        va: u64,
        ranges: &[(u64, u64)],
        flags: MapFlags,
        offset: u64,
    ) -> Result<()> {
        let total = ranges
            .iter()
            .try_fold(0u64, |a, r| a.checked_add(r.1))
            .ok_or_else(|| err(va, 0, "size overflows"))?;
        let (start, end) = self.rel(va, total)?;
        for &(addr, len) in ranges {
            if addr % PAGE_SIZE != 0 || len % PAGE_SIZE != 0 {
                return Err(err(
                    va,
                    total,
                    format!("physical range {addr:#x}+{len:#x} is not 4 KiB aligned"),
                ));
            }
        }
        self.visit(
            mem,
            self.root,
            VmLevel::Pdb2,
            start,
            end,
            &mut |v| match v {
                Visit::Leaf { va: at, .. } => Err(err(
                    va,
                    total,
                    format!("{:#x} is already mapped", self.va_base + at.max(start)),
                )),
                Visit::Hole { .. } => Ok(()),
            },
        )?;
        let dma_bits = self.format.dma_bits();
        let mut pieces = Vec::with_capacity(ranges.len());
        for (addr, len) in merge(ranges) {
            if flags.system && addr.checked_add(len).is_none_or(|e| e > 1 << dma_bits) {
                return Err(err(
                    va,
                    total,
                    format!(
                        "system bus address range {addr:#x}+{len:#x} is beyond the GPU's {dma_bits}-bit DMA range: the device cannot reach it"
                    ),
                ));
            }
            let hw = addr
                .checked_add(offset)
                .filter(|a| a.checked_add(len).is_some_and(|e| e <= 1 << VA_BITS));
            let hw = hw.ok_or_else(|| {
                err(
                    va,
                    total,
                    format!("physical range {addr:#x}+{len:#x} is beyond 48 bits"),
                )
            })?;
            pieces.push((hw, len));
        }
        let mut rel = start;
        for (hw, len) in pieces {
            let mut frag = Frag {
                piece_end: rel + len,
                run_end: 0,
                frag: 0,
            };
            if let Err(e) = self.map_in(
                mem,
                alloc,
                self.root,
                VmLevel::Pdb2,
                rel,
                hw,
                rel + len,
                flags,
                &mut frag,
            ) {
                // Leave nothing half-mapped: the range was empty before this call.
                self.unmap_in(mem, alloc, self.root, VmLevel::Pdb2, start, rel + len)?;
                return Err(e);
            }
            rel += len;
        }
        Ok(())
    }

    /// `frag` carries the current fragment run across the tables of one physical range.
    #[allow(clippy::too_many_arguments)]
    fn map_in(
        &self,
        mem: &dyn VramAccess,
        alloc: &mut dyn TableAlloc,
        table: u64,
        level: VmLevel,
        mut va: u64,
        mut pa: u64,
        end: u64,
        flags: MapFlags,
        frag: &mut Frag,
    ) -> Result<()> {
        let size = level.entry_size();
        while va < end {
            let chunk_end = end.min((va | (size - 1)) + 1);
            let at = Self::entry_addr(table, level, va);
            let leaf = level == VmLevel::Ptb
                || (level.can_be_page()
                    && va.is_multiple_of(size)
                    && pa.is_multiple_of(size)
                    && chunk_end - va == size);
            if leaf {
                if va >= frag.run_end {
                    frag.frag = frag_at(va, pa, frag.piece_end - va);
                    frag.run_end = va + (PAGE_SIZE << frag.frag);
                }
                mem.write64(at, self.format.encode_pte(level, pa, flags, frag.frag))?;
            } else {
                let child_level = below(level, va)?;
                let child = match self.format.decode(level, mem.read64(at)?) {
                    PtEntry::Table { addr } => self.vram_addr(addr)?,
                    PtEntry::Invalid => {
                        let t = alloc.alloc_table(mem)?;
                        mem.write64(at, self.format.encode_pde(level, t + self.vram_offset))?;
                        t
                    }
                    PtEntry::Page(_) => {
                        return Err(err(self.va_base + va, 0, "already mapped by a huge page"));
                    }
                };
                self.map_in(
                    mem,
                    alloc,
                    child,
                    child_level,
                    va,
                    pa,
                    chunk_end,
                    flags,
                    frag,
                )?;
            }
            pa += chunk_end - va;
            va = chunk_end;
        }
        Ok(())
    }

    /// Unmaps `[va, va + size)` and frees the tables left empty. Every page of the range must
    /// be mapped, and the range must not cut through a huge page or a `FRAG` run (the
    /// remaining entries would still promise the TLB a contiguous run); otherwise nothing
    /// changes and the error says where.
    pub fn unmap(
        &self,
        mem: &dyn VramAccess,
        alloc: &mut dyn TableAlloc,
        va: u64,
        size: u64,
    ) -> Result<()> {
        let (start, end) = self.rel(va, size)?;
        self.visit(
            mem,
            self.root,
            VmLevel::Pdb2,
            start,
            end,
            &mut |v| match v {
                Visit::Hole { va: h, .. } => Err(err(
                    va,
                    size,
                    format!("{:#x} is not mapped", self.va_base + h),
                )),
                Visit::Leaf {
                    va: at,
                    level,
                    page,
                } => {
                    let run = level.entry_size().max(PAGE_SIZE << page.frag);
                    let run_start = at & !(run - 1);
                    if run_start < start || run_start + run > end {
                        let what = if level == VmLevel::Ptb {
                            "fragment"
                        } else {
                            "huge page"
                        };
                        let base = self.va_base;
                        Err(err(
                            va,
                            size,
                            format!("would split the {what} {:#x}+{run:#x}", base + run_start),
                        ))
                    } else {
                        Ok(())
                    }
                }
            },
        )?;
        self.unmap_in(mem, alloc, self.root, VmLevel::Pdb2, start, end)
    }

    fn unmap_in(
        &self,
        mem: &dyn VramAccess,
        alloc: &mut dyn TableAlloc,
        table: u64,
        level: VmLevel,
        mut va: u64,
        end: u64,
    ) -> Result<()> {
        let size = level.entry_size();
        while va < end {
            let chunk_end = end.min((va | (size - 1)) + 1);
            let at = Self::entry_addr(table, level, va);
            match self.format.decode(level, mem.read64(at)?) {
                PtEntry::Invalid => {}
                PtEntry::Page(_) => mem.write64(at, 0)?,
                PtEntry::Table { addr } => {
                    let child = self.vram_addr(addr)?;
                    let child_level = below(level, va)?;
                    self.unmap_in(mem, alloc, child, child_level, va, chunk_end)?;
                    let mut empty = true;
                    for i in 0..ENTRIES {
                        if self.format.decode(child_level, mem.read64(child + i * 8)?)
                            != PtEntry::Invalid
                        {
                            empty = false;
                            break;
                        }
                    }
                    if empty {
                        mem.write64(at, 0)?;
                        alloc.free_table(child)?;
                    }
                }
            }
            va = chunk_end;
        }
        Ok(())
    }
}

/// Joins ranges that continue each other, so a fragment can span them.
fn merge(ranges: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for &(a, l) in ranges.iter().filter(|r| r.1 > 0) {
        match out.last_mut() {
            Some(last) if last.0 + last.1 == a => last.1 += l,
            _ => out.push((a, l)),
        }
    }
    out
}
