//! The memory the shaders see: GPU virtual addresses to bytes, behind a trait so the mock can
//! plug in its page-table walker.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A failed access: the address and what was attempted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// GPU virtual address of the first byte that could not be accessed.
    pub addr: u64,
    /// Whether the access was a write.
    pub write: bool,
    /// Why it failed (unmapped, protection, …), in the memory model's words.
    pub reason: String,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.write { "write" } else { "read" };
        write!(f, "{kind} of {:#x}: {}", self.addr, self.reason)
    }
}

/// A 32-bit integer atomic operation of a wave's lanes ([`Memory::atomic32_lanes`]): the
/// value at the lane's address becomes `op(old, x)` with the lane's data `x`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Atomic32 {
    /// Wrapping add.
    Add,
    /// Wrapping subtract (`old - x`).
    Sub,
    /// Bitwise and.
    And,
    /// Bitwise or.
    Or,
    /// Bitwise exclusive or.
    Xor,
    /// Swap (the new value is `x`).
    Swap,
    /// Unsigned minimum.
    MinU,
    /// Unsigned maximum.
    MaxU,
    /// Signed minimum.
    MinI,
    /// Signed maximum.
    MaxI,
}

impl Atomic32 {
    /// The new value of a value `old` that a lane with data `x` replaces.
    #[inline(always)]
    pub fn apply(self, old: u32, x: u32) -> u32 {
        match self {
            Atomic32::Add => old.wrapping_add(x),
            Atomic32::Sub => old.wrapping_sub(x),
            Atomic32::And => old & x,
            Atomic32::Or => old | x,
            Atomic32::Xor => old ^ x,
            Atomic32::Swap => x,
            Atomic32::MinU => old.min(x),
            Atomic32::MaxU => old.max(x),
            Atomic32::MinI => (old as i32).min(x as i32) as u32,
            Atomic32::MaxI => (old as i32).max(x as i32) as u32,
        }
    }

    /// The operand `x` with `op(old, x) == old` for every `old`; none for a swap.
    pub(crate) fn identity(self) -> Option<u32> {
        match self {
            Atomic32::Add | Atomic32::Sub | Atomic32::Or | Atomic32::Xor | Atomic32::MaxU => {
                Some(0)
            }
            Atomic32::And | Atomic32::MinU => Some(u32::MAX),
            Atomic32::MinI => Some(i32::MAX as u32),
            Atomic32::MaxI => Some(i32::MIN as u32),
            Atomic32::Swap => None,
        }
    }

    /// The one operand that does what `a` and then `b` do: `op(op(old, a), b)` is
    /// `op(old, combine(a, b))` for every `old` (`old - a - b` is `old - (a + b)`; every other
    /// operation is its own combination, a swap keeping the last value).
    #[inline(always)]
    pub(crate) fn combine(self, a: u32, b: u32) -> u32 {
        match self {
            Atomic32::Sub => a.wrapping_add(b),
            _ => self.apply(a, b),
        }
    }
}

/// The lowest and highest of `addrs` (`(u64::MAX, 0)` for none). Lanes' addresses almost
/// always share their upper dword: the bounds of the lower dwords then decide, in 32-bit
/// operations that vectorise (x86-64 has no unsigned 64-bit vector minimum before AVX-512).
#[inline(always)]
pub(crate) fn address_bounds(addrs: &[u64]) -> (u64, u64) {
    let Some(&a0) = addrs.first() else {
        return (u64::MAX, 0);
    };
    let hi0 = (a0 >> 32) as u32;
    let (mut other, mut lo_min, mut lo_max) = (0u32, u32::MAX, 0u32);
    for &a in addrs {
        other |= (a >> 32) as u32 ^ hi0;
        lo_min = lo_min.min(a as u32);
        lo_max = lo_max.max(a as u32);
    }
    if other == 0 {
        let hi = u64::from(hi0) << 32;
        return (hi | u64::from(lo_min), hi | u64::from(lo_max));
    }
    let (mut first, mut last) = (u64::MAX, 0u64);
    for &a in addrs {
        first = first.min(a);
        last = last.max(a);
    }
    (first, last)
}

/// GPU virtual memory as the shader sees it.
pub trait Memory {
    /// Fills `buf` from `addr`.
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), Fault>;
    /// Writes `data` at `addr`.
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), Fault>;
    /// The `len` bytes at `addr` as one slice, when this memory keeps them in one piece of
    /// host memory: a coalesced load or store then moves the bytes between that slice and
    /// the registers directly instead of through a staging buffer and [`Memory::read`] /
    /// [`Memory::write`]. `None` (the provided version, and for any range not in one piece,
    /// unmapped ranges among them) sends the access through `read` and `write`, which also
    /// report faults.
    fn contiguous(&mut self, _addr: u64, _len: usize) -> Option<&mut [u8]> {
        None
    }

    /// The `n` bytes at `addrs[l]` of every lane `l` set in `exec` into `out[l * n..]`, as
    /// one call: a gather whose lanes are not consecutive (a broadcast, a column) then costs
    /// the memory one translation instead of one per lane. All or nothing: returns false,
    /// having written nothing to `out` that a caller may use and recorded nothing, when
    /// this memory has no such gather (the provided version) or any lane's read could fail;
    /// the caller then reads lane by lane, which also reports the fault of the lane it
    /// belongs to.
    fn read_lanes(&mut self, _addrs: &[u64], _exec: u64, _n: usize, _out: &mut [u8]) -> bool {
        false
    }

    /// Whether every `read` and `write` of this memory either completes or fails having
    /// changed nothing and recorded nothing. A hot form may then move a whole wave's bytes
    /// with one `read` or `write` through a staging buffer when [`Memory::contiguous`] has
    /// no slice, and leave a failed access to the general path, which reports the fault of
    /// the lane it belongs to. False by default (a memory that may write part of a range
    /// before faulting, or keeps the first fault for its own report, must say false).
    fn all_or_nothing(&self) -> bool {
        false
    }

    /// Whether an access that failed may be made again, the same, with nothing more to
    /// show for it than for one try: a failed `read` or `write` may have recorded its fault
    /// or written part of its bytes, but making it a second time writes those same bytes
    /// and records nothing the first try did not (a memory that keeps only its first fault,
    /// whatever the access). A hot form may then move a whole wave's bytes with one `read`
    /// or `write` through a staging buffer — the very access the general path makes first
    /// for that wave — and leave a failure to the general path, which makes it again and
    /// then goes lane by lane. [`Memory::all_or_nothing`] by default (such a memory is
    /// repeatable); only the hot forms whose one access is the general path's first use
    /// this, the others still ask for all or nothing.
    fn repeatable(&self) -> bool {
        self.all_or_nothing()
    }

    /// Replaces the `len`-byte (4 or 8) little-endian value at `addr` by `f(old)` as one
    /// atomic step and returns the old value. The provided version reads then writes, which
    /// is atomic for a memory that one dispatch thread uses; the adapter over a
    /// [`SharedMemory`] overrides it.
    fn atomic_rmw(
        &mut self,
        addr: u64,
        len: usize,
        f: &mut dyn FnMut(u64) -> u64,
    ) -> Result<u64, Fault> {
        let mut b = [0u8; 8];
        let len = len.min(8);
        self.read(addr, &mut b[..len])?;
        let old = u64::from_le_bytes(b);
        self.write(addr, &f(old).to_le_bytes()[..len])?;
        Ok(old)
    }

    /// [`Memory::atomic_rmw`] of several values in order, as one call: the `len`-byte value
    /// at `addrs[k]` becomes `f(k, old)` and `olds[k]` receives `old`, for `k` from 0 up.
    /// Stops at the first access that faults and returns its index with the fault; the
    /// values before it have been replaced. The provided version calls
    /// [`Memory::atomic_rmw`] once per value; a memory can do the run with less work per
    /// value (one lookup of the region, no indirection per byte).
    fn atomic_rmw_batch(
        &mut self,
        addrs: &[u64],
        len: usize,
        f: &mut dyn FnMut(usize, u64) -> u64,
        olds: &mut [u64],
    ) -> Result<(), (usize, Fault)> {
        for (k, (&a, o)) in addrs.iter().zip(olds.iter_mut()).enumerate() {
            *o = self
                .atomic_rmw(a, len, &mut |old| f(k, old))
                .map_err(|e| (k, e))?;
        }
        Ok(())
    }

    /// A wave's 32-bit atomics `op` as one call: lane by lane in order, the 4-byte value at
    /// `addrs[l]` becomes `op(old, xs[l])` and `olds[l]` receives `old`, as
    /// [`Memory::atomic_rmw_batch`] would leave them. Returns false, having done nothing,
    /// when this memory has no such batch (the provided version) or any lane's value could
    /// fault or is not one atomic step here; the caller then takes the value-by-value path,
    /// which reports the fault of the lane it belongs to.
    fn atomic32_lanes(
        &mut self,
        _op: Atomic32,
        _addrs: &[u64],
        _xs: &[u32],
        _olds: &mut [u32],
    ) -> bool {
        false
    }

    /// Posts a wave's 32-bit atomics without return (`op` of `xs[l]` on the 4-byte value at
    /// `addrs[l]`, in lane order): the memory may hold them and perform them later, as the
    /// hardware's memory performs them after the wave has gone on, but it performs them
    /// before this memory's next access to any of their bytes, at [`Memory::flush_posted`],
    /// and within a bounded number of reads. Returns false, having held nothing, when this
    /// memory holds no atomics (the provided version) or not these (the caller then performs
    /// them, which also reports a lane's fault).
    fn post_atomic32(&mut self, _op: Atomic32, _addrs: &[u64], _xs: &[u32]) -> bool {
        false
    }

    /// Performs every atomic [`Memory::post_atomic32`] holds: a wave that waits for its
    /// memory operations (`s_waitcnt` and its kin) has them performed, as hardware has once
    /// the counter drops.
    fn flush_posted(&mut self) {}
}

