//! Bounds-checked volatile access to mapped device memory: BARs and DMA-able system memory.
//!
//! Device memory can change under the CPU (the GPU writes it, a register reads back what the
//! hardware decides), so no Rust reference to it is ever created: every access goes through a
//! raw pointer with `read_volatile`/`write_volatile`, after the offset, the size and — where
//! the hardware needs it — the alignment are checked. A failed check is an error naming the
//! device, the region and the offset; it never panics and never touches memory out of range.

use std::os::fd::AsRawFd;
use std::ptr::NonNull;

use crate::pci::{Bar, SysMem};
use crate::{Error, ErrorKind, Result};

/// What keeps a mapping alive; dropping it unmaps the memory.
#[derive(Debug)]
enum Backing {
    /// A file mapping (sysfs `resourceN`, a VFIO device fd at a region offset).
    #[allow(dead_code, reason = "held for its Drop, which unmaps")]
    File(memmap2::MmapRaw),
    /// Anonymous memory from `mmap` (locked or hugepage-backed system memory).
    Anonymous { ptr: NonNull<u8>, len: usize },
}

impl Drop for Backing {
    fn drop(&mut self) {
        if let Backing::Anonymous { ptr, len } = *self {
            // SAFETY: `ptr`/`len` are exactly what `mmap` returned in `MmioRegion::anonymous`,
            // the region is unmapped only here, and no reference into it exists (all access is
            // through raw pointers of the `MmioRegion` that owns this backing and is being
            // dropped).
            unsafe {
                libc::munmap(ptr.as_ptr().cast(), len);
            }
        }
    }
}

/// A mapped region of device or DMA memory with checked volatile access at byte offsets.
///
/// Implements [`Bar`] (for BARs) and is the storage of system memory handed to the GPU.
#[derive(Debug)]
pub struct MmioRegion {
    device: String,
    what: String,
    ptr: *mut u8,
    len: usize,
    _backing: Backing,
}

// SAFETY: the region is plain memory (device or system RAM) reached only through volatile
// accesses of raw pointers; the hardware itself serialises concurrent accesses from several
// threads, exactly as it does for accesses from several CPUs. The mapping lives as long as
// the `MmioRegion` and is not tied to the creating thread.
unsafe impl Send for MmioRegion {}
// SAFETY: see `Send`: no `&self` method hands out references or mutates Rust-visible state.
unsafe impl Sync for MmioRegion {}

impl MmioRegion {
    /// Map `len` bytes of `file` at `offset`, shared and read-write (a sysfs `resourceN` file
    /// at offset 0, a VFIO device fd at a region's offset).
    ///
    /// `path` is only used in error messages.
    pub fn map_file(
        device: &str,
        what: &str,
        file: &impl AsRawFd,
        path: &std::path::Path,
        offset: u64,
        len: usize,
    ) -> Result<Self> {
        if len == 0 {
            let reason = format!("{what} at {} has size 0", path.display());
            return Err(Error::new(device, ErrorKind::NoBar { bar: 0, reason }));
        }
        let options = memmap2::MmapOptions::new()
            .offset(offset)
            .len(len)
            .map_raw(file.as_raw_fd());
        let map = options.map_err(|source| {
            let path = path.to_path_buf();
            Error::new(
                device,
                ErrorKind::Io {
                    op: "mmap",
                    path,
                    source,
                },
            )
        })?;
        let (ptr, len) = (map.as_mut_ptr(), map.len());
        Ok(Self {
            device: device.into(),
            what: what.into(),
            ptr,
            len,
            _backing: Backing::File(map),
        })
    }

