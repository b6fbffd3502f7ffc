//! The ordered list of what the PSP loads: the sOS bootloader components, then the
//! commands of the PSP ring that carry firmware.
//!
//! The order is the one of `docs/FIRMWARE.md` (from tinygrad's AM driver, checked
//! against amdgpu): bootloader components KDB, SPL, SYS_DRV, SOC_DRV, INTF_DRV, DBG_DRV,
//! RAS_DRV, SOS (those present); LOAD_TOC if the sOS has a TOC; the SMU on GC ≥ 11;
//! SETUP_TMR; the IP firmware (P2S table on GC < 11, SDMA, PFP/ME/MEC, IMU, RLC parts);
//! AUTOLOAD_RLC on GC ≥ 11 or the register list on GC 9.

use std::fmt;
use std::sync::Arc;

use crate::error::{FirmwareError, Result};
use crate::ip::{IpVersion, Role};
use crate::parse::{Body, Gfx, PspSos, Region, Sdma, SosVariant};
use crate::set::{FirmwareSet, LoadedFile};
use crate::types::{BootloaderCmd, GfxFwType, PspFwType};

/// Bytes of one firmware file that one step hands to the PSP.
#[derive(Clone)]
pub struct Payload {
    /// The file they come from.
    pub file: String,
    /// Where in the file they start.
    pub offset: usize,
    data: Arc<Vec<u8>>,
    len: usize,
}

impl Payload {
    fn new(file: &LoadedFile, region: Region) -> Self {
        Self {
            file: file.spec.name.clone(),
            offset: region.offset,
            data: file.data.clone(),
            len: region.len,
        }
    }

    /// The bytes. The region was checked against the file when it was parsed.
    pub fn bytes(&self) -> &[u8] {
        self.data
            .get(self.offset..self.offset + self.len)
            .unwrap_or_default()
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty payload.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}[{:#x}..{:#x}]",
            self.file,
            self.offset,
            self.offset + self.len
        )
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        self.file == other.file && self.offset == other.offset && self.len == other.len
    }
}

/// One step of the PSP firmware sequence.
#[derive(Debug, Clone, PartialEq)]
pub enum PspStep {
    /// Before the sOS runs: copy `payload` to the 1 MiB buffer, `C2PMSG_36 = addr >> 20`,
    /// `C2PMSG_35 = command`.
    Bootloader {
        /// The sOS component the bytes are.
        component: PspFwType,
        /// The bootloader command that takes them.
        command: BootloaderCmd,
        /// The bytes.
        payload: Payload,
    },
    /// `GFX_CMD_ID_LOAD_TOC`: the TMR table of contents; the response gives the TMR size.
    LoadToc {
        /// The TOC component of the sOS.
        payload: Payload,
    },
    /// `GFX_CMD_ID_SETUP_TMR`: where the PSP keeps firmware (no bytes).
    SetupTmr,
    /// `GFX_CMD_ID_LOAD_IP_FW` of one firmware type.
    LoadIpFw {
        /// The `fw_type` of the command.
        fw_type: GfxFwType,
        /// The bytes.
        payload: Payload,
    },
    /// `GFX_CMD_ID_AUTOLOAD_RLC`: everything is loaded, start the RLC (GC ≥ 11; no bytes).
    AutoloadRlc,
}

impl PspStep {
    /// The bytes of the step, if it carries any.
    pub fn payload(&self) -> Option<&Payload> {
        match self {
            PspStep::Bootloader { payload, .. }
            | PspStep::LoadToc { payload }
            | PspStep::LoadIpFw { payload, .. } => Some(payload),
            PspStep::SetupTmr | PspStep::AutoloadRlc => None,
        }
    }

    /// A short name: the bootloader command, `LOAD_TOC`, the `GFX_FW_TYPE_*` name, …
    pub fn name(&self) -> String {
        match self {
            PspStep::Bootloader { command, .. } => command.full_name(),
            PspStep::LoadToc { .. } => "GFX_CMD_ID_LOAD_TOC".to_string(),
            PspStep::SetupTmr => "GFX_CMD_ID_SETUP_TMR".to_string(),
            PspStep::LoadIpFw { fw_type, .. } => fw_type.full_name(),
            PspStep::AutoloadRlc => "GFX_CMD_ID_AUTOLOAD_RLC".to_string(),
        }
    }
}

