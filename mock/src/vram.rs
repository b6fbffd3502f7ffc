//! Sparse VRAM: a profile has up to 288 GiB of it, tests touch a few MiB.
//!
//! Memory is kept in 2 MiB chunks allocated (zeroed) on the first write of a non-zero byte;
//! reading a chunk nobody wrote returns zeros, so zeros written there change nothing and
//! leave it absent (drivers clear whole buffers, and a served device must not commit host
//! memory for that). (Real memory holds whatever it held; a driver must clear what it
//! relies on, and the mock does not check that it does.)
//!
//! The chunks a device may commit are capped ([`Vram::limit`], [`DEFAULT_LIMIT`] unless set):
//! a write that needs one more past the cap is refused with [`VramFull`]. That is the mock's
//! own resource limit, not the hardware's: a 24 GiB profile would otherwise let a client
//! commit 24 GiB of the host's memory through BAR0. Chunks are never given back while the
//! device lives (the engines read them without a lock).
//!
//! VRAM is shared by the CPU side (BAR0, the MM window, firmware models) and the engine
//! threads (CP, SDMA, shaders), so the hot paths take no lock: the chunk table is an array
//! of atomic pointers, chunks never move or go away while the device lives, and bytes are
//! copied through raw pointers. Two agents touching the same bytes at the same time without
//! synchronising is a race on hardware too; the mock keeps such races from tearing aligned
//! 32- and 64-bit values (signals, fences, pointers) by doing those accesses atomically.
//!
//! Two records ride along with the bytes:
//! - **Write generations** (for the GMC's TLB snapshot): every 4 KiB page remembers the epoch
//!   of its last write; [`Vram::snapshot`] closes an epoch, so a page written after a
//!   snapshot has a larger generation than it. Page-table pages (every table of a context's
//!   tree when the GMC invalidates its TLB, and every page the walker reads) are
//!   *watched*: the first write to one in an epoch first saves its old bytes, so a walk
//!   for a TLB snapshot older than the write still reads the tables as they were
//!   ([`Vram::read_as_of`]), as a TLB that has not been invalidated keeps translating.
//! - **CPU writes the HDP still holds**: writes through BAR0 ([`Vram::cpu_write`]) are
//!   remembered, byte-exact, until the next HDP flush ([`Vram::hdp_flush`]). An engine that
//!   reads such bytes ([`Vram::unflushed`]) would see stale memory on hardware.

use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use am_isa::sync::lock;

/// Granule of the write generations the GMC's TLB snapshot checks (a page-table page).
pub const GEN_PAGE: u64 = 0x1000;

/// Size of one backing chunk.
pub const CHUNK_SIZE: u64 = 2 << 20;

const PAGES_PER_CHUNK: usize = (CHUNK_SIZE / GEN_PAGE) as usize;

/// Host memory a device commits for its VRAM unless told otherwise (or its VRAM size, if
/// smaller). A fixed figure rather than a share of the host's memory, so a workload fits or
/// is refused alike on every machine; the shader emulator gets through far less than this
/// in any run a person waits for, and a served device stays bounded.
pub const DEFAULT_LIMIT: u64 = 4 << 30;

/// A write refused because it needs another chunk of host memory past the device's cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VramFull {
    /// VRAM offset of the first byte that found no room.
    pub offset: u64,
    /// The cap, in bytes.
    pub limit: u64,
}

impl std::fmt::Display for VramFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "VRAM offset {:#x} would commit host memory past this mock device's cap of {} MiB \
             of written VRAM (a limit of the mock, not of the hardware: \
             raise it with Vram::set_limit or am serve --max-mock-vram-mib)",
            self.offset,
            self.limit >> 20
        )
    }
}

/// One 2 MiB chunk: its bytes, the write generation of each of its pages, and which of
/// its pages the walker has read as page tables.
struct Chunk {
    data: NonNull<u8>,
    gens: Box<[AtomicU64]>,
    watched: [AtomicU64; PAGES_PER_CHUNK / 64],
}

/// The bytes of a watched page from before a write: valid for snapshots in
/// `[since, until)`.
struct Shadow {
    since: u64,
    until: u64,
    bytes: Box<[u8]>,
}

