//! PSP (MP0): the bootloader that takes the sOS components, the sOS ring and the decoding
//! of every ring command (`mock-device.md` item 3), with fault injection (item 14).
//!
//! The model is strict: a component after the sOS, a ring command before the ring exists,
//! an unknown command or firmware type, or an address outside VRAM's MC range and system
//! memory is a [`Fault`] naming what the driver did. What was loaded is kept in a log
//! ([`PspLoad`]) that tests compare with `am_firmware`'s load plan.
//!
//! Time is counted in polls (reads of `C2PMSG_35`, `C2PMSG_64` or `C2PMSG_67`), as the
//! mailbox model does: a late answer comes after [`PspFaults::late_polls`] of them.

use am_autogen::psp_gfx::{
    GFX_CMD_ID_AUTOLOAD_RLC, GFX_CMD_ID_LOAD_IP_FW, GFX_CMD_ID_LOAD_TOC, GFX_CMD_ID_SETUP_TMR,
    GFX_CMD_ID_SRIOV_SPATIAL_PART, GFX_FLAG_RESPONSE, psp_gfx_cmd_load_ip_fw, psp_gfx_cmd_load_toc,
    psp_gfx_cmd_resp, psp_gfx_cmd_sriov_spatial_part, psp_gfx_rb_frame,
};
use am_firmware::{BootloaderCmd, GfxFwType};
use std::mem::{offset_of, size_of};
use zerocopy::FromBytes;

use super::{Fault, Hw, IpModel, Reg, ResetKind};
use crate::ip::gmc::{Hub, fb_aperture};
use crate::log::BoundedLog;
use crate::profile::{Profile, RegIp};

/// The bootloader's component buffer is 1 MiB (`PSP_1_MEG`): the driver zeroes it and copies
/// one component in, so the model reads (and hashes) the whole MiB.
pub const BL_BUFFER: usize = 1 << 20;
/// `PSP_RING_TYPE__KM`: the kernel-mode ring the driver creates.
pub const RING_TYPE_KM: u32 = 2;
/// `GFX_CTRL_CMD_ID_DESTROY_RINGS`.
pub const DESTROY_RINGS: u32 = 0x0003_0000;
/// Largest TMR the PSP asks for in its LOAD_TOC answer (the driver refuses more).
pub const TMR_SIZE: u32 = 0x0130_0000;
/// What `C2PMSG_81` reads once the sOS runs (a chosen non-zero sOS version).
pub const SOS_ALIVE: u32 = 0x0031_0024;
/// Largest firmware a LOAD_IP_FW may carry (no IP firmware comes near 16 MiB).
const MAX_FW_SIZE: u32 = 16 << 20;
/// Largest ring a ring create may ask for. amdgpu and AM make 4 KiB (`PSP_RING_SIZE`, 64
/// frames); the size comes from a register the driver writes, so it is checked before the
/// model reads the ring.
pub const MAX_RING_SIZE: u32 = 64 << 10;

/// Where an MC address the PSP or SMU is handed lands in this device's VRAM: MMHUB 0's FB
/// aperture, minus the device's XGMI segment offset in a hive (`gmc::fb_aperture`); else
/// `None` (system memory).
fn vram_offset(hw: &Hw<'_>, addr: u64, len: u64) -> Option<u64> {
    let off = fb_aperture(hw, Hub::mm(0), addr)?;
    hw.vram.contains(off, len).then_some(off)
}

/// Read `len` bytes of device-visible memory at MC/bus address `addr`: VRAM through its MC
/// range, else system memory (bus mastering must be on).
pub(crate) fn mem_read(hw: &Hw<'_>, addr: u64, buf: &mut [u8]) -> Result<(), String> {
    let len = buf.len() as u64;
    if let Some(off) = vram_offset(hw, addr, len) {
        hw.vram.read(off, buf);
        return Ok(());
    }
    if !hw.config.bus_master() {
        return Err(format!(
            "address {addr:#x} is not in VRAM's MC range and bus mastering is off"
        ));
    }
    hw.sysmem.read(addr, buf).map_err(|e| {
        format!(
            "address {addr:#x} (+{len:#x}) is neither in VRAM's MC range nor system memory: {e}"
        )
    })
}

