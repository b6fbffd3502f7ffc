//! Sparse VRAM: a profile has up to 288 GiB of it, tests touch a few MiB.
//!
//! Memory is kept in 2 MiB chunks allocated on the first write; reading a chunk nobody wrote
//! returns zeros, as freshly trained HBM/GDDR would in a model (real memory holds garbage;
//! the driver must not rely on either, and zero is the value that hides the fewest bugs of
//! the "forgot to initialise" kind only if tests also check explicit clears — see MOCK.md).

use std::collections::HashMap;
use std::sync::Mutex;

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
}

impl Vram {
    /// VRAM of `size` bytes, all untouched.
    pub fn new(size: u64) -> Self {
        Self {
            size,
            chunks: Mutex::new(HashMap::new()),
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

    /// Copy bytes in, allocating chunks on first write; bytes outside VRAM are dropped.
    pub fn write(&self, offset: u64, data: &[u8]) {
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
