//! The GPUs the project models, by their shader ISA.

use std::fmt;
use std::str::FromStr;

use crate::Error;

/// A GPU shader target, named as LLVM names its processor (`-mcpu=gfx1100`).
///
/// Every fact the other crates ask of a target comes from here; adding a GPU is a variant and
/// one row of facts (and its decoder or code generator where one is needed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GfxTarget {
    /// CDNA3, MI300X and MI325X (GC 9.4.3, 9.4.4): wave64, AccVGPRs, MFMA.
    Gfx942,
    /// CDNA4, MI350X and MI355X (GC 9.5.0): gfx942 plus new MFMA shapes and 160 KiB of LDS.
    Gfx950,
    /// RDNA3, Navi 31 (GC 11.0.0): RX 7900, Radeon Pro W7900.
    Gfx1100,
    /// RDNA3, Navi 32 (GC 11.0.3): the gfx1100 ISA.
    Gfx1101,
    /// RDNA3, Navi 33 (GC 11.0.2): the gfx1100 ISA.
    Gfx1102,
    /// RDNA4, Navi 44 (GC 12.0.0): RX 9060.
    Gfx1200,
    /// RDNA4, Navi 48 (GC 12.0.1): RX 9070; the same ISA as gfx1200.
    Gfx1201,
}

/// The architecture generation a target belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// Compute DNA 3 (GFX9 family, `gfx94x`).
    Cdna3,
    /// Compute DNA 4 (GFX9 family, `gfx950`).
    Cdna4,
    /// RDNA 3 (GFX11).
    Rdna3,
    /// RDNA 4 (GFX12).
    Rdna4,
}

/// The matrix multiply-accumulate instructions a target has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Matrix {
    /// `v_wmma_*` (RDNA3, RDNA4): a wave's VGPRs hold the tiles.
    Wmma,
    /// `v_mfma_*` (CDNA): results in AccVGPRs or VGPRs.
    Mfma,
}

/// What distinguishes one target from another; the rest follows from its family.
struct Facts {
    /// The LLVM processor name.
    name: &'static str,
    family: Family,
    /// GC IP versions that are this target (the first is the one it is named after).
    gc: &'static [(u8, u8, u8)],
    /// `EF_AMDGPU_MACH_*` (LLVM's `BinaryFormat/ELF.h`).
    elf_mach: u32,
    /// LDS bytes one workgroup may allocate.
    max_lds: u32,
}

impl GfxTarget {
    /// Every target.
    pub const ALL: [GfxTarget; 7] = [
        GfxTarget::Gfx942,
        GfxTarget::Gfx950,
        GfxTarget::Gfx1100,
        GfxTarget::Gfx1101,
        GfxTarget::Gfx1102,
        GfxTarget::Gfx1200,
        GfxTarget::Gfx1201,
    ];

