//! Page-directory and page-table entry encodings of the three GPUVM formats.
//!
//! All three walk the same tree: 4 KiB tables of 512 entries, PDB2 → PDB1 → PDB0 → PTB with
//! VA shifts 39/30/21/12. They differ in where the memory type lives and in how an entry
//! above the PTB says "I am a page, not a table":
//! - GFX9 (Vega, MI300/MI350, `gmc_v9_0.c` with translate-further): PDB1/PDB2 leaves carry
//!   `PDE_PTE`; a PDB0 entry is a 2 MiB page unless it carries `TF` (then it points to a PTB),
//!   PDB1 entries that point to a PDB0 carry `PDE_BFS(9)`. The context is programmed with
//!   depth 2 and block size 9 (the PTB level is the translate-further of PDB0).
//! - GFX10/11: `PDE_PTE` (bit 54) on any leaf above the PTB; depth 3, block size 0.
//! - GFX12: bit 63 on every leaf (`PTE_IS_PTE` in a PTB, `PDE_PTE_GFX12` above it), memory
//!   type moved to bits 55:54.
//!
//! [`PteFormat::decode`] is a pure function of the format, the level and the entry value, so
//! the mock's page-table walker and tests can read raw table bytes with the same rules.

use super::*;
use VmLevel::{Pdb0, Pdb1, Ptb};
use am_autogen::vm::*;

/// `MTYPE_UC`: 3 in every `MTYPE` enum that applies (`vega10_enum.h:1042`,
/// `navi10_enum.h:309`, `soc21_enum.h:168`, `soc24_enum.h:282`). The other mappings use
/// `MTYPE_NC` = 0.
pub const MTYPE_UC: u8 = 3;

/// Physical address bits 47:12 of a page (the PTE format comments in `gmc_v9_0.c` and
/// `gmc_v12_0.c`).
pub const PTE_ADDR_MASK: u64 = 0x0000_FFFF_FFFF_F000;
/// Physical address bits 47:6 of the table a PDE points to.
pub const PDE_ADDR_MASK: u64 = 0x0000_FFFF_FFFF_FFC0;

/// Block fragment size tinygrad and `gmc_v9_0_get_vm_pde` put in a PDB1 entry under
/// translate-further: the PDB0 below covers 2^9 pages per entry.
const GFX9_PDB1_BFS: u64 = 9;

/// One of the three GPUVM entry formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PteFormat {
    /// GC 9.x (Vega, MI200, MI300, MI350): translate-further at PDB0.
    Gfx9,
    /// GC 10.x and 11.x.
    Gfx10,
    /// GC 12.x.
    Gfx12,
}
use PteFormat::{Gfx9, Gfx10, Gfx12};

/// What one entry of a page table or directory says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtEntry {
    /// Not valid: accesses through it fault.
    Invalid,
    /// Points to the next-level table at this physical (PTE-space) address.
    Table {
        /// Address of the child table as written in the entry.
        addr: u64,
    },
    /// Maps a page of the entry's level size (4 KiB in a PTB, 2 MiB in PDB0, 1 GiB in PDB1).
    Page(PageEntry),
}

/// The fields of a page entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageEntry {
    /// Page address as written in the entry (VRAM addresses include the XGMI offset).
    pub addr: u64,
    /// Access and placement flags.
    pub flags: MapFlags,
    /// Raw `MTYPE` field.
    pub mtype: u8,
    /// `FRAG`: the page belongs to an aligned, physically contiguous run of 2^frag 4 KiB pages.
    pub frag: u8,
}

impl PteFormat {
    /// The format of a GC IP version.
    pub fn for_gc(major: u8) -> Self {
        match major {
            12.. => Gfx12,
            10 | 11 => Gfx10,
            _ => Gfx9,
        }
    }

    /// Width of the system bus addresses the GPU can reach (its DMA mask): Linux sets
    /// `DMA_BIT_MASK(44)` for GC 10, 11 and 12 (`gmc_v10_0.c`, `gmc_v11_0.c`,
    /// `gmc_v12_0.c`) and 48 bits for GC ≥ 9.4.2 (`gmc_v9_0.c`; the GC 9 parts this driver
    /// supports are 9.4.3 and 9.5.0).
    pub const fn dma_bits(self) -> u32 {
        match self {
            Gfx9 => 48,
            _ => 44,
        }
    }

    /// `VM_CONTEXTn_CNTL.PAGE_TABLE_DEPTH` for a PDB2 root: GFX9 stops the hardware walk at
    /// PDB0 and translates further from there.
    pub const fn page_table_depth(self) -> u32 {
        match self {
            Gfx9 => 2,
            _ => 3,
        }
    }

    /// `VM_CONTEXTn_CNTL.PAGE_TABLE_BLOCK_SIZE`: 9 (a PTB of 512 entries behind each PDB0
    /// entry) under translate-further, else 0.
    pub const fn page_table_block_size(self) -> u32 {
        match self {
            Gfx9 => 9,
            _ => 0,
        }
    }