/// GPU virtual memory that the threads of a parallel dispatch
/// ([`crate::dispatch_hw_parallel`]) use at once. Plain reads and writes of different
/// workgroups may race as they do on hardware (a racing access sees either value, byte by
/// byte); [`SharedMemory::atomic_rmw`] must be atomic with respect to every other access.
pub trait SharedMemory: Sync {
    /// Fills `buf` from `addr`.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault>;
    /// Writes `data` at `addr`.
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Fault>;
    /// As [`Memory::atomic_rmw`], atomically.
    fn atomic_rmw(
        &self,
        addr: u64,
        len: usize,
        f: &mut dyn FnMut(u64) -> u64,
    ) -> Result<u64, Fault>;
    /// As [`Memory::all_or_nothing`]; false by default.
    fn all_or_nothing(&self) -> bool {
        false
    }
    /// As [`Memory::atomic32_lanes`], each value atomically; false (nothing done) by default.
    fn atomic32_lanes(
        &self,
        _op: Atomic32,
        _addrs: &[u64],
        _xs: &[u32],
        _olds: &mut [u32],
    ) -> bool {
        false
    }

    /// Whether `[addr, addr + len)` lies in one piece of this memory where 4-byte aligned
    /// [`SharedMemory::atomic32_lanes`] and [`SharedMemory::atomic_rmw`] cannot fault: a
    /// thread may then hold its atomics without return there and perform them later (see
    /// [`Memory::post_atomic32`]). False by default (no atomics are held).
    fn covers(&self, _addr: u64, _len: usize) -> bool {
        false
    }

    /// The region that holds `addr`, when this memory keeps it as atomic 64-bit words that
    /// plain accesses may load and store directly (relaxed, whole words; part of a word only
    /// by a compare-and-swap that keeps the word's other bytes), and the region stays this
    /// memory's, in place and at its size, as long as `self` is borrowed: a thread's
    /// [`Memory`] view looks a region up once and keeps it for the dispatch. `None` by
    /// default (every access goes through [`SharedMemory::read`] and
    /// [`SharedMemory::write`]).
    fn region(&self, _addr: u64) -> Option<SharedRegion<'_>> {
        None
    }
}

/// A region of a [`SharedMemory`] as the atomic words that hold it
/// ([`SharedMemory::region`]): byte `i` of the region is byte `i % 8` of `words[i / 8]`,
/// little-endian.
#[derive(Clone, Copy, Debug)]
pub struct SharedRegion<'a> {
    /// Address of the region's first byte.
    pub base: u64,
    /// Its size in bytes; `words` holds at least `size.div_ceil(8)` words.
    pub size: usize,
    /// The words.
    pub words: &'a [AtomicU64],
}

impl SharedRegion<'_> {
    /// The default entry of a cache of regions: size 0, which holds no address.
    const NONE: SharedRegion<'static> = SharedRegion {
        base: 0,
        size: 0,
        words: &[],
    };
}

/// Fills `buf` from `words`, one relaxed load per word, for as many whole words as both
/// hold (a wave's coalesced access: four words a time, as atomic loads do not vectorise;
/// unrolled, a word costs about 2.5 host instructions instead of 4).
#[inline(always)]
fn load_words(words: &[AtomicU64], buf: &mut [u8]) {
    let (chunks, _) = buf.as_chunks_mut::<8>();
    let (c4, c1) = chunks.as_chunks_mut::<4>();
    let (s4, _) = words.as_chunks::<4>();
    for (c, w) in c4.iter_mut().zip(s4) {
        for k in 0..4 {
            c[k] = w[k].load(Relaxed).to_le_bytes();
        }
    }
    let done = 4 * c4.len();
    for (c, w) in c1.iter_mut().zip(words.get(done..).unwrap_or_default()) {
        *c = w.load(Relaxed).to_le_bytes();
    }
}

/// Fills `buf` (whole dwords) from `words`, starting at byte `off` (0 or 4) of the first:
/// the upper half of the first word when `off` is 4, the whole words, and the lower half of
/// the last word when `buf` ends in its middle.
#[inline(always)]
fn load_dwords(words: &[AtomicU64], off: usize, buf: &mut [u8]) {
    let (mut ws, mut at) = (words, 0);
    if off == 4
        && let (Some((w, more)), Some(head)) = (ws.split_first(), buf.first_chunk_mut::<4>())
    {
        *head = ((w.load(Relaxed) >> 32) as u32).to_le_bytes();
        (ws, at) = (more, 4);
    }
    let whole = (buf.len() - at) / 8;
    let (body, tail) = buf[at..].split_at_mut(8 * whole);
    load_words(ws, body);
    if let (Some(w), Some(t)) = (ws.get(whole), tail.first_chunk_mut::<4>()) {
        *t = (w.load(Relaxed) as u32).to_le_bytes();
    }
}

/// Stores `data`'s whole words into `words`, one relaxed store per word, as [`load_words`].
#[inline(always)]
fn store_words(words: &[AtomicU64], data: &[u8]) {
    let (chunks, _) = data.as_chunks::<8>();
    let (c4, c1) = chunks.as_chunks::<4>();
    let (d4, _) = words.as_chunks::<4>();
    for (c, w) in c4.iter().zip(d4) {
        for k in 0..4 {
            w[k].store(u64::from_le_bytes(c[k]), Relaxed);
        }
    }
    let done = 4 * c4.len();
    for (c, w) in c1.iter().zip(words.get(done..).unwrap_or_default()) {
        w.store(u64::from_le_bytes(*c), Relaxed);
    }
}

/// One thread's view of a [`SharedMemory`] as a [`Memory`]. It holds the thread's posted
/// atomics ([`Memory::post_atomic32`]) in a window of 512 bytes until they must be performed,
/// and moves whole dwords of the regions the memory keeps as words ([`SharedMemory::region`])
/// itself, without a call of the memory per access.
pub(crate) struct SharedAccess<'a> {
    mem: &'a dyn SharedMemory,
    posted: Posted,
    /// Regions reads and writes found lately ([`SharedMemory::region`]), checked before the
    /// memory is asked again: a kernel's accesses go round a few buffers (its arguments,
    /// what it reads, what it writes), so one kept region would be missed on most accesses.
    recent: [SharedRegion<'a>; LAST],
    /// The entry of `recent` the next region found replaces.
    oldest: usize,
    /// The memory's [`SharedMemory::all_or_nothing`], asked once.
    all_or_nothing: bool,
}

/// Atomics without return that a [`SharedAccess`] holds: one operand for each 4-byte value of
/// the window `[base, base + 512)`, such that `op` applied once with it does what every posted
/// lane's `op` on that value does in turn. A value no lane hit holds `op`'s identity.
struct Posted {
    /// Whether any atomic is held.
    any: bool,
    op: Atomic32,
    base: u64,
    vals: [u32; POSTED_VALUES],
    /// The bytes `[lo, hi)` the held lanes hit, which [`SharedMemory::covers`] vouched for.
    lo: u64,
    hi: u64,
    /// Reads through the access since the window took its first atomic.
    reads: u32,
}

/// Values of a [`Posted`] window: 512 bytes from a 256-byte boundary take any wave whose
/// lanes span at most 256 bytes (a histogram's 64 bins).
const POSTED_VALUES: usize = 128;

/// Reads (atomics count as reads) after which a thread performs its posted atomics though
/// nothing asked for them: a wave of another thread that waits in a loop for one of them
/// (reading what it waits for) then sees it while this thread's waves go on reading or
/// spinning on a lock.
const READS_BEFORE_FLUSH: u32 = 1024;

