//! Buffers: GPU virtual ranges of VM context 0 with the memory behind them.
//!
//! - [`MemKind::Vram`]: device-local VRAM. The CPU reaches it through BAR0 when BAR0 covers
//!   it (an HDP flush before the GPU reads what the CPU wrote), else through SDMA copies with a
//!   system-memory staging buffer.
//! - [`MemKind::System`]: system memory the device reaches by DMA (snooped; `uncached` maps it
//!   `MTYPE_UC`). The CPU reads and writes it directly.
//! - [`MemKind::Peer`]: VRAM of another member of the device's XGMI hive, mapped with
//!   `Device::map_peer`: the device's engines and kernels reach it over XGMI; the CPU reads
//!   and writes it through the device that owns it. The mapping keeps that buffer (and its
//!   device) alive.
//!
//! A [`Buffer`] is a handle: cloning it, or taking a [`Buffer::view`] of a sub-range, shares the
//! memory, which is returned (unmapped, freed) when the last handle goes.

use std::sync::{Arc, Mutex, Weak};

use am_driver::SysMem;
use am_driver::mm::VirtMapping;

use crate::device::Inner;
use crate::{Error, Result};

/// Where a buffer's memory is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemKind {
    /// Device-local VRAM.
    Vram,
    /// System memory; `uncached` maps it so the GPU never caches it.
    System {
        /// `MTYPE_UC`.
        uncached: bool,
    },
    /// Another XGMI hive member's VRAM, mapped into this device (`Device::map_peer`; not
    /// something [`Device::alloc`](crate::Device::alloc) makes).
    Peer,
}

pub(crate) enum Backing {
    /// VRAM: the physical ranges in VA order.
    Vram,
    /// System memory.
    Sys(Arc<dyn SysMem>),
    /// A hive member's VRAM allocation (kept while mapped) and its device. `kept`: the
    /// mapping is one of `alloc`'s [`Allocation::peer_maps`], unmapped by `alloc` when it is
    /// freed, not by this allocation (`Device::peer_view`).
    Peer {
        alloc: Arc<Allocation>,
        owner: crate::Device,
        kept: bool,
    },
}

/// The memory of a buffer and its views.
pub(crate) struct Allocation {
    pub(crate) dev: Weak<Inner>,
    pub(crate) mapping: VirtMapping,
    pub(crate) backing: Backing,
    pub(crate) kind: MemKind,
    /// Mappings of this VRAM into other hive members that `Device::copy_between` made and
    /// reuses (one per member). They live in the memory they map, not in the member, so they
    /// are unmapped before the memory is freed and cannot outlive it, and they hold no handle
    /// on it (a handle here would keep it from ever being freed).
    pub(crate) peer_maps: Mutex<Vec<PeerMap>>,
}

/// A mapping of an allocation's VRAM into another hive member (see
/// [`Allocation::peer_maps`]).
pub(crate) struct PeerMap {
    pub(crate) dev: Weak<Inner>,
    pub(crate) mapping: VirtMapping,
}

impl Allocation {
    pub(crate) fn new(
        dev: Weak<Inner>,
        mapping: VirtMapping,
        backing: Backing,
        kind: MemKind,
    ) -> Allocation {
        Allocation {
            dev,
            mapping,
            backing,
            kind,
            peer_maps: Mutex::new(Vec::new()),
        }
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        // The other members' mappings first: once the memory below is freed and handed out
        // again, a mapping left behind would reach whatever is put there.
        let maps = std::mem::take(self.peer_maps.get_mut().unwrap_or_else(|e| e.into_inner()));
        for m in maps {
            let Some(member) = m.dev.upgrade() else {
                continue;
            };
            if let Err(e) = member.with_driver(|d| d.unmap_borrowed(&m.mapping)) {
                tracing::warn!(
                    "{}: unmapping the peer mapping at {:#x}: {e}",
                    member.name,
                    m.mapping.va
                );
            }
        }
        let Some(dev) = self.dev.upgrade() else {
            return;
        };
        let r = match self.backing {
            Backing::Vram => dev.with_driver(|d| d.vfree(&self.mapping)),
            Backing::Peer { kept: true, .. } => return,
            // Borrowed pages: the system memory, or the peer's allocation, goes after this,
            // when the backing drops.
            Backing::Sys(_) | Backing::Peer { .. } => {
                dev.with_driver(|d| d.unmap_borrowed(&self.mapping))
            }
        };
        if let Err(e) = r {
            tracing::warn!(
                "{}: freeing the buffer at {:#x}: {e}",
                dev.name,
                self.mapping.va
            );
        }
    }
}

