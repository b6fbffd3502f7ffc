//! The host's PCI bus as the mock devices of one process share it: where each device's
//! BAR0 sits, so that one device's DMA to a bus address inside another's BAR0 reaches that
//! device's VRAM (PCIe peer-to-peer through the host bridge).
//!
//! Every device made in the process takes a window of the bus address space for its BAR0
//! when it is made: aligned to, and as large as, the largest size its Resizable BAR
//! capability offers (a BAR is naturally aligned, and the OS leaves room to grow it), at
//! least 8 GiB, first fit. Windows under 256 GiB (the Navi parts) go to [`LOW_BASE`,
//! [`SYSMEM_BUS_BASE`]) — below the system memory the mock hands out, and inside the 44-bit
//! DMA mask Linux gives GC 10/11/12 parts, so any peer reaches them; those of 256 GiB and
//! more (MI300X, MI350X) to [`HIGH_BASE`, [`HIGH_END`]) (48 bits: their own DMA mask, not a
//! Navi's — as large BARs sit high on real platforms); each range is the other's fallback
//! when full. A window is held by weak reference: when a device's last handle goes,
//! nothing answers there any more and a later device may take the space.
//!
//! What a peer's access meets is decided by the target, as its BAR decodes
//! ([`reach`]): the BAR's current size (a small BAR shows 256 MiB of VRAM), VRAM's end, the
//! target's memory decoding, a VF's gate. An address in no window is not a BAR at all: the
//! engine treats it as system memory, where the arena refuses what was never allocated.

use std::sync::{Arc, Mutex, Weak};

use am_isa::sync::lock;

use crate::device::Shared;
use crate::sysmem::SYSMEM_BUS_BASE;

/// Where BAR0 windows start: 512 GiB, above 4 GiB and every 32-bit BAR.
pub const LOW_BASE: u64 = 512 << 30;
/// Where windows go once the low range is full: 16 TiB, past the 44-bit DMA mask and the
/// system memory below it.
pub const HIGH_BASE: u64 = 1 << 44;
/// End of the high range: 48 bits.
pub const HIGH_END: u64 = 1 << 48;
/// Where the doorbell BARs (BAR2) go: 256 GiB up, one 2 MiB slot per 8 GiB of BAR0 space
/// (every window is 8 GiB or larger, so slots never collide).
const BAR2_BASE: u64 = 256 << 30;
const BAR2_SLOT: u64 = 2 << 20;
/// Windows this large (the MI300X's 256 GiB BAR0, the MI350X's 512 GiB) go to the high
/// range first: the low one holds only 38 of them, and these parts' 48-bit DMA mask reaches
/// each other's there (a Navi's 44-bit one does not).
const HIGH_FIRST: u64 = 256 << 30;
/// The smallest window: 8 GiB (a small BAR's device too, so BAR2 slots stay apart).
const MIN_WINDOW: u64 = 8 << 30;

struct Window {
    base: u64,
    size: u64,
    /// The device's name, kept after it has gone (for the refusal).
    name: String,
    dev: Weak<Shared>,
    /// Taken for a device being made (it attaches before anything can reach it).
    pending: bool,
}

impl Window {
    fn free(&self) -> bool {
        !self.pending && self.dev.strong_count() == 0
    }
}

fn windows() -> &'static Mutex<Vec<Window>> {
    static BUS: Mutex<Vec<Window>> = Mutex::new(Vec::new());
    &BUS
}

/// Take a window of `size` bytes (a power of two) for the BAR0 of device `name`; its base.
/// `None` when neither range has room.
pub(crate) fn reserve(name: &str, size: u64) -> Option<u64> {
    let size = size.next_power_of_two().max(MIN_WINDOW);
    let mut ws = lock(windows());
    ws.retain(|w| !w.free());
    let fits = |base: u64| {
        ws.iter()
            .all(|w| base + size <= w.base || w.base + w.size <= base)
    };
    let first = |lo: u64, hi: u64| {
        let mut base = lo.next_multiple_of(size);
        while base + size <= hi {
            if fits(base) {
                return Some(base);
            }
            base += size;
        }
        None
    };
    let (low, high) = ((LOW_BASE, SYSMEM_BUS_BASE), (HIGH_BASE, HIGH_END));
    let (a, b) = if size >= HIGH_FIRST {
        (high, low)
    } else {
        (low, high)
    };
    let base = first(a.0, a.1).or_else(|| first(b.0, b.1))?;
    ws.push(Window {
        base,
        size,
        name: name.to_string(),
        dev: Weak::new(),
        pending: true,
    });
    Some(base)
}

/// The device made for the window at `base` takes it.
pub(crate) fn attach(base: u64, dev: Weak<Shared>) {
    let mut ws = lock(windows());
    if let Some(w) = ws.iter_mut().find(|w| w.base == base && w.pending) {
        w.dev = dev;
        w.pending = false;
    }
}

/// The name of the live device whose BAR0 window starts at `base`.
pub(crate) fn holder(base: u64) -> Option<String> {
    let ws = lock(windows());
    let w = ws.iter().find(|w| w.base == base)?;
    w.dev.upgrade().map(|d| d.name().to_string())
}

/// The BAR2 (doorbell) address that goes with a BAR0 window at `bar0`.
pub(crate) fn bar2_for(bar0: u64) -> u64 {
    let slot = bar0.saturating_sub(LOW_BASE) >> 33;
    BAR2_BASE + slot * BAR2_SLOT
}

/// Whether `bus` lies where BAR windows are (outside the system memory the arenas hand
/// out): only those addresses are looked up here, so a system-memory access pays nothing.
#[inline]
pub(crate) fn in_bar_space(bus: u64) -> bool {
    !(SYSMEM_BUS_BASE..HIGH_BASE).contains(&bus)
}

/// What a peer's access of `len` bytes at bus address `bus` reaches: the device whose BAR0
/// window holds it, the BAR's bus address and its current size; `Ok(None)` when the address is
/// in no window (not a BAR); `Err` with the refusal when a window holds it but the device
/// does not decode it (gone, beyond its BAR's size or its VRAM, decoding off, a gated VF).
pub(crate) fn reach(bus: u64, len: u64) -> Result<Option<(Arc<Shared>, u64, u64)>, String> {
    let (base, name, dev) = {
        let ws = lock(windows());
        let Some(w) = ws.iter().find(|w| (w.base..w.base + w.size).contains(&bus)) else {
            return Ok(None);
        };
        (w.base, w.name.clone(), w.dev.upgrade())
    };
    let Some(dev) = dev else {
        return Err(format!(
            "bus address {bus:#x} is in the BAR0 window of {name}, which is gone: nothing \
             answers there"
        ));
    };
    let size = dev.peer_bar0(base, bus - base, len)?;
    Ok(Some((dev, base, size)))
}
