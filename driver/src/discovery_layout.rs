//! TEMPORARY stand-in for `am_autogen::discovery` until the generated structs land.
#![allow(missing_docs, non_camel_case_types, dead_code)]
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

pub const BINARY_SIGNATURE: u32 = 0x28211407;
pub const DISCOVERY_TABLE_SIGNATURE: u32 = 0x53445049;
pub const GC_TABLE_ID: u32 = 0x4347;
pub const HARVEST_TABLE_SIGNATURE: u32 = 0x56524148;
pub const IP_DISCOVERY: u32 = 0;
pub const GC: u32 = 1;
pub const HARVEST_INFO: u32 = 2;
pub const TOTAL_TABLES: usize = 6;

#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct table_info {
    pub offset: u16,
    pub checksum: u16,
    pub size: u16,
    pub padding: u16,
}

#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct binary_header {
    pub binary_signature: u32,
    pub version_major: u16,
    pub version_minor: u16,
    pub binary_checksum: u16,
    pub binary_size: u16,
    pub table_list: [table_info; TOTAL_TABLES],
}

#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct die_info {
    pub die_id: u16,
    pub die_offset: u16,
}

#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ip_discovery_header {
    pub signature: u32,
    pub version: u16,
    pub size: u16,
    pub id: u32,
    pub num_dies: u16,
    pub die_info: [die_info; 16],
    pub flags: u8,
    pub reserved2: u8,
}
impl ip_discovery_header {
    pub fn base_addr_64_bit(&self) -> u8 {
        self.flags & 1
    }
    pub fn set_base_addr_64_bit(&mut self, v: u8) {
        self.flags = (self.flags & !1) | (v & 1)
    }
}

#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct die_header {
    pub die_id: u16,
    pub num_ips: u16,
}

#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ip_v4 {
    pub hw_id: u16,
    pub instance_number: u8,
    pub num_base_address: u8,
    pub major: u8,
    pub minor: u8,
    pub revision: u8,
    pub sub_rev_variant: u8,
}
impl ip_v4 {
    pub fn sub_revision(&self) -> u8 {
        self.sub_rev_variant & 0xf
    }
    pub fn variant(&self) -> u8 {
        self.sub_rev_variant >> 4
    }
}

#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct gpu_info_header {
    pub table_id: u32,
    pub version_major: u16,
    pub version_minor: u16,
    pub size: u32,
}

#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct gc_info_v1_0 {
    pub header: gpu_info_header,
    pub gc_num_se: u32,
    pub gc_num_wgp0_per_sa: u32,
    pub gc_num_wgp1_per_sa: u32,
    pub gc_num_rb_per_se: u32,
    pub gc_num_gl2c: u32,
    pub gc_num_gprs: u32,
    pub gc_num_max_gs_thds: u32,
    pub gc_gs_table_depth: u32,
    pub gc_gsprim_buff_depth: u32,
    pub gc_parameter_cache_depth: u32,
    pub gc_double_offchip_lds_buffer: u32,
    pub gc_wave_size: u32,
    pub gc_max_waves_per_simd: u32,
    pub gc_max_scratch_slots_per_cu: u32,
    pub gc_lds_size: u32,
    pub gc_num_sc_per_se: u32,
    pub gc_num_sa_per_se: u32,
    pub gc_num_packer_per_sc: u32,
    pub gc_num_gl2a: u32,
}

#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct gc_info_v2_0 {
    pub header: gpu_info_header,
    pub gc_num_se: u32,
    pub gc_num_cu_per_sh: u32,
    pub gc_num_sh_per_se: u32,
    pub gc_num_rb_per_se: u32,
    pub gc_num_tccs: u32,
    pub gc_num_gprs: u32,
    pub gc_num_max_gs_thds: u32,
    pub gc_gs_table_depth: u32,
    pub gc_gsprim_buff_depth: u32,
    pub gc_parameter_cache_depth: u32,
    pub gc_double_offchip_lds_buffer: u32,
    pub gc_wave_size: u32,
    pub gc_max_waves_per_simd: u32,
    pub gc_max_scratch_slots_per_cu: u32,
    pub gc_lds_size: u32,
    pub gc_num_sc_per_se: u32,
    pub gc_num_packer_per_sc: u32,
}

#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct harvest_info_header {
    pub signature: u32,
    pub version: u32,
}

#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct harvest_info {
    pub hw_id: u16,
    pub number_instance: u8,
    pub reserved: u8,
}

#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct harvest_table {
    pub header: harvest_info_header,
    pub list: [harvest_info; 32],
}

pub const MP1_HWID: u16 = 1;
pub const SMUIO_HWID: u16 = 4;
pub const GC_HWID: u16 = 11;
pub const UVD_HWID: u16 = 12;
pub const MMHUB_HWID: u16 = 34;
pub const ATHUB_HWID: u16 = 35;
pub const OSSSYS_HWID: u16 = 40;
pub const HDP_HWID: u16 = 41;
pub const SDMA0_HWID: u16 = 42;
pub const SDMA1_HWID: u16 = 43;
pub const DF_HWID: u16 = 46;
pub const SDMA2_HWID: u16 = 68;
pub const SDMA3_HWID: u16 = 69;
pub const NBIF_HWID: u16 = 108;
pub const UMC_HWID: u16 = 150;
pub const XGMI_HWID: u16 = 200;
pub const MP0_HWID: u16 = 255;
pub const HW_ID_NAMES: &[(u16, &str)] = &[
    (1, "MP1"),
    (2, "MP2"),
    (3, "THM"),
    (4, "SMUIO"),
    (5, "FUSE"),
    (6, "CLKA"),
    (10, "PWR"),
    (11, "GC"),
    (12, "UVD"),
    (13, "AUDIO_AZ"),
    (14, "ACP"),
    (15, "DCI"),
    (16, "DCO"),
    (17, "XDMA"),
    (18, "DCEAZ"),
    (19, "SDPMUX"),
    (20, "NTB"),
    (21, "VPE"),
    (24, "IOHC"),
    (28, "L2IMU"),
    (32, "VCE"),
    (34, "MMHUB"),
    (35, "ATHUB"),
    (36, "DBGU_NBIO"),
    (37, "DFX"),
    (38, "DBGU0"),
    (39, "DBGU1"),
    (40, "OSSSYS"),
    (41, "HDP"),
    (42, "SDMA0"),
    (43, "SDMA1"),
    (44, "ISP"),
    (45, "DBGU_IO"),
    (46, "DF"),
    (47, "CLKB"),
    (48, "FCH"),
    (49, "DFX_DAP"),
    (50, "L1IMU_PCIE"),
    (51, "L1IMU_NBIF"),
    (52, "L1IMU_IOAGR"),
    (66, "WAFLC"),
    (67, "FCH_USB_PD"),
    (68, "SDMA2"),
    (69, "SDMA3"),
    (70, "PCIE"),
    (80, "PCS"),
    (89, "DDCL"),
    (90, "SST"),
    (91, "LSDMA"),
    (100, "IOAGR"),
    (108, "NBIF"),
    (124, "IOAPIC"),
    (128, "SYSTEMHUB"),
    (144, "NTBCCP"),
    (150, "UMC"),
    (168, "SATA"),
    (170, "USB"),
    (176, "CCXSEC"),
    (200, "XGMI"),
    (216, "XGBE"),
    (255, "MP0"),
    (271, "DMU"),
    (272, "DIO"),
    (274, "DAZ"),
];