impl<'a> SharedAccess<'a> {
    pub(crate) fn new(mem: &'a dyn SharedMemory) -> SharedAccess<'a> {
        SharedAccess {
            mem,
            posted: Posted {
                any: false,
                op: Atomic32::Add,
                base: 0,
                vals: [0; POSTED_VALUES],
                lo: 0,
                hi: 0,
                reads: 0,
            },
            recent: [SharedRegion::NONE; LAST],
            oldest: 0,
            all_or_nothing: mem.all_or_nothing(),
        }
    }

    /// The words that hold `[addr, addr + len)`, from the one holding `addr`, and `addr`'s
    /// byte in it, when the range lies inside one region the memory keeps as words.
    #[inline(always)]
    fn words(&mut self, addr: u64, len: usize) -> Option<(&'a [AtomicU64], usize)> {
        let r = self.region(addr)?;
        let off = usize::try_from(addr.wrapping_sub(r.base)).ok()?;
        if off.checked_add(len)? > r.size {
            return None;
        }
        Some((r.words.get(off / 8..)?, off % 8))
    }

    /// The region that holds `addr`: a recent one, else the memory's, which then replaces
    /// the oldest recent one.
    #[inline(always)]
    fn region(&mut self, addr: u64) -> Option<SharedRegion<'a>> {
        match self
            .recent
            .iter()
            .find(|r| addr.wrapping_sub(r.base) < r.size as u64)
        {
            Some(r) => Some(*r),
            None => self.region_miss(addr),
        }
    }

    /// [`SharedAccess::region`] when no recent region holds `addr`.
    #[inline(never)]
    fn region_miss(&mut self, addr: u64) -> Option<SharedRegion<'a>> {
        let r = self.mem.region(addr)?;
        if addr.wrapping_sub(r.base) < r.size as u64 {
            self.recent[self.oldest] = r;
            self.oldest = (self.oldest + 1) % LAST;
        }
        Some(r)
    }

    /// Performs the held atomics if any lies in `[addr, addr + len)`: the thread's accesses
    /// see its own atomics, in the order it made them.
    #[inline(always)]
    fn before(&mut self, addr: u64, len: usize) {
        let p = &self.posted;
        if p.any && addr < p.hi && addr.saturating_add(len as u64) > p.lo {
            self.flush_posted();
        }
    }

    /// [`SharedAccess::before`] or, for an access that reads, [`SharedAccess::before_read`],
    /// when atomics are held; out of line, so that an access without them saves no
    /// registers for the call.
    #[cold]
    #[inline(never)]
    fn before_posted(&mut self, addr: u64, len: usize, read: bool) {
        if read {
            self.before_read(addr, len);
        } else {
            self.before(addr, len);
        }
    }

    /// [`SharedAccess::before`] for an access that reads (a read or an atomic), which also
    /// counts towards [`READS_BEFORE_FLUSH`].
    #[inline(always)]
    fn before_read(&mut self, addr: u64, len: usize) {
        if self.posted.any {
            self.posted.reads += 1;
            if self.posted.reads >= READS_BEFORE_FLUSH {
                self.flush_posted();
            }
            self.before(addr, len);
        }
    }
}

impl Drop for SharedAccess<'_> {
    fn drop(&mut self) {
        self.flush_posted();
    }
}

impl Memory for SharedAccess<'_> {
    /// Whole dwords at a dword boundary inside a region the memory keeps as words
    /// ([`SharedMemory::region`], looked up in the recent ones first) are loaded here, the
    /// rest by the memory's `read`.
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        if self.posted.any {
            self.before_posted(addr, buf.len(), true);
        }
        if buf.len().is_multiple_of(4)
            && let Some((words, off)) = self.words(addr, buf.len())
            && off.is_multiple_of(4)
        {
            load_dwords(words, off, buf);
            return Ok(());
        }
        self.mem.read(addr, buf)
    }
    /// Whole words at a word boundary as [`SharedAccess::read`]; the rest by the memory's
    /// `write`, which merges parts of words.
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), Fault> {
        if self.posted.any {
            self.before_posted(addr, data.len(), false);
        }
        if data.len().is_multiple_of(8)
            && let Some((words, 0)) = self.words(addr, data.len())
        {
            store_words(words, data);
            return Ok(());
        }
        self.mem.write(addr, data)
    }
    fn atomic_rmw(
        &mut self,
        addr: u64,
        len: usize,
        f: &mut dyn FnMut(u64) -> u64,
    ) -> Result<u64, Fault> {
        self.before_read(addr, len);
        self.mem.atomic_rmw(addr, len, f)
    }
    fn all_or_nothing(&self) -> bool {
        self.all_or_nothing
    }
    fn atomic32_lanes(
        &mut self,
        op: Atomic32,
        addrs: &[u64],
        xs: &[u32],
        olds: &mut [u32],
    ) -> bool {
        if self.posted.any {
            let (first, last) = address_bounds(addrs);
            self.before_read(
                first,
                (last.saturating_sub(first) as usize).saturating_add(4),
            );
        }
        self.mem.atomic32_lanes(op, addrs, xs, olds)
    }

    /// Held when the operation has an identity (not a swap), every lane's value is 4-byte
    /// aligned, the lanes span at most 256 bytes and fit the window (else the window held
    /// so far is performed first and a new one starts at the 256-byte boundary at or below
    /// the lowest lane), and the memory [`SharedMemory::covers`] them.
    fn post_atomic32(&mut self, op: Atomic32, addrs: &[u64], xs: &[u32]) -> bool {
        post_lanes(self, op, addrs, xs)
    }

    fn flush_posted(&mut self) {
        let p = &mut self.posted;
        if !p.any {
            return;
        }
        (p.any, p.reads) = (false, 0);
        let (op, base) = (p.op, p.base);
        let identity = op.identity().unwrap_or_default();
        let mut addrs = [0u64; POSTED_VALUES];
        let mut xs = [0u32; POSTED_VALUES];
        let mut n = 0;
        let (k0, k1) = ((p.lo - base) / 4, (p.hi - base) / 4);
        for k in k0 as usize..(k1 as usize).min(POSTED_VALUES) {
            // A value left at the identity changes nothing.
            if p.vals[k] != identity {
                (addrs[n], xs[n]) = (base + 4 * k as u64, p.vals[k]);
                n += 1;
            }
        }
        let mut olds = [0u32; 64];
        for (a, x) in addrs[..n].chunks(64).zip(xs[..n].chunks(64)) {
            if !self.mem.atomic32_lanes(op, a, x, &mut olds[..a.len()]) {
                for (&a, &x) in a.iter().zip(x) {
                    // `covers` vouched for every value, so none faults.
                    let _ = self
                        .mem
                        .atomic_rmw(a, 4, &mut |o| u64::from(op.apply(o as u32, x)));
                }
            }
        }
    }
}

/// [`SharedAccess`]'s [`Memory::post_atomic32`], built for AVX2 too (the lanes' bounds and
/// offsets take unsigned 32-bit vector minimums, which the baseline x86-64 lacks).
#[cfg_attr(not(test), multiversion::multiversion(targets("x86_64+avx2+fma")))]
fn post_lanes(access: &mut SharedAccess<'_>, op: Atomic32, addrs: &[u64], xs: &[u32]) -> bool {
    const WINDOW: u64 = 4 * POSTED_VALUES as u64;
    let Some(identity) = op.identity() else {
        return false;
    };
    let n = addrs.len();
    if n == 0 || n > 64 || xs.len() != n {
        return false;
    }
    let (first, last) = address_bounds(addrs);
    if last - first > WINDOW / 2 - 4 || last > u64::MAX - WINDOW {
        return false;
    }
    let p = &access.posted;
    if p.any && (p.op != op || first < p.base || last + 4 > p.base + WINDOW) {
        access.flush_posted();
    }
    let p = &mut access.posted;
    if !p.any {
        // A new window (`reads` is 0 while nothing is held).
        (p.op, p.base, p.lo, p.hi) = (op, first & !255, first, first);
        p.vals = [identity; POSTED_VALUES];
    }
    // Every lane lies in the window, so its offset is below 512.
    let mut offs = [0u32; 64];
    let mut bits = 0;
    for (o, &a) in offs.iter_mut().zip(addrs) {
        *o = (a - p.base) as u32;
        bits |= *o;
    }
    if bits % 4 != 0 {
        return false;
    }
    let (lo, hi) = (p.lo.min(first), p.hi.max(last + 4));
    if (lo, hi) != (p.lo, p.hi) {
        if !access.mem.covers(lo, (hi - lo) as usize) {
            return false;
        }
        (p.lo, p.hi) = (lo, hi);
    }
    // One loop per operation, each with its combination inlined.
    macro_rules! by_op {
        ($($op:ident),*) => {
            match op {
                $(Atomic32::$op => {
                    for (&o, &x) in offs[..n].iter().zip(xs) {
                        let v = &mut p.vals[(o / 4) as usize % POSTED_VALUES];
                        *v = Atomic32::$op.combine(*v, x);
                    }
                })*
                Atomic32::Swap => return false,
            }
        };
    }
    by_op!(Add, Sub, And, Or, Xor, MinU, MaxU, MinI, MaxI);
    p.any = true;
    true
}

/// How many recently used regions [`HostMemory`] and [`SharedAccess`] check before searching
/// them all.
const LAST: usize = 4;

/// A region of [`HostMemory`] an access hit lately: its address, size and index. The
/// default entry (size 0) matches no address.
#[derive(Clone, Copy, Debug, Default)]
struct Recent {
    base: u64,
    size: u64,
    index: usize,
}

