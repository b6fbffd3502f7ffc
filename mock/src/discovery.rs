//! The IP discovery binary a profile's firmware would leave at `VRAM - 64 KiB`.
//!
//! Layout (all offsets from the start of the binary, `discovery.h`): the binary header with
//! its table list, the IP discovery header (version 4) with one die entry per AID, each die
//! header followed by its `ip_v4` entries (32- or 64-bit bases), then the `gc_info` table
//! (v1.x on RDNA, v2.x on GFX9) and the harvest table. Every table carries its byte-sum
//! checksum and the binary header the sum of everything after its checksum field.

use std::ops::Range;

use zerocopy::IntoBytes;

use crate::profile::{GcConfig, Profile};
use crate::{Error, Result};

use am_autogen::discovery::{
    BINARY_SIGNATURE, DISCOVERY_TABLE_SIGNATURE, GC, GC_TABLE_ID, HARVEST_INFO,
    HARVEST_TABLE_SIGNATURE, IP_DISCOVERY, binary_header, die_header, die_info, gc_info_v1_0,
    gc_info_v2_1, gpu_info_header, harvest_info, harvest_info_header, harvest_table,
    ip_discovery_header, ip_v3, table, table_info,
};

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
    while !buf.len().is_multiple_of(4) {
        buf.push(0);
    }
}

fn off16(profile: &Profile, at: usize) -> Result<u16> {
    u16::try_from(at).map_err(|_| Error::BadProfile {
        profile: profile.name,
        reason: format!("discovery table offset {at:#x} does not fit 16 bits"),
    })
}

fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
    buf[at..at + bytes.len()].copy_from_slice(bytes);
}

/// The `ip_discovery_header` of the generated tables has a union (no `IntoBytes`): its
/// fields are written at the offsets the generated struct gives them.
fn write_ip_discovery_header(
    buf: &mut [u8],
    at: usize,
    size: u16,
    dies: &[die_info],
    base_addr_64_bit: bool,
) {
    use std::mem::offset_of;
    type H = ip_discovery_header;
    put(
        buf,
        at + offset_of!(H, signature),
        &DISCOVERY_TABLE_SIGNATURE.to_le_bytes(),
    );
    put(buf, at + offset_of!(H, version), &4u16.to_le_bytes());
    put(buf, at + offset_of!(H, size), &size.to_le_bytes());
    put(
        buf,
        at + offset_of!(H, num_dies),
        &(dies.len() as u16).to_le_bytes(),
    );
    put(buf, at + offset_of!(H, die_info), dies.as_bytes());
    // Bit 0 of the byte after the die list: base_addr_64_bit (version 4 only).
    put(
        buf,
        at + offset_of!(H, __bindgen_anon_1),
        &[u8::from(base_addr_64_bit)],
    );
}

/// Build the discovery binary of a profile.
pub fn build(profile: &Profile) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; size_of::<binary_header>()];
    pad4(&mut buf);
    let ip = write_ip_discovery(&mut buf, profile)?;
    pad4(&mut buf);
    let gc = write_gc_info(&mut buf, &profile.gc);
    pad4(&mut buf);
    let harvest = write_harvest_table(&mut buf, profile)?;
    if buf.len() > DISCOVERY_SIZE {
        return Err(Error::BadProfile {
            profile: profile.name,
            reason: format!(
                "discovery binary is {} bytes, more than {DISCOVERY_SIZE}",
                buf.len()
            ),
        });
    }
    write_binary_header(
        &mut buf,
        profile,
        [(IP_DISCOVERY, ip), (GC, gc), (HARVEST_INFO, harvest)],
    )?;
    Ok(buf)
}

