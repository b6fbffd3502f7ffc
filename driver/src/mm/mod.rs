//! Memory manager: physical VRAM pools, the GPU virtual address space and the GPUVM page
//! tables of VM context 0.
//!
//! VRAM is carved, bottom up, into
//! - the boot pool (`[paddr_base, 32 MiB)`): everything `init_sw` allocates while booting,
//!   including the root page table. Allocation is deterministic, so a later driver instance
//!   finds the firmware and ring buffers of a warm boot at the same addresses and never
//!   overwrites them;
//! - the page-table pool (1/512 of VRAM, enough to map all of it with 4 KiB pages), low in
//!   VRAM so tables stay CPU-visible through a small BAR0;
//! - the main pool: the rest, up to the reserved top of VRAM.
//!
//! `paddr_base` is 1 MiB on an SR-IOV VF (the first MiB of VF VRAM is not ours); the XGMI
//! segment offset of a hive is a different thing and only shows up in the entries
//! ([`PageTables::vram_offset`], from the [`McLayout`]). Another hive member's VRAM is mapped by its
//! hive physical address ([`MemoryManager::map`] with `hive`).

mod pt;
mod pte;
mod tlsf;

use std::ops::Range;

pub use pt::*;
pub use pte::*;
pub use tlsf::*;

use crate::*;

/// Size of the boot pool at the bottom of VRAM.
pub const BOOT_POOL_SIZE: u64 = 32 << 20;
/// First GPU virtual address handed out (tinygrad's choice, shared by all its devices; well
/// above anything the CP or shaders reserve).
pub const VA_BASE: u64 = 0x2000_0000_0000;
/// Size of the allocatable GPU virtual address space.
pub const VA_SIZE: u64 = 1 << 44;

/// Levels of the GPUVM tree, named as `enum amdgpu_vm_level`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum VmLevel {
    /// Root directory, 512 GiB per entry.
    Pdb2,
    /// 1 GiB per entry.
    Pdb1,
    /// 2 MiB per entry.
    Pdb0,
    /// Page table, 4 KiB per entry.
    Ptb,
}

impl VmLevel {
    /// Position of this level's index in a virtual address: 9 bits per level above 4 KiB.
    pub const fn shift(self) -> u32 {
        39 - 9 * self as u32
    }
    /// Bytes one entry covers.
    pub const fn entry_size(self) -> u64 {
        1 << self.shift()
    }
    /// The level below, if any.
    pub const fn child(self) -> Option<VmLevel> {
        [Some(Self::Pdb1), Some(Self::Pdb0), Some(Self::Ptb), None][self as usize]
    }
}

/// Access and placement of a mapping.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MapFlags {
    /// `READABLE`.
    pub readable: bool,
    /// `WRITEABLE`.
    pub writable: bool,
    /// `EXECUTABLE`.
    pub executable: bool,
    /// `SYSTEM`: the address is a system-memory bus address, not VRAM.
    pub system: bool,
    /// `SNOOPED`: accesses snoop the CPU caches.
    pub snooped: bool,
    /// `MTYPE_UC` instead of `MTYPE_NC`.
    pub uncached: bool,
}

impl MapFlags {
    /// Readable, writable, executable VRAM.
    pub const VRAM: MapFlags = MapFlags {
        readable: true,
        writable: true,
        executable: true,
        system: false,
        snooped: false,
        uncached: false,
    };
    /// Another XGMI hive member's VRAM: readable, writable, executable, snooped, `MTYPE_NC`
    /// and VRAM-style (no `SYSTEM`), as `gmc_v9_0_get_coherence_flags` maps a peer's VRAM
    /// on GC 9.4.3 (remote, not local: `MTYPE_NC`; snooped within the hive).
    pub const PEER_VRAM: MapFlags = MapFlags {
        snooped: true,
        ..MapFlags::VRAM
    };
    /// Readable, writable, executable system memory, snooped.
    pub const SYSTEM: MapFlags = MapFlags {
        system: true,
        ..MapFlags::PEER_VRAM
    };
}

/// 64-bit access to VRAM at physical addresses: where the page tables live.
pub trait VramAccess {
    /// Reads the 8-byte entry at `paddr`.
    fn read64(&self, paddr: u64) -> Result<u64>;
    /// Writes the 8-byte entry at `paddr`.
    fn write64(&self, paddr: u64, value: u64) -> Result<()>;
    /// Zeroes `len` bytes (a multiple of 8) at `paddr`.
    fn zero(&self, paddr: u64, len: u64) -> Result<()> {
        (0..len / 8).try_for_each(|i| self.write64(paddr + i * 8, 0))
    }
}