/// A simple memory of separately allocated regions, for tests and tools: every address outside
/// a region faults.
#[derive(Default, Debug)]
pub struct HostMemory {
    regions: Vec<(u64, Vec<u8>)>,
    next: u64,
    /// Regions accesses hit lately (a kernel's accesses go round a few buffers: its
    /// arguments, what it reads, what it writes), checked before a search of all regions.
    last: [Recent; LAST],
    /// The entry of `last` the next miss replaces.
    oldest: usize,
}

impl HostMemory {
    /// An empty memory whose first allocation starts at 4 GiB (so 32-bit truncation of an
    /// address faults instead of silently working).
    pub fn new() -> HostMemory {
        HostMemory {
            regions: Vec::new(),
            next: 1 << 32,
            last: [Recent::default(); LAST],
            oldest: 0,
        }
    }

    /// Allocates `size` zeroed bytes aligned to 256 bytes, with an unmapped guard gap after
    /// them, and returns their address.
    pub fn alloc(&mut self, size: usize) -> u64 {
        let addr = self.next;
        self.regions.push((addr, vec![0; size]));
        self.next = (addr + size as u64 + 4096 + 255) & !255;
        addr
    }

    /// Allocates and fills a region with `data`.
    pub fn alloc_bytes(&mut self, data: &[u8]) -> u64 {
        let a = self.alloc(data.len());
        if let Some(r) = self.regions.last_mut() {
            r.1.copy_from_slice(data);
        }
        a
    }

    /// The `len` bytes at `addr`, when they lie inside one region.
    #[inline]
    fn find(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        let i = match self
            .last
            .iter()
            .find(|h| addr.wrapping_sub(h.base) < h.size)
        {
            Some(h) => h.index,
            None => self.miss(addr)?,
        };
        let (base, bytes) = self.regions.get_mut(i)?;
        let off = usize::try_from(addr - *base).ok()?;
        bytes.get_mut(off..off.checked_add(len)?)
    }

    /// The last region starting at or below `addr`, when no recent one holds it; when it
    /// holds `addr`, it replaces the oldest recent one. (A region that ends at `addr` is
    /// returned but not kept: an empty access there is inside it, as before the recent
    /// regions, and any other faults.)
    #[inline(never)]
    fn miss(&mut self, addr: u64) -> Option<usize> {
        let i = self
            .regions
            .partition_point(|r| r.0 <= addr)
            .checked_sub(1)?;
        let (base, bytes) = &self.regions[i];
        let size = bytes.len() as u64;
        if addr - base < size {
            self.last[self.oldest] = Recent {
                base: *base,
                size,
                index: i,
            };
            self.oldest = (self.oldest + 1) % LAST;
        }
        Some(i)
    }

    /// Places `data` at a fixed address (for loading code object segments), failing if it
    /// overlaps a region already present.
    pub fn map(&mut self, addr: u64, data: &[u8]) -> Result<(), Fault> {
        let end = addr.checked_add(data.len() as u64).ok_or(Fault {
            addr,
            write: true,
            reason: "region wraps around the address space".into(),
        })?;
        let at = self.regions.partition_point(|r| r.0 < addr);
        let overlaps_prev = at > 0 && {
            let (b, v) = &self.regions[at - 1];
            b + v.len() as u64 > addr
        };
        let overlaps_next = self.regions.get(at).is_some_and(|r| r.0 < end);
        if overlaps_prev || overlaps_next {
            return Err(Fault {
                addr,
                write: true,
                reason: "overlaps an existing region".into(),
            });
        }
        self.regions.insert(at, (addr, data.to_vec()));
        // The regions after `at` moved up one index.
        self.last = [Recent::default(); LAST];
        if end > self.next {
            self.next = (end + 4096 + 255) & !255;
        }
        Ok(())
    }

    /// Copies bytes out (for checking results).
    pub fn bytes(&mut self, addr: u64, len: usize) -> Option<Vec<u8>> {
        self.find(addr, len).map(|s| s.to_vec())
    }
}

impl Memory for HostMemory {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        match self.find(addr, buf.len()) {
            Some(s) => {
                buf.copy_from_slice(s);
                Ok(())
            }
            None => Err(Fault {
                addr,
                write: false,
                reason: "unmapped".into(),
            }),
        }
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), Fault> {
        match self.find(addr, data.len()) {
            Some(s) => {
                s.copy_from_slice(data);
                Ok(())
            }
            None => Err(Fault {
                addr,
                write: true,
                reason: "unmapped".into(),
            }),
        }
    }

    /// Any range inside one region.
    fn contiguous(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        self.find(addr, len)
    }

    /// As the provided version (read, then write), with one region lookup.
    fn atomic_rmw(
        &mut self,
        addr: u64,
        len: usize,
        f: &mut dyn FnMut(u64) -> u64,
    ) -> Result<u64, Fault> {
        let len = len.min(8);
        match self.find(addr, len) {
            Some(s) => {
                let mut b = [0u8; 8];
                b[..len].copy_from_slice(s);
                let old = u64::from_le_bytes(b);
                s.copy_from_slice(&f(old).to_le_bytes()[..len]);
                Ok(old)
            }
            None => Err(Fault {
                addr,
                write: false,
                reason: "unmapped".into(),
            }),
        }
    }

    /// As the provided version, with 4- and 8-byte values read and written as fixed-size
    /// arrays (no byte-length copies) and the region found once per value from the last hit.
    fn atomic_rmw_batch(
        &mut self,
        addrs: &[u64],
        len: usize,
        f: &mut dyn FnMut(usize, u64) -> u64,
        olds: &mut [u64],
    ) -> Result<(), (usize, Fault)> {
        let unmapped = |addr| Fault {
            addr,
            write: false,
            reason: "unmapped".into(),
        };
        for (k, (&a, o)) in addrs.iter().zip(olds.iter_mut()).enumerate() {
            let s = self.find(a, len).ok_or_else(|| (k, unmapped(a)))?;
            *o = match len {
                4 => {
                    let Some(v) = s.first_chunk_mut::<4>() else {
                        return Err((k, unmapped(a)));
                    };
                    let old = u32::from_le_bytes(*v) as u64;
                    *v = (f(k, old) as u32).to_le_bytes();
                    old
                }
                8 => {
                    let Some(v) = s.first_chunk_mut::<8>() else {
                        return Err((k, unmapped(a)));
                    };
                    let old = u64::from_le_bytes(*v);
                    *v = f(k, old).to_le_bytes();
                    old
                }
                _ => self
                    .atomic_rmw(a, len, &mut |old| f(k, old))
                    .map_err(|e| (k, e))?,
            };
        }
        Ok(())
    }
}

/// A [`SharedMemory`] of separately allocated regions, the multi-threaded sibling of
/// [`HostMemory`] (same allocation rules: addresses from 4 GiB, 256-byte alignment, an
/// unmapped gap after each region). Memory is held in atomic 64-bit words, so concurrent
/// accesses are well defined without `unsafe`; an atomic operation on a 4- or 8-byte value
/// is a compare-and-swap loop on the word that holds it (aligned values never straddle two).
#[derive(Default, Debug)]
pub struct SharedHostMemory {
    regions: Vec<(u64, usize, Vec<AtomicU64>)>,
    next: u64,
}

impl SharedHostMemory {
    /// An empty memory whose first allocation starts at 4 GiB.
    pub fn new() -> SharedHostMemory {
        SharedHostMemory {
            regions: Vec::new(),
            next: 1 << 32,
        }
    }

    /// Allocates `size` zeroed bytes (256-byte aligned) and returns their address.
    pub fn alloc(&mut self, size: usize) -> u64 {
        let addr = self.next;
        let words = (0..size.div_ceil(8)).map(|_| AtomicU64::new(0)).collect();
        self.regions.push((addr, size, words));
        self.next = (addr + size as u64 + 4096 + 255) & !255;
        addr
    }

    /// Allocates and fills a region with `data`.
    pub fn alloc_bytes(&mut self, data: &[u8]) -> u64 {
        let a = self.alloc(data.len());
        // The region was just allocated, so this cannot fault.
        let _ = SharedMemory::write(self, a, data);
        a
    }

    /// Copies bytes out (for checking results).
    pub fn bytes(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
        let mut v = vec![0; len];
        SharedMemory::read(self, addr, &mut v).ok()?;
        Some(v)
    }

    /// The last region starting at or below `addr` (which may end before it).
    #[inline]
    fn at_or_below(&self, addr: u64) -> Option<&(u64, usize, Vec<AtomicU64>)> {
        let i = self
            .regions
            .partition_point(|r| r.0 <= addr)
            .checked_sub(1)?;
        self.regions.get(i)
    }

    /// The region words and the byte offset of `addr` in them, if `len` bytes fit.
    fn find(&self, addr: u64, len: usize) -> Option<(&[AtomicU64], usize)> {
        let (base, size, words) = self.at_or_below(addr)?;
        let off = usize::try_from(addr - *base).ok()?;
        (off.checked_add(len)? <= *size).then_some((words.as_slice(), off))
    }