    /// One row per target: a new GPU is a variant, its place in [`GfxTarget::ALL`] and a row.
    ///
    /// The GC versions are Linux's (`kgd2kfd_probe` in `amdkfd/kfd_device.c`, its
    /// `gfx_target_version`): the gfx number does not follow the IP version, GC 11.0.3
    /// (Navi 32) is gfx1101 and GC 11.0.2 (Navi 33) gfx1102. GC 9.4.3 is gfx942 from its
    /// production stepping on (Linux gives gfx940/gfx941 to the first steppings, which LLVM
    /// 22 no longer knows). GC 11.0.1 and 11.0.4 (gfx1103, APUs) and 11.5.x are not
    /// modelled.
    const fn facts(self) -> Facts {
        use Family::*;
        const KIB: u32 = 1024;
        match self {
            GfxTarget::Gfx942 => Facts {
                name: "gfx942",
                family: Cdna3,
                gc: &[(9, 4, 3), (9, 4, 4)],
                elf_mach: 0x4c,
                max_lds: 64 * KIB,
            },
            GfxTarget::Gfx950 => Facts {
                name: "gfx950",
                family: Cdna4,
                gc: &[(9, 5, 0)],
                elf_mach: 0x4f,
                max_lds: 160 * KIB,
            },
            GfxTarget::Gfx1100 => Facts {
                name: "gfx1100",
                family: Rdna3,
                gc: &[(11, 0, 0)],
                elf_mach: 0x41,
                max_lds: 64 * KIB,
            },
            GfxTarget::Gfx1101 => Facts {
                name: "gfx1101",
                family: Rdna3,
                gc: &[(11, 0, 3)],
                elf_mach: 0x46,
                max_lds: 64 * KIB,
            },
            GfxTarget::Gfx1102 => Facts {
                name: "gfx1102",
                family: Rdna3,
                gc: &[(11, 0, 2)],
                elf_mach: 0x47,
                max_lds: 64 * KIB,
            },
            GfxTarget::Gfx1200 => Facts {
                name: "gfx1200",
                family: Rdna4,
                gc: &[(12, 0, 0)],
                elf_mach: 0x48,
                max_lds: 64 * KIB,
            },
            GfxTarget::Gfx1201 => Facts {
                name: "gfx1201",
                family: Rdna4,
                gc: &[(12, 0, 1)],
                elf_mach: 0x4e,
                max_lds: 64 * KIB,
            },
        }
    }

    /// The target of a GC IP version as IP discovery reports it (the table at
    /// [`GfxTarget::gc_versions`]).
    pub fn from_gc(major: u8, minor: u8, rev: u8) -> Result<GfxTarget, Error> {
        GfxTarget::ALL
            .into_iter()
            .find(|t| t.gc_versions().contains(&(major, minor, rev)))
            .ok_or(Error::UnknownGc { major, minor, rev })
    }

    /// The GC IP versions of this target, as Linux's KFD maps them (GC 11.0.3 is gfx1101,
    /// GC 9.4.3 and 9.4.4 are gfx942).
    pub fn gc_versions(self) -> &'static [(u8, u8, u8)] {
        self.facts().gc
    }

    /// The LLVM processor name.
    pub fn name(self) -> &'static str {
        self.facts().name
    }

    /// The architecture generation.
    pub fn family(self) -> Family {
        self.facts().family
    }

    /// Whether this is a CDNA (GFX9-family) target.
    pub fn is_cdna(self) -> bool {
        matches!(self.family(), Family::Cdna3 | Family::Cdna4)
    }

    /// Whether this is an RDNA4 (GFX12) target.
    pub fn is_gfx12(self) -> bool {
        self.family() == Family::Rdna4
    }

    /// The lanes per wave code is compiled for by default: RDNA runs wave32 natively, CDNA
    /// only wave64.
    pub fn wave_size(self) -> u32 {
        if self.is_cdna() { 64 } else { 32 }
    }

    /// Every wave size the hardware runs (RDNA also runs wave64, as two passes of a SIMD32).
    pub fn wave_sizes(self) -> &'static [u32] {
        if self.is_cdna() { &[64] } else { &[32, 64] }
    }

    /// LDS bytes one workgroup may allocate.
    pub fn max_lds(self) -> u32 {
        self.facts().max_lds
    }

    /// SGPRs one wave may use, as the metadata's `.sgpr_count` counts them: the addressable
    /// ones (s0–s105 on gfx10+, s0–s101 on gfx9) and the special registers counted with
    /// them (VCC on gfx10+; VCC, FLAT_SCRATCH and XNACK_MASK on gfx9): 108 on both, as LLVM
    /// counts a kernel that uses every SGPR and VCC.
    pub fn max_sgprs(self) -> u32 {
        108
    }

    /// VGPRs one wave may use, as the metadata's `.vgpr_count` counts them: 256 addressable
    /// on RDNA; on CDNA the unified file of 512 (VGPRs and AccVGPRs).
    pub fn max_vgprs(self) -> u32 {
        if self.is_cdna() { 512 } else { 256 }
    }

    /// The matrix instructions.
    pub fn matrix(self) -> Matrix {
        if self.is_cdna() {
            Matrix::Mfma
        } else {
            Matrix::Wmma
        }
    }

    /// `EF_AMDGPU_MACH_*`: the processor in the low byte of a code object's `e_flags`.
    pub fn elf_mach(self) -> u32 {
        self.facts().elf_mach
    }

    /// The target of a code object's `e_flags`, if it is one of these.
    pub fn from_elf_flags(e_flags: u32) -> Option<GfxTarget> {
        GfxTarget::ALL
            .into_iter()
            .find(|t| t.elf_mach() == e_flags & 0xff)
    }

    /// Every name, for messages.
    pub(crate) fn names() -> String {
        let names: Vec<&str> = GfxTarget::ALL.iter().map(|t| t.name()).collect();
        names.join(", ")
    }

    /// Every GC version, for messages.
    pub(crate) fn gc_versions_text() -> String {
        let v: Vec<String> = GfxTarget::ALL
            .iter()
            .flat_map(|t| t.gc_versions())
            .map(|(a, b, c)| format!("{a}.{b}.{c}"))
            .collect();
        v.join(", ")
    }
}