/// Old versions kept per page (a page rewritten more often than this between two flushes
/// loses its oldest version, and a walk that needed it faults as stale).
const SHADOWS_PER_PAGE: usize = 4;

impl Chunk {
    fn layout() -> std::alloc::Layout {
        // 2 MiB is a power of two and far below isize::MAX: the layout always exists.
        std::alloc::Layout::from_size_align(CHUNK_SIZE as usize, 4096)
            .unwrap_or_else(|_| std::alloc::Layout::new::<u8>())
    }

    fn new() -> Box<Chunk> {
        let layout = Self::layout();
        // SAFETY: the layout has a non-zero size. `alloc_zeroed` returns memory the kernel
        // hands out zeroed and lazily (untouched pages cost nothing).
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let data = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        Box::new(Chunk {
            data,
            gens: (0..PAGES_PER_CHUNK).map(|_| AtomicU64::new(0)).collect(),
            watched: std::array::from_fn(|_| AtomicU64::new(0)),
        })
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: `data` came from `alloc_zeroed` with this layout and is freed once, here.
        unsafe { std::alloc::dealloc(self.data.as_ptr(), Self::layout()) }
    }
}

/// Device memory, shared by the BAR0 window, MM_INDEX/MM_DATA, the firmware models and the
/// engines.
pub struct Vram {
    size: u64,
    /// One slot per 2 MiB of VRAM; null until the first write there.
    chunks: Box<[AtomicPtr<Chunk>]>,
    resident: AtomicU64,
    /// Most bytes `resident` may reach.
    limit: AtomicU64,
    /// The current write epoch (see [`Vram::snapshot`]).
    epoch: AtomicU64,
    /// Byte ranges `[start, end)` written through BAR0 since the last HDP flush.
    hdp: Mutex<BTreeMap<u64, u64>>,
    hdp_pending: AtomicBool,
    /// Old versions of watched pages, by page index.
    shadows: Mutex<std::collections::HashMap<u64, Vec<Shadow>>>,
}

impl std::fmt::Debug for Vram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vram")
            .field("size", &self.size)
            .field("resident", &self.resident_bytes())
            .finish_non_exhaustive()
    }
}

// SAFETY: the raw chunk pointers are owned by the `Vram` (created by `Chunk::new`, freed in
// `Drop`) and only ever reached through its methods, which bound every access.
unsafe impl Send for Vram {}
// SAFETY: as above; concurrent access goes through atomics (the table, generations, aligned
// words) or raw copies whose overlap with other agents' accesses is the device's race, not
// a dangling or out-of-bounds access.
unsafe impl Sync for Vram {}

