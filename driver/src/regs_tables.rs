//! TEMPORARY stand-in for the generated register tables of `am_autogen` (a few registers
//! of GC 11.0.0, GC 9.4.3, NBIO 4.3.0 and NBIO 7.9.0 from the Linux 6.12 headers), until
//! they land. Same shape the driver expects from the generator.
#![allow(missing_docs, dead_code)]

use crate::HwIp;

/// A register field: `shift` and the in-place `mask` of `*_sh_mask.h`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldDef {
    pub name: &'static str,
    pub shift: u8,
    pub mask: u32,
}

/// A register of `*_offset.h`: dword offset within its base segment, the segment
/// (`_BASE_IDX`), its fields, and its reset value when a `*_default.h` gives one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegDef {
    pub name: &'static str,
    pub offset: u32,
    pub base_idx: u8,
    pub fields: &'static [FieldDef],
    pub default: Option<u32>,
}

/// The registers of one IP version, sorted by name.
#[derive(Debug)]
pub struct RegTable {
    pub prefix: &'static str,
    pub version: (u8, u8, u8),
    pub regs: &'static [RegDef],
}

/// A register name checked at compile time: one constant per name that exists in any
/// table of the block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegName {
    pub ip: HwIp,
    pub name: &'static str,
}

const fn f(name: &'static str, shift: u8, mask: u32) -> FieldDef {
    FieldDef { name, shift, mask }
}
const fn r(name: &'static str, offset: u32, base_idx: u8, fields: &'static [FieldDef]) -> RegDef {
    RegDef {
        name,
        offset,
        base_idx,
        fields,
        default: None,
    }
}

static GC_11_0_0: &[RegDef] = &[
    r("CP_STAT", 0x0f40, 0, &[f("CP_BUSY", 31, 0x8000_0000)]),
    r(
        "GRBM_GFX_CNTL",
        0x0900,
        1,
        &[
            f("PIPEID", 0, 0x3),
            f("MEID", 2, 0xc),
            f("VMID", 4, 0xf0),
            f("QUEUEID", 8, 0x700),
            f("CTXID", 11, 0x3800),
        ],
    ),
    r(
        "RLC_RLCS_BOOTLOAD_STATUS",
        0x4e82,
        1,
        &[
            f("GFX_INIT_DONE", 0, 0x1),
            f("RLC_GPM_IRAM_LOADED", 3, 0x8),
            f("RLC_GPM_IRAM_DONE", 4, 0x10),
            f("RESERVED", 5, 0x7fff_ffe0),
            f("BOOTLOAD_COMPLETE", 31, 0x8000_0000),
        ],
    ),
    r(
        "SCRATCH_REG6",
        0x2046,
        1,
        &[f("SCRATCH_REG6", 0, 0xffff_ffff)],
    ),
    r(
        "SCRATCH_REG7",
        0x2047,
        1,
        &[f("SCRATCH_REG7", 0, 0xffff_ffff)],
    ),
];

static GC_9_4_3: &[RegDef] = &[
    r("CP_STAT", 0x01a0, 0, &[f("CP_BUSY", 31, 0x8000_0000)]),
    r(
        "GRBM_GFX_CNTL",
        0x0022,
        0,
        &[
            f("PIPEID", 0, 0x3),
            f("MEID", 2, 0xc),
            f("VMID", 4, 0xf0),
            f("QUEUEID", 8, 0x700),
        ],
    ),
    r(
        "SCRATCH_REG6",
        0x2046,
        1,
        &[f("SCRATCH_REG6", 0, 0xffff_ffff)],
    ),
    r(
        "SCRATCH_REG7",
        0x2047,
        1,
        &[f("SCRATCH_REG7", 0, 0xffff_ffff)],
    ),
];

static NBIO_COMMON: &[RegDef] = &[
    r("BIF_BX0_PCIE_DATA2", 0x000f, 0, &[]),
    r("BIF_BX0_PCIE_INDEX2", 0x000e, 0, &[]),
    r("BIF_BX0_PCIE_INDEX2_HI", 0x0011, 0, &[]),
    r("BIF_BX_PF0_RSMU_DATA", 0x0001, 1, &[]),
    r("BIF_BX_PF0_RSMU_INDEX", 0x0000, 1, &[]),
];

pub static TABLES: &[RegTable] = &[
    RegTable {
        prefix: "gc",
        version: (9, 4, 3),
        regs: GC_9_4_3,
    },
    RegTable {
        prefix: "gc",
        version: (11, 0, 0),
        regs: GC_11_0_0,
    },
    RegTable {
        prefix: "nbio",
        version: (4, 3, 0),
        regs: NBIO_COMMON,
    },
    RegTable {
        prefix: "nbio",
        version: (7, 9, 0),
        regs: NBIO_COMMON,
    },
];

pub mod gc {
    use super::RegName;
    use crate::HwIp;
    pub const CP_STAT: RegName = RegName {
        ip: HwIp::GC,
        name: "CP_STAT",
    };
    pub const GRBM_GFX_CNTL: RegName = RegName {
        ip: HwIp::GC,
        name: "GRBM_GFX_CNTL",
    };
    pub const RLC_RLCS_BOOTLOAD_STATUS: RegName = RegName {
        ip: HwIp::GC,
        name: "RLC_RLCS_BOOTLOAD_STATUS",
    };
    pub const SCRATCH_REG6: RegName = RegName {
        ip: HwIp::GC,
        name: "SCRATCH_REG6",
    };
    pub const SCRATCH_REG7: RegName = RegName {
        ip: HwIp::GC,
        name: "SCRATCH_REG7",
    };
}

pub mod nbio {
    use super::RegName;
    use crate::HwIp;
    pub const BIF_BX0_PCIE_DATA2: RegName = RegName {
        ip: HwIp::NBIO,
        name: "BIF_BX0_PCIE_DATA2",
    };
    pub const BIF_BX0_PCIE_INDEX2: RegName = RegName {
        ip: HwIp::NBIO,
        name: "BIF_BX0_PCIE_INDEX2",
    };
    pub const BIF_BX0_PCIE_INDEX2_HI: RegName = RegName {
        ip: HwIp::NBIO,
        name: "BIF_BX0_PCIE_INDEX2_HI",
    };
    pub const BIF_BX_PF0_RSMU_DATA: RegName = RegName {
        ip: HwIp::NBIO,
        name: "BIF_BX_PF0_RSMU_DATA",
    };
    pub const BIF_BX_PF0_RSMU_INDEX: RegName = RegName {
        ip: HwIp::NBIO,
        name: "BIF_BX_PF0_RSMU_INDEX",
    };
}
