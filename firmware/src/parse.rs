//! Parsing the versioned headers of `amdgpu_ucode.h`.
//!
//! The header layouts are the generated `am_autogen::ucode` structs; this module only
//! reads them at bounds-checked offsets and turns their offset/size fields into checked
//! [`Region`]s of the file. Where a header field is relative to something other than the
//! file start, the comment at the read says so (and where amdgpu takes it from).

use std::mem::{offset_of, size_of};

use am_autogen::ucode::{
    common_firmware_header, gfx_firmware_header_v1_0, gfx_firmware_header_v2_0,
    imu_firmware_header_v1_0, mes_firmware_header_v1_0, psp_firmware_header_v1_0,
    psp_firmware_header_v1_1, psp_firmware_header_v1_2, psp_firmware_header_v1_3,
    psp_firmware_header_v2_0, psp_firmware_header_v2_1, psp_fw_bin_desc, psp_fw_legacy_bin_desc,
    rlc_firmware_header_v2_0, rlc_firmware_header_v2_1, rlc_firmware_header_v2_2,
    rlc_firmware_header_v2_3, sdma_firmware_header_v1_0, sdma_firmware_header_v2_0,
    sdma_firmware_header_v3_0, smc_firmware_header_v1_0, smc_firmware_header_v2_0,
    smc_firmware_header_v2_1, smc_soft_pptable_entry, ta_firmware_header_v2_0,
};
use zerocopy::{FromBytes, Immutable, KnownLayout};

use crate::error::{FirmwareError, Result};
use crate::types::PspFwType;

/// amdgpu refuses a PSP descriptor table this long (`UCODE_MAX_PSP_PACKAGING`: what fits
/// in the 256-byte `amdgpu_firmware_header` union, times two).
const MAX_PSP_BINS: u32 =
    ((0x100 - size_of::<common_firmware_header>() - 4) / size_of::<psp_fw_bin_desc>() * 2) as u32;

/// A byte range of a firmware file, checked to lie inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Region {
    /// Offset from the start of the file.
    pub offset: usize,
    /// Length in bytes.
    pub len: usize,
}

impl Region {
    /// The range within the file.
    pub fn range(&self) -> std::ops::Range<usize> {
        self.offset..self.offset + self.len
    }
}

/// What kind of firmware a file holds, which decides the versioned header it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// PSP secure OS package (`psp_*_sos.bin`).
    PspSos,
    /// SMU firmware (`smu_*.bin`).
    Smc,
    /// SDMA microcode (`sdma_*.bin`).
    Sdma,
    /// CP microcode: PFP, ME, MEC (`gc_*_{pfp,me,mec}.bin`).
    Gfx,
    /// IMU (`gc_*_imu.bin`).
    Imu,
    /// RLC (`gc_*_rlc.bin`).
    Rlc,
    /// MES scheduler (`gc_*_mes*.bin`; not loaded by this driver, parsed for `am fw check`).
    Mes,
    /// PSP trusted applications (`psp_*_ta.bin`; not loaded by this driver).
    Ta,
    /// Anything else: only the common header is parsed.
    Other,
}

impl Kind {
    /// The kind a file name implies (a `.zst` suffix is ignored).
    pub fn from_file_name(name: &str) -> Self {
        let name = name.strip_suffix(".zst").unwrap_or(name);
        let stem = name.strip_suffix(".bin").unwrap_or(name);
        // New names are `<block>_<ip version>[_<part>]` (`gc_11_0_0_mec`, `smu_13_0_0`);
        // older ones `<chip>_<part>` (`navi10_smc`, `vega10_sdma1`).
        let (first, last) = match (stem.split('_').next(), stem.rsplit('_').next()) {
            (Some(f), Some(l)) => (f, l),
            _ => return Kind::Other,
        };
        let has = |part: &str| stem.split('_').skip(1).any(|p| p == part);
        if last == "sos" {
            Kind::PspSos
        } else if last == "ta" {
            Kind::Ta
        } else if first == "smu" || has("smc") {
            Kind::Smc
        } else if first == "sdma" || last == "sdma" || last == "sdma1" {
            Kind::Sdma
        } else if has("mes") || has("mes1") || stem.contains("_mes_") {
            Kind::Mes
        } else if matches!(last, "pfp" | "me" | "mec" | "mec2" | "ce") {
            Kind::Gfx
        } else if last == "imu" {
            Kind::Imu
        } else if has("rlc") {
            Kind::Rlc
        } else {
            Kind::Other
        }
    }

    /// Short upper-case name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::PspSos => "PSP SOS",
            Kind::Smc => "SMC",
            Kind::Sdma => "SDMA",
            Kind::Gfx => "GFX",
            Kind::Imu => "IMU",
            Kind::Rlc => "RLC",
            Kind::Mes => "MES",
            Kind::Ta => "PSP TA",
            Kind::Other => "common",
        }
    }
}