impl fmt::Display for GfxTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GfxTarget {
    type Err = Error;
    fn from_str(s: &str) -> Result<GfxTarget, Error> {
        GfxTarget::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| Error::UnknownTarget(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gc_versions_map_to_the_targets_linux_kfd_names() {
        let name = |v: (u8, u8, u8)| GfxTarget::from_gc(v.0, v.1, v.2).map(|t| t.name());
        assert_eq!(name((11, 0, 0)).ok(), Some("gfx1100"));
        assert_eq!(name((11, 0, 3)).ok(), Some("gfx1101"), "Navi 32");
        assert_eq!(name((11, 0, 2)).ok(), Some("gfx1102"), "Navi 33");
        assert_eq!(name((9, 4, 3)).ok(), Some("gfx942"));
        assert_eq!(name((9, 4, 4)).ok(), Some("gfx942"));
        assert_eq!(name((9, 5, 0)).ok(), Some("gfx950"));
        assert_eq!(name((12, 0, 0)).ok(), Some("gfx1200"));
        assert_eq!(name((12, 0, 1)).ok(), Some("gfx1201"));
        let e = GfxTarget::from_gc(11, 0, 1).unwrap_err().to_string();
        assert!(e.contains("GC 11.0.1") && e.contains("9.4.3"), "{e}");
    }

    #[test]
    fn names_parse_back_and_gc_versions_round_trip() {
        for t in GfxTarget::ALL {
            assert_eq!(t.to_string().parse::<GfxTarget>().ok(), Some(t));
            for &(a, b, c) in t.gc_versions() {
                assert_eq!(GfxTarget::from_gc(a, b, c).ok(), Some(t), "{t}");
            }
            assert_eq!(GfxTarget::from_elf_flags(t.elf_mach() | 0x300), Some(t));
        }
        let mut names: Vec<&str> = GfxTarget::ALL.iter().map(|t| t.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), GfxTarget::ALL.len(), "one name per target");
        let e = "gfx9000".parse::<GfxTarget>().unwrap_err().to_string();
        assert!(
            e.contains("unknown target `gfx9000`") && e.contains("gfx1201"),
            "{e}"
        );
    }

    #[test]
    fn families_decide_wave_sizes_and_matrix_instructions() {
        assert_eq!(GfxTarget::Gfx942.wave_sizes(), &[64]);
        assert_eq!(GfxTarget::Gfx1101.wave_sizes(), &[32, 64]);
        assert_eq!(GfxTarget::Gfx1201.wave_size(), 32);
        assert_eq!(GfxTarget::Gfx950.family(), Family::Cdna4);
        assert_eq!(GfxTarget::Gfx950.matrix(), Matrix::Mfma);
        assert_eq!(GfxTarget::Gfx1200.matrix(), Matrix::Wmma);
        assert_eq!(GfxTarget::Gfx950.max_lds(), 160 << 10);
        assert_eq!(GfxTarget::Gfx942.max_lds(), 64 << 10);
    }
}
