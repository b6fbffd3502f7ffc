//! Register-access helpers shared by the IP blocks: one dword access of a BAR, and the
//! halves of a 64-bit value written to a register pair.

use crate::*;

/// The low half of a 64-bit value written to a register pair (`*_LO`, `*_LO32`).
pub(crate) const fn lo32(v: u64) -> u32 {
    v as u32
}

/// The high half of a 64-bit value written to a register pair (`*_HI`, `*_HI32`).
pub(crate) const fn hi32(v: u64) -> u32 {
    (v >> 32) as u32
}

/// One dword access at byte `offset` of a BAR: read it, or write `write` and return it.
pub(crate) fn access32(bar: &dyn Bar, offset: u64, write: Option<u32>) -> Result<u32> {
    match write {
        Some(v) => bar.write32(offset, v).map(|()| v),
        None => bar.read32(offset),
    }
}