/// A parsed firmware file: its common header and what its versioned header describes.
#[derive(Debug, Clone)]
pub struct Image {
    /// The `common_firmware_header` every file starts with.
    pub header: common_firmware_header,
    /// The payload the common header describes (`ucode_array_offset_bytes`,
    /// `ucode_size_bytes`).
    pub ucode: Region,
    /// The versioned part.
    pub body: Body,
}

impl Image {
    /// `header_version_major`, `header_version_minor`.
    pub fn header_version(&self) -> (u16, u16) {
        (
            self.header.header_version_major,
            self.header.header_version_minor,
        )
    }

    /// The kind of the parsed body.
    pub fn kind(&self) -> Kind {
        match self.body {
            Body::PspSos(_) => Kind::PspSos,
            Body::Smc(_) => Kind::Smc,
            Body::Sdma(_) => Kind::Sdma,
            Body::Gfx(_) => Kind::Gfx,
            Body::Imu(_) => Kind::Imu,
            Body::Rlc(_) => Kind::Rlc,
            Body::Mes(_) => Kind::Mes,
            Body::Ta(_) => Kind::Ta,
            Body::Other => Kind::Other,
        }
    }
}

/// The versioned part of a firmware file.
#[derive(Debug, Clone)]
pub enum Body {
    /// PSP secure OS package.
    PspSos(PspSos),
    /// SMU firmware.
    Smc(Smc),
    /// SDMA microcode.
    Sdma(Sdma),
    /// CP microcode.
    Gfx(Gfx),
    /// IMU microcode.
    Imu(Imu),
    /// RLC microcode.
    Rlc(Rlc),
    /// MES microcode.
    Mes(Mes),
    /// PSP trusted applications.
    Ta(Ta),
    /// Only the common header was parsed.
    Other,
}

/// One component of a PSP sOS package.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SosComponent {
    /// Position in the descriptor table (v2.x), or of the legacy descriptor (v1.x).
    pub index: usize,
    /// What it is.
    pub fw_type: PspFwType,
    /// Its version.
    pub fw_version: u32,
    /// Where its bytes are.
    pub region: Region,
}

/// A PSP sOS package (`psp_firmware_header_v1_x` / `v2_x`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PspSos {
    /// All components, in file order. On v2.1 the table holds two sets: the primary one
    /// before `aux_index`, the auxiliary one from it on.
    pub components: Vec<SosComponent>,
    /// `psp_aux_fw_bin_index` of a v2.1 header.
    pub aux_index: Option<u32>,
    /// Offset of the descriptor table (v2.x) or of the first legacy descriptor (v1.x).
    pub table_offset: usize,
}

/// Which of the two component sets of a v2.1 sOS package to use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SosVariant {
    /// Descriptors before `psp_aux_fw_bin_index` (amdgpu's choice unless the PMFW asks for
    /// the auxiliary sOS).
    #[default]
    Primary,
    /// Descriptors from `psp_aux_fw_bin_index` on. amdgpu takes these on MP0 13.0.6 when
    /// the running PMFW is older than 85.115.0 (`MP1_PUB_SCRATCH0 < 0x557300`); tinygrad
    /// ends up with them too, as later descriptors of a type replace earlier ones.
    Aux,
}

impl PspSos {
    /// The components of one set. Headers without an auxiliary set have only the primary
    /// one (and return it for [`SosVariant::Aux`] too).
    pub fn set(&self, variant: SosVariant) -> &[SosComponent] {
        match self.aux_index {
            Some(aux) => {
                let split = (aux as usize).min(self.components.len());
                match variant {
                    SosVariant::Primary => &self.components[..split],
                    SosVariant::Aux => &self.components[split..],
                }
            }
            None => &self.components,
        }
    }

    /// The first component of `fw_type` in a set.
    pub fn component(&self, variant: SosVariant, fw_type: PspFwType) -> Option<&SosComponent> {
        self.set(variant).iter().find(|c| c.fw_type == fw_type)
    }
}

/// A soft PPTable of an SMC v2 file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SoftPpTable {
    /// `smc_soft_pptable_entry.id` (`None` for the single table of a v2.0 header).
    pub id: Option<u32>,
    /// Where its bytes are.
    pub region: Region,
}

/// `smc_soft_pptable_entry.id` of the P2S table the driver loads on MI300X/MI350X
/// (ASCII `P2SX`, little-endian).
pub const P2S_TABLE_ID_X: u32 = 0x5032_5358;

/// SMU firmware (`smc_firmware_header_v1_0` / `v2_0` / `v2_1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Smc {
    /// `ucode_start_addr`.
    pub ucode_start_addr: u32,
    /// The soft PPTables (v2.x); on MI300-class parts these are the P2S tables.
    pub pptables: Vec<SoftPpTable>,
}

impl Smc {
    /// The P2S table the driver loads (`GFX_FW_TYPE_P2S_TABLE`) on GC < 11.
    pub fn p2s_table(&self) -> Option<&SoftPpTable> {
        self.pptables.iter().find(|t| t.id == Some(P2S_TABLE_ID_X))
    }
}

