//! Two-level segregated fit allocator over an address range (physical VRAM pools and the
//! GPU virtual address space).
//!
//! Free blocks sit in one of 64 × 16 lists: the first level is the position of the size's
//! most significant bit, the second level splits that power-of-two range into 16 equal
//! steps. The lists are ordered by size class, so the first non-empty list at or after the
//! class of the padded request holds a block that is certain to fit; each list hands out
//! its most recently freed block first. Free blocks are always coalesced with free
//! neighbours, so no two free blocks are adjacent.
//!
//! Block metadata lives in an ordered map keyed by block start (the managed memory may be
//! VRAM the CPU cannot cheaply touch, or not memory at all); the blocks tile the range, so a
//! block's physical predecessor is the previous key.

use std::collections::BTreeMap;

use super::*;

const SL_BITS: u32 = 4;

/// Index of the free list of a block size (at least 4 KiB): first level (the most
/// significant bit) times 16 plus the second level (the next four bits).
fn list_index(size: u64) -> usize {
    let fl = size.ilog2();
    (fl << SL_BITS | (size >> (fl - SL_BITS)) as u32 & 15) as usize
}

/// A TLSF allocator over an address range.
#[derive(Debug)]
pub struct Tlsf {
    name: String,
    range: Range<u64>,
    /// Every block by start address: `(size, free)`.
    blocks: BTreeMap<u64, (u64, bool)>,
    /// Starts of the free blocks of each size class, the next one to hand out last.
    lists: Vec<Vec<u64>>,
}

impl Tlsf {
    /// An allocator named `name` (used in errors, e.g. "0000:03:00.0 boot pool") over
    /// `range`. Every allocation is a multiple of the 4 KiB GPU page and aligned to at
    /// least it; the range is rounded inward to it (and is empty if it ends before it
    /// starts).
    pub fn new(name: impl Into<String>, range: Range<u64>) -> Self {
        let start = range.start.next_multiple_of(PAGE_SIZE);
        let end = (range.end / PAGE_SIZE * PAGE_SIZE).max(start);
        let mut t = Tlsf {
            name: name.into(),
            range: start..end,
            blocks: BTreeMap::new(),
            lists: vec![vec![]; 64 << SL_BITS],
        };
        if end > start {
            t.link(start, end - start);
        }
        t
    }

    /// The name given at creation.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The managed range.
    pub fn range(&self) -> Range<u64> {
        self.range.clone()
    }
    /// Bytes currently free.
    pub fn free_bytes(&self) -> u64 {
        self.free_blocks().iter().map(|b| b.1).sum()
    }

    /// The free blocks as `(start, size)`, in address order. For debugging and tests: after
    /// everything is freed this is the single initial block.
    pub fn free_blocks(&self) -> Vec<(u64, u64)> {
        let free = self.blocks.iter().filter(|(_, b)| b.1);
        free.map(|(&start, &(size, _))| (start, size)).collect()
    }

    fn link(&mut self, start: u64, size: u64) {
        self.blocks.insert(start, (size, true));
        self.lists[list_index(size)].push(start);
    }

    fn unlink(&mut self, start: u64, size: u64) {
        self.blocks.remove(&start);
        self.lists[list_index(size)].retain(|&s| s != start);
    }

    fn bad(&self, reason: String) -> Error {
        Error::from(ErrorKind::BadAllocation {
            pool: self.name.clone(),
            reason,
        })
    }

    /// Allocates `size` bytes (rounded up to 4 KiB) aligned to `align` (a power of two;
    /// at least 4 KiB). Returns the start address.
    pub fn alloc(&mut self, size: u64, align: u64) -> Result<u64> {
        let align = align.max(PAGE_SIZE);
        if size == 0 || !align.is_power_of_two() {
            return Err(self.bad(format!("size {size:#x} with alignment {align:#x}")));
        }
        let rounded = size.checked_next_multiple_of(PAGE_SIZE);
        // Any block in the list we pick must fit even after skipping to an aligned start,
        // so search from the padded size rounded up to the next list boundary.
        let need = rounded.and_then(|s| s.checked_add(align - PAGE_SIZE));
        let need = need.and_then(|n| n.checked_next_multiple_of(1 << (n.ilog2() - SL_BITS)));
        let found = need.and_then(|n| self.lists[list_index(n)..].iter_mut().find_map(Vec::pop));
        let (Some(size), Some(block)) = (rounded, found) else {
            return Err(Error::from(ErrorKind::OutOfMemory {
                pool: self.name.clone(),
                size: rounded.unwrap_or(size),
                align,
                free: self.free_bytes(),
                largest: self.free_blocks().iter().map(|b| b.1).max().unwrap_or(0),
            }));
        };
        let end = block + self.blocks.get(&block).map_or(0, |b| b.0);
        let start = block.next_multiple_of(align);
        // The block's parts before and after the allocation stay free.
        for (from, to) in [(block, start), (start + size, end)] {
            if to > from {
                self.link(from, to - from);
            }
        }
        self.blocks.insert(start, (size, false));
        Ok(start)
    }

    /// Frees the allocation that starts at `addr`.
    pub fn free(&mut self, addr: u64) -> Result<()> {
        let Some(&(mut size, false)) = self.blocks.get(&addr) else {
            let reason = format!("free of {addr:#x}, which is not the start of an allocation");
            return Err(self.bad(reason));
        };
        let mut start = addr;
        if let Some(&(next, true)) = self.blocks.get(&(addr + size)) {
            self.unlink(addr + size, next);
            size += next;
        }
        if let Some((&prev, &(prev_size, true))) = self.blocks.range(..addr).next_back() {
            self.unlink(prev, prev_size);
            (start, size) = (prev, prev_size + size);
        }
        self.blocks.remove(&addr);
        self.link(start, size);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn exhaustion_names_pool_and_size() {
        let mut t = Tlsf::new("test boot pool", 0..1 << 20);
        t.alloc(1 << 20, 0x1000).unwrap();
        let e = t.alloc(0x2000, 0x1000).unwrap_err().to_string();
        assert!(e.contains("test boot pool") && e.contains("0x2000"), "{e}");
    }

    #[test]
    fn double_free_is_an_error() {
        let mut t = Tlsf::new("p", 0x1000..0x10_1000);
        let a = t.alloc(0x3000, 0x1000).unwrap();
        t.free(a).unwrap();
        assert!(t.free(a).is_err());
        assert!(t.free(a + 0x1000).is_err());
    }

    #[test]
    fn base_offsets_allocations() {
        let mut t = Tlsf::new("vf", 1 << 20..32 << 20);
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
            let mut t = Tlsf::new("prop", base..base + size);
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
                                let largest = t.free_blocks().iter().map(|b| b.1).max().unwrap_or(0);
                                prop_assert!(largest < need + need / 16 + 0x1000);
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
