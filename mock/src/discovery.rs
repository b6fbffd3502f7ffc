//! The IP discovery binary a profile's firmware would leave at `VRAM - 64 KiB`.
//!
//! Layout (all offsets from the start of the binary, `discovery.h`): the binary header with
//! its table list, the IP discovery header (version 4) with one die entry per AID, each die
//! header followed by its `ip_v4` entries (32- or 64-bit bases), then the `gc_info` table
//! (v1.x on RDNA, v2.x on GFX9) and the harvest table. Every table carries its byte-sum
//! checksum and the binary header the sum of everything after its checksum field.

use zerocopy::IntoBytes;

use crate::profile::Profile;
use crate::{Error, Result};

use layout::*;

/// Offset of the discovery binary from the end of VRAM.
pub const DISCOVERY_TMR_OFFSET: u64 = 64 << 10;
/// Size the driver reads.
pub const DISCOVERY_SIZE: usize = 10 << 10;

/// VRAM offset of the discovery binary of a profile.
pub fn offset(profile: &Profile) -> u64 {
    profile.vram_size - DISCOVERY_TMR_OFFSET
}

fn byte_sum(bytes: &[u8]) -> u16 {
    bytes
        .iter()
        .fold(0u16, |s, &b| s.wrapping_add(u16::from(b)))
}

fn pad4(buf: &mut Vec<u8>) {
    while buf.len() % 4 != 0 {
        buf.push(0);
    }
}

fn off16(profile: &Profile, at: usize) -> Result<u16> {
    u16::try_from(at).map_err(|_| Error::BadProfile {
        profile: profile.name,
        reason: format!("discovery table offset {at:#x} does not fit 16 bits"),
    })
}