/// SDMA microcode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sdma {
    /// `sdma_firmware_header_v1_0`/`v1_1`: one image for every engine.
    V1 {
        /// `ucode_feature_version`.
        feature_version: u32,
        /// The jump table inside the ucode.
        jt: Region,
    },
    /// `sdma_firmware_header_v2_0`: context (thread 0) and control (thread 1) images.
    V2 {
        /// `ucode_feature_version`.
        feature_version: u32,
        /// Context thread ucode (`GFX_FW_TYPE_SDMA_UCODE_TH0`).
        ctx: Region,
        /// Control thread ucode (`GFX_FW_TYPE_SDMA_UCODE_TH1`).
        ctl: Region,
    },
    /// `sdma_firmware_header_v3_0`: one RS64 image.
    V3 {
        /// `ucode_feature_version`.
        feature_version: u32,
        /// The ucode.
        ucode: Region,
    },
}

/// CP microcode (PFP, ME, MEC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gfx {
    /// `gfx_firmware_header_v1_0` (F32 engines): code followed by a jump table.
    V1 {
        /// `ucode_feature_version`.
        feature_version: u32,
        /// The code without the jump table.
        code: Region,
        /// The jump table (`jt_offset`, `jt_size`, in dwords from the ucode array).
        jt: Region,
    },
    /// `gfx_firmware_header_v2_0` (RS64 engines): instructions and data (stack) apart.
    V2 {
        /// `ucode_feature_version`.
        feature_version: u32,
        /// Instruction image.
        ucode: Region,
        /// Data image: the per-pipe stack.
        data: Region,
        /// `ucode_start_addr_hi << 32 | ucode_start_addr_lo`: where the RS64 core starts.
        ucode_start_addr: u64,
    },
}

/// IMU microcode (`imu_firmware_header_v1_0`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imu {
    /// Instruction RAM image (`GFX_FW_TYPE_IMU_I`).
    pub iram: Region,
    /// Data RAM image (`GFX_FW_TYPE_IMU_D`).
    pub dram: Region,
}

/// The RLC save/restore lists of a v2.1+ header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestoreLists {
    /// `save_restore_list_cntl` (`GFX_FW_TYPE_RLC_RESTORE_LIST_SRM_CNTL`).
    pub cntl: Region,
    /// `save_restore_list_gpm` (`GFX_FW_TYPE_RLC_RESTORE_LIST_GPM_MEM`).
    pub gpm: Region,
    /// `save_restore_list_srm` (`GFX_FW_TYPE_RLC_RESTORE_LIST_SRM_MEM`).
    pub srm: Region,
}

/// RLC microcode (`rlc_firmware_header_v2_0` … `v2_3`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rlc {
    /// `ucode_feature_version`.
    pub feature_version: u32,
    /// The register list format array.
    pub reg_list_format: Region,
    /// The register list array.
    pub reg_list: Region,
    /// Save/restore lists (v2.1+).
    pub restore_lists: Option<RestoreLists>,
    /// RLC IRAM (`GFX_FW_TYPE_RLC_IRAM`) and DRAM boot (`GFX_FW_TYPE_RLC_DRAM_BOOT`)
    /// images (v2.2+).
    pub iram_dram: Option<(Region, Region)>,
    /// RLC P (`GFX_FW_TYPE_RLC_P`) and RLC V (`GFX_FW_TYPE_RLC_V`) images (v2.3).
    pub rlcp_rlcv: Option<(Region, Region)>,
}

/// MES microcode (`mes_firmware_header_v1_0`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mes {
    /// `mes_ucode_version`.
    pub ucode_version: u32,
    /// Instruction image.
    pub ucode: Region,
    /// `mes_ucode_data_version`.
    pub data_version: u32,
    /// Data image.
    pub data: Region,
    /// `mes_uc_start_addr_hi << 32 | mes_uc_start_addr_lo`.
    pub uc_start_addr: u64,
    /// `mes_data_start_addr_hi << 32 | mes_data_start_addr_lo`.
    pub data_start_addr: u64,
}

/// One trusted application of a TA package.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaBin {
    /// Position in the descriptor table.
    pub index: usize,
    /// `enum ta_fw_type` value (1 ASD, 2 XGMI, 3 RAS, 4 HDCP, 5 DTM, 6 RAP, 7 secure display).
    pub fw_type: u32,
    /// Its version.
    pub fw_version: u32,
    /// Where its bytes are.
    pub region: Region,
}

/// A PSP trusted-application package (`ta_firmware_header_v2_0`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ta {
    /// The applications, in file order.
    pub bins: Vec<TaBin>,
}