    /// Allocate `len` bytes of anonymous memory, populated and locked in RAM so its physical
    /// pages stay put while the GPU uses them. With `hugepage`, the memory comes from 2 MiB
    /// hugetlb pages (physically contiguous per page; `len` must be a multiple of 2 MiB).
    pub fn anonymous(device: &str, what: &str, len: usize, hugepage: bool) -> Result<Self> {
        let path = match hugepage {
            true => "/proc/sys/vm/nr_hugepages",
            false => "anonymous memory",
        };
        let io_err = |op, source| {
            Error::new(
                device,
                ErrorKind::Io {
                    op,
                    path: path.into(),
                    source,
                },
            )
        };
        if len == 0 {
            let (what, offset, size) = (what.into(), 0, 0);
            return Err(Error::new(
                device,
                ErrorKind::OutOfRange {
                    what,
                    offset,
                    size,
                    len: 0,
                },
            ));
        }
        let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE;
        if hugepage {
            flags |= libc::MAP_HUGETLB | libc::MAP_HUGE_2MB;
        }
        // SAFETY: an anonymous mapping at an address of the kernel's choosing aliases no
        // existing memory; the result is checked against MAP_FAILED before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io_err("mmap", std::io::Error::last_os_error()));
        }
        let Some(ptr) = NonNull::new(ptr.cast::<u8>()) else {
            return Err(io_err("mmap", std::io::Error::other("mmap returned null")));
        };
        // From here on, `backing` unmaps the memory on every error path.
        let backing = Backing::Anonymous { ptr, len };
        // SAFETY: `ptr`/`len` describe the mapping just created; mlock only pins its pages.
        if unsafe { libc::mlock(ptr.as_ptr().cast(), len) } != 0 {
            return Err(io_err("mlock", std::io::Error::last_os_error()));
        }
        let (device, what, ptr) = (device.into(), what.into(), ptr.as_ptr());
        Ok(Self {
            device,
            what,
            ptr,
            len,
            _backing: backing,
        })
    }

    /// CPU virtual address of the first byte (for `/proc/self/pagemap` and VFIO DMA maps).
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region has no bytes (never true for a constructed region).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Pointer to `size` bytes at `offset`, after checking bounds (with overflow) and
    /// alignment.
    fn at(&self, offset: u64, size: usize, align: u64) -> Result<*mut u8> {
        let (what, len, size) = (|| self.what.clone(), self.len as u64, size as u64);
        if offset.checked_add(size).is_none_or(|end| end > len) {
            let what = what();
            return Err(Error::new(
                &self.device,
                ErrorKind::OutOfRange {
                    what,
                    offset,
                    size,
                    len,
                },
            ));
        }
        if !offset.is_multiple_of(align) {
            let what = what();
            return Err(Error::new(
                &self.device,
                ErrorKind::Misaligned {
                    what,
                    offset,
                    align,
                },
            ));
        }
        // `offset < len <= isize::MAX` was checked above, so the cast is lossless.
        // SAFETY: `offset + size <= len`, so the pointer stays inside the mapping.
        Ok(unsafe { self.ptr.add(offset as usize) })
    }

    /// Volatile read of one naturally aligned `T`.
    fn load<T: Copy>(&self, offset: u64) -> Result<T> {
        let p = self
            .at(offset, size_of::<T>(), size_of::<T>() as u64)?
            .cast::<T>();
        // SAFETY: `at` checked that `size_of::<T>()` bytes at `p` lie inside the live mapping
        // and that `p` is aligned for `T` (the mapping itself is page aligned). The access is
        // volatile and creates no reference to device memory.
        Ok(unsafe { p.read_volatile() })
    }

    /// Volatile write of one naturally aligned `T` as a single access.
    fn store<T: Copy>(&self, offset: u64, value: T) -> Result<()> {
        let p = self
            .at(offset, size_of::<T>(), size_of::<T>() as u64)?
            .cast::<T>();
        // SAFETY: as in `load`: in bounds, aligned, volatile, no reference created.
        unsafe { p.write_volatile(value) };
        Ok(())
    }

    /// Walk `len` bytes at `offset` in the widest accesses alignment allows: `access(p, i,
    /// wide)` for byte `i` of the walk at `p`, 8 bytes at an 8-aligned `p` when `wide`, else one.
    fn walk(
        &self,
        offset: u64,
        len: usize,
        mut access: impl FnMut(*mut u8, usize, bool),
    ) -> Result<()> {
        let base = self.at(offset, len, 1)?;
        let mut i = 0;
        while i < len {
            // SAFETY: `at` checked `offset + len <= self.len`, and `i < len`.
            let p = unsafe { base.add(i) };
            let wide = (p as usize).is_multiple_of(8) && len - i >= 8;
            access(p, i, wide);
            i += if wide { 8 } else { 1 };
        }
        Ok(())
    }
}

