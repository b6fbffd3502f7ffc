//! System memory handed to the driver (`alloc_sysmem`), with bus addresses the mock resolves
//! itself so its engines can DMA to and from it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::engine::Wake;

use am_driver::pci::SYSMEM_PAGE_SIZE;
use am_driver::{Error as DrvError, SysMem};

const PAGE: u64 = SYSMEM_PAGE_SIZE as u64;

/// First bus address handed out: 10 TiB, above every BAR and far above 4 GiB (a driver that
/// truncates a bus address to 32 bits, or mixes it up with a VRAM offset, sees it fail),
/// and inside the 44-bit DMA mask Linux gives GC 10/11/12 parts (48 bits on GC 9.4.3+), as
/// the host's DMA allocator keeps addresses inside the device's mask.
pub const SYSMEM_BUS_BASE: u64 = 0x0000_0a00_0000_0000;

#[derive(Debug)]
struct Region {
    bytes: Mutex<Vec<u8>>,
    /// Set when the driver drops its [`MockSysMem`]: the pages are off the bus from then
    /// on, even while an engine still holds the region ([`SysPage`]).
    freed: AtomicBool,
}

impl Region {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        am_isa::sync::lock(&self.bytes)
    }

    fn freed(&self) -> bool {
        self.freed.load(Ordering::Acquire)
    }
}

/// One page of system memory an engine found on the bus ([`SysArena::page`]) and keeps
/// for the length of one step of its work, so repeated reads of it (a kernel's arguments,
/// read by every wave) skip the arena's lock and table. A read still fails once the
/// driver has freed the page, as a look-up in the arena would.
#[derive(Debug)]
pub struct SysPage {
    /// Bus address of the page's first byte.
    bus: u64,
    region: Arc<Region>,
    /// The page's index in its region.
    idx: usize,
}

impl SysPage {
    /// Whether `[bus, bus + len)` lies inside this page.
    pub fn holds(&self, bus: u64, len: usize) -> bool {
        bus.checked_sub(self.bus)
            .is_some_and(|at| at.saturating_add(len as u64) <= PAGE)
    }

    /// DMA read of `buf.len()` bytes at `bus`, which [`SysPage::holds`].
    pub fn read(&self, bus: u64, buf: &mut [u8]) -> Result<(), DmaFault> {
        if self.region.freed() {
            return Err(DmaFault::Freed(bus));
        }
        let at = self.idx * SYSMEM_PAGE_SIZE + (bus - self.bus) as usize;
        buf.copy_from_slice(&self.region.lock()[at..at + buf.len()]);
        Ok(())
    }
}

/// Every system-memory page the device can reach, by bus address.
#[derive(Debug, Default)]
pub struct SysArena {
    inner: Mutex<ArenaInner>,
    /// Queues blocked on memory: a CPU write to system memory wakes them.
    wake: Arc<Wake>,
}

#[derive(Debug, Default)]
struct ArenaInner {
    next_bus: u64,
    /// Bus page → (region, page index within the region). Weak: when the driver drops its
    /// `SysMem` the pages disappear from the bus, and a later DMA to them is caught.
    pages: HashMap<u64, (Weak<Region>, usize)>,
}

/// Why a DMA access to system memory failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DmaFault {
    /// No page was ever allocated at this bus address.
    Unmapped(u64),
    /// The page was allocated but the driver has since freed it.
    Freed(u64),
}

impl std::fmt::Display for DmaFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DmaFault::Unmapped(a) => write!(f, "no system memory at bus address {a:#x}"),
            DmaFault::Freed(a) => write!(f, "system memory at bus address {a:#x} was freed"),
        }
    }
}

