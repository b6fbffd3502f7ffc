//! Synthetic firmware files with valid headers, for tests and the mock.
//!
//! Debian ships no GC 9.5.0 (MI350X) firmware, and tests should not depend on the host's
//! firmware package anyway. These files have the header versions the real files of the
//! same IP versions have and deterministic content: each region starts with the marker
//! `AMSYNTH:<file>:<part>` and continues with a pseudo-random stream seeded by that
//! marker, so two builds are byte-identical and a region is recognisable in a dump.

use std::mem::size_of;
use std::path::{Path, PathBuf};

use am_autogen::ucode::{
    common_firmware_header, gfx_firmware_header_v1_0, gfx_firmware_header_v2_0,
    imu_firmware_header_v1_0, psp_firmware_header_v2_0, psp_firmware_header_v2_1, psp_fw_bin_desc,
    rlc_firmware_header_v2_1, rlc_firmware_header_v2_3, sdma_firmware_header_v1_0,
    sdma_firmware_header_v2_0, sdma_firmware_header_v3_0, smc_firmware_header_v2_1,
    smc_soft_pptable_entry,
};
use zerocopy::{FromZeros, IntoBytes};

use crate::error::{FirmwareError, Result};
use crate::ip::{FileSpec, IpVersion, IpVersions, Role};
use crate::parse::P2S_TABLE_ID_X;
use crate::types::PspFwType;

/// Where the payload starts in every synthetic file, as in the real ones.
const UCODE_ARRAY_OFFSET: u32 = 0x100;

/// `ucode_version` of synthetic files: recognisable, and never a real firmware's.
pub const SYNTH_UCODE_VERSION: u32 = 0x00a5_0001;

/// RS64 start address written into synthetic GFX v2 headers (the value of Debian's
/// `gc_11_0_0_mec.bin`).
pub const SYNTH_RS64_START: u64 = 0x0007_0000_0000_3000;

/// Writes every file of `ips` (see [`IpVersions::files`]) into `dir`, creating it.
/// Returns the paths written.
pub fn write_set(dir: &Path, ips: &IpVersions) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|source| FirmwareError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    ips.files()
        .iter()
        .map(|spec| {
            let path = dir.join(&spec.name);
            std::fs::write(&path, build(spec, ips)).map_err(|source| FirmwareError::Io {
                path: path.clone(),
                source,
            })?;
            Ok(path)
        })
        .collect()
}

/// The content of one synthetic file.
pub fn build(spec: &FileSpec, ips: &IpVersions) -> Vec<u8> {
    let gc11 = ips.gc >= IpVersion::new(11, 0, 0);
    // A sOS package with a primary and an auxiliary set has 16 descriptors: more than fit
    // below 0x100 (the real MP0 13.0.6 file starts its ucode array at 0x200 too).
    let array = if spec.role == Role::Sos {
        0x200
    } else {
        UCODE_ARRAY_OFFSET
    };
    let mut b = Builder::new(&spec.name, array);
    match spec.role {
        Role::Sos => sos(&mut b, ips, gc11),
        Role::Smu => smu(&mut b, ips, gc11),
        Role::Sdma => sdma(&mut b, ips),
        Role::Pfp | Role::Me | Role::Mec => gfx(&mut b, ips, gc11, spec.role),
        Role::Imu => imu(&mut b, ips),
        Role::Rlc => rlc(&mut b, ips, gc11),
    }
    b.finish()
}

/// Lays out a file: header first, payload regions appended from the ucode array on.
struct Builder {
    name: String,
    buf: Vec<u8>,
    /// Where the ucode array starts: past the header and any table that follows it.
    array: u32,
}

impl Builder {
    fn new(name: &str, array: u32) -> Self {
        Self {
            name: name.to_string(),
            buf: vec![0; array as usize],
            array,
        }
    }

    fn common(
        &self,
        header_size: usize,
        major: u16,
        minor: u16,
        ip: IpVersion,
    ) -> common_firmware_header {
        let mut h = common_firmware_header::new_zeroed();
        h.header_size_bytes = header_size as u32;
        h.header_version_major = major;
        h.header_version_minor = minor;
        h.ip_version_major = ip.major.into();
        h.ip_version_minor = ip.minor.into();
        h.ucode_version = SYNTH_UCODE_VERSION;
        h.ucode_array_offset_bytes = self.array;
        h
    }

