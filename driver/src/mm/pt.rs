//! The page-table tree in VRAM: map, unmap, walk.
//!
//! The table bytes are the only state: every operation reads the entries it needs through
//! [`VramAccess`], so what the driver believes is mapped is exactly what the GPU will find.
//!
//! Every operation is one descent of the tree (`each`): a closure sees each entry covering
//! the requested range and either handles it (writes a page, clears it, records it) or names
//! the table below to descend into; unmapping frees the tables it empties on the way back up.

use super::*;
use VmLevel::{Pdb2, Ptb};

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
    /// [`PageTables::map`] with `hive`).
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

/// One entry a traversal reaches: at VRAM address `at` in a `level` table, covering the
/// relative virtual range `[va, end)` of the request.
struct Slot {
    at: u64,
    level: VmLevel,
    va: u64,
    end: u64,
}

/// Largest aligned, physically contiguous power-of-two run starting at `va`/`pa` within
/// `len` bytes, as a `FRAG` value (log2 of 4 KiB pages).
fn frag_at(va: u64, pa: u64, len: u64) -> u8 {
    let aligned = ((va | pa) / PAGE_SIZE).trailing_zeros();
    // 31: the largest value of the 5-bit field.
    aligned.min((len / PAGE_SIZE).max(1).ilog2()).min(31) as u8
}

fn err(va: u64, size: u64, reason: impl Into<String>) -> Error {
    Error::from(ErrorKind::Mapping {
        va,
        size,
        reason: reason.into(),
    })
}

impl PageTables {
    /// `[va, va + size)` relative to `va_base`, checked against the tree's reach.
    fn rel(&self, va: u64, size: u64) -> Result<Range<u64>> {
        let r = va
            .checked_sub(self.va_base)
            .filter(|r| (r | size).is_multiple_of(PAGE_SIZE) && size > 0);
        let r = r.ok_or_else(|| err(va, size, "not 4 KiB aligned, empty, or below the VM base"))?;
        match r.checked_add(size) {
            Some(end) if end <= 1 << VA_BITS => Ok(r..end),
            _ => Err(err(va, size, format!("beyond the {VA_BITS}-bit VM"))),
        }
    }

    fn vram_addr(&self, addr: u64) -> Result<u64> {
        let off = self.vram_offset;
        addr.checked_sub(off).ok_or_else(|| {
            let reason = format!("entry address {addr:#x} is below the XGMI offset {off:#x}");
            err(0, 0, reason)
        })
    }

    /// Calls `f` on each entry covering `range` (relative VA) from the root down: `f`
    /// returns the table to descend into, if any. With `prune`, a table left without a valid
    /// entry after the descent is unhooked and returned to it.
    fn each(
        &self,
        mem: &dyn VramAccess,
        prune: &mut Option<&mut dyn TableAlloc>,
        (table, level): (u64, VmLevel),
        range: Range<u64>,
        f: &mut dyn FnMut(&Slot) -> Result<Option<u64>>,
    ) -> Result<()> {
        let size = level.entry_size();
        let mut va = range.start;
        while va < range.end {
            let s = Slot {
                at: table + ((va >> level.shift()) & (ENTRIES - 1)) * 8,
                level,
                va,
                end: range.end.min((va | (size - 1)) + 1),
            };
            if let Some(child) = f(&s)? {
                let below = level
                    .child()
                    .ok_or_else(|| err(self.va_base + va, 0, "a PTB entry decoded as a table"))?;
                self.each(mem, prune, (child, below), va..s.end, f)?;
                if let Some(alloc) = prune {
                    let mut i = 0;
                    while i < ENTRIES
                        && self.format.decode(below, mem.read64(child + i * 8)?) == PtEntry::Invalid
                    {
                        i += 1;
                    }
                    if i == ENTRIES {
                        mem.write64(s.at, 0)?;
                        alloc.free_table(child)?;
                    }
                }
            }
            va = s.end;
        }
        Ok(())
    }