/// VRAM left alone: reads are zero and writes vanish. For an inspecting instance, whose
/// allocator bookkeeping must not clear the tables of the instance that runs the device.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoVram;

impl VramAccess for NoVram {
    fn read64(&self, _: u64) -> Result<u64> {
        Ok(0)
    }
    fn write64(&self, _: u64, _: u64) -> Result<()> {
        Ok(())
    }
}

/// The physical pools a block allocates from (page tables come from their own pool, which
/// only the page-table code uses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pool {
    /// Bottom 32 MiB: boot-time allocations that survive into later driver instances.
    Boot,
    /// Everything else.
    Main,
}

/// A GPU virtual range with the physical memory behind it, as [`MemoryManager::valloc`]
/// returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VirtMapping {
    /// GPU virtual address.
    pub va: u64,
    /// Size in bytes.
    pub size: u64,
    /// Physical `(addr, len)` ranges in VA order.
    pub paddrs: Vec<(u64, u64)>,
    /// How it is mapped.
    pub flags: MapFlags,
}

/// Physical pools, the VA allocator and the page tables of one device.
#[derive(Debug)]
pub struct MemoryManager {
    /// Boot pool.
    pub boot: Tlsf,
    /// Page-table pool.
    pub ptable: Tlsf,
    /// Main pool.
    pub main: Tlsf,
    /// GPU virtual address allocator over `[VA_BASE, VA_BASE + VA_SIZE)`.
    pub va: Tlsf,
    /// The page-table tree of VM context 0.
    pub tables: PageTables,
    booting: bool,
}

/// Page tables come from the boot pool while booting, then from the page-table pool.
impl TableAlloc for MemoryManager {
    fn alloc_table(&mut self, mem: &dyn VramAccess) -> Result<u64> {
        let t = if self.booting {
            self.boot.alloc(PAGE_SIZE, PAGE_SIZE)?
        } else {
            // A full page-table pool spills into the main pool rather than failing a map.
            self.ptable
                .alloc(PAGE_SIZE, PAGE_SIZE)
                .or_else(|_| self.main.alloc(PAGE_SIZE, PAGE_SIZE))?
        };
        mem.zero(t, PAGE_SIZE)?;
        Ok(t)
    }
    /// A table goes back to whichever pool it came from.
    fn free_table(&mut self, paddr: u64) -> Result<()> {
        let mut pools = [&mut self.boot, &mut self.ptable].into_iter();
        pools
            .find(|p| p.range().contains(&paddr))
            .unwrap_or(&mut self.main)
            .free(paddr)
    }
}

impl MemoryManager {
    /// Lays out the pools of `device` (named in errors) over `vram`, the VRAM the driver may
    /// use (from 1 MiB on a VF, up to the reserved top), and allocates the (zeroed) root page
    /// table from the boot pool; entries take `mc`'s XGMI segment offset. The manager starts
    /// in boot mode: page tables come from the boot pool until
    /// [`finish_boot`](Self::finish_boot).
    pub fn new(
        device: &str,
        vram: Range<u64>,
        format: PteFormat,
        mc: &McLayout,
        mem: &dyn VramAccess,
    ) -> Result<Self> {
        let pool = |name: &str, range| Tlsf::new(format!("{device} {name}"), range);
        let boot_end = BOOT_POOL_SIZE.min(vram.end);
        let pt_end = (boot_end + (vram.end / 512).next_multiple_of(1 << 20)).min(vram.end);
        let mut boot = pool("boot pool", vram.start..boot_end);
        let root = boot.alloc(PAGE_SIZE, PAGE_SIZE)?;
        mem.zero(root, PAGE_SIZE)?;
        Ok(MemoryManager {
            boot,
            ptable: pool("page-table pool", boot_end..pt_end),
            main: pool("VRAM", pt_end..vram.end),
            va: pool("GPU VA space", VA_BASE..VA_BASE + VA_SIZE),
            tables: PageTables {
                format,
                root,
                vram_offset: mc.xgmi_paddr_base,
                xgmi_seg_size: mc.xgmi_seg_size,
                va_base: VA_BASE,
            },
            booting: true,
        })
    }

