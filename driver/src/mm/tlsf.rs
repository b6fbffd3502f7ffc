//! Two-level segregated fit allocator over an address range (physical VRAM pools and the
//! GPU virtual address space).
//!
//! Free blocks sit in one of 64 × 16 lists: the first level is the position of the size's
//! most significant bit, the second level splits that power-of-two range into 16 equal
//! steps. Two bitmaps say which lists are non-empty, so finding a block that is certain to
//! fit is a couple of `trailing_zeros`: O(1). Free blocks are always coalesced with free
//! neighbours, so no two free blocks are adjacent.
//!
//! Block metadata lives in a hash map keyed by block start (the managed memory may be VRAM
//! the CPU cannot cheaply touch, or not memory at all).

use std::collections::HashMap;

use crate::{Error, ErrorKind, Result};

const SL_BITS: u32 = 4;
const SL_COUNT: usize = 1 << SL_BITS;
const FL_COUNT: usize = 64;

#[derive(Clone, Copy, Debug)]
struct Block {
    size: u64,
    prev_phys: Option<u64>,
    free: bool,
    prev_free: Option<u64>,
    next_free: Option<u64>,
}

/// A TLSF allocator over `[base, base + size)`.
#[derive(Debug)]
pub struct Tlsf {
    name: String,
    base: u64,
    size: u64,
    granule: u64,
    free_bytes: u64,
    blocks: HashMap<u64, Block>,
    heads: Vec<[Option<u64>; SL_COUNT]>,
    fl_bitmap: u64,
    sl_bitmap: [u16; FL_COUNT],
}

fn bad(pool: String, reason: String) -> Error {
    Error::from(ErrorKind::BadAllocation { pool, reason })
}

/// First- and second-level list index of a block size.
fn mapping(size: u64) -> (usize, usize) {
    let fl = 63 - size.leading_zeros();
    let sl = if fl >= SL_BITS {
        size >> (fl - SL_BITS)
    } else {
        size << (SL_BITS - fl)
    };
    (fl as usize, (sl as usize) & (SL_COUNT - 1))
}

impl Tlsf {
    /// An allocator named `name` (used in errors, e.g. "0000:03:00.0 boot pool") over
    /// `[base, base + size)`. Every allocation is a multiple of `granule` (a power of two)
    /// and aligned to at least it; `base` and `size` are rounded inward to it.
    pub fn new(name: impl Into<String>, base: u64, size: u64, granule: u64) -> Result<Self> {
        let name = name.into();
        if !granule.is_power_of_two() {
            return Err(bad(
                name,
                format!("granule {granule:#x} is not a power of two"),
            ));
        }
        let start = base.div_ceil(granule) * granule;
        let end = base.saturating_add(size) / granule * granule;
        let mut t = Tlsf {
            name,
            base: start,
            size: end.saturating_sub(start),
            granule,
            free_bytes: 0,
            blocks: HashMap::new(),
            heads: vec![[None; SL_COUNT]; FL_COUNT],
            fl_bitmap: 0,
            sl_bitmap: [0; FL_COUNT],
        };
        if t.size > 0 {
            let b = Block {
                size: t.size,
                prev_phys: None,
                free: true,
                prev_free: None,
                next_free: None,
            };
            t.blocks.insert(start, b);
            t.link(start);
        }
        Ok(t)
    }