/// Bounds-checked reads of one file.
struct Reader<'a> {
    file: &'a str,
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    fn read<T: FromBytes + KnownLayout + Immutable>(&self, offset: usize, what: &str) -> Result<T> {
        self.data
            .get(offset..)
            .and_then(|tail| T::read_from_prefix(tail).ok())
            .map(|(value, _)| value)
            .ok_or_else(|| FirmwareError::Truncated {
                file: self.file.to_string(),
                what: what.to_string(),
                offset,
                need: size_of::<T>(),
                len: self.data.len(),
            })
    }

    /// The region `offset..offset + len` (u64 so a sum of two u32 fields cannot wrap),
    /// checked against the file; `field_offset` is where the header describes it.
    fn region(&self, what: &str, field_offset: usize, offset: u64, len: u64) -> Result<Region> {
        let end = offset.saturating_add(len);
        if end > self.data.len() as u64 {
            return Err(FirmwareError::OutOfBounds {
                file: self.file.to_string(),
                what: what.to_string(),
                field_offset,
                offset,
                end,
                len: self.data.len(),
            });
        }
        // Both fit in usize: they are at most the file length.
        Ok(Region {
            offset: offset as usize,
            len: len as usize,
        })
    }

    /// The region that a header at the start of the file describes by a little-endian `u32`
    /// byte offset (from the file start) at `offset_field` and a `u32` size at `size_field`.
    fn span(&self, what: &str, offset_field: usize, size_field: usize) -> Result<Region> {
        let offset: u32 = self.read(offset_field, what)?;
        let len: u32 = self.read(size_field, what)?;
        self.region(what, offset_field, offset.into(), len.into())
    }

    fn unknown_version(&self, kind: Kind, header: &common_firmware_header) -> FirmwareError {
        FirmwareError::UnknownVersion {
            file: self.file.to_string(),
            kind: kind.name(),
            major: header.header_version_major,
            minor: header.header_version_minor,
            offset: offset_of!(common_firmware_header, header_version_major),
        }
    }
}

/// Parses `data` as the kind its `name` implies.
pub fn parse(name: &str, data: &[u8]) -> Result<Image> {
    parse_as(Kind::from_file_name(name), name, data)
}

/// Parses `data` as firmware of `kind`; `name` is used in errors.
pub fn parse_as(kind: Kind, name: &str, data: &[u8]) -> Result<Image> {
    let r = Reader { file: name, data };
    let header: common_firmware_header = r.read(0, "common_firmware_header")?;
    // amdgpu_ucode_validate() rejects a file whose length differs from size_bytes.
    if header.size_bytes as usize != data.len() {
        return Err(FirmwareError::Invalid {
            file: name.to_string(),
            what: "common_firmware_header.size_bytes".to_string(),
            offset: offset_of!(common_firmware_header, size_bytes),
            reason: format!(
                "says {:#x} bytes, file has {:#x}",
                header.size_bytes,
                data.len()
            ),
        });
    }
    let ucode = r.span(
        "ucode array",
        offset_of!(common_firmware_header, ucode_array_offset_bytes),
        offset_of!(common_firmware_header, ucode_size_bytes),
    )?;
    let body = match kind {
        Kind::PspSos => Body::PspSos(parse_psp_sos(&r, &header)?),
        Kind::Smc => Body::Smc(parse_smc(&r, &header)?),
        Kind::Sdma => Body::Sdma(parse_sdma(&r, &header)?),
        Kind::Gfx => Body::Gfx(parse_gfx(&r, &header)?),
        Kind::Imu => Body::Imu(parse_imu(&r, &header)?),
        Kind::Rlc => Body::Rlc(parse_rlc(&r, &header)?),
        Kind::Mes => Body::Mes(parse_mes(&r, &header)?),
        Kind::Ta => Body::Ta(parse_ta(&r, &header)?),
        Kind::Other => Body::Other,
    };
    Ok(Image {
        header,
        ucode,
        body,
    })
}

fn parse_psp_sos(r: &Reader<'_>, h: &common_firmware_header) -> Result<PspSos> {
    match (h.header_version_major, h.header_version_minor) {
        (1, minor @ 0..=3) => parse_psp_sos_v1(r, h, minor),
        (2, minor @ 0..=1) => parse_psp_sos_v2(r, h, minor),
        _ => Err(r.unknown_version(Kind::PspSos, h)),
    }
}