    /// Each allocator (boot, page-table and main VRAM pools, GPU virtual space) by name with
    /// its free blocks: equal before and after a sequence of allocations and frees when
    /// everything was returned.
    pub fn free_lists(&self) -> Vec<(String, Vec<(u64, u64)>)> {
        [&self.boot, &self.ptable, &self.main, &self.va]
            .into_iter()
            .map(|t| (t.name().to_string(), t.free_blocks()))
            .collect()
    }

    /// Ends boot mode: page tables now come from the page-table pool.
    pub fn finish_boot(&mut self) {
        self.booting = false;
    }

    /// Allocates `size` bytes of VRAM from `pool`, aligned to `align` (at least 4 KiB).
    pub fn palloc(&mut self, size: u64, align: u64, pool: Pool) -> Result<u64> {
        match pool {
            Pool::Boot => &mut self.boot,
            Pool::Main => &mut self.main,
        }
        .alloc(size, align)
    }

    /// Allocates GPU virtual space, aligned to the largest power of two not above `size` (so
    /// big buffers can use huge pages and large fragments).
    pub fn alloc_va(&mut self, size: u64) -> Result<u64> {
        self.va.alloc(size, 1 << size.max(1).ilog2())
    }

    /// Maps `va` to the physical ranges, or to hive physical ranges (another member's VRAM)
    /// when `hive` (see [`PageTables::map`]).
    pub fn map(
        &mut self,
        mem: &dyn VramAccess,
        va: u64,
        ranges: &[(u64, u64)],
        flags: MapFlags,
        hive: bool,
    ) -> Result<()> {
        let t = self.tables;
        t.map(mem, self, va, ranges, flags, hive)
    }

    /// Unmaps `[va, va + size)` and frees emptied tables (see [`PageTables::unmap`]).
    pub fn unmap(&mut self, mem: &dyn VramAccess, va: u64, size: u64) -> Result<()> {
        let t = self.tables;
        t.unmap(mem, self, va, size)
    }

    /// Allocates `size` bytes (rounded up to 4 KiB) of VRAM and GPU virtual space and maps
    /// them ([`MapFlags::VRAM`]). Non-contiguous requests take the largest pieces the main
    /// pool has (2 MiB-aligned from 2 MiB up) so the mapping gets huge pages and fragments.
    pub fn valloc(
        &mut self,
        mem: &dyn VramAccess,
        size: u64,
        contiguous: bool,
    ) -> Result<VirtMapping> {
        let (size, flags) = (size.max(1).next_multiple_of(PAGE_SIZE), MapFlags::VRAM);
        let mut paddrs = vec![];
        let mut placed = 0;
        let mut chunk = if contiguous { size } else { 1 << size.ilog2() };
        let va = loop {
            if placed == size {
                break self.alloc_va(size).and_then(|va| {
                    let mapped = self.map(mem, va, &paddrs, flags, false);
                    mapped
                        .map(|()| va)
                        .or_else(|e| self.va.free(va).and(Err(e)))
                });
            }
            chunk = chunk.min(size - placed);
            match self
                .main
                .alloc(chunk, if chunk >= 2 << 20 { 2 << 20 } else { PAGE_SIZE })
            {
                Ok(p) => {
                    paddrs.push((p, chunk));
                    placed += chunk;
                }
                Err(Error {
                    kind: ErrorKind::OutOfMemory { .. },
                    ..
                }) if !contiguous && chunk > PAGE_SIZE => {
                    chunk = (chunk / 2).next_multiple_of(PAGE_SIZE)
                }
                Err(e) => break Err(e),
            }
        };
        match va {
            Ok(va) => Ok(VirtMapping {
                va,
                size,
                paddrs,
                flags,
            }),
            Err(e) => paddrs
                .iter()
                .try_for_each(|&(p, _)| self.main.free(p))
                .and(Err(e)),
        }
    }

    /// Unmaps and frees a [`valloc`](Self::valloc) mapping.
    pub fn vfree(&mut self, mem: &dyn VramAccess, m: &VirtMapping) -> Result<()> {
        self.unmap(mem, m.va, m.size)?;
        self.va.free(m.va)?;
        m.paddrs.iter().try_for_each(|&(p, _)| self.main.free(p))
    }
}

#[cfg(test)]
mod tests;