    fn fault(addr: u64, write: bool) -> Fault {
        Fault {
            addr,
            write,
            reason: "unmapped".into(),
        }
    }
}

impl SharedMemory for SharedHostMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let (words, off) = self
            .find(addr, buf.len())
            .ok_or_else(|| Self::fault(addr, false))?;
        if off % 8 == 0 {
            // Whole aligned words (a coalesced wave access), then the tail.
            let whole = buf.len() / 8 * 8;
            load_words(words.get(off / 8..).unwrap_or_default(), buf);
            if whole < buf.len() {
                let v = words[(off + whole) / 8].load(Relaxed).to_le_bytes();
                let n = buf.len() - whole;
                buf[whole..].copy_from_slice(&v[..n]);
            }
            return Ok(());
        }
        let mut at = 0;
        while at < buf.len() {
            let (w, b) = ((off + at) / 8, (off + at) % 8);
            let n = (8 - b).min(buf.len() - at);
            let v = words[w].load(Relaxed).to_le_bytes();
            buf[at..at + n].copy_from_slice(&v[b..b + n]);
            at += n;
        }
        Ok(())
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Fault> {
        let (words, off) = self
            .find(addr, data.len())
            .ok_or_else(|| Self::fault(addr, true))?;
        let mut at = 0;
        if off % 8 == 0 {
            // Whole aligned words first (a coalesced wave access); the tail merges below.
            at = data.len() / 8 * 8;
            store_words(words.get(off / 8..).unwrap_or_default(), data);
        }
        while at < data.len() {
            let (w, b) = ((off + at) / 8, (off + at) % 8);
            let n = (8 - b).min(data.len() - at);
            if n == 8 {
                let v = u64::from_le_bytes(data[at..at + 8].try_into().unwrap_or([0; 8]));
                words[w].store(v, Relaxed);
            } else {
                // Part of a word: merge without losing another thread's bytes of it.
                let _ = words[w].fetch_update(Relaxed, Relaxed, |old| {
                    let mut v = old.to_le_bytes();
                    v[b..b + n].copy_from_slice(&data[at..at + n]);
                    Some(u64::from_le_bytes(v))
                });
            }
            at += n;
        }
        Ok(())
    }

    fn atomic_rmw(
        &self,
        addr: u64,
        len: usize,
        f: &mut dyn FnMut(u64) -> u64,
    ) -> Result<u64, Fault> {
        use std::sync::atomic::Ordering::SeqCst;
        let len = len.clamp(1, 8);
        let (words, off) = self
            .find(addr, len)
            .ok_or_else(|| Self::fault(addr, true))?;
        let (w, b) = (off / 8, off % 8);
        if b + len > 8 {
            return Err(Fault {
                addr,
                write: true,
                reason: format!("misaligned {len}-byte atomic"),
            });
        }
        let mask = if len == 8 {
            u64::MAX
        } else {
            ((1u64 << (8 * len)) - 1) << (8 * b)
        };
        let mut old_val = 0;
        let _ = words[w].fetch_update(SeqCst, SeqCst, |word| {
            old_val = (word & mask) >> (8 * b);
            let new = (f(old_val) << (8 * b)) & mask;
            Some((word & !mask) | new)
        });
        Ok(old_val)
    }

    /// True: `read` and `write` find the whole range in one region before touching a byte.
    fn all_or_nothing(&self) -> bool {
        true
    }

    /// All lanes' values found in one region and checked to sit inside one word each before
    /// any is touched; then, when the lanes hit at most 64 words, one compare-and-swap loop per
    /// word, applying that word's lanes in lane order inside it (else one per lane, in lane
    /// order). A histogram's 64 lanes on 64 bins are at most 32 atomics instead of 64, and the
    /// words in address order keep each cache line with this thread for a run instead of once
    /// per lane. The old values are exactly those of the
    /// lanes one by one in lane order: lanes on one value are in one atomic step, in lane
    /// order, and lanes on different values do not see each other. Other threads see a
    /// word's lanes land together, an order the lanes one by one could also have produced
    /// for that word; the wave's atomics on different words are unordered on hardware too.
    /// SeqCst as [`SharedMemory::atomic_rmw`]: on x86-64 every ordering of a read-modify-write
    /// is the same locked instruction, so a weaker one would buy nothing there.
    fn atomic32_lanes(&self, op: Atomic32, addrs: &[u64], xs: &[u32], olds: &mut [u32]) -> bool {
        shared_atomic32_lanes(self, op, addrs, xs, olds)
    }

    fn covers(&self, addr: u64, len: usize) -> bool {
        self.find(addr, len).is_some()
    }

    /// Every region: they are only added, through `&mut self`.
    fn region(&self, addr: u64) -> Option<SharedRegion<'_>> {
        let (base, size, words) = self.at_or_below(addr)?;
        (addr - base < *size as u64).then_some(SharedRegion {
            base: *base,
            size: *size,
            words,
        })
    }
}

/// [`SharedHostMemory`]'s [`SharedMemory::atomic32_lanes`]: one copy of the loops per
/// operation, each with its operation inlined, built for AVX2 too (the baseline x86-64 has
/// no unsigned 32-bit vector minimum, and the address bounds took a third of the call).
#[cfg_attr(not(test), multiversion::multiversion(targets("x86_64+avx2+fma")))]
fn shared_atomic32_lanes(
    mem: &SharedHostMemory,
    op: Atomic32,
    addrs: &[u64],
    xs: &[u32],
    olds: &mut [u32],
) -> bool {
    macro_rules! by_op {
        ($($op:ident),*) => {
            match op {
                $(Atomic32::$op => {
                    mem.lanes32(addrs, xs, olds, |o, x| Atomic32::$op.apply(o, x))
                })*
            }
        };
    }
    by_op!(Add, Sub, And, Or, Xor, Swap, MinU, MaxU, MinI, MaxI)
}