/// Write device-visible memory at MC/bus address `addr` (see [`mem_read`]).
pub(crate) fn mem_write(hw: &Hw<'_>, addr: u64, data: &[u8]) -> Result<(), String> {
    let len = data.len() as u64;
    if let Some(off) = vram_offset(hw, addr, len) {
        return hw.vram.write(off, data).map_err(|full| full.to_string());
    }
    if !hw.config.bus_master() {
        return Err(format!(
            "address {addr:#x} is not in VRAM's MC range and bus mastering is off"
        ));
    }
    hw.sysmem.write(addr, data).map_err(|e| {
        format!(
            "address {addr:#x} (+{len:#x}) is neither in VRAM's MC range nor system memory: {e}"
        )
    })
}

/// Fault injection (test hook, kept across resets).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PspFaults {
    /// Never answer: the bootloader ready bit stays clear, the ring is never acknowledged,
    /// fences are never written.
    pub no_answer: bool,
    /// Answer with this status: `C2PMSG_35`/`C2PMSG_64` carry it in their low bits and
    /// ring commands get it in `resp.status`.
    pub error_status: Option<u32>,
    /// Answer only after this many polls.
    pub late_polls: u32,
}

/// One entry of the PSP's record of what it took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PspLoad {
    /// A bootloader component: the command (`PSP_BL__*`), the extent of non-zero bytes in
    /// the 1 MiB buffer and the SHA-256 of the whole buffer.
    Bootloader {
        /// `PSP_BL__*` value written to `C2PMSG_35`.
        command: BootloaderCmd,
        /// Bytes up to the last non-zero one.
        size: usize,
        /// SHA-256 of the 1 MiB buffer.
        sha256: [u8; 32],
    },
    /// `GFX_CMD_ID_LOAD_TOC` with the TOC's size and hash.
    LoadToc {
        /// `toc_size`.
        size: u32,
        /// SHA-256 of the TOC bytes.
        sha256: [u8; 32],
    },
    /// `GFX_CMD_ID_SETUP_TMR`.
    SetupTmr,
    /// `GFX_CMD_ID_LOAD_IP_FW`.
    LoadIpFw {
        /// `fw_type`.
        fw_type: GfxFwType,
        /// `fw_size`.
        size: u32,
        /// SHA-256 of the firmware bytes.
        sha256: [u8; 32],
    },
    /// `GFX_CMD_ID_AUTOLOAD_RLC`.
    AutoloadRlc,
    /// `GFX_CMD_ID_SRIOV_SPATIAL_PART` with its mode.
    SpatialPartition {
        /// `mode`.
        mode: u32,
    },
}