/// A range of GPU memory (a whole allocation or a view of one).
#[derive(Clone)]
pub struct Buffer {
    pub(crate) alloc: Arc<Allocation>,
    offset: u64,
    size: u64,
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("va", &format_args!("{:#x}", self.va()))
            .field("size", &self.size)
            .field("kind", &self.alloc.kind)
            .finish()
    }
}

impl Buffer {
    pub(crate) fn new(alloc: Allocation, size: u64) -> Buffer {
        Buffer {
            alloc: Arc::new(alloc),
            offset: 0,
            size,
        }
    }

    /// The same range of another allocation of the same layout (a peer mapping of this
    /// buffer's allocation, or the allocation a peer mapping maps).
    pub(crate) fn same_range_of(&self, alloc: Arc<Allocation>) -> Buffer {
        Buffer {
            alloc,
            offset: self.offset,
            size: self.size,
        }
    }

    /// For a [`MemKind::Peer`] buffer: the same range of the hive member's own buffer, and
    /// that device.
    pub(crate) fn peer_original(&self) -> Option<(Buffer, &crate::Device)> {
        match &self.alloc.backing {
            Backing::Peer { alloc, owner, .. } => Some((self.same_range_of(alloc.clone()), owner)),
            _ => None,
        }
    }

    /// The allocation whose memory this is (a peer mapping's: the original's) and where
    /// this view starts in it.
    fn home(&self) -> (*const Allocation, u64) {
        match &self.alloc.backing {
            Backing::Peer { alloc, .. } => (Arc::as_ptr(alloc), self.offset),
            _ => (Arc::as_ptr(&self.alloc), self.offset),
        }
    }

    /// Whether the two buffers share a byte of memory — views of one allocation whose
    /// ranges meet, a peer mapping and its original included (what orders two commands
    /// that touch them).
    pub fn overlaps(&self, other: &Buffer) -> bool {
        let ((a, x), (b, y)) = (self.home(), other.home());
        std::ptr::eq(a, b) && x < y + other.size && y < x + self.size
    }

    /// GPU virtual address of the first byte.
    pub fn va(&self) -> u64 {
        self.alloc.mapping.va + self.offset
    }

    /// Where this view starts in its allocation.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Where the memory is.
    pub fn kind(&self) -> MemKind {
        self.alloc.kind
    }

    /// A view of `[offset, offset + size)` sharing this buffer's memory.
    pub fn view(&self, offset: u64, size: u64) -> Result<Buffer> {
        self.check(offset, size)?;
        Ok(Buffer {
            alloc: self.alloc.clone(),
            offset: self.offset + offset,
            size,
        })
    }

    /// Whether the buffer is memory of `dev`.
    pub fn belongs_to(&self, dev: &crate::Device) -> bool {
        std::ptr::eq(self.alloc.dev.as_ptr(), Arc::as_ptr(&dev.0))
    }

    fn device_name(&self) -> String {
        self.alloc
            .dev
            .upgrade()
            .map_or_else(|| "(closed device)".to_string(), |d| d.name.clone())
    }

    pub(crate) fn check(&self, offset: u64, len: u64) -> Result<()> {
        if offset.checked_add(len).is_none_or(|e| e > self.size) {
            return Err(Error::Buffer {
                device: self.device_name(),
                va: self.va(),
                size: self.size,
                reason: format!("access of {len} bytes at offset {offset:#x} is outside it"),
            });
        }
        Ok(())
    }

    /// The VRAM physical ranges `[offset, offset + len)` of this buffer covers, in order.
    pub(crate) fn vram_ranges(&self, offset: u64, len: u64) -> Vec<(u64, u64)> {
        let mut at = self.offset + offset;
        let mut left = len;
        let mut out = Vec::new();
        let mut base = 0u64;
        for &(p, n) in &self.alloc.mapping.paddrs {
            if left == 0 {
                break;
            }
            if at < base + n {
                let within = at - base;
                let k = (n - within).min(left);
                out.push((p + within, k));
                at += k;
                left -= k;
            }
            base += n;
        }
        out
    }

    /// The system memory behind the buffer and the offset of this view in it.
    pub(crate) fn sysmem(&self) -> Option<(&Arc<dyn SysMem>, u64)> {
        match &self.alloc.backing {
            Backing::Sys(m) => Some((m, self.offset)),
            Backing::Vram | Backing::Peer { .. } => None,
        }
    }
}