/// v1.x: the system driver and the sOS, then the legacy descriptors of the minor version.
fn parse_psp_sos_v1(r: &Reader<'_>, h: &common_firmware_header, minor: u16) -> Result<PspSos> {
    let array = u64::from(h.ucode_array_offset_bytes);
    // v1.x: the system driver fills the ucode array up to `sos.offset_bytes`, the
    // sOS follows (`sos.size_bytes`); the other legacy descriptors hold offsets from
    // the ucode array (psp_init_sos_base_fw / psp_init_sos_microcode).
    let v1: psp_firmware_header_v1_0 = r.read(0, "psp_firmware_header_v1_0")?;
    let sos_field = offset_of!(psp_firmware_header_v1_0, sos);
    let sos_off = u64::from(v1.sos.offset_bytes);
    let sys_len = sos_off;
    let sos_len = u64::from(v1.sos.size_bytes);
    let mut components = vec![
        SosComponent {
            index: 0,
            fw_type: PspFwType::SYS_DRV,
            fw_version: h.ucode_version,
            region: r.region("system driver", sos_field, array, sys_len)?,
        },
        SosComponent {
            index: 0,
            fw_type: PspFwType::SOS,
            fw_version: v1.sos.fw_version,
            region: r.region("sOS", sos_field, array + sos_off, sos_len)?,
        },
    ];
    let mut legacy = |index: usize,
                      fw_type: PspFwType,
                      field: usize,
                      d: &psp_fw_legacy_bin_desc|
     -> Result<()> {
        if d.size_bytes == 0 {
            return Ok(());
        }
        let region = r.region(
            &format!("{} descriptor", fw_type.full_name()),
            field,
            array + u64::from(d.offset_bytes),
            d.size_bytes.into(),
        )?;
        components.push(SosComponent {
            index,
            fw_type,
            fw_version: d.fw_version,
            region,
        });
        Ok(())
    };
    match minor {
        1 | 3 => {
            let v: psp_firmware_header_v1_1 = r.read(0, "psp_firmware_header_v1_1")?;
            legacy(
                1,
                PspFwType::TOC,
                offset_of!(psp_firmware_header_v1_1, toc),
                &v.toc,
            )?;
            legacy(
                2,
                PspFwType::KDB,
                offset_of!(psp_firmware_header_v1_1, kdb),
                &v.kdb,
            )?;
        }
        2 => {
            let v: psp_firmware_header_v1_2 = r.read(0, "psp_firmware_header_v1_2")?;
            legacy(
                2,
                PspFwType::KDB,
                offset_of!(psp_firmware_header_v1_2, kdb),
                &v.kdb,
            )?;
        }
        _ => {}
    }
    if minor == 3 {
        let v: psp_firmware_header_v1_3 = r.read(0, "psp_firmware_header_v1_3")?;
        legacy(
            3,
            PspFwType::SPL,
            offset_of!(psp_firmware_header_v1_3, spl),
            &v.spl,
        )?;
        legacy(
            4,
            PspFwType::RL,
            offset_of!(psp_firmware_header_v1_3, rl),
            &v.rl,
        )?;
    }
    Ok(PspSos {
        components,
        aux_index: None,
        table_offset: sos_field,
    })
}

/// v2.x: a table of component descriptors (v2.1 adds the index of the aux set).
fn parse_psp_sos_v2(r: &Reader<'_>, h: &common_firmware_header, minor: u16) -> Result<PspSos> {
    let array = u64::from(h.ucode_array_offset_bytes);
    let (count, aux_index, table_offset) = if minor == 0 {
        let v: psp_firmware_header_v2_0 = r.read(0, "psp_firmware_header_v2_0")?;
        (
            v.psp_fw_bin_count,
            None,
            size_of::<psp_firmware_header_v2_0>(),
        )
    } else {
        let v: psp_firmware_header_v2_1 = r.read(0, "psp_firmware_header_v2_1")?;
        (
            v.psp_fw_bin_count,
            Some(v.psp_aux_fw_bin_index),
            size_of::<psp_firmware_header_v2_1>(),
        )
    };
    let count_field = offset_of!(psp_firmware_header_v2_0, psp_fw_bin_count);
    if count >= MAX_PSP_BINS {
        return Err(FirmwareError::Invalid {
            file: r.file.to_string(),
            what: "psp_fw_bin_count".to_string(),
            offset: count_field,
            reason: format!("{count} descriptors, amdgpu accepts fewer than {MAX_PSP_BINS}"),
        });
    }
    if let Some(aux) = aux_index
        && aux > count
    {
        return Err(FirmwareError::Invalid {
            file: r.file.to_string(),
            what: "psp_aux_fw_bin_index".to_string(),
            offset: offset_of!(psp_firmware_header_v2_1, psp_aux_fw_bin_index),
            reason: format!("{aux} is past psp_fw_bin_count {count}"),
        });
    }
    let mut components = Vec::with_capacity(count as usize);
    for index in 0..count as usize {
        let at = table_offset + index * size_of::<psp_fw_bin_desc>();
        let d: psp_fw_bin_desc = r.read(at, &format!("psp_fw_bin[{index}]"))?;
        let fw_type = PspFwType(d.fw_type);
        // parse_sos_bin_descriptor(): offsets count from the ucode array.
        let region = r.region(
            &format!("psp_fw_bin[{index}] {fw_type}"),
            at,
            array + u64::from(d.offset_bytes),
            d.size_bytes.into(),
        )?;
        components.push(SosComponent {
            index,
            fw_type,
            fw_version: d.fw_version,
            region,
        });
    }
    Ok(PspSos {
        components,
        aux_index,
        table_offset,
    })
}

