//! PCI config-space capability lists, walked over a byte buffer (a `config` file's contents).
//!
//! Layouts are those of the PCI Express base specification as Linux's `pci_regs.h` names
//! them. Every read is bounds-checked and every walk bounded, so a malformed or truncated
//! config space ends the walk instead of looping or panicking.

/// Status register (bit `PCI_STATUS_CAP_LIST` says a capability list exists).
const PCI_STATUS: usize = 0x06;
const PCI_STATUS_CAP_LIST: u16 = 0x10;
/// Pointer to the first standard capability.
const PCI_CAPABILITY_LIST: usize = 0x34;
/// Extended capabilities start right after the 256-byte legacy space.
const PCI_CFG_SPACE_SIZE: usize = 0x100;
const PCI_CFG_SPACE_EXP_SIZE: usize = 0x1000;

/// Standard capability id: PCI Express.
pub const PCI_CAP_ID_EXP: u8 = 0x10;
/// Standard capability id: MSI.
pub const PCI_CAP_ID_MSI: u8 = 0x05;
/// Standard capability id: MSI-X.
pub const PCI_CAP_ID_MSIX: u8 = 0x11;
/// Extended capability id: Single Root I/O Virtualization.
pub const PCI_EXT_CAP_ID_SRIOV: u16 = 0x10;
/// Extended capability id: Resizable BAR.
pub const PCI_EXT_CAP_ID_REBAR: u16 = 0x15;

fn u8_at(cfg: &[u8], off: usize) -> Option<u8> {
    cfg.get(off).copied()
}

fn u16_at(cfg: &[u8], off: usize) -> Option<u16> {
    let b = cfg.get(off..off.checked_add(2)?)?;
    Some(u16::from_le_bytes([b[0], b[1]]))
}

fn u32_at(cfg: &[u8], off: usize) -> Option<u32> {
    let b = cfg.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Offsets and ids of the standard capabilities, in list order.
pub fn capabilities(cfg: &[u8]) -> Vec<(u16, u8)> {
    let mut out = Vec::new();
    if u16_at(cfg, PCI_STATUS).is_none_or(|s| s & PCI_STATUS_CAP_LIST == 0) {
        return out;
    }
    let mut pos = u8_at(cfg, PCI_CAPABILITY_LIST).map_or(0, |p| p & 0xfc);
    // 48 = (256 - 64) / 4: more entries than that can only be a loop.
    for _ in 0..48 {
        if pos < 0x40 {
            break;
        }
        let (Some(id), Some(next)) = (u8_at(cfg, pos.into()), u8_at(cfg, usize::from(pos) + 1))
        else {
            break;
        };
        if id == 0xff {
            break;
        }
        out.push((u16::from(pos), id));
        pos = next & 0xfc;
    }
    out
}

/// Offset of the first standard capability with `id`.
pub fn find_capability(cfg: &[u8], id: u8) -> Option<u16> {
    capabilities(cfg)
        .into_iter()
        .find(|&(_, c)| c == id)
        .map(|(off, _)| off)
}

/// Offsets and ids of the extended capabilities (PCIe config space beyond 0x100).
pub fn ext_capabilities(cfg: &[u8]) -> Vec<(u16, u16)> {
    let mut out = Vec::new();
    let mut pos = PCI_CFG_SPACE_SIZE;
    // Each capability takes at least 4 bytes of the 3840 extended bytes.
    for _ in 0..(PCI_CFG_SPACE_EXP_SIZE - PCI_CFG_SPACE_SIZE) / 4 {
        let Some(header) = u32_at(cfg, pos) else {
            break;
        };
        if header == 0 || header == 0xffff_ffff {
            break;
        }
        out.push((pos as u16, (header & 0xffff) as u16));
        let next = ((header >> 20) & 0xffc) as usize;
        if next < PCI_CFG_SPACE_SIZE {
            break;
        }
        pos = next;
    }
    out
}

/// Offset of the first extended capability with `id`.
pub fn find_ext_capability(cfg: &[u8], id: u16) -> Option<u16> {
    ext_capabilities(cfg)
        .into_iter()
        .find(|&(_, c)| c == id)
        .map(|(off, _)| off)
}

/// One BAR of the Resizable BAR capability.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RebarEntry {
    /// The BAR index.
    pub bar: u8,
    /// Supported sizes: bit `n` set means 2^n MiB is supported (the encoding of sysfs
    /// `resourceN_resize`).
    pub sizes: u64,
    /// Current size as log2 of MiB.
    pub current: u8,
}