/// Build the discovery binary of a profile.
pub fn build(profile: &Profile) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; std::mem::size_of::<BinaryHeader>()];
    pad4(&mut buf);

    // IP discovery table: header, then dies.
    let ip_off = buf.len();
    buf.resize(ip_off + std::mem::size_of::<IpDiscoveryHeader>(), 0);
    pad4(&mut buf);
    let num_dies = usize::from(profile.num_aid.max(1));
    let mut ihdr = IpDiscoveryHeader {
        signature: DISCOVERY_TABLE_SIGNATURE,
        version: 4,
        num_dies: num_dies as u16,
        base_addr_64_bit: u8::from(profile.base_addr_64_bit),
        ..Default::default()
    };
    for die in 0..num_dies {
        let die_off = buf.len();
        let ips: Vec<_> = profile
            .ips
            .iter()
            .filter(|i| usize::from(i.die) == die)
            .collect();
        ihdr.die_info[die] = DieInfo {
            die_id: die as u16,
            die_offset: off16(profile, die_off)?,
        };
        buf.extend_from_slice(
            DieHeader {
                die_id: die as u16,
                num_ips: ips.len() as u16,
            }
            .as_bytes(),
        );
        for ip in ips {
            let entry = IpV4 {
                hw_id: ip.hw_id,
                instance_number: ip.instance,
                num_base_address: ip.bases.len() as u8,
                major: ip.version.0,
                minor: ip.version.1,
                revision: ip.version.2,
                sub_revision_variant: 0,
            };
            buf.extend_from_slice(entry.as_bytes());
            for &b in &ip.bases {
                if profile.base_addr_64_bit {
                    buf.extend_from_slice(&b.to_le_bytes());
                } else {
                    let b32 = u32::try_from(b).map_err(|_| Error::BadProfile {
                        profile: profile.name,
                        reason: format!("base {b:#x} of hw_id {} needs 64-bit discovery", ip.hw_id),
                    })?;
                    buf.extend_from_slice(&b32.to_le_bytes());
                }
            }
        }
    }
    let ip_size = buf.len() - ip_off;
    ihdr.size = off16(profile, ip_size)?;
    buf[ip_off..ip_off + std::mem::size_of::<IpDiscoveryHeader>()].copy_from_slice(ihdr.as_bytes());
    pad4(&mut buf);

    // gc_info.
    let gc_off = buf.len();
    let g = &profile.gc;
    if g.info_major == 1 {
        let info = GcInfoV1_0 {
            header: GpuInfoHeader {
                table_id: GC_TABLE_ID,
                version_major: 1,
                version_minor: 0,
                size: std::mem::size_of::<GcInfoV1_0>() as u32,
            },
            gc_num_se: g.num_se,
            // RDNA counts work-group processors (2 CUs each) per shader array.
            gc_num_wgp0_per_sa: g.num_cu_per_sh / 2,
            gc_num_wgp1_per_sa: 0,
            gc_num_rb_per_se: g.num_rb_per_se,
            gc_num_gl2c: g.num_tccs,
            gc_num_gprs: 1024,
            gc_num_max_gs_thds: 32,
            gc_gs_table_depth: 32,
            gc_gsprim_buff_depth: 1792,
            gc_parameter_cache_depth: 1024,
            gc_double_offchip_lds_buffer: 1,
            gc_wave_size: g.wave_size,
            gc_max_waves_per_simd: g.max_waves_per_simd,
            gc_max_scratch_slots_per_cu: g.max_scratch_slots_per_cu,
            gc_lds_size: g.lds_kib,
            gc_num_sc_per_se: 2,
            gc_num_sa_per_se: g.num_sh_per_se,
            gc_num_packer_per_sc: 4,
            gc_num_gl2a: 4,
        };
        buf.extend_from_slice(info.as_bytes());
    } else {
        let info = GcInfoV2_1 {
            header: GpuInfoHeader {
                table_id: GC_TABLE_ID,
                version_major: 2,
                version_minor: 1,
                size: std::mem::size_of::<GcInfoV2_1>() as u32,
            },
            gc_num_se: g.num_se,
            gc_num_cu_per_sh: g.num_cu_per_sh,
            gc_num_sh_per_se: g.num_sh_per_se,
            gc_num_rb_per_se: g.num_rb_per_se,
            gc_num_tccs: g.num_tccs,
            gc_num_gprs: 512,
            gc_num_max_gs_thds: 32,
            gc_gs_table_depth: 32,
            gc_gsprim_buff_depth: 1792,
            gc_parameter_cache_depth: 1024,
            gc_double_offchip_lds_buffer: 1,
            gc_wave_size: g.wave_size,
            gc_max_waves_per_simd: g.max_waves_per_simd,
            gc_max_scratch_slots_per_cu: g.max_scratch_slots_per_cu,
            gc_lds_size: g.lds_kib,
            gc_num_sc_per_se: 1,
            gc_num_packer_per_sc: 4,
            gc_num_tcp_per_sh: g.num_cu_per_sh,
            gc_tcp_size_per_cu: 16,
            gc_num_sdp_interface: 16,
            gc_num_cu_per_sqc: 2,
            gc_instruction_cache_size_per_sqc: 64,
            gc_scalar_data_cache_size_per_sqc: 16,
            gc_tcc_size: 4096,
        };
        buf.extend_from_slice(info.as_bytes());
    }
    let gc_size = buf.len() - gc_off;
    pad4(&mut buf);

    // Harvest table.
    let hv_off = buf.len();
    let mut harvest = HarvestTable {
        header: HarvestInfoHeader {
            signature: HARVEST_TABLE_SIGNATURE,
            version: 1,
        },
        list: [HarvestInfo::default(); 32],
    };
    if profile.harvest.len() > harvest.list.len() {
        return Err(Error::BadProfile {
            profile: profile.name,
            reason: "more than 32 harvest entries".into(),
        });
    }
    for (slot, &(hw_id, instance)) in harvest.list.iter_mut().zip(&profile.harvest) {
        *slot = HarvestInfo {
            hw_id,
            number_instance: instance,
            reserved: 0,
        };
    }
    buf.extend_from_slice(harvest.as_bytes());
    let hv_size = buf.len() - hv_off;

    if buf.len() > DISCOVERY_SIZE {
        return Err(Error::BadProfile {
            profile: profile.name,
            reason: format!(
                "discovery binary is {} bytes, more than {DISCOVERY_SIZE}",
                buf.len()
            ),
        });
    }

    let table = |off: usize, size: usize| -> Result<TableInfo> {
        Ok(TableInfo {
            offset: off16(profile, off)?,
            checksum: byte_sum(&buf[off..off + size]),
            size: off16(profile, size)?,
            padding: 0,
        })
    };
    let mut bhdr = BinaryHeader {
        binary_signature: BINARY_SIGNATURE,
        version_major: 2,
        version_minor: 0,
        binary_checksum: 0,
        binary_size: off16(profile, buf.len())?,
        table_list: [TableInfo::default(); TOTAL_TABLES],
    };
    bhdr.table_list[IP_DISCOVERY] = table(ip_off, ip_size)?;
    bhdr.table_list[GC] = table(gc_off, gc_size)?;
    bhdr.table_list[HARVEST_INFO] = table(hv_off, hv_size)?;
    buf[..std::mem::size_of::<BinaryHeader>()].copy_from_slice(bhdr.as_bytes());
    let after_checksum = std::mem::offset_of!(BinaryHeader, binary_checksum) + 2;
    bhdr.binary_checksum = byte_sum(&buf[after_checksum..]);
    buf[..std::mem::size_of::<BinaryHeader>()].copy_from_slice(bhdr.as_bytes());
    Ok(buf)
}

