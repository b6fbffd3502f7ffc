//! Values read by hand from the Linux 6.12 headers, so that a generator regression fails here.

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
    // ip_v4 is its 8 fixed bytes (hw_id u16, instance, num_base_address, major, minor,
    // revision, then sub_revision:4 / variant:4 as amdgpu builds it with LITTLEENDIAN_CPU);
    // the base addresses follow.
    assert_eq!(size_of::<discovery::ip_v4>(), 8);
    let ip = discovery::ip_v4::read_from_bytes(&[11, 0, 0, 5, 11, 0, 0, 0x3a][..]).unwrap();
    assert_eq!((ip.sub_revision(), ip.variant()), (0xa, 0x3));
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

#[test]
fn psp_gfx_frame_and_command_ids() {
    // psp_gfx_if.h: the ring frame is 64 bytes; GFX_CMD_ID_LOAD_IP_FW = 6.
    assert_eq!(size_of::<am_autogen::psp_gfx::psp_gfx_rb_frame>(), 64);
    assert_eq!(am_autogen::psp_gfx::GFX_CMD_ID_LOAD_IP_FW, 6);
    assert_eq!(am_autogen::psp_gfx::GFX_FW_TYPE_RLC_G, 8);
    assert_eq!(am_autogen::psp_gfx::GFX_FW_TYPE_SMU, 18);
}

#[test]
fn mqds_are_2048_bytes() {
    use am_autogen::mqd;
    assert_eq!(size_of::<mqd::v9::v9_mqd>(), 2048);
    assert_eq!(size_of::<mqd::v11::v11_compute_mqd>(), 2048);
    assert_eq!(size_of::<mqd::v12::v12_compute_mqd>(), 2048);
}

#[test]
fn pm4_opcodes_and_headers() {
    use am_autogen::pm4::{nvd, soc15d};
    assert_eq!(nvd::PACKET3_WAIT_REG_MEM, 0x3c);
    assert_eq!(nvd::PACKET3_RELEASE_MEM, 0x49);
    assert_eq!(soc15d::PACKET3_RELEASE_MEM, 0x49);
    // PACKET3(op, n): type 3 in bits 30..31, count at 16, opcode at 8.
    assert_eq!(nvd::PACKET3(0x3c, 5), 0xc005_3c00);
    assert_eq!(nvd::PACKET3_RELEASE_MEM_DATA_SEL(2), 2 << 29);
    assert_eq!(nvd::PACKET3_RELEASE_MEM_EVENT_INDEX(5), 5 << 8);
    assert_eq!(soc15d::WAIT_REG_MEM_FUNCTION(3), 3);
}

#[test]
fn sdma_packet_opcodes() {
    use am_autogen::sdma_pkt::{v4, v6};
    assert_eq!(v6::SDMA_OP_COPY, 1);
    assert_eq!(v6::SDMA_OP_FENCE, 5);
    assert_eq!(v4::SDMA_PKT_HEADER_op_mask, 0xff);
    assert_eq!(v4::SDMA_PKT_HEADER_OP(0x105), 0x05);
}

#[test]
fn ih_ids() {
    use am_autogen::ih;
    assert_eq!(ih::SOC15_IH_CLIENTID_GRBM_CP, 20);
    assert_eq!(ih::SOC15_IH_CLIENTID_VMC, 18);
    assert_eq!(ih::gfx_9_0::GFX_9_0__SRCID__CP_EOP_INTERRUPT, 181);
    assert_eq!(ih::gfx_11_0_0::GFX_11_0_0__SRCID__CP_EOP_INTERRUPT, 181);
}

#[test]
fn smu_messages_clocks_and_metrics() {
    use am_autogen::smu;
    assert_eq!(smu::v13_0_0::PPSMC_MSG_GetSmuVersion, 2);
    assert_eq!(smu::v13_0_0::PPSMC_MSG_SetSoftMaxByFreq, 0x1a);
    assert_eq!(smu::v13_0_6::PPSMC_MSG_SetSoftMaxByFreq, 0x14);
    assert_eq!(smu::v14_0_2::PPSMC_MSG_SetSoftMaxByFreq, 0x1a);
    assert_eq!(smu::v13_0_0::PPCLK_GFXCLK, 0);
    assert_eq!(smu::v13_0_0::PPCLK_UCLK, 2);
    // Metrics tables are plain bytes to the driver: they read from a DMA buffer.
    let raw = [0u8; size_of::<smu::v13_0_6::MetricsTableX_t>()];
    assert!(smu::v13_0_6::MetricsTableX_t::read_from_bytes(&raw).is_ok());
}

#[test]
fn mqd_accessors_address_the_c_dword_offsets() {
    use am_autogen::mqd::{v9, v11};
    use zerocopy::FromZeros;
    // v11_structs.h: cp_hqd_pq_base_lo is dword 136 ("offset: 136  (0x88)").
    let mut m = v11::v11_compute_mqd::new_zeroed();
    m.set_cp_hqd_pq_base_lo(0x1234);
    assert_eq!(m.dw[136], 0x1234);
    assert_eq!(m.cp_hqd_pq_base_lo(), 0x1234);
    // v9_structs.h: the union at dword 39 names compute_current_logic_xcc_id and
    // compute_static_thread_mgmt_se4 for the same dword.
    let mut q = v9::v9_mqd::new_zeroed();
    q.set_compute_current_logic_xcc_id(3);
    assert_eq!(q.compute_static_thread_mgmt_se4(), 3);
    assert_eq!(q.dw[39], 3);
}