    /// Appends a region of `len` bytes (16-byte aligned start) and returns its offset.
    fn region(&mut self, part: &str, len: usize) -> u32 {
        let start = self.buf.len().next_multiple_of(16);
        self.buf.resize(start, 0);
        self.buf.extend(fill(&self.name, part, len));
        start as u32
    }

    fn put<T: IntoBytes + zerocopy::Immutable>(&mut self, offset: usize, value: &T) {
        let bytes = value.as_bytes();
        if self.buf.len() < offset + bytes.len() {
            self.buf.resize(offset + bytes.len(), 0);
        }
        self.buf[offset..offset + bytes.len()].copy_from_slice(bytes);
    }

    fn end(&self) -> u32 {
        self.buf.len() as u32
    }

    fn finish(mut self) -> Vec<u8> {
        let len = self.buf.len() as u32;
        // size_bytes is the first field of every header; the layouts put it at offset 0.
        self.buf[0..4].copy_from_slice(&len.to_le_bytes());
        self.buf
    }
}

/// Deterministic content: a marker naming file and part, then an xorshift stream.
fn fill(file: &str, part: &str, len: usize) -> Vec<u8> {
    let marker = format!("AMSYNTH:{file}:{part}\0");
    // FNV-1a of the marker seeds the stream.
    let mut state = marker.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    }) | 1;
    let mut out: Vec<u8> = marker.into_bytes();
    out.truncate(len);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend(state.to_le_bytes().into_iter().take(len - out.len()));
    }
    out
}

fn sos(b: &mut Builder, ips: &IpVersions, gc11: bool) {
    // The component sets of the real packages: RDNA3 parts have TOC and SPL, MI300-class
    // ones the SoC/interface/debug/RAS drivers; both have the register list.
    let set: &[(PspFwType, usize)] = if gc11 {
        &[
            (PspFwType::SYS_DRV, 0x2000),
            (PspFwType::SOS, 0x2000),
            (PspFwType::TOC, 0x400),
            (PspFwType::KDB, 0x800),
            (PspFwType::SPL, 0x200),
            (PspFwType::RL, 0x400),
        ]
    } else {
        &[
            (PspFwType::SYS_DRV, 0x2000),
            (PspFwType::SOS, 0x2000),
            (PspFwType::KDB, 0x800),
            (PspFwType::SOC_DRV, 0x1000),
            (PspFwType::INTF_DRV, 0x800),
            (PspFwType::DBG_DRV, 0x800),
            (PspFwType::RAS_DRV, 0x800),
            (PspFwType::RL, 0x400),
        ]
    };
    // MP0 13.0.6 packages carry a primary and an auxiliary set (v2.1), as the real one.
    let sets = if ips.mp0 == IpVersion::new(13, 0, 6) {
        2
    } else {
        1
    };
    let mut descs = Vec::new();
    for s in 0..sets {
        for &(fw_type, len) in set {
            let offset = b.region(
                &format!("{fw_type}{}", if s == 1 { ".aux" } else { "" }),
                len,
            );
            let mut d = psp_fw_bin_desc::new_zeroed();
            d.fw_type = fw_type.0;
            d.fw_version = SYNTH_UCODE_VERSION + s as u32;
            d.offset_bytes = offset - b.array;
            d.size_bytes = len as u32;
            descs.push(d);
        }
    }
    let ucode_size = b.end() - b.array;
    let table = if sets == 2 {
        let mut h = psp_firmware_header_v2_1::new_zeroed();
        h.header = b.common(size_of::<psp_firmware_header_v2_1>(), 2, 1, ips.mp0);
        h.header.ucode_size_bytes = ucode_size;
        h.psp_fw_bin_count = descs.len() as u32;
        h.psp_aux_fw_bin_index = set.len() as u32;
        b.put(0, &h);
        size_of::<psp_firmware_header_v2_1>()
    } else {
        let mut h = psp_firmware_header_v2_0::new_zeroed();
        h.header = b.common(size_of::<psp_firmware_header_v2_0>(), 2, 0, ips.mp0);
        h.header.ucode_size_bytes = ucode_size;
        h.psp_fw_bin_count = descs.len() as u32;
        b.put(0, &h);
        size_of::<psp_firmware_header_v2_0>()
    };
    for (i, d) in descs.iter().enumerate() {
        b.put(table + i * size_of::<psp_fw_bin_desc>(), d);
    }
}

