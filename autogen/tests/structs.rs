//! Values read by hand from the Linux 6.12 headers, so that a generator regression fails here.

#![allow(clippy::unwrap_used)]

use am_autogen::{discovery, hwid, ucode, vm};
use zerocopy::FromBytes;

#[test]
fn ucode_header_sizes_match_c() {
    // amdgpu_ucode.h: common header = 6 u32 + 4 u16 = 32 bytes; v2.0 PSP adds the bin count.
    assert_eq!(size_of::<ucode::common_firmware_header>(), 32);
    assert_eq!(size_of::<ucode::psp_fw_bin_desc>(), 16);
    assert_eq!(size_of::<ucode::psp_firmware_header_v2_0>(), 36);
    assert_eq!(size_of::<ucode::smc_firmware_header_v2_0>(), 44);
    // The header union is `uint8_t raw[0x100]` at its largest.
    assert_eq!(size_of::<ucode::amdgpu_firmware_header>(), 256);
}

#[test]
fn ucode_common_header_reads_from_bytes() {
    let mut raw = [0u8; 32];
    raw[0..4].copy_from_slice(&0x1234u32.to_le_bytes()); // size_bytes
    raw[8..10].copy_from_slice(&2u16.to_le_bytes()); // header_version_major
    raw[10..12].copy_from_slice(&1u16.to_le_bytes()); // header_version_minor
    raw[24..28].copy_from_slice(&0x100u32.to_le_bytes()); // ucode_array_offset_bytes
    let (hdr, rest) = ucode::common_firmware_header::read_from_prefix(&raw).unwrap();
    assert!(rest.is_empty());
    assert_eq!(hdr.size_bytes, 0x1234);
    assert_eq!((hdr.header_version_major, hdr.header_version_minor), (2, 1));
    assert_eq!(hdr.ucode_array_offset_bytes, 0x100);
}

#[test]
fn ucode_enums_are_constants() {
    // enum psp_fw_type starts PSP_FW_TYPE_UNKOWN, PSP_FW_TYPE_PSP_SOS, ...
    assert_eq!(ucode::PSP_FW_TYPE_UNKOWN, 0);
    assert_eq!(ucode::PSP_FW_TYPE_PSP_SOS, 1);
    assert_eq!(ucode::AMDGPU_UCODE_ID_CAP, 0);
    assert_eq!(ucode::AMDGPU_UCODE_ID_SDMA0, 1);
}

#[test]
fn discovery_signatures_and_ids() {
    assert_eq!(discovery::BINARY_SIGNATURE, 0x2821_1407);
    assert_eq!(discovery::DISCOVERY_TABLE_SIGNATURE, 0x5344_5049);
    assert_eq!(discovery::GC_TABLE_ID, 0x4347);
    assert_eq!(discovery::HARVEST_TABLE_SIGNATURE, 0x5652_4148);
    assert_eq!(discovery::GC, 1);
    assert_eq!(discovery::TOTAL_TABLES, 6);
}

#[test]
fn discovery_struct_sizes_match_c() {
    // All packed: 8-byte table_info, ip_discovery_header with 16 die_info entries.
    assert_eq!(size_of::<discovery::table_info>(), 8);
    assert_eq!(size_of::<discovery::ip_discovery_header>(), 80);
    // ip_v4 is its 7 fixed bytes; the base addresses follow.
    assert_eq!(size_of::<discovery::ip_v4>(), 7);
}

#[test]
fn discovery_bitfields_decode() {
    // ip_v3: `uint8_t sub_revision : 4; uint8_t variant : 4;` in the byte after revision.
    let mut raw = [0u8; 8];
    raw[0..2].copy_from_slice(&11u16.to_le_bytes());
    raw[7] = 0x52;
    let ip = discovery::ip_v3::read_from_prefix(&raw).unwrap().0;
    assert_eq!({ ip.hw_id }, 11);
    assert_eq!(ip.sub_revision(), 0x2);
    assert_eq!(ip.variant(), 0x5);
    let mut ip = ip;
    ip.set_variant(0xa);
    assert_eq!(ip.variant(), 0xa);
    assert_eq!(ip.sub_revision(), 0x2);
}

#[test]
fn hw_ids_and_hwip_map() {
    assert_eq!(hwid::GC_HWID, 11);
    assert_eq!(hwid::MP1_HWID, 1);
    assert_eq!(hwid::HwIp::GC.hw_id(), Some(hwid::GC_HWID));
    // amdgpu_discovery.c maps NBIO_HWIP to NBIF_HWID.
    assert_eq!(hwid::HwIp::NBIO.hw_id(), Some(hwid::NBIF_HWID));
    assert_eq!(hwid::HwIp::NBIO.hw_id(), Some(108));
    assert_eq!(hwid::HwIp::GC as u8, 1);
    assert_eq!(hwid::HwIp::RSMU.hw_id(), None);
    assert_eq!(hwid::VCN_HWIP, hwid::HwIp::UVD);
    assert_eq!(hwid::HwIp::GC.name(), "GC_HWIP");
}

#[test]
fn pte_flags_per_family() {
    assert_eq!(vm::AMDGPU_PTE_VALID, 1);
    assert_eq!(vm::AMDGPU_PTE_SYSTEM, 1 << 1);
    assert_eq!(vm::AMDGPU_PTE_WRITEABLE, 1 << 6);
    assert_eq!(vm::AMDGPU_PTE_FRAG(9), 9 << 7);
    assert_eq!(vm::AMDGPU_PTE_FRAG_SHIFT, 7);
    assert_eq!(vm::AMDGPU_PTE_FRAG_MASK, 0x1f << 7);
    assert_eq!(vm::AMDGPU_PDE_PTE, 1 << 54);
    assert_eq!(vm::AMDGPU_PTE_TF, 1 << 56);
    assert_eq!(vm::AMDGPU_PDE_BFS(9), 9 << 59);
    // GFX9 MTYPE at 57..59, GFX10/11 at 48..51, GFX12 at 54..56.
    assert_eq!(vm::AMDGPU_PTE_MTYPE_VG10_MASK, 3 << 57);
    assert_eq!(
        vm::AMDGPU_PTE_MTYPE_NV10(u64::MAX, 1),
        !(7 << 48) | (1 << 48)
    );
    assert_eq!(vm::AMDGPU_PTE_MTYPE_GFX12_SHIFT_BITS, 54);
    assert_eq!(vm::AMDGPU_PTE_IS_PTE, 1 << 63);
    assert_eq!(vm::AMDGPU_PDE_BFS_GFX12(0x3f), 0x1f << 58);
}