impl RebarEntry {
    /// Largest supported size in bytes.
    pub fn largest_size(&self) -> Option<u64> {
        largest_rebar_size(self.sizes).map(|n| (1u64 << 20) << n)
    }
}

/// Largest supported size of a Resizable BAR sizes mask (bit n = 2^n MiB), as its bit index.
pub fn largest_rebar_size(sizes: u64) -> Option<u32> {
    (sizes != 0).then(|| 63 - sizes.leading_zeros())
}

/// The entries of the Resizable BAR capability (`PCI_EXT_CAP_ID_REBAR`).
pub fn rebar_entries(cfg: &[u8]) -> Vec<RebarEntry> {
    let Some(cap) = find_ext_capability(cfg, PCI_EXT_CAP_ID_REBAR) else {
        return Vec::new();
    };
    let cap = usize::from(cap);
    // PCI_REBAR_CTRL of the first entry holds the number of entries (PCI_REBAR_CTRL_NBAR).
    let Some(ctrl0) = u32_at(cfg, cap + 8) else {
        return Vec::new();
    };
    let count = ((ctrl0 >> 5) & 0x7).clamp(1, 6) as usize;
    let mut out = Vec::new();
    for i in 0..count {
        let base = cap + 4 + i * 8;
        let (Some(caps), Some(ctrl)) = (u32_at(cfg, base), u32_at(cfg, base + 4)) else {
            break;
        };
        // PCI_REBAR_CAP bits 4..31 are sizes 1 MiB..128 TiB; PCI_REBAR_CTRL bits 16..31
        // extend them to 256 TiB and beyond.
        let sizes = u64::from(caps >> 4) | (u64::from(ctrl >> 16) << 28);
        out.push(RebarEntry {
            bar: (ctrl & 0x7) as u8,
            sizes,
            current: ((ctrl >> 8) & 0x3f) as u8,
        });
    }
    out
}

/// What the SR-IOV capability says about a physical function's virtual functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SriovInfo {
    /// Offset of the capability.
    pub offset: u16,
    /// `PCI_SRIOV_TOTAL_VF`: VFs the device can offer.
    pub total_vfs: u16,
    /// `PCI_SRIOV_NUM_VF`: VFs currently configured.
    pub num_vfs: u16,
    /// `PCI_SRIOV_VF_OFFSET`: routing-id offset of the first VF.
    pub vf_offset: u16,
    /// `PCI_SRIOV_VF_STRIDE`: routing-id distance between VFs.
    pub vf_stride: u16,
    /// `PCI_SRIOV_VF_DID`: device id of the VFs.
    pub vf_device_id: u16,
}

