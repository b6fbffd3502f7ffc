//! Sparse VRAM: a profile has up to 288 GiB of it, tests touch a few MiB.
//!
//! Memory is kept in 2 MiB chunks allocated on the first write; reading a chunk nobody wrote
//! returns zeros. (Real memory holds whatever it held; a driver must clear what it relies
//! on, and the mock does not check that it does.)

use std::collections::HashMap;
use std::sync::Mutex;

/// Granule of the write generations the GMC's TLB snapshot checks (a page-table page).
pub const GEN_PAGE: u64 = 0x1000;

/// Size of one backing chunk.
pub const CHUNK_SIZE: u64 = 2 << 20;

/// Device memory, shared by the BAR0 window, MM_INDEX/MM_DATA and (later) the engines.
///
/// It has its own lock, independent of the register file's, so an engine thread can copy
/// memory while the CPU touches registers.
#[derive(Debug)]
pub struct Vram {
    size: u64,
    chunks: Mutex<HashMap<u64, Box<[u8]>>>,
    /// Write generation: a counter bumped by every write, and the generation of the last
    /// write to each 4 KiB page. The GMC compares the pages its walker visits with the
    /// generation of the hub's last invalidation (`ip::gmc`, TLB snapshot semantics).
    gens: Mutex<(u64, HashMap<u64, u64>)>,
}

impl Vram {
    /// VRAM of `size` bytes, all untouched.
    pub fn new(size: u64) -> Self {
        Self {
            size,
            chunks: Mutex::new(HashMap::new()),
            gens: Mutex::new((0, HashMap::new())),
        }
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Whether `[offset, offset + len)` lies inside VRAM.
    pub fn contains(&self, offset: u64, len: u64) -> bool {
        offset.checked_add(len).is_some_and(|end| end <= self.size)
    }

    /// Bytes of host memory actually backing VRAM (a multiple of [`CHUNK_SIZE`]).
    pub fn resident_bytes(&self) -> u64 {
        self.lock().len() as u64 * CHUNK_SIZE
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Box<[u8]>>> {
        // A panic while holding the lock cannot leave a chunk half-initialised in a way that
        // matters more than the panic itself; keep serving the memory.
        self.chunks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Copy bytes out; the caller has checked the range with [`Vram::contains`]. Bytes
    /// outside VRAM read as zero rather than panicking.
    pub fn read(&self, offset: u64, buf: &mut [u8]) {
        let chunks = self.lock();
        let mut done = 0usize;
        while done < buf.len() {
            let addr = offset + done as u64;
            let (idx, within) = (addr / CHUNK_SIZE, (addr % CHUNK_SIZE) as usize);
            let n = (buf.len() - done).min(CHUNK_SIZE as usize - within);
            match chunks.get(&idx) {
                Some(c) => buf[done..done + n].copy_from_slice(&c[within..within + n]),
                None => buf[done..done + n].fill(0),
            }
            done += n;
        }
    }

    /// The current write generation (a write after this call has a larger one).
    pub fn generation(&self) -> u64 {
        self.gens.lock().unwrap_or_else(|p| p.into_inner()).0
    }

    /// Generation of the last write to the 4 KiB page holding `offset` (0: never written).
    pub fn page_generation(&self, offset: u64) -> u64 {
        let g = self.gens.lock().unwrap_or_else(|p| p.into_inner());
        g.1.get(&(offset / GEN_PAGE)).copied().unwrap_or(0)
    }

    /// Copy bytes in, allocating chunks on first write; bytes outside VRAM are dropped.
    pub fn write(&self, offset: u64, data: &[u8]) {
        if !data.is_empty() {
            let mut g = self.gens.lock().unwrap_or_else(|p| p.into_inner());
            g.0 += 1;
            let generation = g.0;
            let last = offset.saturating_add(data.len() as u64 - 1);
            for page in offset / GEN_PAGE..=last / GEN_PAGE {
                g.1.insert(page, generation);
            }
        }
        let mut chunks = self.lock();
        let mut done = 0usize;
        while done < data.len() {
            let addr = offset + done as u64;
            if addr >= self.size {
                break;
            }
            let (idx, within) = (addr / CHUNK_SIZE, (addr % CHUNK_SIZE) as usize);
            let n = (data.len() - done).min(CHUNK_SIZE as usize - within);
            let chunk = chunks
                .entry(idx)
                .or_insert_with(|| vec![0u8; CHUNK_SIZE as usize].into_boxed_slice());
            chunk[within..within + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
    }

    /// Read a little-endian dword.
    pub fn read32(&self, offset: u64) -> u32 {
        let mut b = [0u8; 4];
        self.read(offset, &mut b);
        u32::from_le_bytes(b)
    }

    /// Write a little-endian dword.
    pub fn write32(&self, offset: u64, value: u32) {
        self.write(offset, &value.to_le_bytes());
    }
}