    /// Calls `f` with each page entry and each hole (as read and decoded) of `range`; see
    /// [`each`](Self::each) for `prune`.
    fn visit(
        &self,
        mem: &dyn VramAccess,
        prune: &mut Option<&mut dyn TableAlloc>,
        range: Range<u64>,
        f: &mut dyn FnMut(&Slot, u64, PtEntry) -> Result<()>,
    ) -> Result<()> {
        let root = (self.root, Pdb2);
        self.each(mem, prune, root, range, &mut |s| {
            let raw = mem.read64(s.at)?;
            match self.format.decode(s.level, raw) {
                PtEntry::Table { addr } => self.vram_addr(addr).map(Some),
                e => f(s, raw, e).map(|()| None),
            }
        })
    }

    /// Translates `va`, or `None` if it is not mapped.
    pub fn walk(&self, mem: &dyn VramAccess, va: u64) -> Result<Option<Translation>> {
        let page = self
            .pages(mem, self.rel(va & !(PAGE_SIZE - 1), PAGE_SIZE)?)?
            .pop();
        Ok(page.map(|t| Translation {
            va,
            phys: t.phys + va % PAGE_SIZE,
            ..t
        }))
    }

    /// Every page entry of the tree as the translation of its first address, in VA order.
    pub fn mappings(&self, mem: &dyn VramAccess) -> Result<Vec<Translation>> {
        self.pages(mem, 0..1 << VA_BITS)
    }

    /// The translation of the first address of each page entry in `range`.
    fn pages(&self, mem: &dyn VramAccess, range: Range<u64>) -> Result<Vec<Translation>> {
        let mut pages = vec![];
        let (off, seg) = (self.vram_offset, self.xgmi_seg_size);
        self.visit(mem, &mut None, range, &mut |s, entry, e| {
            let PtEntry::Page(page) = e else {
                return Ok(());
            };
            let (base, peer_region) = if page.flags.system {
                (page.addr, None)
            } else if seg > 0 && !(off..off + seg).contains(&page.addr) {
                (page.addr % seg, Some((page.addr / seg) as u32))
            } else {
                (self.vram_addr(page.addr)?, None)
            };
            let page_size = s.level.entry_size();
            pages.push(Translation {
                va: self.va_base + s.va,
                phys: base + s.va % page_size,
                peer_region,
                level: s.level,
                page_size,
                page,
                entry,
                entry_addr: s.at,
            });
            Ok(())
        })?;
        Ok(pages)
    }