impl SharedHostMemory {
    /// [`SharedMemory::atomic32_lanes`] with the operation `op`.
    #[inline(always)]
    fn lanes32(
        &self,
        addrs: &[u64],
        xs: &[u32],
        olds: &mut [u32],
        op: impl Fn(u32, u32) -> u32,
    ) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        let n = addrs.len();
        if n > 64 || xs.len() != n || olds.len() != n {
            return false;
        }
        if n == 0 {
            return true;
        }
        let (first, last) = address_bounds(addrs);
        let Some(span) = usize::try_from(last - first)
            .ok()
            .and_then(|s| s.checked_add(4))
        else {
            return false;
        };
        let Some((words, off)) = self.find(first, span) else {
            return false;
        };
        let w0 = off / 8;
        let words_hit = (off + span - 1) / 8 - w0 + 1;
        if words_hit <= 64 && off % 4 == 0 {
            // The lanes' byte offsets from word `w0`'s start (the span is at most 512 bytes).
            let mut rel = [0u32; 64];
            let mut misaligned = 0;
            for (r, &a) in rel.iter_mut().zip(addrs) {
                *r = (a - first) as u32 + (off % 8) as u32;
                misaligned |= *r;
            }
            if misaligned % 4 == 0 {
                return Self::aligned_lanes(&words[w0..], &rel[..n], xs, olds, op);
            }
        }
        // One atomic step on word `w` (counted from the first lane's) for the lanes of `mask`,
        // lowest lane first.
        let mut shift = [0u32; 64];
        let rmw = |w: usize, mask: u64, olds: &mut [u32], shift: &[u32; 64]| {
            // `find` checked the whole span against the region's size, and the region holds
            // `size.div_ceil(8)` words, so the word exists.
            let _ = words[w0 + w].fetch_update(SeqCst, SeqCst, |mut v| {
                let mut m = mask;
                while m != 0 {
                    let l = m.trailing_zeros() as usize;
                    m &= m - 1;
                    let sh = shift[l];
                    let old = (v >> sh) as u32;
                    olds[l] = old;
                    v = (v & !(0xffff_ffffu64 << sh)) | (op(old, xs[l]) as u64) << sh;
                }
                Some(v)
            });
        };
        // The lanes of each word as a mask when the words are few (a histogram's bins): one
        // step per word. Else one step per lane, in lane order (spread lanes rarely share a
        // word, and each lane alone is exactly the lane-by-lane order).
        let mut masks = [0u64; 64];
        for (l, &a) in addrs.iter().enumerate() {
            let o = off + (a - first) as usize;
            if o % 8 > 4 {
                // Across two words: not one atomic step (the general path reports it).
                return false;
            }
            shift[l] = (o % 8 * 8) as u32;
            if words_hit <= 64 {
                masks[o / 8 - w0] |= 1 << l;
            }
        }
        if words_hit <= 64 {
            for (w, &m) in masks[..words_hit].iter().enumerate() {
                if m != 0 {
                    rmw(w, m, olds, &shift);
                }
            }
        } else {
            for (l, &a) in addrs.iter().enumerate() {
                rmw((off + (a - first) as usize) / 8 - w0, 1 << l, olds, &shift);
            }
        }
        true
    }

    /// [`SharedHostMemory::lanes32`] when every lane's value is a whole half of one of the
    /// (at most 64) `words`: lane `l`'s at byte `rel[l]` of them, a multiple of 4. One
    /// compare-and-swap loop per word, applying its lower half's lanes and then its upper
    /// half's, each in lane order (lanes on different halves do not see each other). The
    /// lanes are grouped by word and half in one pass, without the per-lane shifts of the
    /// general grouping.
    #[inline(always)]
    fn aligned_lanes(
        words: &[AtomicU64],
        rel: &[u32],
        xs: &[u32],
        olds: &mut [u32],
        op: impl Fn(u32, u32) -> u32,
    ) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        let mut masks = [0u64; 64];
        let mut upper = 0u64;
        for (l, &r) in rel.iter().enumerate() {
            masks[(r / 8) as usize % 64] |= 1 << l;
            upper |= u64::from(r / 4 % 2) << l;
        }
        // The lanes of `m`, lowest first, applied to `half`; each lane's old value to `olds`.
        let apply = |mut half: u32, mut m: u64, olds: &mut [u32]| {
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                if let (Some(o), Some(&x)) = (olds.get_mut(l), xs.get(l)) {
                    *o = half;
                    half = op(half, x);
                }
            }
            half
        };
        for (word, &m) in words.iter().zip(&masks) {
            if m == 0 {
                continue;
            }
            let _ = word.fetch_update(SeqCst, SeqCst, |v| {
                let lo = apply(v as u32, m & !upper, olds);
                let hi = apply((v >> 32) as u32, m & upper, olds);
                Some(u64::from(lo) | u64::from(hi) << 32)
            });
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A memory that only has the provided `atomic_rmw_batch` (through `HostMemory`'s
    /// reads and writes), the reference for the override.
    struct Plain(HostMemory);

    impl Memory for Plain {
        fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
            self.0.read(addr, buf)
        }
        fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), Fault> {
            self.0.write(addr, data)
        }
    }

    #[test]
    fn host_contiguous_is_a_range_inside_one_region_only() {
        let mut m = HostMemory::new();
        let a = m.alloc(64);
        let b = m.alloc(64);
        m.contiguous(a + 8, 8)
            .expect("a range inside the first region")
            .copy_from_slice(&[7; 8]);
        assert_eq!(
            m.bytes(a + 8, 8),
            Some(vec![7; 8]),
            "writes through the slice land"
        );
        assert_eq!(m.contiguous(a, 64).map(|s| s.len()), Some(64));
        assert!(m.contiguous(a + 60, 8).is_none(), "past the region's end");
        assert!(
            m.contiguous(a, (b - a + 8) as usize).is_none(),
            "across two regions"
        );
        assert!(m.contiguous(b + 4096, 4).is_none(), "unmapped");
        assert!(
            Plain(HostMemory::new()).contiguous(a, 4).is_none(),
            "the provided version"
        );
    }

    #[test]
    fn host_atomic_batch_matches_one_atomic_at_a_time_up_to_the_first_fault() {
        for len in [4usize, 8] {
            let (mut fast, mut plain) = (HostMemory::new(), Plain(HostMemory::new()));
            let a = fast.alloc(64);
            assert_eq!(plain.0.alloc(64), a);
            // Repeated addresses (lane order decides), then one past the region: a fault.
            let addrs: Vec<u64> = [0u64, 8, 0, 16, 8, 0, 4096, 24]
                .iter()
                .map(|o| a + o)
                .collect();
            let mut f = |k: usize, old: u64| old.wrapping_mul(3).wrapping_add(k as u64 + 1);
            let (mut o1, mut o2) = (vec![0u64; 8], vec![0u64; 8]);
            let r1 = fast.atomic_rmw_batch(&addrs, len, &mut f, &mut o1);
            let r2 = plain.atomic_rmw_batch(&addrs, len, &mut f, &mut o2);
            assert_eq!(
                r1.as_ref().map_err(|e| e.0),
                Err(6),
                "len {len}: fault index"
            );
            assert_eq!(r1.map_err(|e| e.1.addr), r2.map_err(|e| e.1.addr));
            assert_eq!(o1[..6], o2[..6], "len {len}: old values before the fault");
            assert_eq!(fast.bytes(a, 64), plain.0.bytes(a, 64), "len {len}: memory");
            assert_ne!(
                fast.bytes(a, 8),
                Some(vec![0; 8]),
                "the batch wrote nothing"
            );
        }
    }

    const ALL_OPS: [Atomic32; 10] = [
        Atomic32::Add,
        Atomic32::Sub,
        Atomic32::And,
        Atomic32::Or,
        Atomic32::Xor,
        Atomic32::Swap,
        Atomic32::MinU,
        Atomic32::MaxU,
        Atomic32::MinI,
        Atomic32::MaxI,
    ];

    #[test]
    fn host_lookups_through_recent_regions_match_a_search_of_all() {
        let mut next = crate::xorshift(0x6a09_e667_f3bc_c908);
        let mut mem = HostMemory::new();
        // Regions of 0 to 3000 bytes, each filled with its own byte; one mapped below the
        // others halfway (the recent regions' indices then move).
        let mut regions: Vec<(u64, usize, u8)> = Vec::new();
        for r in 0..12u8 {
            if r == 6 {
                mem.map(1 << 20, &[0xee; 100])
                    .expect("map below the allocations");
                regions.push((1 << 20, 100, 0xee));
            }
            let size = (next() % 3001) as usize;
            regions.push((mem.alloc_bytes(&vec![r; size]), size, r));
            for _ in 0..300 {
                let &(base, size, _) = &regions[(next() % regions.len() as u64) as usize];
                // Inside, at the end (empty and one byte), or just before the start.
                let (addr, len) = match next() % 4 {
                    0 => (base + size as u64, 0),
                    1 => (base + size as u64, 1),
                    2 => (base.wrapping_sub(1), 1),
                    _ => {
                        let off = next() % (size as u64 + 1);
                        (base + off, (next() % (size as u64 - off + 1)) as usize)
                    }
                };
                // The fill of the region holding all `len` bytes, if one does.
                let want = regions
                    .iter()
                    .find(|&&(b, n, _)| addr >= b && addr - b + len as u64 <= n as u64)
                    .map(|&(_, _, fill)| vec![fill; len]);
                assert_eq!(mem.bytes(addr, len), want, "{len} bytes at {addr:#x}");
            }
        }
    }

    #[test]
    fn address_bounds_are_the_lowest_and_highest_address() {
        let mut next = crate::xorshift(0x2545_f491_4f6c_dd1d);
        for round in 0..200 {
            let n = round % 65;
            // Mostly one upper dword; every fourth round lanes on both sides of a 4 GiB
            // boundary, and every eighth any 64-bit values.
            let base = 7u64 << 32;
            let addrs: Vec<u64> = (0..n)
                .map(|_| match round % 8 {
                    7 => next(),
                    3 => base - 512 + next() % 1024,
                    _ => base + next() % (1 << 32),
                })
                .collect();
            let want = (
                addrs.iter().copied().min().unwrap_or(u64::MAX),
                addrs.iter().copied().max().unwrap_or(0),
            );
            assert_eq!(address_bounds(&addrs), want, "round {round}: {addrs:x?}");
        }
    }

    #[test]
    fn shared_reads_and_writes_match_host_memory_at_every_offset_and_length() {
        // Offsets in and across words, lengths from nothing to past four-word blocks (the
        // unrolled aligned loops) with every tail; each write lands on what earlier ones left.
        let mut next = crate::xorshift(0x2545_f491_4f6c_dd1d);
        let init: Vec<u8> = (0..640).map(|_| next() as u8).collect();
        let (mut host, mut shared) = (HostMemory::new(), SharedHostMemory::new());
        let a = host.alloc_bytes(&init);
        assert_eq!(shared.alloc_bytes(&init), a);
        for off in 0..17u64 {
            for len in (0..90).chain([255, 256, 257, 300, 623 - off as usize]) {
                let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                Memory::write(&mut host, a + off, &data).expect("host write");
                SharedMemory::write(&shared, a + off, &data).expect("shared write");
                let (mut h, mut s) = (vec![0u8; len], vec![1u8; len]);
                Memory::read(&mut host, a + off, &mut h).expect("host read");
                SharedMemory::read(&shared, a + off, &mut s).expect("shared read");
                assert_eq!(s, h, "read of {len} bytes at +{off}");
                assert_eq!(s, data, "read of {len} bytes at +{off} after writing them");
            }
        }
        assert_eq!(shared.bytes(a, 640), host.bytes(a, 640), "whole region");
        let mut b = [0u8; 16];
        assert!(
            SharedMemory::read(&shared, a + 632, &mut b).is_err(),
            "read past the end"
        );
        assert!(
            SharedMemory::write(&shared, a + 632, &b).is_err(),
            "write past the end"
        );
        assert_eq!(
            shared.bytes(a, 640),
            host.bytes(a, 640),
            "a faulting write changed nothing"
        );
    }

    #[test]
    fn shared_atomic32_lanes_match_one_atomic_at_a_time_in_lane_order() {
        let mut next = crate::xorshift(0x9e37_79b9_7f4a_7c15u64);
        for op in ALL_OPS {
            for round in 0..50 {
                let init: Vec<u8> = (0..2048).map(|_| next() as u8).collect();
                let (mut host, mut shared) = (HostMemory::new(), SharedHostMemory::new());
                let a = host.alloc_bytes(&init);
                assert_eq!(shared.alloc_bytes(&init), a);
                // Few values, many lanes on each (the lanes counted into their words), or every
                // third round values over 1 KiB (one atomic step per lane); every other round also
                // unaligned values inside a word, overlapping their neighbours.
                let addrs: Vec<u64> = (0..64)
                    .map(|_| {
                        let words = if round % 3 == 2 { 200 } else { 6 };
                        let w = a + next() % words * 8 + 64;
                        w + if round % 2 == 0 {
                            next() % 2 * 4
                        } else {
                            next() % 5
                        }
                    })
                    .collect();
                let xs: Vec<u32> = (0..64).map(|_| next() as u32).collect();
                let mut want = [0u64; 64];
                host.atomic_rmw_batch(
                    &addrs,
                    4,
                    &mut |k, o| op.apply(o as u32, xs[k]) as u64,
                    &mut want,
                )
                .expect("host batch");
                let mut got = [0u32; 64];
                assert!(
                    shared.atomic32_lanes(op, &addrs, &xs, &mut got),
                    "{op:?}: every lane is inside one word of one region"
                );
                for l in 0..64 {
                    assert_eq!(
                        got[l] as u64, want[l],
                        "{op:?} round {round}: old value of lane {l}"
                    );
                }
                assert_eq!(
                    shared.bytes(a, 2048),
                    host.bytes(a, 2048),
                    "{op:?} round {round}: memory"
                );
            }
        }
    }

    #[test]
    fn shared_atomic32_lanes_do_nothing_when_a_lane_would_fault_or_straddle() {
        let mut shared = SharedHostMemory::new();
        let a = shared.alloc(64);
        let xs = [1u32; 4];
        let mut olds = [7u32; 4];
        for bad in [a + 64, a + 5, a - 4] {
            let addrs = [a, a + 8, bad, a + 16];
            assert!(
                !shared.atomic32_lanes(Atomic32::Add, &addrs, &xs, &mut olds),
                "lane 2 at {bad:#x} cannot be one atomic step"
            );
            assert_eq!(
                shared.bytes(a, 64),
                Some(vec![0; 64]),
                "{bad:#x}: memory changed"
            );
            assert_eq!(olds, [7; 4], "{bad:#x}: old values written");
        }
        assert!(
            !Plain(HostMemory::new()).atomic32_lanes(Atomic32::Add, &[a], &[1], &mut [0]),
            "the provided version takes nothing"
        );
    }

    #[test]
    fn shared_atomic32_lanes_stay_atomic_between_threads() {
        let mut shared = SharedHostMemory::new();
        let a = shared.alloc(64);
        let shared = &shared;
        // 64 lanes on 16 counters, both halves of each word; each call must see each
        // counter's lanes as consecutive counts, and no increment may be lost.
        let addrs: Vec<u64> = (0..64u64).map(|l| a + (l * 7) % 16 * 4).collect();
        let calls = 20_000;
        std::thread::scope(|s| {
            for _ in 0..2 {
                let addrs = &addrs;
                s.spawn(move || {
                    let mut olds = [0u32; 64];
                    for _ in 0..calls {
                        assert!(shared.atomic32_lanes(Atomic32::Add, addrs, &[1; 64], &mut olds));
                        for l in 0..64 {
                            if let Some(p) = (0..l).rev().find(|&p| addrs[p] == addrs[l]) {
                                assert_eq!(olds[l], olds[p] + 1, "lane {l} after lane {p}");
                            }
                        }
                    }
                });
            }
        });
        let bytes = shared.bytes(a, 64).expect("counters");
        for (c, v) in bytes.chunks_exact(4).enumerate() {
            let v = u32::from_le_bytes([v[0], v[1], v[2], v[3]]);
            assert_eq!(v, 2 * calls * 4, "counter {c}: increments lost or doubled");
        }
    }

    /// Every operation's identity changes no value, and its combination of two operands
    /// does what the two do in turn, over random values and the edges.
    #[test]
    fn atomic_identities_and_combinations_hold_for_every_operation() {
        use Atomic32::*;
        let mut next = crate::xorshift(0x5eed);
        let edges = [0u32, 1, 0x7fff_ffff, 0x8000_0000, 0xffff_fffe, u32::MAX];
        for op in [Add, Sub, And, Or, Xor, Swap, MinU, MaxU, MinI, MaxI] {
            for k in 0..20_000 {
                let mut pick = || {
                    let r = next();
                    if r.is_multiple_of(4) {
                        edges[(r >> 8) as usize % edges.len()]
                    } else {
                        (r >> 16) as u32
                    }
                };
                let (old, a, b) = (pick(), pick(), pick());
                if let Some(id) = op.identity() {
                    assert_eq!(op.apply(old, id), old, "{op:?} identity on {old:#x}");
                }
                assert_eq!(
                    op.apply(op.apply(old, a), b),
                    op.apply(old, op.combine(a, b)),
                    "{op:?} draw {k}: {old:#x}, {a:#x}, {b:#x}"
                );
            }
        }
        assert_eq!(Swap.identity(), None, "a swap has no identity");
    }

    /// Random waves of posted atomics (several operations, lanes on a few values, two
    /// windows) leave the memory as the same atomics lane by lane in order would; until
    /// performed, another view of the memory sees none of them; and they are performed by an
    /// overlapping read, write or atomic of the same access, by another window or operation,
    /// by `flush_posted`, after `READS_BEFORE_FLUSH` other reads and atomics, and when the
    /// access ends.
    #[test]
    fn posted_atomics_are_held_until_the_access_touches_them_or_ends() {
        use Atomic32::*;
        let mut next = crate::xorshift(0x90_57ed);
        let mut shared = SharedHostMemory::new();
        let a = shared.alloc(2048);
        let other = shared.alloc(64);
        let mut host = HostMemory::new();
        assert_eq!(host.alloc(2048), a);
        let fill: Vec<u8> = (0..2048).map(|_| next() as u8).collect();
        SharedMemory::write(&shared, a, &fill).expect("fill");
        host.write(a, &fill).expect("fill");
        let view = |m: &SharedHostMemory| m.bytes(a, 2048).expect("memory");
        // How each round ends the holding: the expected outcome is checked after it.
        for round in 0..60 {
            let ops = [Add, Sub, And, Or, Xor, MinU, MaxU, MinI, MaxI];
            let op = ops[round % ops.len()];
            // Two waves of lanes on 16 values (both halves of words, lanes repeated): on the
            // same values in even rounds, the second wave 256 bytes on in odd rounds (the held
            // bytes grow inside the window).
            let window = a + 512 * (round as u64 % 3) + 4 * (next() % 8);
            let mut access = SharedAccess::new(&shared);
            let start = view(&shared);
            for wave in 0..2 {
                let base = window + if round % 2 == 1 { 256 * wave } else { 0 };
                let addrs: Vec<u64> = (0..64).map(|_| base + 4 * (next() % 16)).collect();
                let xs: Vec<u32> = (0..64).map(|_| (next() >> 20) as u32).collect();
                assert!(
                    access.post_atomic32(op, &addrs, &xs),
                    "round {round}: not held"
                );
                let mut olds = vec![0u64; 64];
                host.atomic_rmw_batch(
                    &addrs,
                    4,
                    &mut |k, o| u64::from(op.apply(o as u32, xs[k])),
                    &mut olds,
                )
                .expect("the same atomics on host memory");
            }
            assert!(
                view(&shared) == start,
                "round {round}: held atomics are not seen by another view"
            );
            // A read elsewhere leaves them held.
            let mut b = [0u8; 8];
            access.read(other, &mut b).expect("read");
            assert!(view(&shared) == start, "round {round}: a read elsewhere");
            match round % 6 {
                0 => access.read(window, &mut b).map(|_| ()).expect("read"),
                1 => {
                    let v = host.bytes(window + 4, 4).expect("value");
                    access.write(window + 4, &v).expect("write");
                }
                2 => {
                    access
                        .atomic_rmw(window, 4, &mut |o| o)
                        .map(|_| ())
                        .expect("atomic");
                }
                3 => access.flush_posted(),
                4 => {
                    // One read elsewhere was made above; atomics elsewhere count as reads.
                    for k in 1..READS_BEFORE_FLUSH {
                        assert!(
                            view(&shared) == start,
                            "round {round}: performed after {k} reads"
                        );
                        if k % 2 == 0 {
                            access.read(other, &mut b).expect("read");
                        } else {
                            access.atomic_rmw(other, 4, &mut |o| o).expect("atomic");
                        }
                    }
                }
                _ => {
                    // Another operation's atomic elsewhere performs the window first, then is
                    // itself held.
                    let o = if op == Add { Or } else { Add };
                    assert!(access.post_atomic32(o, &[a + 2044], &[0]));
                }
            }
            if round % 6 != 5 {
                assert!(
                    view(&shared) == host.bytes(a, 2048).expect("host"),
                    "round {round}: performed as lane by lane"
                );
            }
            drop(access);
            assert!(
                view(&shared) == host.bytes(a, 2048).expect("host"),
                "round {round}: performed when the access ends"
            );
        }
    }

    /// Atomics the window cannot take are not held, and leave nothing held: a swap, a lane
    /// not 4-byte aligned, lanes spanning more than 256 bytes, a lane past the region's end.
    #[test]
    fn atomics_the_window_cannot_take_are_not_held() {
        let mut shared = SharedHostMemory::new();
        let a = shared.alloc(1024);
        let mut access = SharedAccess::new(&shared);
        let cases: [(Atomic32, Vec<u64>); 4] = [
            (Atomic32::Swap, vec![a, a + 4]),
            (Atomic32::Add, vec![a, a + 6]),
            (Atomic32::Add, vec![a, a + 256]),
            (Atomic32::Add, vec![a + 1016, a + 1024]),
        ];
        for (op, addrs) in &cases {
            let xs = vec![1u32; addrs.len()];
            assert!(!access.post_atomic32(*op, addrs, &xs), "{op:?} {addrs:x?}");
            assert!(!access.posted.any, "{op:?} {addrs:x?}: something held");
        }
        assert!(access.post_atomic32(Atomic32::Add, &[a, a + 252], &[1, 2]));
        assert!(access.posted.any);
    }

    /// A [`SharedHostMemory`] that counts the calls a [`SharedAccess`] makes of it.
    struct Counted {
        mem: SharedHostMemory,
        /// Whether it offers its regions (else every access goes through `read` and `write`).
        regions: bool,
        reads: std::sync::atomic::AtomicUsize,
        writes: std::sync::atomic::AtomicUsize,
        lookups: std::sync::atomic::AtomicUsize,
    }

    impl Counted {
        fn new(mem: SharedHostMemory, regions: bool) -> Counted {
            Counted {
                mem,
                regions,
                reads: Default::default(),
                writes: Default::default(),
                lookups: Default::default(),
            }
        }
        /// Reads, writes and region lookups so far.
        fn calls(&self) -> [usize; 3] {
            [&self.reads, &self.writes, &self.lookups].map(|c| c.load(Relaxed))
        }
    }

    impl SharedMemory for Counted {
        fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
            self.reads.fetch_add(1, Relaxed);
            self.mem.read(addr, buf)
        }
        fn write(&self, addr: u64, data: &[u8]) -> Result<(), Fault> {
            self.writes.fetch_add(1, Relaxed);
            self.mem.write(addr, data)
        }
        fn atomic_rmw(
            &self,
            addr: u64,
            len: usize,
            f: &mut dyn FnMut(u64) -> u64,
        ) -> Result<u64, Fault> {
            self.mem.atomic_rmw(addr, len, f)
        }
        fn all_or_nothing(&self) -> bool {
            true
        }
        fn region(&self, addr: u64) -> Option<SharedRegion<'_>> {
            self.lookups.fetch_add(1, Relaxed);
            self.regions.then(|| self.mem.region(addr)).flatten()
        }
    }

    #[test]
    fn shared_regions_are_the_words_of_the_one_holding_the_address() {
        let mut shared = SharedHostMemory::new();
        let a = shared.alloc_bytes(&(0..100).collect::<Vec<u8>>());
        let empty = shared.alloc(0);
        let c = shared.alloc(64);
        for addr in [a, a + 37, a + 99] {
            let r = shared.region(addr).expect("inside the first region");
            assert_eq!((r.base, r.size), (a, 100), "region of {addr:#x}");
            assert!(
                r.words.len() >= 13,
                "{} words hold 100 bytes",
                r.words.len()
            );
            for i in 0..100 {
                let byte = r.words[i / 8].load(Relaxed).to_le_bytes()[i % 8];
                assert_eq!(
                    byte,
                    i as u8,
                    "byte {i} is byte {} of word {}",
                    i % 8,
                    i / 8
                );
            }
        }
        let r = shared.region(c + 63).expect("the last region");
        assert_eq!((r.base, r.size), (c, 64));
        for addr in [a - 1, a + 100, empty, c + 64, c + (1 << 40)] {
            assert!(shared.region(addr).is_none(), "no region holds {addr:#x}");
        }
    }

    #[test]
    fn access_moves_whole_dwords_through_the_words_and_the_rest_through_the_memory() {
        let mut next = crate::xorshift(0x3c6e_f372_fe94_f82b);
        for regions in [true, false] {
            let (mut host, mut shared) = (HostMemory::new(), SharedHostMemory::new());
            // Six regions (more than an access keeps) of 0 to 700 random bytes.
            let mut bases = Vec::new();
            for _ in 0..6 {
                let init: Vec<u8> = (0..next() % 701).map(|_| next() as u8).collect();
                let b = host.alloc_bytes(&init);
                assert_eq!(shared.alloc_bytes(&init), b);
                bases.push((b, init.len() as u64));
            }
            let counted = Counted::new(shared, regions);
            let mut access = SharedAccess::new(&counted);
            for round in 0..4000 {
                let (base, size) = bases[(next() % 6) as usize];
                // Whole words, whole dwords or any bytes; now and then running past the end.
                let unit = [8, 4, 1][(next() % 3) as usize];
                let off = next() % (size + 1) / unit * unit;
                let room = if round % 16 == 0 { size + 9 } else { size } - off;
                let len = (next() % (room + 1) / unit * unit) as usize;
                let (addr, write) = (base + off, next().is_multiple_of(2));
                let inside = off + len as u64 <= size;
                let before = counted.calls();
                let (want, got) = if write {
                    let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                    (host.write(addr, &data), access.write(addr, &data))
                } else {
                    let (mut h, mut s) = (vec![0u8; len], vec![1u8; len]);
                    let want = host.read(addr, &mut h);
                    let got = access.read(addr, &mut s);
                    if want.is_ok() {
                        assert_eq!(s, h, "round {round}: {len} bytes read at {addr:#x}");
                    }
                    (want, got)
                };
                let kind = if write { "write" } else { "read" };
                let what = format!("round {round}: {len}-byte {kind} at {addr:#x}");
                assert_eq!(
                    got.map_err(|f| (f.addr, f.write)),
                    want.map_err(|f| (f.addr, f.write)),
                    "{what}"
                );
                let [reads, writes, _] = counted.calls();
                // The address inside the region (an empty access at its end is not) and the
                // bytes too.
                let direct = regions
                    && off < size
                    && inside
                    && off.is_multiple_of(4)
                    && len.is_multiple_of(4);
                let direct = direct && (!write || off.is_multiple_of(8) && len.is_multiple_of(8));
                let through = if write {
                    writes - before[1]
                } else {
                    reads - before[0]
                };
                assert_eq!(through, usize::from(!direct), "{what}: calls of the memory");
            }
            for &(b, size) in &bases {
                assert_eq!(
                    counted.mem.bytes(b, size as usize),
                    host.bytes(b, size as usize),
                    "region at {b:#x}"
                );
            }
        }
    }

    #[test]
    fn access_keeps_the_last_regions_it_found() {
        let mut shared = SharedHostMemory::new();
        let bases: Vec<u64> = (0..LAST as u64 + 1).map(|_| shared.alloc(64)).collect();
        let counted = Counted::new(shared, true);
        let mut access = SharedAccess::new(&counted);
        let mut b = [0u8; 8];
        let mut lookups = |access: &mut SharedAccess<'_>, r: usize| {
            let before = counted.calls()[2];
            access.read(bases[r] + 8, &mut b).expect("read");
            counted.calls()[2] - before
        };
        for r in 0..LAST {
            assert_eq!(lookups(&mut access, r), 1, "region {r} is looked up first");
        }
        for r in (0..LAST).rev() {
            assert_eq!(lookups(&mut access, r), 0, "region {r} is kept");
        }
        // One more region replaces the one found first; the others stay.
        assert_eq!(lookups(&mut access, LAST), 1, "a new region");
        for r in 1..=LAST {
            assert_eq!(lookups(&mut access, r), 0, "region {r} is kept");
        }
        assert_eq!(lookups(&mut access, 0), 1, "region 0 was replaced");
        // An address in no region is looked up every time (and read through the memory,
        // which reports the fault).
        for _ in 0..2 {
            let before = counted.calls();
            assert!(access.read(bases[0] + 64, &mut b).is_err(), "unmapped");
            let after = counted.calls();
            assert_eq!((after[0] - before[0], after[2] - before[2]), (1, 1));
        }
    }
}