impl Drop for Vram {
    fn drop(&mut self) {
        for slot in self.chunks.iter() {
            let p = slot.swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !p.is_null() {
                // SAFETY: every non-null slot holds a pointer from `Box::into_raw`, taken out
                // of the table exactly once here.
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}

impl Vram {
    /// VRAM of `size` bytes, all untouched, committing at most [`DEFAULT_LIMIT`].
    pub fn new(size: u64) -> Self {
        let n = size.div_ceil(CHUNK_SIZE) as usize;
        Self {
            size,
            chunks: (0..n)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            resident: AtomicU64::new(0),
            limit: AtomicU64::new(DEFAULT_LIMIT),
            epoch: AtomicU64::new(1),
            hdp: Mutex::new(BTreeMap::new()),
            hdp_pending: AtomicBool::new(false),
            shadows: Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Whether `[offset, offset + len)` lies inside VRAM.
    #[inline]
    pub fn contains(&self, offset: u64, len: u64) -> bool {
        offset.checked_add(len).is_some_and(|end| end <= self.size)
    }

    /// Bytes of host memory actually backing VRAM (a multiple of [`CHUNK_SIZE`]).
    pub fn resident_bytes(&self) -> u64 {
        self.resident.load(Ordering::Relaxed)
    }

    /// Most bytes of host memory the chunks may take.
    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::Relaxed)
    }

    /// Cap the host memory the chunks may take (rounded down to whole chunks). Chunks
    /// already committed stay; only new ones are refused.
    pub fn set_limit(&self, bytes: u64) {
        self.limit.store(bytes, Ordering::Relaxed);
    }

    /// The chunk at index `idx`, if it was ever written.
    #[inline]
    fn chunk(&self, idx: usize) -> Option<&Chunk> {
        let p = self.chunks.get(idx)?.load(Ordering::Acquire);
        // SAFETY: a non-null slot points to a live chunk that stays until `Vram` drops.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// The chunk at index `idx`, allocated (zeroed) if it was never written; `None` past
    /// the end. `offset` names the write in the refusal when the cap leaves no room.
    fn chunk_mut(&self, idx: usize, offset: u64) -> Result<Option<&Chunk>, VramFull> {
        let Some(slot) = self.chunks.get(idx) else {
            return Ok(None);
        };
        let p = slot.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: as in `chunk`.
            return Ok(Some(unsafe { &*p }));
        }
        // Room is taken before the chunk exists, so racing writers cannot pass the cap.
        let limit = self.limit();
        self.resident
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| {
                r.checked_add(CHUNK_SIZE).filter(|&n| n <= limit)
            })
            .map_err(|_| VramFull { offset, limit })?;
        let fresh = Box::into_raw(Chunk::new());
        match slot.compare_exchange(
            std::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: just stored; lives until `Vram` drops.
            Ok(_) => Ok(Some(unsafe { &*fresh })),
            Err(other) => {
                // Another thread allocated it first (and counted it): ours was never shared.
                self.resident.fetch_sub(CHUNK_SIZE, Ordering::AcqRel);
                // SAFETY: `fresh` came from `Box::into_raw` above and was not published.
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: as in `chunk`.
                Ok(Some(unsafe { &*other }))
            }
        }
    }

    /// The chunk a write of `data` at `offset` (inside chunk `idx`) goes to: `None` when
    /// the chunk is absent and `data` is all zeros, which it already reads as.
    fn chunk_for(&self, idx: usize, offset: u64, data: &[u8]) -> Result<Option<&Chunk>, VramFull> {
        match self.chunk(idx) {
            Some(c) => Ok(Some(c)),
            None if data.iter().all(|&b| b == 0) => Ok(None),
            None => self.chunk_mut(idx, offset),
        }
    }

    /// Split `[offset, offset + len)` into per-chunk pieces: (chunk index, offset in the
    /// chunk, position in the caller's buffer, length). Bytes beyond VRAM are left out.
    fn pieces(
        &self,
        offset: u64,
        len: usize,
    ) -> impl Iterator<Item = (usize, usize, usize, usize)> {
        let end = offset.saturating_add(len as u64).min(self.size);
        let mut at = offset;
        std::iter::from_fn(move || {
            if at >= end {
                return None;
            }
            let idx = (at / CHUNK_SIZE) as usize;
            let within = (at % CHUNK_SIZE) as usize;
            let n = ((end - at) as usize).min(CHUNK_SIZE as usize - within);
            let piece = (idx, within, (at - offset) as usize, n);
            at += n as u64;
            Some(piece)
        })
    }

    /// Copy bytes out; the caller has checked the range with [`Vram::contains`]. Bytes
    /// outside VRAM or never written read as zero. Inlined (into a shader's reads).
    #[inline(always)]
    pub fn read(&self, offset: u64, buf: &mut [u8]) {
        if buf.len() == 4 && offset.is_multiple_of(4) && self.contains(offset, 4) {
            buf.copy_from_slice(&self.read32(offset).to_le_bytes());
            return;
        }
        if buf.len() == 8 && offset.is_multiple_of(8) && self.contains(offset, 8) {
            buf.copy_from_slice(&self.read64(offset).to_le_bytes());
            return;
        }
        // Inside one chunk (a wave's load, almost every read): one look-up and one copy.
        let within = (offset % CHUNK_SIZE) as usize;
        if within + buf.len() <= CHUNK_SIZE as usize && self.contains(offset, buf.len() as u64) {
            match self.chunk((offset / CHUNK_SIZE) as usize) {
                // SAFETY: `within + buf.len() <= CHUNK_SIZE` (checked above), the chunk is live
                // and the two regions are distinct allocations.
                Some(c) => unsafe {
                    std::ptr::copy_nonoverlapping(
                        c.data.as_ptr().add(within),
                        buf.as_mut_ptr(),
                        buf.len(),
                    )
                },
                None => buf.fill(0),
            }
            return;
        }
        let covered = self
            .pieces(offset, buf.len())
            .fold(0, |_, (idx, within, pos, n)| {
                match self.chunk(idx) {
                    // SAFETY: `within + n <= CHUNK_SIZE` and `pos + n <= buf.len()` by
                    // construction of `pieces`; the chunk is live and the two regions are
                    // distinct allocations.
                    Some(c) => unsafe {
                        std::ptr::copy_nonoverlapping(
                            c.data.as_ptr().add(within),
                            buf.as_mut_ptr().add(pos),
                            n,
                        )
                    },
                    None => buf[pos..pos + n].fill(0),
                }
                pos + n
            });
        buf[covered..].fill(0);
    }

    /// Before a write to `[within, within + n)` of chunk `idx`: a watched page written for
    /// the first time in this epoch keeps its old bytes for older snapshots.
    fn before_write(&self, idx: usize, chunk: &Chunk, within: usize, n: usize) {
        let epoch = self.epoch.load(Ordering::Acquire);
        let first = within / GEN_PAGE as usize;
        let last = (within + n.max(1) - 1) / GEN_PAGE as usize;
        for p in first..=last {
            let watched = chunk.watched[p / 64].load(Ordering::Acquire) & (1 << (p % 64)) != 0;
            let since = chunk.gens[p].load(Ordering::Acquire);
            if !watched || since >= epoch {
                continue;
            }
            let mut bytes = vec![0u8; GEN_PAGE as usize].into_boxed_slice();
            // SAFETY: page `p` lies inside the live chunk; `bytes` is a distinct allocation.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    chunk.data.as_ptr().add(p * GEN_PAGE as usize),
                    bytes.as_mut_ptr(),
                    GEN_PAGE as usize,
                )
            };
            let page = idx as u64 * PAGES_PER_CHUNK as u64 + p as u64;
            let mut shadows = lock(&self.shadows);
            let list = shadows.entry(page).or_default();
            if list.len() >= SHADOWS_PER_PAGE {
                list.remove(0);
            }
            list.push(Shadow {
                since,
                until: epoch,
                bytes,
            });
        }
    }