fn smu(b: &mut Builder, ips: &IpVersions, gc11: bool) {
    let mut h = smc_firmware_header_v2_1::new_zeroed();
    h.v1_0.header = b.common(size_of::<smc_firmware_header_v2_1>(), 2, 1, ips.mp1);
    h.v1_0.ucode_start_addr = 0x2_0000;
    // RDNA3: the SMU image itself and one soft pptable. MI300-class: no image (the SMU
    // boots from the IFWI), only pptables, the P2S one among them.
    let ucode_len = if gc11 { 0x2000 } else { 0 };
    if ucode_len > 0 {
        b.region("SMU", ucode_len);
    }
    h.v1_0.header.ucode_size_bytes = ucode_len as u32;
    let ids: &[u32] = if gc11 {
        &[0x0000_0e50]
    } else {
        &[0x5032_5341, P2S_TABLE_ID_X]
    };
    let entries_at = b.end().next_multiple_of(16);
    b.buf.resize(
        entries_at as usize + ids.len() * size_of::<smc_soft_pptable_entry>(),
        0,
    );
    let mut entries = Vec::new();
    for &id in ids {
        let mut e = smc_soft_pptable_entry::new_zeroed();
        e.id = id;
        e.ppt_size_bytes = 0x480;
        e.ppt_offset_bytes = b.region(&format!("pptable.{id:#x}"), 0x480);
        entries.push(e);
    }
    for (i, e) in entries.iter().enumerate() {
        b.put(
            entries_at as usize + i * size_of::<smc_soft_pptable_entry>(),
            e,
        );
    }
    h.pptable_count = ids.len() as u32;
    h.pptable_entry_offset = entries_at;
    b.put(0, &h);
}

fn sdma(b: &mut Builder, ips: &IpVersions) {
    match ips.sdma.major {
        0..=4 => {
            let mut h = sdma_firmware_header_v1_0::new_zeroed();
            h.header = b.common(size_of::<sdma_firmware_header_v1_0>(), 1, 0, ips.sdma);
            let len = 0x2000_u32;
            b.region("SDMA", len as usize);
            h.header.ucode_size_bytes = len;
            h.ucode_feature_version = 0x2c;
            // Jump table: the last 512 bytes, in dwords from the ucode array.
            h.jt_offset = (len - 0x200) / 4;
            h.jt_size = 0x200 / 4;
            b.put(0, &h);
        }
        5 | 6 => {
            let mut h = sdma_firmware_header_v2_0::new_zeroed();
            h.header = b.common(size_of::<sdma_firmware_header_v2_0>(), 2, 0, ips.sdma);
            let (ctx_len, ctl_len) = (0x1800_u32, 0x1400_u32);
            b.region("SDMA.TH0", ctx_len as usize);
            h.ctl_ucode_offset = b.region("SDMA.TH1", ctl_len as usize);
            h.header.ucode_size_bytes = b.end() - b.array;
            h.ucode_feature_version = 0x3c;
            h.ctx_ucode_size_bytes = ctx_len;
            h.ctx_jt_offset = (ctx_len - 0x200) / 4;
            h.ctx_jt_size = 0x200 / 4;
            h.ctl_ucode_size_bytes = ctl_len;
            h.ctl_jt_offset = (ctl_len - 0x200) / 4;
            h.ctl_jt_size = 0x200 / 4;
            b.put(0, &h);
        }
        _ => {
            let mut h = sdma_firmware_header_v3_0::new_zeroed();
            h.header = b.common(size_of::<sdma_firmware_header_v3_0>(), 3, 0, ips.sdma);
            let len = 0x3000_u32;
            h.ucode_offset_bytes = b.region("SDMA", len as usize);
            h.ucode_size_bytes = len;
            h.header.ucode_size_bytes = len;
            b.put(0, &h);
        }
    }
}

