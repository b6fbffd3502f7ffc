//! Names of the AMD GPUs this project knows, by PCI device id.

use am_isa::GfxTarget;

/// A known AMD GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownGpu {
    /// PCI device id.
    pub device_id: u16,
    /// Chip and product, as the PCI id database words them.
    pub name: &'static str,
    /// The target of its shader cores.
    pub gfx_target: GfxTarget,
    /// Whether this id is an SR-IOV virtual function.
    pub is_vf: bool,
}

const fn gpu(device_id: u16, name: &'static str, gfx_target: GfxTarget, is_vf: bool) -> KnownGpu {
    KnownGpu {
        device_id,
        name,
        gfx_target,
        is_vf,
    }
}

/// Every AMD GPU the driver has a name for.
pub const KNOWN_GPUS: &[KnownGpu] = &[
    gpu(
        0x744c,
        "Navi 31 [Radeon RX 7900 XT/7900 XTX]",
        GfxTarget::Gfx1100,
        false,
    ),
    gpu(
        0x7448,
        "Navi 31 [Radeon Pro W7900]",
        GfxTarget::Gfx1100,
        false,
    ),
    gpu(
        0x7480,
        "Navi 33 [Radeon RX 7600/7600 XT]",
        GfxTarget::Gfx1102,
        false,
    ),
    gpu(
        0x7590,
        "Navi 44 [Radeon RX 9060 XT]",
        GfxTarget::Gfx1200,
        false,
    ),
    gpu(
        0x7550,
        "Navi 48 [Radeon RX 9070/9070 XT]",
        GfxTarget::Gfx1201,
        false,
    ),
    gpu(
        0x7551,
        "Navi 48 [Radeon AI PRO R9700]",
        GfxTarget::Gfx1201,
        false,
    ),
    gpu(
        0x74a1,
        "Aqua Vanjaram [Instinct MI300X]",
        GfxTarget::Gfx942,
        false,
    ),
    gpu(
        0x74a5,
        "Aqua Vanjaram [Instinct MI325X]",
        GfxTarget::Gfx942,
        false,
    ),
    gpu(
        0x74b5,
        "Aqua Vanjaram [Instinct MI300X VF]",
        GfxTarget::Gfx942,
        true,
    ),
    gpu(0x75a0, "Instinct MI350X", GfxTarget::Gfx950, false),
    gpu(0x75a3, "Instinct MI355X", GfxTarget::Gfx950, false),
    gpu(0x75b0, "Instinct MI350X VF", GfxTarget::Gfx950, true),
];

/// The known GPU with this device id (vendor 0x1002 assumed).
pub fn known_gpu(device_id: u16) -> Option<&'static KnownGpu> {
    KNOWN_GPUS.iter().find(|g| g.device_id == device_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_profiles_of_the_mock() {
        assert_eq!(known_gpu(0x744c).unwrap().gfx_target, GfxTarget::Gfx1100);
        assert_eq!(known_gpu(0x74a1).unwrap().gfx_target, GfxTarget::Gfx942);
        let vf = known_gpu(0x75b0).unwrap();
        assert!(vf.is_vf && vf.gfx_target == GfxTarget::Gfx950);
        assert!(known_gpu(0x1234).is_none());
    }

    #[test]
    fn ids_are_unique() {
        for (i, a) in KNOWN_GPUS.iter().enumerate() {
            assert!(
                KNOWN_GPUS[i + 1..]
                    .iter()
                    .all(|b| b.device_id != a.device_id),
                "{:#x}",
                a.device_id
            );
        }
    }
}