    /// This format's `MTYPE` field.
    const fn mtype_mask(self) -> u64 {
        match self {
            Gfx9 => AMDGPU_PTE_MTYPE_VG10_MASK,
            Gfx10 => AMDGPU_PTE_MTYPE_NV10_MASK,
            Gfx12 => AMDGPU_PTE_MTYPE_GFX12_MASK,
        }
    }

    /// The bit that marks a page entry at `level` (0 where the level alone decides: a GFX9
    /// PDB0 entry is a page unless it carries `TF`).
    const fn page_bit(self, level: VmLevel) -> u64 {
        match (self, level) {
            (Gfx12, Ptb) => AMDGPU_PTE_IS_PTE,
            (_, Ptb) | (Gfx9, Pdb0) => 0,
            (Gfx12, _) => AMDGPU_PDE_PTE_GFX12,
            _ => AMDGPU_PDE_PTE,
        }
    }

    /// The entry at `level` pointing to the child table at `addr`.
    pub fn encode_pde(self, level: VmLevel, addr: u64) -> u64 {
        let e = (addr & PDE_ADDR_MASK) | AMDGPU_PTE_VALID;
        match (self, level) {
            (Gfx9, Pdb1) => e | AMDGPU_PDE_BFS(GFX9_PDB1_BFS),
            (Gfx9, Pdb0) => e | AMDGPU_PTE_TF,
            _ => e,
        }
    }

    /// The entry at `level` mapping the page at `addr` with `flags`, in a fragment of
    /// 2^`frag` pages.
    pub fn encode_pte(self, level: VmLevel, addr: u64, flags: MapFlags, frag: u8) -> u64 {
        let bit = |on: bool, b: u64| if on { b } else { 0 };
        let mtype = if flags.uncached {
            MTYPE_UC.into()
        } else {
            AMDGPU_MTYPE_NC
        };
        let mask = self.mtype_mask();
        (addr & PTE_ADDR_MASK)
            | AMDGPU_PTE_VALID
            | bit(flags.system, AMDGPU_PTE_SYSTEM)
            | bit(flags.snooped, AMDGPU_PTE_SNOOPED)
            | bit(flags.readable, AMDGPU_PTE_READABLE)
            | bit(flags.writable, AMDGPU_PTE_WRITEABLE)
            | bit(flags.executable, AMDGPU_PTE_EXECUTABLE)
            | AMDGPU_PTE_FRAG(frag.into())
            | ((mtype << mask.trailing_zeros()) & mask)
            | self.page_bit(level)
    }