/// Choices the firmware files alone cannot make.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlanOptions {
    /// Which component set of a v2.1 sOS package to load (decided at run time from the
    /// PMFW version on MP0 13.0.6).
    pub sos: SosVariant,
}

/// What the PSP loads, in order, plus the values of the files the driver needs later.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    /// The steps, in order.
    pub steps: Vec<PspStep>,
    /// RS64 start addresses (`ucode_start_addr`) by CP engine, for the program counter the
    /// GFX block sets before un-halting it.
    pub ucode_start: Vec<(Role, u64)>,
}

impl LoadPlan {
    /// The RS64 start address of a CP engine (`Role::Mec`, `Role::Pfp`, `Role::Me`).
    pub fn ucode_start(&self, role: Role) -> Option<u64> {
        self.ucode_start
            .iter()
            .find(|(r, _)| *r == role)
            .map(|(_, a)| *a)
    }
}

/// The sOS components in the order the bootloader takes them, with their commands. The
/// SPL slot is filled by the component of [`spl_component`].
const SOS_ORDER: [(PspFwType, BootloaderCmd); 8] = [
    (PspFwType::KDB, BootloaderCmd::LOAD_KEY_DATABASE),
    (PspFwType::SPL, BootloaderCmd::LOAD_TOS_SPL_TABLE),
    (PspFwType::SYS_DRV, BootloaderCmd::LOAD_SYSDRV),
    (PspFwType::SOC_DRV, BootloaderCmd::LOAD_SOCDRV),
    (PspFwType::INTF_DRV, BootloaderCmd::LOAD_INTFDRV),
    (PspFwType::DBG_DRV, BootloaderCmd::LOAD_DBGDRV),
    (PspFwType::RAS_DRV, BootloaderCmd::LOAD_RASDRV),
    (PspFwType::SOS, BootloaderCmd::LOAD_SOSDRV),
];

/// The component sent with `PSP_BL__LOAD_TOS_SPL_TABLE`: the SPL from MP0 14 on, the KDB
/// before (what the reference driver does and the fact sheet records).
pub fn spl_component(mp0: IpVersion) -> PspFwType {
    if mp0 >= IpVersion::new(14, 0, 0) {
        PspFwType::SPL
    } else {
        PspFwType::KDB
    }
}

/// MP0 versions whose TMR the PSP sets up at boot.
fn boot_time_tmr(mp0: IpVersion) -> bool {
    matches!(
        (mp0.major, mp0.minor, mp0.rev),
        (13, 0, 6 | 14) | (14, 0, 2 | 3)
    )
}

/// MP0 versions that load firmware into the boot-time TMR without SETUP_TMR.
fn autoload_tmr(mp0: IpVersion) -> bool {
    !matches!((mp0.major, mp0.minor, mp0.rev), (13, 0, 6 | 14))
}

impl FirmwareSet {
    /// The ordered PSP load sequence for this set.
    pub fn plan(&self, options: PlanOptions) -> Result<LoadPlan> {
        let ips = self.ips;
        let gc11 = ips.gc >= IpVersion::new(11, 0, 0);
        let sos_file = self.require(Role::Sos)?;
        let Body::PspSos(sos) = &sos_file.image.body else {
            return Err(wrong_kind(sos_file, "PSP SOS"));
        };
        let mut steps = bootloader_steps(ips.mp0, sos_file, sos, options)?;

        // The SMU firmware goes before the TMR is set up (GC ≥ 11); before GC 11 the SMU
        // boots from the IFWI and only its P2S table is loaded, with the IP firmware.
        let mut ip_fw = Vec::new();
        self.smu_firmware(gc11, &mut steps, &mut ip_fw)?;
        if !boot_time_tmr(ips.mp0) || !autoload_tmr(ips.mp0) {
            steps.push(PspStep::SetupTmr);
        }
        self.sdma_firmware(&mut ip_fw)?;
        let ucode_start = self.cp_firmware(&mut ip_fw)?;
        if gc11 {
            self.imu_firmware(&mut ip_fw)?;
        }
        self.rlc_firmware(&mut ip_fw)?;
        steps.extend(ip_fw);

        if gc11 {
            steps.push(PspStep::AutoloadRlc);
        } else {
            let rl = sos.component(options.sos, PspFwType::RL).ok_or_else(|| {
                FirmwareError::MissingComponent {
                    file: sos_file.spec.name.clone(),
                    component: "RL (register list, needed on GC 9)".to_string(),
                    offset: sos.table_offset,
                }
            })?;
            steps.push(load(GfxFwType::REG_LIST, sos_file, rl.region));
        }
        Ok(LoadPlan { steps, ucode_start })
    }