impl SysArena {
    /// An empty arena whose CPU-side writes wake `wake`'s sleepers.
    pub fn new(wake: Arc<Wake>) -> Self {
        SysArena {
            inner: Mutex::default(),
            wake,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ArenaInner> {
        am_isa::sync::lock(&self.inner)
    }

    /// Allocate `size` bytes (rounded up to pages). Non-contiguous requests get their pages
    /// in descending bus order, so a driver that assumes contiguity without asking for it
    /// maps the wrong pages.
    pub fn alloc(&self, device: &str, size: usize, contiguous: bool) -> Arc<MockSysMem> {
        let pages = size.div_ceil(SYSMEM_PAGE_SIZE).max(1);
        let region = Arc::new(Region {
            bytes: Mutex::new(vec![0u8; pages * SYSMEM_PAGE_SIZE]),
            freed: AtomicBool::new(false),
        });
        let mut inner = self.lock();
        inner
            .pages
            .retain(|_, (w, _)| w.upgrade().is_some_and(|r| !r.freed()));
        if inner.next_bus == 0 {
            inner.next_bus = SYSMEM_BUS_BASE;
        }
        let base = inner.next_bus;
        // One unmapped guard page between allocations catches overruns.
        inner.next_bus += (pages as u64 + 1) * PAGE;
        let mut bus_addrs: Vec<u64> = (0..pages as u64).map(|i| base + i * PAGE).collect();
        if !contiguous {
            bus_addrs.reverse();
        }
        for (i, &bus) in bus_addrs.iter().enumerate() {
            inner.pages.insert(bus, (Arc::downgrade(&region), i));
        }
        Arc::new(MockSysMem {
            device: device.to_string(),
            region,
            bus_addrs,
            wake: self.wake.clone(),
        })
    }

    fn resolve(&self, bus: u64) -> Result<(Arc<Region>, usize), DmaFault> {
        let page = bus & !(PAGE - 1);
        let inner = self.lock();
        let (weak, idx) = inner.pages.get(&page).ok_or(DmaFault::Unmapped(bus))?;
        let region = weak
            .upgrade()
            .filter(|r| !r.freed())
            .ok_or(DmaFault::Freed(bus))?;
        Ok((region, *idx))
    }

    /// The page that holds bus address `bus`, for reads an engine repeats
    /// ([`SysPage::read`]).
    pub fn page(&self, bus: u64) -> Result<SysPage, DmaFault> {
        let (region, idx) = self.resolve(bus)?;
        Ok(SysPage {
            bus: bus & !(PAGE - 1),
            region,
            idx,
        })
    }

    /// DMA read from system memory at a bus address.
    pub fn read(&self, bus: u64, buf: &mut [u8]) -> Result<(), DmaFault> {
        let mut done = 0usize;
        while done < buf.len() {
            let addr = bus + done as u64;
            let (region, idx) = self.resolve(addr)?;
            let within = (addr % PAGE) as usize;
            let n = (buf.len() - done).min(SYSMEM_PAGE_SIZE - within);
            let at = idx * SYSMEM_PAGE_SIZE + within;
            buf[done..done + n].copy_from_slice(&region.lock()[at..at + n]);
            done += n;
        }
        Ok(())
    }

    /// Run `f` on the bytes of `[bus, bus + len)` page by page, with each piece's offset
    /// from `bus` (a DMA read without a bounce buffer).
    pub fn with_pages(
        &self,
        bus: u64,
        len: usize,
        mut f: impl FnMut(usize, &[u8]),
    ) -> Result<(), DmaFault> {
        let mut done = 0usize;
        while done < len {
            let addr = bus + done as u64;
            let (region, idx) = self.resolve(addr)?;
            let within = (addr % PAGE) as usize;
            let n = (len - done).min(SYSMEM_PAGE_SIZE - within);
            let at = idx * SYSMEM_PAGE_SIZE + within;
            f(done, &region.lock()[at..at + n]);
            done += n;
        }
        Ok(())
    }

    /// DMA write to system memory at a bus address.
    pub fn write(&self, bus: u64, data: &[u8]) -> Result<(), DmaFault> {
        let mut done = 0usize;
        while done < data.len() {
            let addr = bus + done as u64;
            let (region, idx) = self.resolve(addr)?;
            let within = (addr % PAGE) as usize;
            let n = (data.len() - done).min(SYSMEM_PAGE_SIZE - within);
            let at = idx * SYSMEM_PAGE_SIZE + within;
            region.lock()[at..at + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
        Ok(())
    }
}

/// One `alloc_sysmem` allocation as the driver sees it.
#[derive(Debug)]
pub struct MockSysMem {
    device: String,
    region: Arc<Region>,
    bus_addrs: Vec<u64>,
    wake: Arc<Wake>,
}

impl Drop for MockSysMem {
    fn drop(&mut self) {
        self.region.freed.store(true, Ordering::Release);
    }
}

impl MockSysMem {
    fn check(&self, offset: u64, len: usize) -> am_driver::Result<usize> {
        let total = self.bus_addrs.len() * SYSMEM_PAGE_SIZE;
        match offset.checked_add(len as u64) {
            Some(end) if end <= total as u64 => Ok(offset as usize),
            _ => Err(DrvError::new(
                &self.device,
                am_driver::ErrorKind::OutOfRange {
                    what: "system memory".into(),
                    offset,
                    size: len as u64,
                    len: total as u64,
                },
            )),
        }
    }
}

impl SysMem for MockSysMem {
    fn len(&self) -> usize {
        self.bus_addrs.len() * SYSMEM_PAGE_SIZE
    }

    fn bus_addrs(&self) -> &[u64] {
        &self.bus_addrs
    }

    fn read_bytes(&self, offset: u64, buf: &mut [u8]) -> am_driver::Result<()> {
        let at = self.check(offset, buf.len())?;
        buf.copy_from_slice(&self.region.lock()[at..at + buf.len()]);
        Ok(())
    }

    fn write_bytes(&self, offset: u64, data: &[u8]) -> am_driver::Result<()> {
        let at = self.check(offset, data.len())?;
        self.region.lock()[at..at + data.len()].copy_from_slice(data);
        self.wake.notify();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page an engine keeps reads its bytes while the driver holds the memory, and fails
    /// as freed once the driver drops it, as a look-up in the arena does; the arena also
    /// refuses a page never allocated.
    #[test]
    fn a_kept_page_fails_once_its_memory_is_freed() {
        let arena = SysArena::default();
        let mem = arena.alloc("mock", 2 * SYSMEM_PAGE_SIZE, true);
        mem.write_bytes(0x10, &[1, 2, 3, 4]).unwrap();
        let bus = mem.bus_addrs()[0];
        let page = arena.page(bus + 0x10).unwrap();
        assert!(page.holds(bus, SYSMEM_PAGE_SIZE));
        assert!(!page.holds(bus + 0xffc, 8), "past the page's end");
        let mut b = [0u8; 4];
        page.read(bus + 0x10, &mut b).unwrap();
        assert_eq!(b, [1, 2, 3, 4]);
        drop(mem);
        assert_eq!(
            page.read(bus + 0x10, &mut b),
            Err(DmaFault::Freed(bus + 0x10))
        );
        assert_eq!(arena.read(bus, &mut b), Err(DmaFault::Freed(bus)));
        assert_eq!(arena.page(bus).unwrap_err(), DmaFault::Freed(bus));
        // A later allocation drops the freed pages from the bus.
        let _other = arena.alloc("mock", SYSMEM_PAGE_SIZE, true);
        assert_eq!(arena.read(bus, &mut b), Err(DmaFault::Unmapped(bus)));
    }
}