impl Bar for MmioRegion {
    fn len(&self) -> u64 {
        self.len as u64
    }
    fn host_ptr(&self) -> Option<*mut u8> {
        Some(self.ptr)
    }
    fn read32(&self, offset: u64) -> Result<u32> {
        self.load(offset)
    }
    fn write32(&self, offset: u64, value: u32) -> Result<()> {
        self.store(offset, value)
    }
    fn read64(&self, offset: u64) -> Result<u64> {
        self.load(offset)
    }
    fn write64(&self, offset: u64, value: u64) -> Result<()> {
        self.store(offset, value)
    }
    fn read8(&self, offset: u64) -> Result<u8> {
        self.load(offset)
    }
    fn write8(&self, offset: u64, value: u8) -> Result<()> {
        self.store(offset, value)
    }
    /// Copies 8 bytes per access where aligned.
    fn read_bytes(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.walk(offset, buf.len(), |p, i, wide| {
            if wide {
                // SAFETY: `walk` hands out 8 in-bounds bytes at an 8-aligned `p`.
                let word = unsafe { p.cast::<u64>().read_volatile() };
                buf[i..i + 8].copy_from_slice(&word.to_ne_bytes());
            } else {
                // SAFETY: `walk` hands out one in-bounds byte at `p`.
                buf[i] = unsafe { p.read_volatile() };
            }
        })
    }
    /// Copies 8 bytes per access where aligned.
    fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.walk(offset, data.len(), |p, i, wide| {
            if wide {
                let mut word = [0u8; 8];
                word.copy_from_slice(&data[i..i + 8]);
                // SAFETY: `walk` hands out 8 in-bounds bytes at an 8-aligned `p`.
                unsafe { p.cast::<u64>().write_volatile(u64::from_ne_bytes(word)) };
            } else {
                // SAFETY: `walk` hands out one in-bounds byte at `p`.
                unsafe { p.write_volatile(data[i]) };
            }
        })
    }
}

/// System memory the GPU reaches by DMA: a locked mapping plus the bus address of each page.
pub struct DmaMemory {
    region: MmioRegion,
    bus_addrs: Vec<u64>,
}

impl DmaMemory {
    /// Pair a mapping with the bus addresses of its 4 KiB pages.
    pub fn new(region: MmioRegion, bus_addrs: Vec<u64>) -> Self {
        Self { region, bus_addrs }
    }

    /// The mapping (for its CPU address).
    pub fn region(&self) -> &MmioRegion {
        &self.region
    }
}