fn gfx(b: &mut Builder, ips: &IpVersions, gc11: bool, role: Role) {
    let part = role.name();
    if gc11 {
        let mut h = gfx_firmware_header_v2_0::new_zeroed();
        h.header = b.common(size_of::<gfx_firmware_header_v2_0>(), 2, 0, ips.gc);
        let (ucode_len, data_len) = (0x3000_u32, 0x1000_u32);
        h.ucode_offset_bytes = b.region(&format!("{part}.ucode"), ucode_len as usize);
        h.data_offset_bytes = b.region(&format!("{part}.data"), data_len as usize);
        h.header.ucode_size_bytes = b.end() - b.array;
        h.ucode_feature_version = 29;
        h.ucode_size_bytes = ucode_len;
        h.data_size_bytes = data_len;
        h.ucode_start_addr_lo = SYNTH_RS64_START as u32;
        h.ucode_start_addr_hi = (SYNTH_RS64_START >> 32) as u32;
        b.put(0, &h);
    } else {
        let mut h = gfx_firmware_header_v1_0::new_zeroed();
        h.header = b.common(size_of::<gfx_firmware_header_v1_0>(), 1, 0, ips.gc);
        let len = 0x4000_u32;
        b.region(part, len as usize);
        h.header.ucode_size_bytes = len;
        h.ucode_feature_version = 50;
        // Jump table: the last 1 KiB, in dwords from the ucode array.
        h.jt_offset = (len - 0x400) / 4;
        h.jt_size = 0x400 / 4;
        b.put(0, &h);
    }
}

fn imu(b: &mut Builder, ips: &IpVersions) {
    let mut h = imu_firmware_header_v1_0::new_zeroed();
    h.header = b.common(size_of::<imu_firmware_header_v1_0>(), 1, 0, ips.gc);
    let len = 0x1000_u32;
    b.region("IMU_I", len as usize);
    b.region("IMU_D", len as usize);
    h.header.ucode_size_bytes = 2 * len;
    h.imu_iram_ucode_size_bytes = len;
    h.imu_iram_ucode_offset_bytes = 0;
    h.imu_dram_ucode_size_bytes = len;
    h.imu_dram_ucode_offset_bytes = len;
    b.put(0, &h);
}

fn rlc(b: &mut Builder, ips: &IpVersions, gc11: bool) {
    let g_len = 0x2000_u32;
    b.region("RLC_G", g_len as usize);
    if gc11 {
        let mut h = rlc_firmware_header_v2_3::new_zeroed();
        h.v2_2.v2_1.v2_0.header = b.common(size_of::<rlc_firmware_header_v2_3>(), 2, 3, ips.gc);
        h.v2_2.v2_1.v2_0.header.ucode_size_bytes = g_len;
        fill_rlc_v2_1(b, &mut h.v2_2.v2_1);
        h.v2_2.rlc_iram_ucode_offset_bytes = b.region("RLC_IRAM", 0x1000);
        h.v2_2.rlc_iram_ucode_size_bytes = 0x1000;
        h.v2_2.rlc_dram_ucode_offset_bytes = b.region("RLC_DRAM", 0x800);
        h.v2_2.rlc_dram_ucode_size_bytes = 0x800;
        h.rlcp_ucode_offset_bytes = b.region("RLC_P", 0x800);
        h.rlcp_ucode_size_bytes = 0x800;
        h.rlcv_ucode_offset_bytes = b.region("RLC_V", 0x800);
        h.rlcv_ucode_size_bytes = 0x800;
        b.put(0, &h);
    } else {
        let mut h = rlc_firmware_header_v2_1::new_zeroed();
        h.v2_0.header = b.common(size_of::<rlc_firmware_header_v2_1>(), 2, 1, ips.gc);
        h.v2_0.header.ucode_size_bytes = g_len;
        fill_rlc_v2_1(b, &mut h);
        b.put(0, &h);
    }
}

fn fill_rlc_v2_1(b: &mut Builder, h: &mut rlc_firmware_header_v2_1) {
    h.v2_0.ucode_feature_version = 1;
    h.v2_0.reg_list_format_array_offset_bytes = b.region("reg_list_format", 0x100);
    h.v2_0.reg_list_format_size_bytes = 0x100;
    h.v2_0.reg_list_array_offset_bytes = b.region("reg_list", 0x100);
    h.v2_0.reg_list_size_bytes = 0x100;
    let end = b.end().next_multiple_of(16);
    h.v2_0.reg_list_format_separate_array_offset_bytes = end;
    h.v2_0.reg_list_separate_array_offset_bytes = end;
    h.save_restore_list_cntl_offset_bytes = b.region("RLC_RESTORE_LIST_SRM_CNTL", 0x340);
    h.save_restore_list_cntl_size_bytes = 0x340;
    h.save_restore_list_gpm_offset_bytes = b.region("RLC_RESTORE_LIST_GPM_MEM", 0x700);
    h.save_restore_list_gpm_size_bytes = 0x700;
    h.save_restore_list_srm_offset_bytes = b.region("RLC_RESTORE_LIST_SRM_MEM", 0x1580);
    h.save_restore_list_srm_size_bytes = 0x1580;
}