fn parse_smc(r: &Reader<'_>, h: &common_firmware_header) -> Result<Smc> {
    let v1: smc_firmware_header_v1_0 = r.read(0, "smc_firmware_header_v1_0")?;
    let pptables = match (h.header_version_major, h.header_version_minor) {
        (1, 0) => Vec::new(),
        (2, 0) => {
            // smu_v11_0_set_pptable_v2_0(): offsets count from the file start.
            // The whole header must be there, not only the fields read below.
            r.read::<smc_firmware_header_v2_0>(0, "smc_firmware_header_v2_0")?;
            let region = r.span(
                "soft pptable",
                offset_of!(smc_firmware_header_v2_0, ppt_offset_bytes),
                offset_of!(smc_firmware_header_v2_0, ppt_size_bytes),
            )?;
            vec![SoftPpTable { id: None, region }]
        }
        (2, 1) => {
            let v: smc_firmware_header_v2_1 = r.read(0, "smc_firmware_header_v2_1")?;
            let table = v.pptable_entry_offset as usize;
            let entry_size = size_of::<smc_soft_pptable_entry>();
            // Check the whole table first so a huge count fails before any allocation.
            r.region(
                "smc_soft_pptable_entry table",
                offset_of!(smc_firmware_header_v2_1, pptable_entry_offset),
                table as u64,
                u64::from(v.pptable_count) * entry_size as u64,
            )?;
            let mut tables = Vec::with_capacity(v.pptable_count as usize);
            for i in 0..v.pptable_count as usize {
                let at = table + i * entry_size;
                let e: smc_soft_pptable_entry =
                    r.read(at, &format!("smc_soft_pptable_entry[{i}]"))?;
                let region = r.region(
                    &format!("soft pptable {i} (id {:#x})", e.id),
                    at,
                    e.ppt_offset_bytes.into(),
                    e.ppt_size_bytes.into(),
                )?;
                tables.push(SoftPpTable {
                    id: Some(e.id),
                    region,
                });
            }
            tables
        }
        _ => return Err(r.unknown_version(Kind::Smc, h)),
    };
    Ok(Smc {
        ucode_start_addr: v1.ucode_start_addr,
        pptables,
    })
}

fn parse_sdma(r: &Reader<'_>, h: &common_firmware_header) -> Result<Sdma> {
    let array = u64::from(h.ucode_array_offset_bytes);
    match (h.header_version_major, h.header_version_minor) {
        (1, 0..=1) => {
            let v: sdma_firmware_header_v1_0 = r.read(0, "sdma_firmware_header_v1_0")?;
            let jt = r.region(
                "jump table",
                offset_of!(sdma_firmware_header_v1_0, jt_offset),
                array + u64::from(v.jt_offset) * 4,
                u64::from(v.jt_size) * 4,
            )?;
            Ok(Sdma::V1 {
                feature_version: v.ucode_feature_version,
                jt,
            })
        }
        (2, 0) => {
            let v: sdma_firmware_header_v2_0 = r.read(0, "sdma_firmware_header_v2_0")?;
            // The context image starts the ucode array; the control image's offset counts
            // from the file start (amdgpu_sdma_init_microcode, psp_init_sdma microcode).
            let ctx = r.region(
                "context thread ucode",
                offset_of!(sdma_firmware_header_v2_0, ctx_ucode_size_bytes),
                array,
                v.ctx_ucode_size_bytes.into(),
            )?;
            let ctl = r.span(
                "control thread ucode",
                offset_of!(sdma_firmware_header_v2_0, ctl_ucode_offset),
                offset_of!(sdma_firmware_header_v2_0, ctl_ucode_size_bytes),
            )?;
            Ok(Sdma::V2 {
                feature_version: v.ucode_feature_version,
                ctx,
                ctl,
            })
        }
        (3, 0) => {
            let v: sdma_firmware_header_v3_0 = r.read(0, "sdma_firmware_header_v3_0")?;
            let ucode = r.region(
                "ucode",
                offset_of!(sdma_firmware_header_v3_0, ucode_size_bytes),
                array,
                v.ucode_size_bytes.into(),
            )?;
            Ok(Sdma::V3 {
                feature_version: v.ucode_feature_version,
                ucode,
            })
        }
        _ => Err(r.unknown_version(Kind::Sdma, h)),
    }
}