mod layout {
    #![allow(missing_docs)]
    use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

    pub const BINARY_SIGNATURE: u32 = 0x2821_1407;
    pub const DISCOVERY_TABLE_SIGNATURE: u32 = 0x5344_5049;
    pub const GC_TABLE_ID: u32 = 0x4347;
    pub const HARVEST_TABLE_SIGNATURE: u32 = 0x5652_4148;
    pub const IP_DISCOVERY: usize = 0;
    pub const GC: usize = 1;
    pub const HARVEST_INFO: usize = 2;
    pub const TOTAL_TABLES: usize = 6;

    #[repr(C, packed)]
    #[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
    pub struct TableInfo {
        pub offset: u16,
        pub checksum: u16,
        pub size: u16,
        pub padding: u16,
    }

    #[repr(C, packed)]
    #[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
    pub struct BinaryHeader {
        pub binary_signature: u32,
        pub version_major: u16,
        pub version_minor: u16,
        pub binary_checksum: u16,
        pub binary_size: u16,
        pub table_list: [TableInfo; TOTAL_TABLES],
    }

    #[repr(C, packed)]
    #[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
    pub struct DieInfo {
        pub die_id: u16,
        pub die_offset: u16,
    }

    #[repr(C, packed)]
    #[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
    pub struct IpDiscoveryHeader {
        pub signature: u32,
        pub version: u16,
        pub size: u16,
        pub id: u32,
        pub num_dies: u16,
        pub die_info: [DieInfo; 16],
        pub base_addr_64_bit: u8,
        pub reserved2: u8,
    }

    #[repr(C, packed)]
    #[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
    pub struct DieHeader {
        pub die_id: u16,
        pub num_ips: u16,
    }

    #[repr(C, packed)]
    #[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
    pub struct IpV4 {
        pub hw_id: u16,
        pub instance_number: u8,
        pub num_base_address: u8,
        pub major: u8,
        pub minor: u8,
        pub revision: u8,
        pub sub_revision_variant: u8,
    }

    #[repr(C, packed)]
    #[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
    pub struct GpuInfoHeader {
        pub table_id: u32,
        pub version_major: u16,
        pub version_minor: u16,
        pub size: u32,
    }

    #[repr(C, packed)]
    #[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
    pub struct GcInfoV1_0 {
        pub header: GpuInfoHeader,
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
    pub struct GcInfoV2_1 {
        pub header: GpuInfoHeader,
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
        pub gc_num_tcp_per_sh: u32,
        pub gc_tcp_size_per_cu: u32,
        pub gc_num_sdp_interface: u32,
        pub gc_num_cu_per_sqc: u32,
        pub gc_instruction_cache_size_per_sqc: u32,
        pub gc_scalar_data_cache_size_per_sqc: u32,
        pub gc_tcc_size: u32,
    }

    #[repr(C, packed)]
    #[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
    pub struct HarvestInfoHeader {
        pub signature: u32,
        pub version: u32,
    }

    #[repr(C, packed)]
    #[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
    pub struct HarvestInfo {
        pub hw_id: u16,
        pub number_instance: u8,
        pub reserved: u8,
    }

    #[repr(C, packed)]
    #[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
    pub struct HarvestTable {
        pub header: HarvestInfoHeader,
        pub list: [HarvestInfo; 32],
    }
}