    /// The SMU firmware: its image (GC 11 on, a step of its own) or its P2S table (with the
    /// IP firmware).
    fn smu_firmware(
        &self,
        gc11: bool,
        steps: &mut Vec<PspStep>,
        ip_fw: &mut Vec<PspStep>,
    ) -> Result<()> {
        if self.ips.loads_smu_firmware() {
            let smu_file = self.require(Role::Smu)?;
            let Body::Smc(smc) = &smu_file.image.body else {
                return Err(wrong_kind(smu_file, "SMC"));
            };
            if gc11 {
                steps.push(load(GfxFwType::SMU, smu_file, smu_file.image.ucode));
            } else if let Some(p2s) = smc.p2s_table() {
                ip_fw.push(load(GfxFwType::P2S_TABLE, smu_file, p2s.region));
            }
        }
        Ok(())
    }

    /// The SDMA firmware, by header version.
    fn sdma_firmware(&self, ip_fw: &mut Vec<PspStep>) -> Result<()> {
        let sdma_file = self.require(Role::Sdma)?;
        let Body::Sdma(sdma) = &sdma_file.image.body else {
            return Err(wrong_kind(sdma_file, "SDMA"));
        };
        match sdma {
            Sdma::V1 { .. } => {
                // One image, loaded once per engine type the PSP knows on SDMA 4.
                for fw_type in [
                    GfxFwType::SDMA0,
                    GfxFwType::SDMA1,
                    GfxFwType::SDMA2,
                    GfxFwType::SDMA3,
                ] {
                    ip_fw.push(load(fw_type, sdma_file, sdma_file.image.ucode));
                }
            }
            Sdma::V2 { ctx, ctl, .. } => {
                ip_fw.push(load(GfxFwType::SDMA_UCODE_TH1, sdma_file, *ctl));
                ip_fw.push(load(GfxFwType::SDMA_UCODE_TH0, sdma_file, *ctx));
            }
            Sdma::V3 { ucode, .. } => {
                ip_fw.push(load(GfxFwType::SDMA_UCODE_TH0, sdma_file, *ucode))
            }
        }

        Ok(())
    }

    /// The CP firmware (PFP, ME, MEC) the target needs; returns the RS64 start addresses.
    fn cp_firmware(&self, ip_fw: &mut Vec<PspStep>) -> Result<Vec<(Role, u64)>> {
        let mut ucode_start = Vec::new();
        for role in [Role::Pfp, Role::Me, Role::Mec] {
            let Some(file) = self.file(role) else {
                if self.ips.files().iter().any(|s| s.role == role) {
                    self.require(role)?;
                }
                continue;
            };
            let Body::Gfx(gfx) = &file.image.body else {
                return Err(wrong_kind(file, "GFX"));
            };
            let (f32_code, f32_jt, rs64, rs64_stack) = match role {
                Role::Pfp => (
                    GfxFwType::CP_PFP,
                    None,
                    GfxFwType::RS64_PFP,
                    GfxFwType::RS64_PFP_P0_STACK,
                ),
                Role::Me => (
                    GfxFwType::CP_ME,
                    None,
                    GfxFwType::RS64_ME,
                    GfxFwType::RS64_ME_P0_STACK,
                ),
                _ => (
                    GfxFwType::CP_MEC,
                    Some(GfxFwType::CP_MEC_ME1),
                    GfxFwType::RS64_MEC,
                    GfxFwType::RS64_MEC_P0_STACK,
                ),
            };
            match gfx {
                Gfx::V1 { code, jt, .. } => {
                    ip_fw.push(load(f32_code, file, *code));
                    if let Some(jt_type) = f32_jt {
                        ip_fw.push(load(jt_type, file, *jt));
                    }
                }
                Gfx::V2 {
                    ucode,
                    data,
                    ucode_start_addr,
                    ..
                } => {
                    // Compute uses pipe 0 only, so only the P0 stack is loaded.
                    ip_fw.push(load(rs64, file, *ucode));
                    ip_fw.push(load(rs64_stack, file, *data));
                    ucode_start.push((role, *ucode_start_addr));
                }
            }
        }
        Ok(ucode_start)
    }