fn parse_gfx(r: &Reader<'_>, h: &common_firmware_header) -> Result<Gfx> {
    let array = u64::from(h.ucode_array_offset_bytes);
    match (h.header_version_major, h.header_version_minor) {
        (1, 0) => {
            let v: gfx_firmware_header_v1_0 = r.read(0, "gfx_firmware_header_v1_0")?;
            let jt_len = u64::from(v.jt_size) * 4;
            let code_len = u64::from(h.ucode_size_bytes)
                .checked_sub(jt_len)
                .ok_or_else(|| FirmwareError::Invalid {
                    file: r.file.to_string(),
                    what: "gfx_firmware_header_v1_0.jt_size".to_string(),
                    offset: offset_of!(gfx_firmware_header_v1_0, jt_size),
                    reason: format!(
                        "jump table of {jt_len:#x} bytes exceeds ucode_size_bytes {:#x}",
                        h.ucode_size_bytes
                    ),
                })?;
            let code = r.region(
                "code",
                offset_of!(common_firmware_header, ucode_size_bytes),
                array,
                code_len,
            )?;
            let jt = r.region(
                "jump table",
                offset_of!(gfx_firmware_header_v1_0, jt_offset),
                array + u64::from(v.jt_offset) * 4,
                jt_len,
            )?;
            Ok(Gfx::V1 {
                feature_version: v.ucode_feature_version,
                code,
                jt,
            })
        }
        (2, 0) => {
            let v: gfx_firmware_header_v2_0 = r.read(0, "gfx_firmware_header_v2_0")?;
            // Both offsets count from the file start (gfx_v11_0_config_*_cache_rs64).
            let ucode = r.region(
                "RS64 instructions",
                offset_of!(gfx_firmware_header_v2_0, ucode_size_bytes),
                v.ucode_offset_bytes.into(),
                v.ucode_size_bytes.into(),
            )?;
            let data = r.region(
                "RS64 data (stack)",
                offset_of!(gfx_firmware_header_v2_0, data_size_bytes),
                v.data_offset_bytes.into(),
                v.data_size_bytes.into(),
            )?;
            Ok(Gfx::V2 {
                feature_version: v.ucode_feature_version,
                ucode,
                data,
                ucode_start_addr: u64::from(v.ucode_start_addr_hi) << 32
                    | u64::from(v.ucode_start_addr_lo),
            })
        }
        _ => Err(r.unknown_version(Kind::Gfx, h)),
    }
}

fn parse_imu(r: &Reader<'_>, h: &common_firmware_header) -> Result<Imu> {
    if (h.header_version_major, h.header_version_minor) != (1, 0) {
        return Err(r.unknown_version(Kind::Imu, h));
    }
    let v: imu_firmware_header_v1_0 = r.read(0, "imu_firmware_header_v1_0")?;
    // amdgpu and tinygrad both take the IRAM image at the ucode array and the DRAM image
    // right after it; the *_offset_bytes fields are not used.
    let array = u64::from(h.ucode_array_offset_bytes);
    let iram_len = u64::from(v.imu_iram_ucode_size_bytes);
    let iram = r.region(
        "IMU IRAM",
        offset_of!(imu_firmware_header_v1_0, imu_iram_ucode_size_bytes),
        array,
        iram_len,
    )?;
    let dram = r.region(
        "IMU DRAM",
        offset_of!(imu_firmware_header_v1_0, imu_dram_ucode_size_bytes),
        array + iram_len,
        v.imu_dram_ucode_size_bytes.into(),
    )?;
    Ok(Imu { iram, dram })
}

fn parse_rlc(r: &Reader<'_>, h: &common_firmware_header) -> Result<Rlc> {
    let minor = match (h.header_version_major, h.header_version_minor) {
        (2, minor @ 0..=3) => minor,
        _ => return Err(r.unknown_version(Kind::Rlc, h)),
    };
    // All RLC offsets count from the file start (gfx_v9_0_init_rlc_microcode and friends).
    let v0: rlc_firmware_header_v2_0 = r.read(0, "rlc_firmware_header_v2_0")?;
    let reg_list_format = r.span(
        "register list format array",
        offset_of!(rlc_firmware_header_v2_0, reg_list_format_array_offset_bytes),
        offset_of!(rlc_firmware_header_v2_0, reg_list_format_size_bytes),
    )?;
    let reg_list = r.span(
        "register list array",
        offset_of!(rlc_firmware_header_v2_0, reg_list_array_offset_bytes),
        offset_of!(rlc_firmware_header_v2_0, reg_list_size_bytes),
    )?;
    r.span(
        "separate register list format array",
        offset_of!(
            rlc_firmware_header_v2_0,
            reg_list_format_separate_array_offset_bytes
        ),
        offset_of!(
            rlc_firmware_header_v2_0,
            reg_list_format_separate_size_bytes
        ),
    )?;
    r.span(
        "separate register list array",
        offset_of!(
            rlc_firmware_header_v2_0,
            reg_list_separate_array_offset_bytes
        ),
        offset_of!(rlc_firmware_header_v2_0, reg_list_separate_size_bytes),
    )?;
    let restore_lists = if minor >= 1 {
        // The whole header must be there, not only the fields read below.
        r.read::<rlc_firmware_header_v2_1>(0, "rlc_firmware_header_v2_1")?;
        Some(RestoreLists {
            cntl: r.span(
                "save_restore_list_cntl",
                offset_of!(
                    rlc_firmware_header_v2_1,
                    save_restore_list_cntl_offset_bytes
                ),
                offset_of!(rlc_firmware_header_v2_1, save_restore_list_cntl_size_bytes),
            )?,
            gpm: r.span(
                "save_restore_list_gpm",
                offset_of!(rlc_firmware_header_v2_1, save_restore_list_gpm_offset_bytes),
                offset_of!(rlc_firmware_header_v2_1, save_restore_list_gpm_size_bytes),
            )?,
            srm: r.span(
                "save_restore_list_srm",
                offset_of!(rlc_firmware_header_v2_1, save_restore_list_srm_offset_bytes),
                offset_of!(rlc_firmware_header_v2_1, save_restore_list_srm_size_bytes),
            )?,
        })
    } else {
        None
    };
    let iram_dram = if minor >= 2 {
        // The whole header must be there, not only the fields read below.
        r.read::<rlc_firmware_header_v2_2>(0, "rlc_firmware_header_v2_2")?;
        Some((
            r.span(
                "RLC IRAM",
                offset_of!(rlc_firmware_header_v2_2, rlc_iram_ucode_offset_bytes),
                offset_of!(rlc_firmware_header_v2_2, rlc_iram_ucode_size_bytes),
            )?,
            r.span(
                "RLC DRAM",
                offset_of!(rlc_firmware_header_v2_2, rlc_dram_ucode_offset_bytes),
                offset_of!(rlc_firmware_header_v2_2, rlc_dram_ucode_size_bytes),
            )?,
        ))
    } else {
        None
    };
    let rlcp_rlcv = if minor >= 3 {
        // The whole header must be there, not only the fields read below.
        r.read::<rlc_firmware_header_v2_3>(0, "rlc_firmware_header_v2_3")?;
        Some((
            r.span(
                "RLC P",
                offset_of!(rlc_firmware_header_v2_3, rlcp_ucode_offset_bytes),
                offset_of!(rlc_firmware_header_v2_3, rlcp_ucode_size_bytes),
            )?,
            r.span(
                "RLC V",
                offset_of!(rlc_firmware_header_v2_3, rlcv_ucode_offset_bytes),
                offset_of!(rlc_firmware_header_v2_3, rlcv_ucode_size_bytes),
            )?,
        ))
    } else {
        None
    };
    Ok(Rlc {
        feature_version: v0.ucode_feature_version,
        reg_list_format,
        reg_list,
        restore_lists,
        iram_dram,
        rlcp_rlcv,
    })
}

