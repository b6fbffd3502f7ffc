//! The memory the shaders see: GPU virtual addresses to bytes, behind a trait so the mock can
//! plug in its page-table walker.

use std::fmt;

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

/// GPU virtual memory as the shader sees it.
pub trait Memory {
    /// Fills `buf` from `addr`.
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), Fault>;
    /// Writes `data` at `addr`.
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), Fault>;
}

/// A simple memory of separately allocated regions, for tests and tools: every address outside
/// a region faults.
#[derive(Default, Debug)]
pub struct HostMemory {
    regions: Vec<(u64, Vec<u8>)>,
    next: u64,
}

impl HostMemory {
    /// An empty memory whose first allocation starts at 4 GiB (so 32-bit truncation of an
    /// address faults instead of silently working).
    pub fn new() -> HostMemory {
        HostMemory {
            regions: Vec::new(),
            next: 1 << 32,
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

    fn find(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        let i = self
            .regions
            .partition_point(|r| r.0 <= addr)
            .checked_sub(1)?;
        let (base, bytes) = &mut self.regions[i];
        let off = usize::try_from(addr - *base).ok()?;
        bytes.get_mut(off..off.checked_add(len)?)
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
}