    /// The walker reads `buf.len()` bytes of a page-table page (inside one 4 KiB page) as a
    /// TLB snapshot taken at `generation` sees them: the bytes now if the page was not
    /// written since, else the version saved before the first write after it. `None` if
    /// no such version exists (the table was written after the snapshot and was neither
    /// watched then nor read by the walker before, or its version was dropped). The page becomes watched.
    pub fn read_as_of(&self, offset: u64, buf: &mut [u8], generation: u64) -> Option<()> {
        let idx = (offset / CHUNK_SIZE) as usize;
        let p = ((offset % CHUNK_SIZE) / GEN_PAGE) as usize;
        // A page-table page in a chunk nobody wrote is watched all the same (its later
        // first write must keep the zeros for older snapshots); with no room left under the
        // cap it reads as zeros unwatched, and the write that would change it is refused.
        let Ok(Some(chunk)) = self.chunk_mut(idx, offset) else {
            buf.fill(0);
            return Some(());
        };
        chunk.watched[p / 64].fetch_or(1 << (p % 64), Ordering::AcqRel);
        if chunk.gens[p].load(Ordering::Acquire) <= generation {
            self.read(offset, buf);
            return Some(());
        }
        let page = idx as u64 * PAGES_PER_CHUNK as u64 + p as u64;
        let shadows = lock(&self.shadows);
        let s = shadows
            .get(&page)?
            .iter()
            .find(|s| s.since <= generation && generation < s.until)?;
        let at = (offset % GEN_PAGE) as usize;
        buf.copy_from_slice(s.bytes.get(at..at + buf.len())?);
        Some(())
    }