fn parse_mes(r: &Reader<'_>, h: &common_firmware_header) -> Result<Mes> {
    if (h.header_version_major, h.header_version_minor) != (1, 0) {
        return Err(r.unknown_version(Kind::Mes, h));
    }
    let v: mes_firmware_header_v1_0 = r.read(0, "mes_firmware_header_v1_0")?;
    // Both offsets count from the file start (amdgpu_mes_init_microcode).
    Ok(Mes {
        ucode_version: v.mes_ucode_version,
        ucode: r.span(
            "MES instructions",
            offset_of!(mes_firmware_header_v1_0, mes_ucode_offset_bytes),
            offset_of!(mes_firmware_header_v1_0, mes_ucode_size_bytes),
        )?,
        data_version: v.mes_ucode_data_version,
        data: r.span(
            "MES data",
            offset_of!(mes_firmware_header_v1_0, mes_ucode_data_offset_bytes),
            offset_of!(mes_firmware_header_v1_0, mes_ucode_data_size_bytes),
        )?,
        uc_start_addr: u64::from(v.mes_uc_start_addr_hi) << 32 | u64::from(v.mes_uc_start_addr_lo),
        data_start_addr: u64::from(v.mes_data_start_addr_hi) << 32
            | u64::from(v.mes_data_start_addr_lo),
    })
}

fn parse_ta(r: &Reader<'_>, h: &common_firmware_header) -> Result<Ta> {
    if (h.header_version_major, h.header_version_minor) != (2, 0) {
        return Err(r.unknown_version(Kind::Ta, h));
    }
    let v: ta_firmware_header_v2_0 = r.read(0, "ta_firmware_header_v2_0")?;
    let table = size_of::<ta_firmware_header_v2_0>();
    let count_field = offset_of!(ta_firmware_header_v2_0, ta_fw_bin_count);
    // Check the whole table first so a huge count fails before any allocation.
    r.region(
        "ta_fw_bin table",
        count_field,
        table as u64,
        u64::from(v.ta_fw_bin_count) * size_of::<psp_fw_bin_desc>() as u64,
    )?;
    let array = u64::from(h.ucode_array_offset_bytes);
    let mut bins = Vec::with_capacity(v.ta_fw_bin_count as usize);
    for index in 0..v.ta_fw_bin_count as usize {
        let at = table + index * size_of::<psp_fw_bin_desc>();
        let d: psp_fw_bin_desc = r.read(at, &format!("ta_fw_bin[{index}]"))?;
        // parse_ta_bin_descriptor(): offsets count from the ucode array.
        let region = r.region(
            &format!("ta_fw_bin[{index}] (type {})", d.fw_type),
            at,
            array + u64::from(d.offset_bytes),
            d.size_bytes.into(),
        )?;
        bins.push(TaBin {
            index,
            fw_type: d.fw_type,
            fw_version: d.fw_version,
            region,
        });
    }
    Ok(Ta { bins })
}