/// IP discovery table: header, then one die header and its IP entries per die. Returns
/// where the table lies in `buf`.
fn write_ip_discovery(buf: &mut Vec<u8>, profile: &Profile) -> Result<Range<usize>> {
    let ip_off = buf.len();
    buf.resize(ip_off + size_of::<ip_discovery_header>(), 0);
    pad4(buf);
    let num_dies = usize::from(profile.num_aid.max(1));
    let mut dies = Vec::with_capacity(num_dies);
    for die in 0..num_dies {
        let die_off = buf.len();
        let ips: Vec<_> = profile
            .ips
            .iter()
            .filter(|i| usize::from(i.die) == die)
            .collect();
        dies.push(die_info {
            die_id: die as u16,
            die_offset: off16(profile, die_off)?,
        });
        buf.extend_from_slice(
            die_header {
                die_id: die as u16,
                num_ips: ips.len() as u16,
            }
            .as_bytes(),
        );
        for ip in ips {
            // ip_v4 starts with the same 8 bytes as ip_v3 (sub_revision/variant in byte 7).
            let entry = ip_v3 {
                hw_id: ip.hw_id,
                instance_number: ip.instance,
                num_base_address: ip.bases.len() as u8,
                major: ip.version.major,
                minor: ip.version.minor,
                revision: ip.version.rev,
                _bitfield_1: [0],
                base_address: [],
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
    let ip_size16 = off16(profile, ip_size)?;
    write_ip_discovery_header(buf, ip_off, ip_size16, &dies, profile.base_addr_64_bit);
    Ok(ip_off..buf.len())
}

/// The `gc_info` table: v1.0 on RDNA, v2.1 on GFX9.
fn write_gc_info(buf: &mut Vec<u8>, g: &GcConfig) -> Range<usize> {
    let gc_off = buf.len();
    if g.info_major == 1 {
        let info = gc_info_v1_0 {
            header: gpu_info_header {
                table_id: GC_TABLE_ID,
                version_major: 1,
                version_minor: 0,
                size: size_of::<gc_info_v1_0>() as u32,
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
        let info = gc_info_v2_1 {
            header: gpu_info_header {
                table_id: GC_TABLE_ID,
                version_major: 2,
                version_minor: 1,
                size: size_of::<gc_info_v2_1>() as u32,
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
    gc_off..buf.len()
}

/// The harvest table: the profile's harvested IP instances.
fn write_harvest_table(buf: &mut Vec<u8>, profile: &Profile) -> Result<Range<usize>> {
    let hv_off = buf.len();
    let empty = harvest_info {
        hw_id: 0,
        number_instance: 0,
        reserved: 0,
    };
    let mut harvest = harvest_table {
        header: harvest_info_header {
            signature: HARVEST_TABLE_SIGNATURE,
            version: 1,
        },
        list: [empty; 32],
    };
    if profile.harvest.len() > harvest.list.len() {
        return Err(Error::BadProfile {
            profile: profile.name,
            reason: "more than 32 harvest entries".into(),
        });
    }
    for (slot, &(hw_id, instance)) in harvest.list.iter_mut().zip(&profile.harvest) {
        *slot = harvest_info {
            hw_id,
            number_instance: instance,
            reserved: 0,
        };
    }
    buf.extend_from_slice(harvest.as_bytes());
    Ok(hv_off..buf.len())
}

/// The binary header at the start of `buf`: the table list with each table's checksum,
/// then the checksum of everything after its own checksum field.
fn write_binary_header(
    buf: &mut [u8],
    profile: &Profile,
    tables: [(table, Range<usize>); 3],
) -> Result<()> {
    let info = |at: &Range<usize>| -> Result<table_info> {
        Ok(table_info {
            offset: off16(profile, at.start)?,
            checksum: byte_sum(&buf[at.clone()]),
            size: off16(profile, at.len())?,
            padding: 0,
        })
    };
    let empty = table_info {
        offset: 0,
        checksum: 0,
        size: 0,
        padding: 0,
    };
    let mut bhdr = binary_header {
        binary_signature: BINARY_SIGNATURE,
        version_major: 2,
        version_minor: 0,
        binary_checksum: 0,
        binary_size: off16(profile, buf.len())?,
        table_list: [empty; 6],
    };
    for (id, at) in &tables {
        bhdr.table_list[*id as usize] = info(at)?;
    }
    put(buf, 0, bhdr.as_bytes());
    let after_checksum = std::mem::offset_of!(binary_header, binary_checksum) + 2;
    bhdr.binary_checksum = byte_sum(&buf[after_checksum..]);
    put(buf, 0, bhdr.as_bytes());
    Ok(())
}