    /// Maps `[va, va + Σ len)` to the `(addr, len)` ranges in order: VRAM physical
    /// addresses, or system bus addresses when `flags.system`. Uses 1 GiB and 2 MiB pages and
    /// `FRAG` where the ranges allow. Refuses to touch a page that is already mapped.
    ///
    /// With `hive`, the ranges are the hive's memory, given as hive physical addresses (a
    /// member's `paddr_base` plus its VRAM address) and written into the entries as they
    /// are, VRAM-style (no `SYSTEM`): how another member's VRAM is mapped (Linux adds that
    /// member's `vram_base_offset` to its VRAM address the same way).
    pub fn map(
        &self,
        mem: &dyn VramAccess,
        alloc: &mut dyn TableAlloc,
        va: u64,
        ranges: &[(u64, u64)],
        flags: MapFlags,
        hive: bool,
    ) -> Result<()> {
        if hive && flags.system {
            return Err(err(va, 0, "hive memory is VRAM: it is not mapped SYSTEM"));
        }
        let offset = if flags.system || hive {
            0
        } else {
            self.vram_offset
        };
        let total = ranges.iter().try_fold(0u64, |a, r| a.checked_add(r.1));
        let total = total.ok_or_else(|| err(va, 0, "size overflows"))?;
        let bad = |reason: String| err(va, total, reason);
        let range = self.rel(va, total)?;
        let dma_bits = self.format.dma_bits();
        // A system page must lie within the GPU's DMA reach, any page within 48 bits.
        let reach = if flags.system { dma_bits } else { VA_BITS };
        for &(addr, len) in ranges {
            let end = addr.checked_add(offset).and_then(|a| a.checked_add(len));
            let r = format!("{addr:#x}+{len:#x}");
            let reason = if addr % PAGE_SIZE + len % PAGE_SIZE > 0 {
                format!("physical range {r} is not 4 KiB aligned")
            } else if end.is_some_and(|e| e <= 1 << reach) {
                continue;
            } else if flags.system {
                format!(
                    "system bus address range {r} is beyond the GPU's {dma_bits}-bit DMA range: the device cannot reach it"
                )
            } else {
                format!("physical range {r} is beyond 48 bits")
            };
            return Err(bad(reason));
        }
        self.visit(mem, &mut None, range.clone(), &mut |s, _, e| match e {
            PtEntry::Page(_) => Err(bad(format!("{:#x} is already mapped", self.va_base + s.va))),
            _ => Ok(()),
        })?;
        let mut piece = range.start..range.start;
        for (addr, len) in merge(ranges) {
            piece = piece.end..piece.end + len;
            // The fragment run being written: entries up to `run_end` carry `frag`.
            let (mut run_end, mut frag) = (0, 0);
            let root = (self.root, Pdb2);
            let mapped = self.each(mem, &mut None, root, piece.clone(), &mut |s| {
                // A whole entry of a level that holds pages, over an aligned address.
                let size = s.level.entry_size();
                let pa = addr + offset + (s.va - piece.start);
                if s.level != Pdb2 && s.end - s.va == size && pa.is_multiple_of(size) {
                    if s.va >= run_end {
                        frag = frag_at(s.va, pa, piece.end - s.va);
                        run_end = s.va + (PAGE_SIZE << frag);
                    }
                    mem.write64(s.at, self.format.encode_pte(s.level, pa, flags, frag))?;
                    return Ok(None);
                }
                match self.format.decode(s.level, mem.read64(s.at)?) {
                    PtEntry::Table { addr } => self.vram_addr(addr).map(Some),
                    PtEntry::Invalid => {
                        let t = alloc.alloc_table(mem)?;
                        mem.write64(s.at, self.format.encode_pde(s.level, t + self.vram_offset))?;
                        Ok(Some(t))
                    }
                    PtEntry::Page(_) => {
                        Err(err(self.va_base + s.va, 0, "already mapped by a huge page"))
                    }
                }
            });
            // Leave nothing half-mapped: the range was empty before this call.
            mapped.or_else(|e| self.clear(mem, alloc, range.start..piece.end).and(Err(e)))?;
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
        let range = self.rel(va, size)?;
        self.visit(mem, &mut None, range.clone(), &mut |s, _, e| {
            let reason = if let PtEntry::Page(page) = e {
                let run = s.level.entry_size().max(PAGE_SIZE << page.frag);
                let run_start = s.va & !(run - 1);
                if run_start >= range.start && run_start + run <= range.end {
                    return Ok(());
                }
                let what = if s.level == Ptb {
                    "fragment"
                } else {
                    "huge page"
                };
                let at = self.va_base + run_start;
                format!("would split the {what} {at:#x}+{run:#x}")
            } else {
                format!("{:#x} is not mapped", self.va_base + s.va)
            };
            Err(err(va, size, reason))
        })?;
        self.clear(mem, alloc, range)
    }

    /// Clears every page entry in `range` and frees the tables left empty.
    fn clear(
        &self,
        mem: &dyn VramAccess,
        alloc: &mut dyn TableAlloc,
        range: Range<u64>,
    ) -> Result<()> {
        self.visit(mem, &mut Some(alloc), range, &mut |s, _, e| match e {
            PtEntry::Page(_) => mem.write64(s.at, 0),
            _ => Ok(()),
        })
    }
}

/// Joins ranges that continue each other, so a fragment can span them.
fn merge(ranges: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = vec![];
    for &(a, l) in ranges.iter().filter(|r| r.1 > 0) {
        match out.last_mut() {
            Some(last) if last.0 + last.1 == a => last.1 += l,
            _ => out.push((a, l)),
        }
    }
    out
}