    /// The name given at creation.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// First managed address.
    pub fn base(&self) -> u64 {
        self.base
    }
    /// Managed bytes.
    pub fn size(&self) -> u64 {
        self.size
    }
    /// Whether `addr` lies in the managed range.
    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.base && addr - self.base < self.size
    }
    /// Bytes currently free.
    pub fn free_bytes(&self) -> u64 {
        self.free_bytes
    }

    /// The free blocks as `(start, size)`, in address order. For debugging and tests: after
    /// everything is freed this is the single initial block.
    pub fn free_blocks(&self) -> Vec<(u64, u64)> {
        let mut v: Vec<_> = self
            .blocks
            .iter()
            .filter(|(_, b)| b.free)
            .map(|(&s, b)| (s, b.size))
            .collect();
        v.sort_unstable();
        v
    }

    /// Size of the largest free block (for error messages; walks one list).
    pub fn largest_free(&self) -> u64 {
        if self.fl_bitmap == 0 {
            return 0;
        }
        let fl = 63 - self.fl_bitmap.leading_zeros() as usize;
        let sl = 15 - self.sl_bitmap[fl].leading_zeros() as usize;
        let mut best = 0;
        let mut cur = self.heads[fl][sl];
        while let Some(s) = cur {
            let b = &self.blocks[&s];
            best = best.max(b.size);
            cur = b.next_free;
        }
        best
    }

    fn link(&mut self, start: u64) {
        let size = self.blocks[&start].size;
        let (fl, sl) = mapping(size);
        let old = self.heads[fl][sl];
        if let Some(o) = old.and_then(|o| self.blocks.get_mut(&o)) {
            o.prev_free = Some(start);
        }
        if let Some(b) = self.blocks.get_mut(&start) {
            b.free = true;
            b.prev_free = None;
            b.next_free = old;
        }
        self.heads[fl][sl] = Some(start);
        self.fl_bitmap |= 1 << fl;
        self.sl_bitmap[fl] |= 1 << sl;
        self.free_bytes += size;
    }

    fn unlink(&mut self, start: u64) {
        let b = self.blocks[&start];
        let (fl, sl) = mapping(b.size);
        match b.prev_free {
            Some(p) => self
                .blocks
                .get_mut(&p)
                .into_iter()
                .for_each(|p| p.next_free = b.next_free),
            None => self.heads[fl][sl] = b.next_free,
        }
        if let Some(n) = b.next_free.and_then(|n| self.blocks.get_mut(&n)) {
            n.prev_free = b.prev_free;
        }
        if self.heads[fl][sl].is_none() {
            self.sl_bitmap[fl] &= !(1 << sl);
            if self.sl_bitmap[fl] == 0 {
                self.fl_bitmap &= !(1 << fl);
            }
        }
        if let Some(b) = self.blocks.get_mut(&start) {
            b.free = false;
            b.prev_free = None;
            b.next_free = None;
        }
        self.free_bytes -= b.size;
    }

    /// Cuts the (unlinked) block at `start` at `start + at`; the tail becomes a new unlinked
    /// block. Returns the tail's start.
    fn split(&mut self, start: u64, at: u64) -> u64 {
        let tail = start + at;
        let Some(b) = self.blocks.get_mut(&start) else {
            return tail;
        };
        let tail_size = b.size - at;
        b.size = at;
        let end = tail + tail_size;
        if let Some(n) = self.blocks.get_mut(&end) {
            n.prev_phys = Some(tail);
        }
        let t = Block {
            size: tail_size,
            prev_phys: Some(start),
            free: false,
            prev_free: None,
            next_free: None,
        };
        self.blocks.insert(tail, t);
        tail
    }

    /// Joins the block after `start` (both unlinked) into it.
    fn absorb_next(&mut self, start: u64) {
        let next = start + self.blocks[&start].size;
        let Some(n) = self.blocks.remove(&next) else {
            return;
        };
        if let Some(b) = self.blocks.get_mut(&start) {
            b.size += n.size;
        }
        if let Some(nn) = self.blocks.get_mut(&(next + n.size)) {
            nn.prev_phys = Some(start);
        }
    }

    fn exhausted(&self, size: u64, align: u64) -> Error {
        Error::from(ErrorKind::OutOfMemory {
            pool: self.name.clone(),
            size,
            align,
            free: self.free_bytes,
            largest: self.largest_free(),
        })
    }

    /// Allocates `size` bytes (rounded up to the granule) aligned to `align` (a power of
    /// two; at least the granule). Returns the start address.
    pub fn alloc(&mut self, size: u64, align: u64) -> Result<u64> {
        let align = align.max(self.granule);
        if size == 0 || !align.is_power_of_two() {
            let reason = format!("size {size:#x} with alignment {align:#x}");
            return Err(bad(self.name.clone(), reason));
        }
        let size = size
            .checked_next_multiple_of(self.granule)
            .ok_or_else(|| self.exhausted(size, align))?;
        // Any block in the list we pick must fit even after skipping to an aligned start,
        // so search for the padded size rounded up to the next list boundary.
        let need = size
            .checked_add(align - self.granule)
            .ok_or_else(|| self.exhausted(size, align))?;
        let (fl, _) = mapping(need);
        let step = 1u64 << fl.saturating_sub(SL_BITS as usize);
        let need = need
            .checked_next_multiple_of(step)
            .ok_or_else(|| self.exhausted(size, align))?;
        let (fl, sl) = mapping(need);

        let sl_map = self.sl_bitmap[fl] as u32 & (u32::MAX << sl);
        let (fl, sl) = if sl_map != 0 {
            (fl, sl_map.trailing_zeros() as usize)
        } else {
            let fl_map = if fl + 1 >= 64 {
                0
            } else {
                self.fl_bitmap & (u64::MAX << (fl + 1))
            };
            if fl_map == 0 {
                return Err(self.exhausted(size, align));
            }
            let fl = fl_map.trailing_zeros() as usize;
            (fl, self.sl_bitmap[fl].trailing_zeros() as usize)
        };
        let Some(mut start) = self.heads[fl][sl] else {
            return Err(self.exhausted(size, align));
        };
        self.unlink(start);

        let aligned = start.next_multiple_of(align);
        if aligned != start {
            let tail = self.split(start, aligned - start);
            self.link(start);
            start = tail;
        }
        if self.blocks[&start].size > size {
            let tail = self.split(start, size);
            self.link(tail);
        }
        Ok(start)
    }

    /// Frees the allocation that starts at `addr`.
    pub fn free(&mut self, addr: u64) -> Result<()> {
        match self.blocks.get(&addr) {
            Some(b) if !b.free => {}
            _ => {
                let reason = format!("free of {addr:#x}, which is not the start of an allocation");
                return Err(bad(self.name.clone(), reason));
            }
        }
        let mut start = addr;
        let next = addr + self.blocks[&addr].size;
        if self.blocks.get(&next).is_some_and(|n| n.free) {
            self.unlink(next);
            self.absorb_next(start);
        }
        if let Some(p) = self.blocks[&start]
            .prev_phys
            .filter(|p| self.blocks[p].free)
        {
            self.unlink(p);
            self.absorb_next(p);
            start = p;
        }
        self.link(start);
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn exhaustion_names_pool_and_size() {
        let mut t = Tlsf::new("test boot pool", 0, 1 << 20, 0x1000).unwrap();
        t.alloc(1 << 20, 0x1000).unwrap();
        let e = t.alloc(0x2000, 0x1000).unwrap_err().to_string();
        assert!(e.contains("test boot pool") && e.contains("0x2000"), "{e}");
    }

    #[test]
    fn double_free_is_an_error() {
        let mut t = Tlsf::new("p", 0x1000, 1 << 20, 0x1000).unwrap();
        let a = t.alloc(0x3000, 0x1000).unwrap();
        t.free(a).unwrap();
        assert!(t.free(a).is_err());
        assert!(t.free(a + 0x1000).is_err());
    }

    #[test]
    fn base_offsets_allocations() {
        let mut t = Tlsf::new("vf", 1 << 20, 31 << 20, 0x1000).unwrap();
        let a = t.alloc(0x1000, 0x1000).unwrap();
        assert_eq!(a, 1 << 20);
        let b = t.alloc(2 << 20, 2 << 20).unwrap();
        assert_eq!(b, 2 << 20);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Alloc(u64, u32),
        Free(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1u64..0x40000, 12u32..22).prop_map(|(s, a)| Op::Alloc(s, a)),
            any::<usize>().prop_map(Op::Free),
        ]
    }

    proptest! {
        #[test]
        fn random_alloc_free_never_overlaps_and_coalesces(ops in prop::collection::vec(op(), 1..200)) {
            let (base, size) = (0x10_0000u64, 0x80_0000u64);
            let mut t = Tlsf::new("prop", base, size, 0x1000).unwrap();
            let mut live: Vec<(u64, u64)> = vec![];
            for op in ops {
                match op {
                    Op::Alloc(s, a) => {
                        let align = 1u64 << a;
                        match t.alloc(s, align) {
                            Ok(p) => {
                                let sz = s.next_multiple_of(0x1000);
                                prop_assert_eq!(p % align, 0, "misaligned");
                                prop_assert!(p >= base && p + sz <= base + size, "outside the pool");
                                for &(q, qs) in &live {
                                    prop_assert!(p + sz <= q || q + qs <= p, "{p:#x}+{sz:#x} overlaps {q:#x}+{qs:#x}");
                                }
                                live.push((p, sz));
                            }
                            Err(Error { kind: ErrorKind::OutOfMemory { .. }, .. }) => {
                                // Good fit may refuse when a block would fit only after
                                // alignment, but never when a large enough free block is
                                // certain to fit.
                                let need = s.next_multiple_of(0x1000) + align;
                                prop_assert!(t.largest_free() < need + need / 16 + 0x1000);
                            }
                            Err(e) => prop_assert!(false, "{e}"),
                        }
                    }
                    Op::Free(i) if !live.is_empty() => {
                        let (p, _) = live.swap_remove(i % live.len());
                        t.free(p).unwrap();
                    }
                    Op::Free(_) => {}
                }
                let used: u64 = live.iter().map(|l| l.1).sum();
                prop_assert_eq!(t.free_bytes() + used, size);
            }
            for (p, _) in live.drain(..) {
                t.free(p).unwrap();
            }
            prop_assert_eq!(t.free_blocks(), vec![(base, size)]);
        }
    }
}
