//! Adapter from the generated register tables of `am-autogen` to the mock's register map.

use crate::profile::{IpVersion, RegIp};

/// One register of a generated table.
#[derive(Clone, Copy, Debug)]
pub struct TableReg {
    /// Name without prefix.
    pub name: &'static str,
    /// Dword offset within its segment.
    pub offset: u32,
    /// Segment (base index).
    pub base_idx: u8,
    /// Reset value (`*_default.h`, else 0).
    pub default: u32,
}

/// The registers of one IP version; empty if `am-autogen` has no table for it.
pub fn registers(ip: RegIp, version: IpVersion) -> impl Iterator<Item = TableReg> {
    am_autogen::regs::table(ip, version)
        .into_iter()
        .flat_map(|t| {
            t.iter().map(|r| TableReg {
                name: r.name(),
                offset: r.offset(),
                base_idx: r.base_idx(),
                default: r.reset_default().unwrap_or(0),
            })
        })
}