/// The SR-IOV capability of a physical function, if it has one.
pub fn sriov_info(cfg: &[u8]) -> Option<SriovInfo> {
    let off = find_ext_capability(cfg, PCI_EXT_CAP_ID_SRIOV)?;
    let at = |r: usize| u16_at(cfg, usize::from(off) + r);
    Some(SriovInfo {
        offset: off,
        total_vfs: at(0x0e)?,
        num_vfs: at(0x10)?,
        vf_offset: at(0x14)?,
        vf_stride: at(0x16)?,
        vf_device_id: at(0x1a)?,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A 4 KiB config space with MSI at 0x50 → PCIe at 0x64 → MSI-X at 0xa0, and extended
    /// capabilities 0x0b (vendor) at 0x100 → SR-IOV at 0x150 → Resizable BAR at 0x200.
    pub(crate) fn sample_config() -> Vec<u8> {
        let mut c = vec![0u8; 4096];
        c[0..2].copy_from_slice(&0x1002u16.to_le_bytes());
        c[2..4].copy_from_slice(&0x744cu16.to_le_bytes());
        c[6..8].copy_from_slice(&PCI_STATUS_CAP_LIST.to_le_bytes());
        c[0x34] = 0x50;
        c[0x50] = PCI_CAP_ID_MSI;
        c[0x51] = 0x64;
        c[0x64] = PCI_CAP_ID_EXP;
        c[0x65] = 0xa0;
        c[0xa0] = PCI_CAP_ID_MSIX;
        c[0xa1] = 0;
        let ext = |c: &mut Vec<u8>, pos: usize, id: u32, next: u32| {
            let h = id | (1 << 16) | (next << 20);
            c[pos..pos + 4].copy_from_slice(&h.to_le_bytes());
        };
        ext(&mut c, 0x100, 0x0b, 0x150);
        ext(&mut c, 0x150, 0x10, 0x200);
        ext(&mut c, 0x200, 0x15, 0);
        // SR-IOV: 4 VFs total, 2 enabled, offset 0x80, stride 1, VF device id 0x75b0.
        c[0x15e..0x160].copy_from_slice(&4u16.to_le_bytes());
        c[0x160..0x162].copy_from_slice(&2u16.to_le_bytes());
        c[0x164..0x166].copy_from_slice(&0x80u16.to_le_bytes());
        c[0x166..0x168].copy_from_slice(&1u16.to_le_bytes());
        c[0x16a..0x16c].copy_from_slice(&0x75b0u16.to_le_bytes());
        // Resizable BAR: one entry, BAR0, sizes 256 MiB..32 GiB (bits 8..15), now 256 MiB.
        let sizes: u32 = 0xff00 << 4;
        c[0x204..0x208].copy_from_slice(&sizes.to_le_bytes());
        let ctrl: u32 = (1 << 5) | (8 << 8);
        c[0x208..0x20c].copy_from_slice(&ctrl.to_le_bytes());
        c
    }

    #[test]
    fn walks_the_standard_list_in_order() {
        let c = sample_config();
        assert_eq!(
            capabilities(&c),
            vec![
                (0x50, PCI_CAP_ID_MSI),
                (0x64, PCI_CAP_ID_EXP),
                (0xa0, PCI_CAP_ID_MSIX)
            ]
        );
        assert_eq!(find_capability(&c, PCI_CAP_ID_EXP), Some(0x64));
        assert_eq!(find_capability(&c, 0x09), None);
    }

    #[test]
    fn no_list_without_the_status_bit() {
        let mut c = sample_config();
        c[6] = 0;
        assert!(capabilities(&c).is_empty());
    }

    #[test]
    fn looping_or_truncated_lists_end() {
        let mut c = sample_config();
        c[0xa1] = 0x50; // MSI-X points back at MSI
        assert_eq!(capabilities(&c).len(), 48);
        let mut e = sample_config();
        e[0x202..0x204].copy_from_slice(&(0x100u16 << 4 | 1).to_le_bytes()); // 0x200 → 0x100
        assert_eq!(ext_capabilities(&e).len(), (4096 - 256) / 4);
        assert!(
            ext_capabilities(&c[..256]).is_empty(),
            "256-byte config has no extended caps"
        );
        assert_eq!(
            capabilities(&c[..0x52]).len(),
            1,
            "truncated after the first capability"
        );
    }

    #[test]
    fn finds_sriov_and_resizable_bar() {
        let c = sample_config();
        assert_eq!(
            ext_capabilities(&c),
            vec![
                (0x100, 0x0b),
                (0x150, PCI_EXT_CAP_ID_SRIOV),
                (0x200, PCI_EXT_CAP_ID_REBAR)
            ]
        );
        assert_eq!(
            sriov_info(&c),
            Some(SriovInfo {
                offset: 0x150,
                total_vfs: 4,
                num_vfs: 2,
                vf_offset: 0x80,
                vf_stride: 1,
                vf_device_id: 0x75b0
            })
        );
        let rebar = rebar_entries(&c);
        assert_eq!(
            rebar,
            vec![RebarEntry {
                bar: 0,
                sizes: 0xff00,
                current: 8
            }]
        );
        assert_eq!(rebar[0].largest_size(), Some(32 << 30));
    }

    #[test]
    fn all_ones_config_space_has_no_extended_caps() {
        let c = vec![0xffu8; 4096];
        assert!(ext_capabilities(&c).is_empty());
        assert_eq!(sriov_info(&c), None);
    }

    #[test]
    fn largest_rebar_size_is_the_top_bit() {
        assert_eq!(largest_rebar_size(0), None);
        assert_eq!(largest_rebar_size(0b1), Some(0));
        assert_eq!(largest_rebar_size(0x3fff00), Some(21));
    }
}