    /// Reads an entry found at `level` the way the hardware walker does.
    pub fn decode(self, level: VmLevel, entry: u64) -> PtEntry {
        let has = |b: u64| entry & b != 0;
        let field = |mask: u64| ((entry & mask) >> mask.trailing_zeros()) as u8;
        let is_page = match (self, level) {
            (_, Ptb) => true,
            (Gfx9, Pdb0) => !has(AMDGPU_PTE_TF),
            _ => has(self.page_bit(level)),
        };
        let mtype = field(self.mtype_mask());
        match (has(AMDGPU_PTE_VALID), is_page) {
            (false, _) => PtEntry::Invalid,
            (_, false) => PtEntry::Table {
                addr: entry & PDE_ADDR_MASK,
            },
            _ => PtEntry::Page(PageEntry {
                addr: entry & PTE_ADDR_MASK,
                flags: MapFlags {
                    readable: has(AMDGPU_PTE_READABLE),
                    writable: has(AMDGPU_PTE_WRITEABLE),
                    executable: has(AMDGPU_PTE_EXECUTABLE),
                    system: has(AMDGPU_PTE_SYSTEM),
                    snooped: has(AMDGPU_PTE_SNOOPED),
                    uncached: mtype == MTYPE_UC,
                },
                mtype,
                frag: field(AMDGPU_PTE_FRAG_MASK),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RWX: MapFlags = MapFlags::VRAM;

    // Expected values are written out by hand, bit by bit, from Linux 6.12 amdgpu_vm.h (not
    // from the generated constants the code uses): VALID :57, SYSTEM :58, SNOOPED :59,
    // EXECUTABLE :65, READABLE :67, WRITEABLE :68, FRAG :70, PDE_PTE :76, TF :81, BFS :87,
    // MTYPE_VG10 :97, MTYPE_NV10 :114, MTYPE_GFX12 :125, IS_PTE :132, PDE_PTE_GFX12 :139:
    // VALID 1<<0, SYSTEM 1<<1, SNOOPED 1<<2, EXE 1<<4, READ 1<<5, WRITE 1<<6, FRAG x<<7,
    // PDE_PTE 1<<54, TF 1<<56, BFS a<<59, MTYPE_VG10 m<<57, MTYPE_NV10 m<<48,
    // MTYPE_GFX12 m<<54, IS_PTE / PDE_PTE_GFX12 1<<63.

    #[test]
    fn gfx9_encodings() {
        let f = PteFormat::Gfx9;
        // 4 KiB VRAM page at 0x1234_5000, RWX, FRAG 0, MTYPE NC.
        assert_eq!(
            f.encode_pte(VmLevel::Ptb, 0x1234_5000, RWX, 0),
            0x1234_5000 | 0x71
        );
        // Same, uncached (MTYPE_UC = 3 at bit 57) with FRAG 4.
        let uc = MapFlags {
            uncached: true,
            ..RWX
        };
        assert_eq!(
            f.encode_pte(VmLevel::Ptb, 0x1234_5000, uc, 4),
            0x1234_5000 | 0x71 | (4 << 7) | (3 << 57)
        );
        // 2 MiB page in PDB0: no PDE_PTE, no TF.
        assert_eq!(
            f.encode_pte(VmLevel::Pdb0, 0x4020_0000, RWX, 9),
            0x4020_0000 | 0x71 | (9 << 7)
        );
        // 1 GiB page in PDB1: PDE_PTE.
        assert_eq!(
            f.encode_pte(VmLevel::Pdb1, 0x4000_0000, RWX, 18),
            0x4000_0000 | 0x71 | (18 << 7) | (1 << 54)
        );
        // System page, snooped, read-only.
        let sys = MapFlags {
            readable: true,
            system: true,
            snooped: true,
            ..MapFlags::default()
        };
        assert_eq!(
            f.encode_pte(VmLevel::Ptb, 0xabc_d000, sys, 0),
            0xabc_d000 | 0x27
        );
        // Directory entries: PDB1 → PDB0 carries BFS 9, PDB0 → PTB carries TF.
        assert_eq!(f.encode_pde(VmLevel::Pdb2, 0x20_0000), 0x20_0001);
        assert_eq!(
            f.encode_pde(VmLevel::Pdb1, 0x20_1000),
            0x20_1001 | (9 << 59)
        );
        assert_eq!(
            f.encode_pde(VmLevel::Pdb0, 0x20_2000),
            0x20_2001 | (1 << 56)
        );
    }

    #[test]
    fn gfx10_encodings() {
        let f = PteFormat::Gfx10;
        let uc = MapFlags {
            uncached: true,
            ..RWX
        };
        assert_eq!(
            f.encode_pte(VmLevel::Ptb, 0x1234_5000, uc, 3),
            0x1234_5000 | 0x71 | (3 << 7) | (3 << 48)
        );
        assert_eq!(
            f.encode_pte(VmLevel::Pdb0, 0x4020_0000, RWX, 9),
            0x4020_0000 | 0x71 | (9 << 7) | (1 << 54)
        );
        assert_eq!(f.encode_pde(VmLevel::Pdb1, 0x20_1000), 0x20_1001);
        assert_eq!(f.encode_pde(VmLevel::Pdb0, 0x20_2000), 0x20_2001);
    }

    #[test]
    fn gfx12_encodings() {
        let f = PteFormat::Gfx12;
        let uc = MapFlags {
            uncached: true,
            ..RWX
        };
        assert_eq!(
            f.encode_pte(VmLevel::Ptb, 0x1234_5000, uc, 3),
            0x1234_5000 | 0x71 | (3 << 7) | (3 << 54) | (1 << 63)
        );
        assert_eq!(
            f.encode_pte(VmLevel::Pdb0, 0x4020_0000, RWX, 9),
            0x4020_0000 | 0x71 | (9 << 7) | (1 << 63)
        );
        assert_eq!(f.encode_pde(VmLevel::Pdb0, 0x20_2000), 0x20_2001);
    }

    #[test]
    fn decode_inverts_encode_in_every_format_and_level() {
        let flags = [
            RWX,
            MapFlags {
                uncached: true,
                ..RWX
            },
            MapFlags {
                readable: true,
                system: true,
                snooped: true,
                ..MapFlags::default()
            },
        ];
        for f in [PteFormat::Gfx9, PteFormat::Gfx10, PteFormat::Gfx12] {
            for level in [VmLevel::Pdb1, VmLevel::Pdb0, VmLevel::Ptb] {
                for fl in flags {
                    let e = f.encode_pte(level, 0x8000_0000, fl, 7);
                    let PtEntry::Page(p) = f.decode(level, e) else {
                        panic!("{f:?} {level:?}: {e:#x} is not a page")
                    };
                    assert_eq!(
                        (p.addr, p.flags, p.frag),
                        (0x8000_0000, fl, 7),
                        "{f:?} {level:?}"
                    );
                }
            }
            for level in [VmLevel::Pdb2, VmLevel::Pdb1, VmLevel::Pdb0] {
                assert_eq!(
                    f.decode(level, f.encode_pde(level, 0x7000)),
                    PtEntry::Table { addr: 0x7000 },
                    "{f:?} {level:?}"
                );
            }
            assert_eq!(f.decode(VmLevel::Pdb0, 0x7000), PtEntry::Invalid);
        }
    }
}