impl SysMem for DmaMemory {
    fn len(&self) -> usize {
        self.region.len()
    }
    fn bus_addrs(&self) -> &[u64] {
        &self.bus_addrs
    }
    fn read_bytes(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.region.read_bytes(offset, buf)
    }
    fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.region.write_bytes(offset, data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_region(len: usize) -> (crate::testutil::TempDir, MmioRegion) {
        let dir = crate::testutil::TempDir::new();
        let path = dir.path().join("resource5");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        file.set_len(len as u64).unwrap();
        let region = MmioRegion::map_file("0000:03:00.0", "BAR5", &file, &path, 0, len).unwrap();
        (dir, region)
    }

    #[test]
    fn dword_register_round_trips_and_lands_little_endian_in_the_file() {
        let (dir, bar) = file_region(4096);
        bar.write32(0x10, 0xdead_beef).unwrap();
        assert_eq!(bar.read32(0x10).unwrap(), 0xdead_beef);
        drop(bar);
        let bytes = std::fs::read(dir.path().join("resource5")).unwrap();
        assert_eq!(&bytes[0x10..0x14], &0xdead_beef_u32.to_le_bytes());
    }

    #[test]
    fn doorbell_is_one_64_bit_value() {
        let (_dir, bar) = file_region(4096);
        bar.write64(0x18, 0x1122_3344_5566_7788).unwrap();
        assert_eq!(bar.read64(0x18).unwrap(), 0x1122_3344_5566_7788);
        assert_eq!(bar.read32(0x18).unwrap(), 0x5566_7788);
        assert_eq!(bar.read32(0x1c).unwrap(), 0x1122_3344);
    }

    #[test]
    fn byte_access_touches_one_byte() {
        let (_dir, bar) = file_region(4096);
        bar.write32(0x20, 0xaabb_ccdd).unwrap();
        bar.write8(0x21, 0x11).unwrap();
        assert_eq!(bar.read8(0x21).unwrap(), 0x11);
        assert_eq!(bar.read32(0x20).unwrap(), 0xaabb_11dd);
    }

    #[test]
    fn unaligned_byte_copies_round_trip() {
        let (_dir, bar) = file_region(4096);
        let data: Vec<u8> = (0..100u8).collect();
        bar.write_bytes(3, &data).unwrap();
        let mut back = vec![0u8; 100];
        bar.read_bytes(3, &mut back).unwrap();
        assert_eq!(back, data);
        assert_eq!(
            bar.read8(2).unwrap(),
            0,
            "byte before the copy must stay untouched"
        );
        assert_eq!(
            bar.read8(103).unwrap(),
            0,
            "byte after the copy must stay untouched"
        );
    }

    #[test]
    fn access_past_the_end_is_out_of_range() {
        let (_dir, bar) = file_region(4096);
        assert!(matches!(
            bar.read32(4096),
            Err(Error {
                kind: ErrorKind::OutOfRange {
                    offset: 4096,
                    size: 4,
                    len: 4096,
                    ..
                },
                ..
            })
        ));
        assert!(matches!(
            bar.write64(4092, 0),
            Err(Error {
                kind: ErrorKind::OutOfRange { .. },
                ..
            })
        ));
        assert!(matches!(
            bar.read8(4096),
            Err(Error {
                kind: ErrorKind::OutOfRange { .. },
                ..
            })
        ));
        let mut buf = [0u8; 2];
        assert!(matches!(
            bar.read_bytes(4095, &mut buf),
            Err(Error {
                kind: ErrorKind::OutOfRange { .. },
                ..
            })
        ));
        assert!(bar.read_bytes(4094, &mut buf).is_ok());
    }

    #[test]
    fn offset_overflow_is_out_of_range_not_a_wrap() {
        let (_dir, bar) = file_region(4096);
        assert!(matches!(
            bar.read32(u64::MAX - 3),
            Err(Error {
                kind: ErrorKind::OutOfRange { .. },
                ..
            })
        ));
        assert!(matches!(
            bar.write_bytes(u64::MAX, &[1, 2]),
            Err(Error {
                kind: ErrorKind::OutOfRange { .. },
                ..
            })
        ));
        assert!(matches!(
            bar.read64(u64::MAX - 7),
            Err(Error {
                kind: ErrorKind::OutOfRange { .. },
                ..
            })
        ));
    }

    #[test]
    fn misaligned_register_and_doorbell_accesses_are_refused() {
        let (_dir, bar) = file_region(4096);
        assert!(matches!(
            bar.read32(2),
            Err(Error {
                kind: ErrorKind::Misaligned {
                    offset: 2,
                    align: 4,
                    ..
                },
                ..
            })
        ));
        assert!(matches!(
            bar.write32(1, 0),
            Err(Error {
                kind: ErrorKind::Misaligned { .. },
                ..
            })
        ));
        assert!(matches!(
            bar.write64(4, 0),
            Err(Error {
                kind: ErrorKind::Misaligned {
                    offset: 4,
                    align: 8,
                    ..
                },
                ..
            })
        ));
    }

    #[test]
    fn errors_name_the_device_and_region() {
        let (_dir, bar) = file_region(4096);
        let msg = bar.read32(0x2000).unwrap_err().to_string();
        assert!(
            msg.contains("0000:03:00.0") && msg.contains("BAR5") && msg.contains("0x2000"),
            "{msg}"
        );
    }

    #[test]
    fn anonymous_memory_is_zeroed_and_writable() {
        let mem = MmioRegion::anonymous("test", "system memory", 8192, false).unwrap();
        assert_eq!(mem.len(), 8192);
        assert_eq!(Bar::read64(&mem, 4096).unwrap(), 0);
        mem.write_bytes(4090, &[7; 12]).unwrap();
        let mut back = [0u8; 12];
        mem.read_bytes(4090, &mut back).unwrap();
        assert_eq!(back, [7; 12]);
    }

    #[test]
    fn dma_memory_reports_its_bus_addresses() {
        let mem = MmioRegion::anonymous("test", "system memory", 8192, false).unwrap();
        let dma = DmaMemory::new(mem, vec![0x1000, 0x5000]);
        assert_eq!(dma.bus_addrs(), &[0x1000, 0x5000]);
        dma.write32(8188, 0x0102_0304).unwrap();
        assert_eq!(dma.read32(8188).unwrap(), 0x0102_0304);
        assert!(matches!(
            dma.read32(8190),
            Err(Error {
                kind: ErrorKind::OutOfRange { .. },
                ..
            })
        ));
    }
}
