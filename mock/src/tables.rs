//! Adapter from the generated register tables of `am-autogen` to the mock's register map.

use crate::profile::IpVersion;

/// One register of a generated header.
#[derive(Clone, Copy, Debug)]
pub struct TableReg {
    /// Name without prefix.
    pub name: &'static str,
    /// Dword offset within its segment.
    pub offset: u32,
    /// Segment (base index).
    pub base_idx: u8,
    /// Reset value.
    pub default: u32,
}

/// The registers of header `prefix`_`version`.
pub fn registers(prefix: &str, version: IpVersion) -> impl Iterator<Item = TableReg> {
    let _ = (prefix, version);
    std::iter::empty()
}