/// What the PSP still owes the driver.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Pending {
    /// The bootloader's ready bit.
    BootloaderReady,
    /// The answer to a ring create/destroy in `C2PMSG_64`.
    RingAnswer,
    /// Ring frames whose fences are not written yet: (fence address, value).
    Fences(Vec<(u64, u32)>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ring {
    addr: u64,
    size: u32,
}

/// PSP model state.
#[derive(Debug)]
pub struct Psp {
    pf_owned: bool,
    /// Components the bootloader took since the last reset.
    components: Vec<BootloaderCmd>,
    sos_alive: bool,
    ring: Option<Ring>,
    /// Ring read pointer (dwords).
    rptr: u32,
    /// Whether AUTOLOAD_RLC was executed (the GFX model reads this).
    rlc_autoload_requested: bool,
    /// Whether LOAD_IP_FW of `GFX_FW_TYPE_RLC_G` was executed (the GFX model reads this).
    rlc_firmware_loaded: bool,
    /// Whether SETUP_TMR was executed: IP firmware (other than the SMU's) goes into the TMR.
    tmr_set: bool,
    /// MP0 14: the sOS sets the TMR up itself when it starts, and firmware is loaded into it
    /// without SETUP_TMR (`psp_v14_0` has a boot-time TMR and RLC autoload, so Linux's
    /// `psp_hw_start` skips `psp_tmr_load`; `am_firmware`'s plan does the same).
    boot_time_tmr: bool,
    pending: Option<(Pending, u32)>,
    /// Fault injection.
    pub faults: PspFaults,
    log: BoundedLog<PspLoad>,
}

fn reg_is(reg: Reg<'_>, n: u32) -> bool {
    reg.name()
        .strip_prefix("MP0_SMN_C2PMSG_")
        .or_else(|| reg.name().strip_prefix("MPASP_SMN_C2PMSG_"))
        .is_some_and(|s| s.parse() == Ok(n))
}

/// The name of mailbox register `C2PMSG_n` on the profile's MP0: `MP0_SMN_` before MP0 14,
/// `MPASP_SMN_` from 14 on (the `mp_14_0_2` headers renamed the PSP's side of the block).
pub(crate) fn c2pmsg(hw: &Hw<'_>, n: u32) -> String {
    let mpasp = hw
        .profile
        .version(am_autogen::hwid::MP0_HWID)
        .is_some_and(|v| v.major >= 14);
    format!("{}_SMN_C2PMSG_{n}", if mpasp { "MPASP" } else { "MP0" })
}

fn mp0_version(hw: &Hw<'_>) -> String {
    hw.profile
        .version(am_autogen::hwid::MP0_HWID)
        .map_or_else(|| "?".into(), |v| v.to_string())
}

fn cmd_name(id: u32) -> String {
    let name = match id {
        GFX_CMD_ID_LOAD_IP_FW => "GFX_CMD_ID_LOAD_IP_FW",
        GFX_CMD_ID_SETUP_TMR => "GFX_CMD_ID_SETUP_TMR",
        GFX_CMD_ID_LOAD_TOC => "GFX_CMD_ID_LOAD_TOC",
        GFX_CMD_ID_AUTOLOAD_RLC => "GFX_CMD_ID_AUTOLOAD_RLC",
        GFX_CMD_ID_SRIOV_SPATIAL_PART => "GFX_CMD_ID_SRIOV_SPATIAL_PART",
        _ => return format!("command id {id:#x}"),
    };
    name.to_string()
}

impl Psp {
    /// PSP of a profile.
    pub fn new(profile: &Profile) -> Self {
        Self {
            pf_owned: profile.is_vf,
            components: Vec::new(),
            sos_alive: false,
            ring: None,
            rptr: 0,
            rlc_autoload_requested: false,
            rlc_firmware_loaded: false,
            tmr_set: false,
            boot_time_tmr: profile
                .version(am_autogen::hwid::MP0_HWID)
                .is_some_and(|v| v.major >= 14),
            pending: None,
            faults: PspFaults::default(),
            log: BoundedLog::default(),
        }
    }

    /// Whether IP firmware has a TMR to go into: after SETUP_TMR, or from the sOS's start
    /// where the TMR is set up at boot.
    fn tmr_ready(&self) -> bool {
        self.tmr_set || (self.boot_time_tmr && self.sos_alive)
    }

    /// What the PSP took, in order (kept across resets; the latest 1024 entries at least).
    pub fn log(&self) -> &[PspLoad] {
        self.log.as_slice()
    }

    /// The log, clearing it.
    pub fn take_log(&mut self) -> Vec<PspLoad> {
        self.log.take()
    }

    /// Whether the sOS runs.
    pub fn sos_alive(&self) -> bool {
        self.sos_alive
    }

    /// Whether the ring exists.
    pub fn ring_exists(&self) -> bool {
        self.ring.is_some()
    }

    /// Whether AUTOLOAD_RLC was executed since the last reset.
    pub fn rlc_autoload_requested(&self) -> bool {
        self.rlc_autoload_requested
    }

    /// Whether the RLC firmware (`GFX_FW_TYPE_RLC_G`) was loaded since the last reset.
    pub fn rlc_firmware_loaded(&self) -> bool {
        self.rlc_firmware_loaded
    }

    /// Test hook: mark the RLC firmware loaded and/or AUTOLOAD_RLC executed without driving
    /// the ring (tests of the GFX model that do not exercise the PSP sequence).
    pub fn mark_rlc_for_test(&mut self, firmware_loaded: bool, autoload_requested: bool) {
        self.rlc_firmware_loaded |= firmware_loaded;
        self.rlc_autoload_requested |= autoload_requested;
    }

    /// Test hook: the RLC loses its firmware while the sOS keeps running (as after a
    /// GFX-only reset): RLC autoload reads incomplete until the PSP loads it again.
    pub fn drop_rlc_for_test(&mut self) {
        self.rlc_firmware_loaded = false;
        self.rlc_autoload_requested = false;
    }

    /// Test hook (through [`crate::MockGpu::run_foreign_firmware`]): the sOS of another
    /// driver runs, as `amdgpu` leaves it — `C2PMSG_81` non-zero, `C2PMSG_64` ready, the RLC
    /// firmware loaded — without any load in this model's log. No ring is left (the driver
    /// only looks at `C2PMSG_81` before deciding to reset).
    pub(crate) fn run_foreign_sos(&mut self, hw: &mut Hw<'_>) {
        self.sos_alive = true;
        self.pending = None;
        self.rlc_firmware_loaded = true;
        self.rlc_autoload_requested = true;
        self.tmr_set = true;
        hw.set(RegIp::Mp, &c2pmsg(hw, 81), 0, SOS_ALIVE);
        hw.set(RegIp::Mp, &c2pmsg(hw, 64), 0, GFX_FLAG_RESPONSE);
    }

    fn check(&self, reg: Reg<'_>) -> Result<(), Fault> {
        if self.pf_owned {
            return Err(Fault::new(format!(
                "{}: the PSP belongs to the PF; a VF's own ring (C2PMSG_101..103, Linux's \
                 psp_v13_0_ring_create for SR-IOV) is not modelled",
                reg.name()
            )));
        }
        Ok(())
    }

    /// Something is owed: start counting polls (or never answer).
    fn owe(&mut self, what: Pending) {
        self.pending = Some((what, self.faults.late_polls));
    }

    fn owes(&self, what: &Pending) -> bool {
        matches!(&self.pending, Some((p, _)) if std::mem::discriminant(p) == std::mem::discriminant(what))
    }

    /// One poll: a late answer comes closer; a due one is delivered.
    fn poll(&mut self, hw: &Hw<'_>) {
        if self.faults.no_answer {
            return;
        }
        let due = match &mut self.pending {
            Some((_, 0)) => true,
            Some((_, n)) => {
                *n -= 1;
                *n == 0
            }
            None => false,
        };
        if due
            && matches!(self.pending, Some((Pending::Fences(_), _)))
            && let Some((Pending::Fences(fences), _)) = self.pending.take()
        {
            for (addr, value) in fences {
                // The address was checked when the frame was taken.
                let _ = mem_write(hw, addr, &value.to_le_bytes());
            }
        }
    }

    fn answered(&self) -> bool {
        !self.faults.no_answer && matches!(self.pending, Some((_, 0)) | None)
    }

    fn status(&self) -> u32 {
        self.faults.error_status.unwrap_or(0)
    }

    fn bootloader(&mut self, hw: &mut Hw<'_>, value: u32) -> Result<(), Fault> {
        let cmd = BootloaderCmd(value);
        let Some(name) = cmd.name() else {
            return Err(Fault::new(format!(
                "C2PMSG_35 = {value:#x}: not a PSP_BL__ bootloader command"
            )));
        };
        if self.sos_alive {
            return Err(Fault::new(format!(
                "PSP_BL__{name} after the sOS runs: the bootloader has handed over"
            )));
        }
        if self.owes(&Pending::BootloaderReady) {
            return Err(Fault::new(format!(
                "PSP_BL__{name} while the bootloader is busy (ready bit C2PMSG_35[31] clear)"
            )));
        }
        if self.components.contains(&cmd) {
            // Linux and tinygrad load each component once; no source says the bootloader
            // refuses a second copy.
            hw.warn(format!("PSP_BL__{name} loaded twice"));
        }
        let addr = u64::from(hw.get(RegIp::Mp, &c2pmsg(hw, 36), 0)) << 20;
        let mut buf = vec![0u8; BL_BUFFER];
        mem_read(hw, addr, &mut buf)
            .map_err(|e| Fault::new(format!("PSP_BL__{name}: component buffer: {e}")))?;
        let size = buf.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
        if size == 0 {
            hw.warn(format!(
                "PSP_BL__{name}: the 1 MiB buffer at {addr:#x} is empty"
            ));
        }
        self.log.push(PspLoad::Bootloader {
            command: cmd,
            size,
            sha256: am_firmware::locate::sha256(&buf),
        });
        self.components.push(cmd);
        hw.set(RegIp::Mp, &c2pmsg(hw, 35), 0, value);
        if cmd == BootloaderCmd::LOAD_SOSDRV {
            self.sos_alive = !self.faults.no_answer;
            if self.sos_alive {
                hw.set(RegIp::Mp, &c2pmsg(hw, 81), 0, SOS_ALIVE);
                // The sOS is ready for a ring command.
                hw.set(RegIp::Mp, &c2pmsg(hw, 64), 0, GFX_FLAG_RESPONSE);
            }
        } else {
            self.owe(Pending::BootloaderReady);
        }
        Ok(())
    }

    fn ring_control(&mut self, hw: &mut Hw<'_>, value: u32) -> Result<(), Fault> {
        if !self.sos_alive {
            return Err(Fault::new(format!(
                "C2PMSG_64 = {value:#x} before the sOS runs (C2PMSG_81 = 0)"
            )));
        }
        if value == DESTROY_RINGS {
            self.ring = None;
        } else if value == RING_TYPE_KM << 16 {
            if self.ring.is_some() {
                return Err(Fault::new(
                    "ring create while a ring exists (destroy it first)",
                ));
            }
            let lo = hw.get(RegIp::Mp, &c2pmsg(hw, 69), 0);
            let hi = hw.get(RegIp::Mp, &c2pmsg(hw, 70), 0);
            let size = hw.get(RegIp::Mp, &c2pmsg(hw, 71), 0);
            let addr = u64::from(hi) << 32 | u64::from(lo);
            let frame = size_of::<psp_gfx_rb_frame>() as u32;
            if size == 0 || !size.is_multiple_of(frame) {
                return Err(Fault::new(format!(
                    "ring create: size C2PMSG_71 = {size:#x} is not a non-zero multiple of the {frame}-byte frame"
                )));
            }
            if size > MAX_RING_SIZE {
                return Err(Fault::new(format!(
                    "ring create: size C2PMSG_71 = {size:#x} is larger than the {MAX_RING_SIZE:#x} bytes the PSP takes"
                )));
            }
            // The whole ring must be readable; its first and last frames say so without
            // copying it.
            let last = addr.checked_add(u64::from(size - frame)).ok_or_else(|| {
                Fault::new(format!(
                    "ring create: ring at {addr:#x} wraps the address space"
                ))
            })?;
            for at in [addr, last] {
                mem_read(hw, at, &mut [0u8; size_of::<psp_gfx_rb_frame>()])
                    .map_err(|e| Fault::new(format!("ring create: ring buffer: {e}")))?;
            }
            self.ring = Some(Ring { addr, size });
            self.rptr = 0;
        } else {
            return Err(Fault::new(format!(
                "C2PMSG_64 = {value:#x}: neither ring create (PSP_RING_TYPE__KM << 16) nor DESTROY_RINGS"
            )));
        }
        hw.set(RegIp::Mp, &c2pmsg(hw, 64), 0, value);
        self.owe(Pending::RingAnswer);
        Ok(())
    }

    /// The driver moved the write pointer: take every frame up to it.
    fn submit(&mut self, hw: &mut Hw<'_>, wptr: u32) -> Result<(), Fault> {
        let Some(ring) = self.ring else {
            return Err(Fault::new(format!(
                "C2PMSG_67 (write pointer) = {wptr:#x} with no ring: a command before the ring exists"
            )));
        };
        let frame_dw = (size_of::<psp_gfx_rb_frame>() / 4) as u32;
        let ring_dw = ring.size / 4;
        if !wptr.is_multiple_of(frame_dw) {
            return Err(Fault::new(format!(
                "write pointer {wptr:#x} is not on a frame boundary ({frame_dw} dwords)"
            )));
        }
        hw.set(RegIp::Mp, &c2pmsg(hw, 67), 0, wptr);
        let mut fences = match self.pending.take() {
            Some((Pending::Fences(f), _)) => f,
            _ => Vec::new(),
        };
        while self.rptr % ring_dw != wptr % ring_dw {
            let at = ring.addr + u64::from(self.rptr % ring_dw) * 4;
            let mut raw = [0u8; size_of::<psp_gfx_rb_frame>()];
            mem_read(hw, at, &mut raw).map_err(|e| Fault::new(format!("ring frame: {e}")))?;
            let frame = psp_gfx_rb_frame::read_from_bytes(&raw)
                .map_err(|_| Fault::new("ring frame: short read"))?;
            // A refused frame is consumed, as the PSP moves on after an error.
            self.rptr = self.rptr.wrapping_add(frame_dw);
            match self.execute(hw, &frame) {
                Ok(f) => {
                    // Fences the driver never polled for are overwritten as the ring wraps:
                    // no more are owed than the ring has frames.
                    if fences.len() >= (ring_dw / frame_dw) as usize {
                        fences.remove(0);
                    }
                    fences.push(f)
                }
                Err(e) => {
                    self.owe(Pending::Fences(fences));
                    return Err(e);
                }
            }
        }
        self.owe(Pending::Fences(fences));
        if self.faults.late_polls == 0 {
            self.poll(hw);
        }
        Ok(())
    }

    /// Decode and run one command; returns its fence.
    fn execute(&mut self, hw: &mut Hw<'_>, frame: &psp_gfx_rb_frame) -> Result<(u64, u32), Fault> {
        let cmd_addr = u64::from(frame.cmd_buf_addr_hi) << 32 | u64::from(frame.cmd_buf_addr_lo);
        let fence = u64::from(frame.fence_addr_hi) << 32 | u64::from(frame.fence_addr_lo);
        let mut buf = vec![0u8; size_of::<psp_gfx_cmd_resp>()];
        mem_read(hw, cmd_addr, &mut buf).map_err(|e| Fault::new(format!("command buffer: {e}")))?;
        mem_read(hw, fence, &mut [0u8; 4]).map_err(|e| Fault::new(format!("fence: {e}")))?;
        let dword = |o: usize| {
            buf.get(o..o + 4)
                .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        let id = dword(offset_of!(psp_gfx_cmd_resp, cmd_id));
        let name = cmd_name(id);
        let cmd = &buf[offset_of!(psp_gfx_cmd_resp, cmd)..];
        let mut tmr_size = 0;
        let entry = match id {
            GFX_CMD_ID_LOAD_IP_FW => {
                let c = psp_gfx_cmd_load_ip_fw::read_from_prefix(cmd)
                    .map_err(|_| Fault::new("LOAD_IP_FW: short command"))?
                    .0;
                let fw_type = GfxFwType(c.fw_type);
                if fw_type.name().is_none() {
                    return Err(Fault::new(format!(
                        "{name}: unknown fw_type {:#x}",
                        c.fw_type
                    )));
                }
                // Only the SMU firmware precedes the TMR (it is loaded before SETUP_TMR).
                if !self.tmr_ready() && fw_type != GfxFwType::SMU {
                    return Err(Fault::new(format!(
                        "{name} {} before GFX_CMD_ID_SETUP_TMR",
                        fw_type.full_name()
                    )));
                }
                if c.fw_size == 0 || c.fw_size > MAX_FW_SIZE {
                    return Err(Fault::new(format!(
                        "{name} {}: implausible fw_size {:#x}",
                        fw_type.full_name(),
                        c.fw_size
                    )));
                }
                let addr = u64::from(c.fw_phy_addr_hi) << 32 | u64::from(c.fw_phy_addr_lo);
                let mut fw = vec![0u8; c.fw_size as usize];
                mem_read(hw, addr, &mut fw)
                    .map_err(|e| Fault::new(format!("{name} {}: {e}", fw_type.full_name())))?;
                if fw_type == GfxFwType::RLC_G {
                    self.rlc_firmware_loaded = true;
                }
                if matches!(
                    fw_type,
                    GfxFwType::SDMA0 | GfxFwType::SDMA1 | GfxFwType::SDMA2 | GfxFwType::SDMA3
                ) {
                    super::sdma::Sdma::firmware_loaded(hw);
                }
                PspLoad::LoadIpFw {
                    fw_type,
                    size: c.fw_size,
                    sha256: am_firmware::locate::sha256(&fw),
                }
            }
            GFX_CMD_ID_LOAD_TOC => {
                if self.tmr_set {
                    return Err(Fault::new(format!(
                        "{name} after GFX_CMD_ID_SETUP_TMR: the TOC sizes the TMR"
                    )));
                }
                let c = psp_gfx_cmd_load_toc::read_from_prefix(cmd)
                    .map_err(|_| Fault::new("LOAD_TOC: short command"))?
                    .0;
                if c.toc_size == 0 || c.toc_size > MAX_FW_SIZE {
                    return Err(Fault::new(format!(
                        "{name}: implausible toc_size {:#x}",
                        c.toc_size
                    )));
                }
                let addr = u64::from(c.toc_phy_addr_hi) << 32 | u64::from(c.toc_phy_addr_lo);
                let mut toc = vec![0u8; c.toc_size as usize];
                mem_read(hw, addr, &mut toc).map_err(|e| Fault::new(format!("{name}: {e}")))?;
                tmr_size = TMR_SIZE;
                PspLoad::LoadToc {
                    size: c.toc_size,
                    sha256: am_firmware::locate::sha256(&toc),
                }
            }
            GFX_CMD_ID_SETUP_TMR if self.boot_time_tmr => {
                // Linux (psp_hw_start) and tinygrad skip it on these parts; no source says
                // the sOS refuses it.
                hw.warn(format!(
                    "{name} on MP0 {}: this sOS set the TMR up at boot; a PSP 14 driver loads \
                     into it without SETUP_TMR",
                    mp0_version(hw)
                ));
                self.tmr_set = true;
                PspLoad::SetupTmr
            }
            GFX_CMD_ID_SETUP_TMR => {
                self.tmr_set = true;
                PspLoad::SetupTmr
            }
            GFX_CMD_ID_AUTOLOAD_RLC => {
                if !self.tmr_ready() {
                    return Err(Fault::new(format!(
                        "{name} before GFX_CMD_ID_SETUP_TMR: no firmware is loaded"
                    )));
                }
                self.rlc_autoload_requested = true;
                PspLoad::AutoloadRlc
            }
            GFX_CMD_ID_SRIOV_SPATIAL_PART => {
                let c = psp_gfx_cmd_sriov_spatial_part::read_from_prefix(cmd)
                    .map_err(|_| Fault::new("SRIOV_SPATIAL_PART: short command"))?
                    .0;
                PspLoad::SpatialPartition { mode: c.mode }
            }
            _ => {
                return Err(Fault::new(format!(
                    "ring frame carries {name}, which the PSP model does not know"
                )));
            }
        };
        self.log.push(entry);
        let resp = offset_of!(psp_gfx_cmd_resp, resp);
        let status = self.status();
        let mut out = Vec::with_capacity(20);
        out.extend_from_slice(&status.to_le_bytes());
        out.extend_from_slice(&[0u8; 12]);
        out.extend_from_slice(&tmr_size.to_le_bytes());
        mem_write(hw, cmd_addr + resp as u64, &out)
            .map_err(|e| Fault::new(format!("{name}: response: {e}")))?;
        Ok((fence, frame.fence_value))
    }
}

impl IpModel for Psp {
    fn read(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>) -> Result<u32, Fault> {
        self.check(reg)?;
        let stored = hw.regs.get(reg.id);
        if reg_is(reg, 35) {
            self.poll(hw);
            let ready = !self.sos_alive && self.answered();
            if ready && self.owes(&Pending::BootloaderReady) {
                self.pending = None;
            }
            return Ok(if ready {
                GFX_FLAG_RESPONSE | (self.status() & 0xffff)
            } else {
                stored & !GFX_FLAG_RESPONSE
            });
        }
        if reg_is(reg, 64) {
            self.poll(hw);
            if self.owes(&Pending::RingAnswer) {
                if !self.answered() {
                    return Ok(stored & !GFX_FLAG_RESPONSE);
                }
                self.pending = None;
                let answer = GFX_FLAG_RESPONSE | (self.status() & 0xffff);
                hw.regs.set(reg.id, answer);
                return Ok(answer);
            }
            return Ok(stored);
        }
        if reg_is(reg, 67) {
            self.poll(hw);
        }
        Ok(stored)
    }

    fn write(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>, value: u32) -> Result<(), Fault> {
        self.check(reg)?;
        if reg_is(reg, 35) {
            return self.bootloader(hw, value);
        }
        if reg_is(reg, 64) {
            return self.ring_control(hw, value);
        }
        if reg_is(reg, 67) {
            return self.submit(hw, value);
        }
        if reg_is(reg, 81) {
            // A mailbox register like the others: the value lands (and the sOS state does
            // not change); drivers only read it (psp_v13_0_is_sos_alive).
            hw.warn("C2PMSG_81 is the sOS's alive register; drivers only read it");
        }
        hw.regs.set(reg.id, value);
        Ok(())
    }

    fn reset(&mut self, kind: ResetKind) {
        // Either reset takes the PSP down with the ASIC: the bootloader starts over.
        let _ = kind;
        self.components.clear();
        self.sos_alive = false;
        self.ring = None;
        self.rptr = 0;
        self.rlc_autoload_requested = false;
        self.rlc_firmware_loaded = false;
        self.tmr_set = false;
        self.pending = None;
    }
}