    /// Makes the 4 KiB page holding `offset` watched (see [`Vram::read_as_of`]) without
    /// reading it: the GMC watches every table of a context's tree when it invalidates the
    /// context's TLB, so a later write to one keeps the table as that snapshot saw it even
    /// when no walk has read the table yet. With no room left under the cap for a chunk
    /// nobody wrote, the page stays unwatched (and the write that would change it is refused).
    pub fn watch(&self, offset: u64) {
        let idx = (offset / CHUNK_SIZE) as usize;
        let p = ((offset % CHUNK_SIZE) / GEN_PAGE) as usize;
        if let Ok(Some(chunk)) = self.chunk_mut(idx, offset) {
            chunk.watched[p / 64].fetch_or(1 << (p % 64), Ordering::AcqRel);
        }
    }

    /// Record a write to `[offset, offset + len)` in the page generations.
    fn mark(&self, chunk: &Chunk, within: usize, n: usize) {
        let generation = self.epoch.load(Ordering::Acquire);
        let first = within / GEN_PAGE as usize;
        let last = (within + n.max(1) - 1) / GEN_PAGE as usize;
        for g in &chunk.gens[first..=last] {
            g.store(generation, Ordering::Release);
        }
    }

    /// Copy bytes in, allocating chunks on the first non-zero write; bytes outside VRAM
    /// are dropped. This is a write by the device or a firmware model (it does not pass the
    /// HDP). Refused from the first chunk the cap leaves no room for (the pieces before it
    /// have landed, as a write cut short on a bus would have).
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), VramFull> {
        if data.len() == 4 && offset.is_multiple_of(4) && self.contains(offset, 4) {
            let mut b = [0u8; 4];
            b.copy_from_slice(data);
            return self.write32(offset, u32::from_le_bytes(b));
        }
        if data.len() == 8 && offset.is_multiple_of(8) && self.contains(offset, 8) {
            let mut b = [0u8; 8];
            b.copy_from_slice(data);
            return self.write64(offset, u64::from_le_bytes(b));
        }
        self.write_pieces(offset, data)
    }

    fn write_pieces(&self, offset: u64, data: &[u8]) -> Result<(), VramFull> {
        for (idx, within, pos, n) in self.pieces(offset, data.len()) {
            let at = offset + pos as u64;
            let Some(c) = self.chunk_for(idx, at, &data[pos..pos + n])? else {
                continue;
            };
            self.before_write(idx, c, within, n);
            // SAFETY: bounds as in `read`; source and destination are distinct allocations.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    data.as_ptr().add(pos),
                    c.data.as_ptr().add(within),
                    n,
                )
            };
            self.mark(c, within, n);
        }
        Ok(())
    }

    /// A CPU write through BAR0: it lands in VRAM and stays in the HDP's view until the
    /// next HDP flush (see [`Vram::unflushed`]). A refused write is recorded all the same:
    /// the pieces before the refusal did land.
    pub fn cpu_write(&self, offset: u64, data: &[u8]) -> Result<(), VramFull> {
        let landed = self.write(offset, data);
        if data.is_empty() {
            return landed;
        }
        let (mut start, mut end) = (offset, offset.saturating_add(data.len() as u64));
        let mut set = lock(&self.hdp);
        // Merge with every range that touches [start, end).
        let touching: Vec<(u64, u64)> = set
            .range(..=end)
            .rev()
            .take_while(|&(_, &e)| e >= start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in touching {
            set.remove(&s);
            start = start.min(s);
            end = end.max(e);
        }
        set.insert(start, end);
        self.hdp_pending.store(true, Ordering::Release);
        landed
    }

    /// An HDP flush: every CPU write so far is visible to the GPU.
    pub fn hdp_flush(&self) {
        let mut set = lock(&self.hdp);
        set.clear();
        self.hdp_pending.store(false, Ordering::Release);
    }

    /// The first byte range of `[offset, offset + len)` that the CPU wrote through BAR0 and
    /// no HDP flush has covered yet, if any. Inlined up to the check that any is pending
    /// (almost every access: a shader's reads ask for each); the look-up is out of line.
    #[inline(always)]
    pub fn unflushed(&self, offset: u64, len: u64) -> Option<(u64, u64)> {
        if !self.hdp_pending.load(Ordering::Acquire) || len == 0 {
            return None;
        }
        self.unflushed_in(offset, len)
    }

    /// [`Vram::unflushed`] while some CPU write is pending.
    #[inline(never)]
    fn unflushed_in(&self, offset: u64, len: u64) -> Option<(u64, u64)> {
        let end = offset.saturating_add(len);
        let set = lock(&self.hdp);
        let (&s, &e) = set.range(..end).next_back()?;
        (e > offset).then(|| (s.max(offset), e.min(end)))
    }

    /// Close the current write epoch and return it: every write so far has a generation
    /// of at most the returned value, every later write a larger one. The GMC takes one at
    /// each TLB invalidation.
    pub fn snapshot(&self) -> u64 {
        self.epoch.fetch_add(1, Ordering::AcqRel)
    }

    /// Generation of the last write to the 4 KiB page holding `offset` (0: never written).
    pub fn page_generation(&self, offset: u64) -> u64 {
        let idx = (offset / CHUNK_SIZE) as usize;
        let page = ((offset % CHUNK_SIZE) / GEN_PAGE) as usize;
        self.chunk(idx)
            .map_or(0, |c| c.gens[page].load(Ordering::Acquire))
    }

    /// The aligned word at `offset` as an atomic, if VRAM there was ever written.
    fn word<T>(&self, offset: u64) -> Option<*const T> {
        let c = self.chunk((offset / CHUNK_SIZE) as usize)?;
        // SAFETY: the caller checked alignment and bounds; the offset is inside the chunk.
        Some(unsafe { c.data.as_ptr().add((offset % CHUNK_SIZE) as usize) } as *const T)
    }

    /// Read a little-endian dword (atomically when aligned). Outside VRAM: 0.
    #[inline]
    pub fn read32(&self, offset: u64) -> u32 {
        if !offset.is_multiple_of(4) || !self.contains(offset, 4) {
            let mut b = [0u8; 4];
            if self.contains(offset, 4) {
                self.read_unaligned(offset, &mut b);
            }
            return u32::from_le_bytes(b);
        }
        match self.word::<AtomicU32>(offset) {
            // SAFETY: aligned, in bounds, live for the lifetime of `self`.
            Some(p) => u32::from_le(unsafe { &*p }.load(Ordering::Acquire)),
            None => 0,
        }
    }

    /// Read a little-endian qword (atomically when aligned). Outside VRAM: 0.
    pub fn read64(&self, offset: u64) -> u64 {
        if !offset.is_multiple_of(8) || !self.contains(offset, 8) {
            let mut b = [0u8; 8];
            if self.contains(offset, 8) {
                self.read_unaligned(offset, &mut b);
            }
            return u64::from_le_bytes(b);
        }
        match self.word::<AtomicU64>(offset) {
            // SAFETY: aligned, in bounds, live for the lifetime of `self`.
            Some(p) => u64::from_le(unsafe { &*p }.load(Ordering::Acquire)),
            None => 0,
        }
    }

    fn read_unaligned(&self, offset: u64, buf: &mut [u8]) {
        for (idx, within, pos, n) in self.pieces(offset, buf.len()) {
            match self.chunk(idx) {
                // SAFETY: bounds by construction of `pieces`.
                Some(c) => unsafe {
                    std::ptr::copy_nonoverlapping(
                        c.data.as_ptr().add(within),
                        buf.as_mut_ptr().add(pos),
                        n,
                    )
                },
                None => buf[pos..pos + n].fill(0),
            }
        }
    }

    /// Write a little-endian dword (atomically when aligned); dropped outside VRAM.
    pub fn write32(&self, offset: u64, value: u32) -> Result<(), VramFull> {
        if !offset.is_multiple_of(4) || !self.contains(offset, 4) {
            return self.write_pieces(offset, &value.to_le_bytes());
        }
        let idx = (offset / CHUNK_SIZE) as usize;
        let chunk = match self.chunk(idx) {
            Some(c) => Some(c),
            None if value == 0 => None,
            None => self.chunk_mut(idx, offset)?,
        };
        if let Some(c) = chunk {
            let within = (offset % CHUNK_SIZE) as usize;
            self.before_write(idx, c, within, 4);
            // SAFETY: aligned and in bounds of the live chunk.
            let p = unsafe { c.data.as_ptr().add(within) } as *const AtomicU32;
            // SAFETY: as above.
            unsafe { &*p }.store(value.to_le(), Ordering::Release);
            self.mark(c, within, 4);
        }
        Ok(())
    }

    /// Write a little-endian qword (atomically when aligned); dropped outside VRAM.
    pub fn write64(&self, offset: u64, value: u64) -> Result<(), VramFull> {
        if !offset.is_multiple_of(8) || !self.contains(offset, 8) {
            return self.write_pieces(offset, &value.to_le_bytes());
        }
        let idx = (offset / CHUNK_SIZE) as usize;
        let chunk = match self.chunk(idx) {
            Some(c) => Some(c),
            None if value == 0 => None,
            None => self.chunk_mut(idx, offset)?,
        };
        if let Some(c) = chunk {
            let within = (offset % CHUNK_SIZE) as usize;
            self.before_write(idx, c, within, 8);
            // SAFETY: aligned and in bounds of the live chunk.
            let p = unsafe { c.data.as_ptr().add(within) } as *const AtomicU64;
            // SAFETY: as above.
            unsafe { &*p }.store(value.to_le(), Ordering::Release);
            self.mark(c, within, 8);
        }
        Ok(())
    }

    /// Copy `len` bytes from `src` to `dst` inside VRAM (an engine's copy), as `memmove`
    /// would: chunk to chunk, one pass over memory. Both ranges must lie inside VRAM
    /// (checked by the caller; bytes beyond it are left alone). A copy from a chunk nobody
    /// wrote to another leaves the destination absent (zeros onto zeros); refused from the
    /// first destination chunk the cap leaves no room for.
    pub fn copy_within(&self, src: u64, dst: u64, len: u64) -> Result<(), VramFull> {
        let len = len
            .min(self.size.saturating_sub(src))
            .min(self.size.saturating_sub(dst));
        let backwards = dst > src && dst < src + len;
        let mut done = 0u64;
        while done < len {
            // The next piece that stays inside one chunk on both sides.
            let left = len - done;
            let (s, d) = if backwards {
                (src + left, dst + left)
            } else {
                (src + done, dst + done)
            };
            let room = |a: u64| -> u64 {
                if backwards {
                    match a % CHUNK_SIZE {
                        0 => CHUNK_SIZE,
                        r => r,
                    }
                } else {
                    CHUNK_SIZE - a % CHUNK_SIZE
                }
            };
            let n = left.min(room(s)).min(room(d));
            let (s, d) = if backwards { (s - n, d - n) } else { (s, d) };
            if !self.put_piece(self.chunk((s / CHUNK_SIZE) as usize), s, d, n)? {
                return Ok(());
            }
            done += n;
        }
        Ok(())
    }

    /// Writes `n` bytes of `source` (the chunk holding offset `s` of some VRAM, this one or
    /// another device's; `None`: a chunk nobody wrote, zeros) to offset `d` of this VRAM. The
    /// piece stays inside one chunk on both sides. An absent destination stays absent when
    /// the source is absent too; `false` when the cap leaves no room for it (nothing
    /// written: the copy stops there).
    fn put_piece(&self, source: Option<&Chunk>, s: u64, d: u64, n: u64) -> Result<bool, VramFull> {
        let (sw, di, dw) = (
            (s % CHUNK_SIZE) as usize,
            (d / CHUNK_SIZE) as usize,
            (d % CHUNK_SIZE) as usize,
        );
        let to = match self.chunk(di) {
            Some(c) => c,
            None if source.is_none() => return Ok(true),
            None => match self.chunk_mut(di, d)? {
                Some(c) => c,
                None => return Ok(false),
            },
        };
        self.before_write(di, to, dw, n as usize);
        match source {
            // SAFETY: both ranges lie inside live chunks (`n` is bounded by the room left in
            // each); `ptr::copy` allows them to overlap (a copy inside one chunk).
            Some(from) => unsafe {
                std::ptr::copy(
                    from.data.as_ptr().add(sw),
                    to.data.as_ptr().add(dw),
                    n as usize,
                )
            },
            // SAFETY: the destination range lies inside the live chunk.
            None => unsafe { std::ptr::write_bytes(to.data.as_ptr().add(dw), 0, n as usize) },
        }
        self.mark(to, dw, n as usize);
        Ok(true)
    }

    /// Copy `len` bytes at `src` of `from` (another device's VRAM, or this one) to `dst` of
    /// this VRAM, chunk to chunk in one pass, as [`Vram::copy_within`] does inside one
    /// device: a copy over the fabric. Both ranges must lie inside their VRAM (checked by
    /// the caller); absent source chunks read as zeros, and onto an absent destination chunk
    /// they leave it absent; refused from the first destination chunk the cap leaves no room
    /// for.
    pub fn copy_from(&self, from: &Vram, src: u64, dst: u64, len: u64) -> Result<(), VramFull> {
        if std::ptr::eq(from, self) {
            return self.copy_within(src, dst, len);
        }
        let len = len
            .min(from.size.saturating_sub(src))
            .min(self.size.saturating_sub(dst));
        let mut done = 0u64;
        while done < len {
            let (s, d) = (src + done, dst + done);
            let n = (len - done)
                .min(CHUNK_SIZE - s % CHUNK_SIZE)
                .min(CHUNK_SIZE - d % CHUNK_SIZE);
            if !self.put_piece(from.chunk((s / CHUNK_SIZE) as usize), s, d, n)? {
                return Ok(());
            }
            done += n;
        }
        Ok(())
    }

    /// Fill `[offset, offset + len)` with the little-endian dword `pattern`, repeated
    /// (`len` need not be a multiple of 4: the last copy is cut short). A fill with zeros
    /// leaves absent chunks absent.
    pub fn fill(&self, offset: u64, len: u64, pattern: u32) -> Result<(), VramFull> {
        const STEP: usize = 64 << 10;
        let buf: Vec<u8> = pattern
            .to_le_bytes()
            .iter()
            .copied()
            .cycle()
            .take(STEP.min(len as usize))
            .collect();
        let mut done = 0u64;
        while done < len {
            let n = (STEP as u64).min(len - done) as usize;
            self.write(offset + done, &buf[..n])?;
            done += n as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{CHUNK_SIZE, Vram};

    /// A copy from another device's VRAM moves the bytes across chunk boundaries on both
    /// sides, reads never-written source chunks as zeros (leaving a destination chunk nobody
    /// wrote absent, and clearing one that holds bytes), and marks the pages it writes.
    #[test]
    fn copy_from_another_vram_moves_bytes_and_keeps_chunks_sparse() {
        let (a, b) = (Vram::new(8 * CHUNK_SIZE), Vram::new(8 * CHUNK_SIZE));
        let bytes: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 251) as u8 + 1).collect();
        let src = CHUNK_SIZE - 4096;
        a.write(src, &bytes).unwrap();
        let dst = 3 * CHUNK_SIZE - 100;
        let snapshot = b.snapshot();
        b.copy_from(&a, src, dst, bytes.len() as u64).unwrap();
        let mut back = vec![0u8; bytes.len()];
        b.read(dst, &mut back);
        assert!(back == bytes, "the bytes arrived");
        assert!(
            b.page_generation(dst) > snapshot,
            "the pages written are marked"
        );
        let resident = b.resident_bytes();
        b.copy_from(&a, 6 * CHUNK_SIZE, 6 * CHUNK_SIZE, CHUNK_SIZE)
            .unwrap();
        assert_eq!(
            b.resident_bytes(),
            resident,
            "zeros onto zeros commit nothing"
        );
        b.copy_from(&a, 6 * CHUNK_SIZE, dst, 64).unwrap();
        let mut cleared = [0xffu8; 64];
        b.read(dst, &mut cleared);
        assert_eq!(cleared, [0u8; 64], "an unwritten source reads as zeros");
    }
}