    /// The IMU firmware (GC 11 on).
    fn imu_firmware(&self, ip_fw: &mut Vec<PspStep>) -> Result<()> {
        let imu_file = self.require(Role::Imu)?;
        let Body::Imu(imu) = &imu_file.image.body else {
            return Err(wrong_kind(imu_file, "IMU"));
        };
        ip_fw.push(load(GfxFwType::IMU_I, imu_file, imu.iram));
        ip_fw.push(load(GfxFwType::IMU_D, imu_file, imu.dram));
        Ok(())
    }

    /// The RLC firmware: save/restore lists, IRAM/DRAM, RLCP/RLCV when present, then RLC_G.
    fn rlc_firmware(&self, ip_fw: &mut Vec<PspStep>) -> Result<()> {
        let rlc_file = self.require(Role::Rlc)?;
        let Body::Rlc(rlc) = &rlc_file.image.body else {
            return Err(wrong_kind(rlc_file, "RLC"));
        };
        // The save/restore lists go to the PSP only with a v2.1 header: later headers
        // carry them for the driver's own (non-PSP) path.
        if rlc_file.image.header_version() == (2, 1)
            && let Some(lists) = &rlc.restore_lists
        {
            ip_fw.push(load(
                GfxFwType::RLC_RESTORE_LIST_SRM_CNTL,
                rlc_file,
                lists.cntl,
            ));
            ip_fw.push(load(
                GfxFwType::RLC_RESTORE_LIST_GPM_MEM,
                rlc_file,
                lists.gpm,
            ));
            ip_fw.push(load(
                GfxFwType::RLC_RESTORE_LIST_SRM_MEM,
                rlc_file,
                lists.srm,
            ));
        }
        if let Some((iram, dram)) = rlc.iram_dram {
            ip_fw.push(load(GfxFwType::RLC_IRAM, rlc_file, iram));
            ip_fw.push(load(GfxFwType::RLC_DRAM_BOOT, rlc_file, dram));
        }
        if let Some((p, v)) = rlc.rlcp_rlcv {
            ip_fw.push(load(GfxFwType::RLC_P, rlc_file, p));
            ip_fw.push(load(GfxFwType::RLC_V, rlc_file, v));
        }
        ip_fw.push(load(GfxFwType::RLC_G, rlc_file, rlc_file.image.ucode));
        Ok(())
    }
}

/// The sOS package's components handed to the PSP bootloader, in bootloader order, then
/// its TOC; the package must hold the sOS itself.
fn bootloader_steps(
    mp0: IpVersion,
    sos_file: &LoadedFile,
    sos: &PspSos,
    options: PlanOptions,
) -> Result<Vec<PspStep>> {
    let mut steps = Vec::new();
    for (component, command) in SOS_ORDER {
        let component = if command == BootloaderCmd::LOAD_TOS_SPL_TABLE {
            spl_component(mp0)
        } else {
            component
        };
        if let Some(c) = sos.component(options.sos, component) {
            steps.push(PspStep::Bootloader {
                component,
                command,
                payload: Payload::new(sos_file, c.region),
            });
        }
    }
    if sos.component(options.sos, PspFwType::SOS).is_none() {
        return Err(FirmwareError::MissingComponent {
            file: sos_file.spec.name.clone(),
            component: "SOS".to_string(),
            offset: sos.table_offset,
        });
    }
    if let Some(toc) = sos.component(options.sos, PspFwType::TOC) {
        steps.push(PspStep::LoadToc {
            payload: Payload::new(sos_file, toc.region),
        });
    }

    Ok(steps)
}

fn load(fw_type: GfxFwType, file: &LoadedFile, region: Region) -> PspStep {
    PspStep::LoadIpFw {
        fw_type,
        payload: Payload::new(file, region),
    }
}

fn wrong_kind(file: &LoadedFile, expected: &'static str) -> FirmwareError {
    FirmwareError::WrongKind {
        file: file.spec.name.clone(),
        expected,
        found: file.image.kind().name(),
    }
}
