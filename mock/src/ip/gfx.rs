//! GFX: RLC, CP/MEC, HQDs and the rest of GC (`mock-device.md` items 9 and 13).
//!
//! Registers hold their values (scratch registers among them, which is what warm boot relies
//! on), except:
//! - RLC autoload: on GC 11 `RLC_RLCS_BOOTLOAD_STATUS.BOOTLOAD_COMPLETE` reads 1 only once
//!   the PSP executed `GFX_CMD_ID_AUTOLOAD_RLC`; on GC 9 (no such register, the RLC is
//!   loaded by the PSP's REG_LIST path) `CP_STAT` reads busy until the PSP loaded
//!   `GFX_FW_TYPE_RLC_G`, then 0.
//! - HQDs: every `CP_HQD_*`/`CP_MQD_*` register is banked by the XCC's `GRBM_GFX_CNTL`
//!   (`MEID`, `PIPEID`, `QUEUEID`). `CP_HQD_ACTIVE = 1` activates the selected queue (the
//!   MEC must not be halted and, on GC 11, the pipe's `CP_MEC_RS64_PRGRM_CNTR_START`/`_HI`
//!   must hold the MEC firmware's start address); `CP_HQD_DEQUEUE_REQUEST = 2` deactivates it. Queues outlive
//!   driver handles and are cleared by `GRBM_SOFT_RESET.SOFT_RESET_CP`, FLR and mode1.
//! - RLC safe mode: a write of `RLC_SAFE_MODE` with `CMD` set is acknowledged at once (`CMD`
//!   reads 0) once the RLC runs, and `MESSAGE` enters (1) or leaves (0) safe mode on that XCC;
//!   before the RLC runs nothing answers. Clock-gating controls (`RLC_CGCG_CGLS_CTRL`,
//!   `RLC_CGTT_MGCG_OVERRIDE`) written outside safe mode are violations.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::psp::Psp;
use super::{Fault, Hw, IpModel, Reg, ResetKind};
use crate::profile::RegIp;
use crate::regs::RegId;

/// A compute queue the CP holds active.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActiveQueue {
    /// XCC instance.
    pub xcc: u8,
    /// `GRBM_GFX_CNTL.MEID` (1 = MEC1).
    pub me: u8,
    /// `GRBM_GFX_CNTL.PIPEID`.
    pub pipe: u8,
    /// `GRBM_GFX_CNTL.QUEUEID`.
    pub queue: u8,
    /// `GRBM_GFX_CNTL.VMID` at activation.
    pub vmid: u8,
    /// Ring base (`CP_HQD_PQ_BASE`/`_HI`, 256-byte units) as an address.
    pub pq_base: u64,
    /// Ring size in bytes (`CP_HQD_PQ_CONTROL.QUEUE_SIZE` q: 2^(q+1) dwords).
    pub pq_size: u64,
    /// `CP_HQD_PQ_DOORBELL_CONTROL.DOORBELL_OFFSET` (dword index in the doorbell BAR).
    pub doorbell_offset: u32,
    /// `CP_HQD_PQ_DOORBELL_CONTROL.DOORBELL_EN`.
    pub doorbell_enabled: bool,
    /// `CP_MQD_BASE_ADDR`/`_HI`.
    pub mqd_base: u64,
    /// `CP_HQD_PQ_RPTR_REPORT_ADDR`/`_HI`: where the CP writes its read pointer back.
    pub rptr_report_addr: u64,
    /// `CP_HQD_PQ_WPTR_POLL_ADDR`/`_HI`: where the CP reads the write pointer when it polls.
    pub wptr_poll_addr: u64,
    /// `CP_PQ_WPTR_POLL_CNTL.EN` of the XCC: the CP polls write pointers in memory.
    pub wptr_poll_enabled: bool,
    /// `CP_HQD_AQL_CONTROL` non-zero: an AQL (HSA) queue of 64-byte packets.
    pub aql: bool,
    /// `CP_HQD_PQ_RPTR` at activation (ring offset).
    pub rptr: u32,
    /// `CP_HQD_PQ_WPTR_LO`/`_HI` at activation.
    pub wptr: u64,
    /// `COMPUTE_TG_CHUNK_SIZE` of the XCC (0 where the register is absent or unset).
    pub tg_chunk: u32,
}

/// Queue key: (xcc, me, pipe, queue).
type QueueKey = (u8, u8, u8, u8);

/// GFX model state.
#[derive(Debug, Default)]
pub struct Gfx {
    /// Banked HQD/MQD registers: (me, pipe, queue, register id) → value. The register id
    /// already names the XCC instance.
    banks: HashMap<(u8, u8, u8, RegId), u32>,
    /// Active queues.
    active: BTreeMap<QueueKey, ActiveQueue>,
    /// What the PSP did (copied in by the device before each GC access).
    rlc_autoload_requested: bool,
    rlc_firmware_loaded: bool,
    /// The MEC firmware's RS64 start address (`ucode_start_addr`), when a test told it.
    mec_ucode_start: Option<u64>,
    /// XCCs whose RLC is in safe mode.
    safe_mode: BTreeSet<u8>,
}

fn field(hw: &Hw<'_>, id: RegId, name: &str) -> Result<am_autogen::regs::Field, Fault> {
    let info = hw.map.info(id);
    am_autogen::regs::table(info.table, info.version)
        .and_then(|t| t.by_name(info.name))
        .and_then(|r| r.field(name))
        .ok_or_else(|| Fault::new(format!("{} has no field {name}", info.name)))
}

fn find(hw: &Hw<'_>, name: &str, xcc: u8) -> Result<RegId, Fault> {
    hw.map
        .find(RegIp::Gc, name, xcc)
        .ok_or_else(|| Fault::new(format!("the profile has no {name} (instance {xcc})")))
}

fn get_field(hw: &Hw<'_>, name: &str, xcc: u8, fld: &str) -> Result<u32, Fault> {
    let id = find(hw, name, xcc)?;
    Ok(field(hw, id, fld)?.get(hw.regs.get(id)))
}

fn is_banked(name: &str) -> bool {
    name.starts_with("CP_HQD_") || name.starts_with("CP_MQD_") || is_pipe_banked(name)
}

/// Registers of one MEC pipe (selected by `MEID`/`PIPEID`, whatever `QUEUEID` says).
fn is_pipe_banked(name: &str) -> bool {
    name.starts_with("CP_MEC_RS64_PRGRM_CNTR_START")
}

impl Gfx {
    /// Copy what the GFX model needs of the PSP's state.
    pub fn observe_psp(&mut self, psp: &Psp) {
        self.rlc_autoload_requested = psp.rlc_autoload_requested();
        self.rlc_firmware_loaded = psp.rlc_firmware_loaded();
    }

    /// Tell the model the MEC firmware's RS64 start address (`ucode_start_addr` of the
    /// `gc_*_mec.bin` header, as `am_firmware`'s plan gives it): queue activation on GC 11
    /// then requires the pipe's `CP_MEC_RS64_PRGRM_CNTR_START`/`_HI` to hold it. Without it
    /// the model only requires the program counter to have been written since the last reset.
    pub fn set_mec_ucode_start(&mut self, addr: Option<u64>) {
        self.mec_ucode_start = addr;
    }

    /// The active queues, ordered by (xcc, me, pipe, queue).
    pub fn active_queues(&self) -> Vec<ActiveQueue> {
        self.active.values().copied().collect()
    }

    /// The queue `GRBM_GFX_CNTL` of `xcc` selects: (me, pipe, queue, vmid).
    fn selected(hw: &Hw<'_>, xcc: u8) -> Result<(u8, u8, u8, u8), Fault> {
        let g = |f| get_field(hw, "GRBM_GFX_CNTL", xcc, f).map(|v| v as u8);
        Ok((g("MEID")?, g("PIPEID")?, g("QUEUEID")?, g("VMID")?))
    }

    /// The bank a banked register of `xcc` goes to: (me, pipe, queue).
    fn bank_of(hw: &Hw<'_>, name: &str, xcc: u8) -> Result<(u8, u8, u8), Fault> {
        let (me, pipe, queue, _) = Self::selected(hw, xcc)?;
        Ok((me, pipe, if is_pipe_banked(name) { 0 } else { queue }))
    }

    /// A banked register of the selected queue (its reset value if never written).
    fn bank(&self, hw: &Hw<'_>, me: u8, pipe: u8, queue: u8, name: &str, xcc: u8) -> u32 {
        match hw.map.find(RegIp::Gc, name, xcc) {
            Some(id) => self
                .banks
                .get(&(me, pipe, queue, id))
                .copied()
                .unwrap_or(hw.map.info(id).default),
            None => 0,
        }
    }

    /// On RS64, why the pipe's program counter does not point at the MEC firmware.
    fn program_counter_wrong(&self, hw: &Hw<'_>, xcc: u8, me: u8, pipe: u8) -> Option<String> {
        let lo = self.bank(hw, me, pipe, 0, "CP_MEC_RS64_PRGRM_CNTR_START", xcc);
        let hi = self.bank(hw, me, pipe, 0, "CP_MEC_RS64_PRGRM_CNTR_START_HI", xcc);
        // The counter holds the start address in dwords.
        let pc = u64::from(hi) << 32 | u64::from(lo);
        // Only written values are banked: a missing entry is the reset value.
        let written = hw
            .map
            .find(RegIp::Gc, "CP_MEC_RS64_PRGRM_CNTR_START", xcc)
            .is_some_and(|id| self.banks.contains_key(&(me, pipe, 0, id)));
        match self.mec_ucode_start {
            Some(start) if pc != start >> 2 => Some(format!(
                "CP_MEC_RS64_PRGRM_CNTR_START/_HI of pipe {pipe} hold {:#x}, not the MEC \
                 firmware's start address {start:#x}",
                pc << 2
            )),
            None if !written => Some(format!(
                "CP_MEC_RS64_PRGRM_CNTR_START/_HI of pipe {pipe} were never written"
            )),
            _ => None,
        }
    }

    /// Whether the MEC serving `me` of `xcc` is halted (`MEC_HALT`, or GC 9's
    /// `MEC_ME1_HALT`/`MEC_ME2_HALT`).
    fn mec_halted(&self, hw: &Hw<'_>, xcc: u8, me: u8) -> Result<Option<String>, Fault> {
        if hw.map.find(RegIp::Gc, "CP_MEC_RS64_CNTL", xcc).is_some() {
            return Ok((get_field(hw, "CP_MEC_RS64_CNTL", xcc, "MEC_HALT")? != 0)
                .then(|| "CP_MEC_RS64_CNTL.MEC_HALT is set".into()));
        }
        let bit = match me {
            1 => "MEC_ME1_HALT",
            2 => "MEC_ME2_HALT",
            other => {
                return Err(Fault::new(format!(
                    "GRBM_GFX_CNTL.MEID {other} selects no MEC"
                )));
            }
        };
        Ok((get_field(hw, "CP_MEC_CNTL", xcc, bit)? != 0)
            .then(|| format!("CP_MEC_CNTL.{bit} is set")))
    }

    /// On RS64, why the pipe cannot run a queue at all: held in reset, or its program
    /// counter not at the MEC firmware.
    fn pipe_not_ready(
        &self,
        hw: &Hw<'_>,
        xcc: u8,
        me: u8,
        pipe: u8,
    ) -> Result<Option<String>, Fault> {
        if hw.map.find(RegIp::Gc, "CP_MEC_RS64_CNTL", xcc).is_none() {
            return Ok(None);
        }
        let reset = format!("MEC_PIPE{pipe}_RESET");
        if get_field(hw, "CP_MEC_RS64_CNTL", xcc, &reset)? != 0 {
            return Ok(Some(format!("CP_MEC_RS64_CNTL.{reset} is set")));
        }
        Ok(self.program_counter_wrong(hw, xcc, me, pipe))
    }

    fn activate(&mut self, hw: &mut Hw<'_>, xcc: u8) -> Result<(), Fault> {
        let (me, pipe, queue, vmid) = Self::selected(hw, xcc)?;
        if me == 0 {
            return Err(Fault::new(
                "CP_HQD_ACTIVE with GRBM_GFX_CNTL.MEID 0: the compute HQDs are on MEC1/MEC2",
            ));
        }
        if let Some(why) = self.pipe_not_ready(hw, xcc, me, pipe)? {
            return Err(Fault::new(format!(
                "queue (xcc {xcc}, me {me}, pipe {pipe}, queue {queue}) activated on a pipe that runs no firmware: {why}"
            )));
        }
        // Hardware takes the activation: Linux's gfx_v11_0_cp_resume (with
        // amdgpu_async_gfx_ring=0) activates the KIQ before kcq_resume unhalts the MEC. The
        // mock does not model the halt itself: the queue runs at once, hence the warning.
        if let Some(why) = self.mec_halted(hw, xcc, me)? {
            hw.warn(format!(
                "queue (xcc {xcc}, me {me}, pipe {pipe}, queue {queue}) activated while the MEC is halted ({why}): the mock runs it at once, hardware once the MEC is unhalted"
            ));
        }
        let b = |name: &str| self.bank(hw, me, pipe, queue, name, xcc);
        let pq_base =
            (u64::from(b("CP_HQD_PQ_BASE_HI")) << 32 | u64::from(b("CP_HQD_PQ_BASE"))) << 8;
        let pq_control = b("CP_HQD_PQ_CONTROL");
        let db = b("CP_HQD_PQ_DOORBELL_CONTROL");
        let size_field = field(hw, find(hw, "CP_HQD_PQ_CONTROL", xcc)?, "QUEUE_SIZE")?;
        let db_id = find(hw, "CP_HQD_PQ_DOORBELL_CONTROL", xcc)?;
        let q = size_field.get(pq_control);
        let mqd_base = u64::from(b("CP_MQD_BASE_ADDR_HI")) << 32 | u64::from(b("CP_MQD_BASE_ADDR"));
        let pair = |lo: &str, hi: &str| u64::from(b(hi)) << 32 | u64::from(b(lo));
        let xcc_reg = |name: &str| hw.map.find(RegIp::Gc, name, xcc).map(|id| hw.regs.get(id));
        let poll_en = match hw.map.find(RegIp::Gc, "CP_PQ_WPTR_POLL_CNTL", xcc) {
            Some(id) => field(hw, id, "EN")?.get(hw.regs.get(id)) != 0,
            None => false,
        };
        let entry = ActiveQueue {
            rptr_report_addr: pair(
                "CP_HQD_PQ_RPTR_REPORT_ADDR",
                "CP_HQD_PQ_RPTR_REPORT_ADDR_HI",
            ),
            wptr_poll_addr: pair("CP_HQD_PQ_WPTR_POLL_ADDR", "CP_HQD_PQ_WPTR_POLL_ADDR_HI"),
            wptr_poll_enabled: poll_en,
            aql: b("CP_HQD_AQL_CONTROL") != 0,
            rptr: b("CP_HQD_PQ_RPTR"),
            wptr: pair("CP_HQD_PQ_WPTR_LO", "CP_HQD_PQ_WPTR_HI"),
            tg_chunk: xcc_reg("COMPUTE_TG_CHUNK_SIZE").unwrap_or(0),
            xcc,
            me,
            pipe,
            queue,
            vmid,
            pq_base,
            pq_size: 4u64 << (q + 1),
            doorbell_offset: field(hw, db_id, "DOORBELL_OFFSET")?.get(db),
            doorbell_enabled: field(hw, db_id, "DOORBELL_EN")?.get(db) != 0,
            mqd_base,
        };
        self.active.insert((xcc, me, pipe, queue), entry);
        Ok(())
    }

    /// CP soft reset of one XCC: its queues go.
    fn reset_cp(&mut self, hw: &Hw<'_>, xcc: u8) {
        self.active.retain(|k, _| k.0 != xcc);
        self.banks
            .retain(|&(_, _, _, id), _| hw.map.info(id).instance != xcc);
    }
}

impl IpModel for Gfx {
    fn read(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>) -> Result<u32, Fault> {
        let name = reg.name();
        let xcc = reg.info.instance;
        if is_banked(name) {
            let (me, pipe, queue) = Self::bank_of(hw, name, xcc)?;
            return Ok(self.bank(hw, me, pipe, queue, name, xcc));
        }
        let stored = hw.regs.get(reg.id);
        match name {
            "RLC_RLCS_BOOTLOAD_STATUS" => {
                let f = field(hw, reg.id, "BOOTLOAD_COMPLETE")?;
                Ok(f.set(stored, u32::from(self.rlc_autoload_requested)))
            }
            "CP_STAT"
                if hw
                    .map
                    .find(RegIp::Gc, "RLC_RLCS_BOOTLOAD_STATUS", xcc)
                    .is_none() =>
            {
                if self.rlc_firmware_loaded {
                    Ok(0)
                } else {
                    // The CP stays busy until the RLC runs.
                    let f = field(hw, reg.id, "CP_BUSY")?;
                    Ok(f.set(stored, 1))
                }
            }
            _ => Ok(stored),
        }
    }

    fn write(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>, value: u32) -> Result<(), Fault> {
        let name = reg.name();
        let xcc = reg.info.instance;
        if is_banked(name) {
            let (me, pipe, queue) = Self::bank_of(hw, name, xcc)?;
            match name {
                "CP_HQD_ACTIVE" if value & 1 != 0 => self.activate(hw, xcc)?,
                "CP_HQD_ACTIVE" => {
                    self.active.remove(&(xcc, me, pipe, queue));
                }
                "CP_HQD_DEQUEUE_REQUEST" if value != 0 => {
                    // The CP finishes the dequeue at once: the queue goes inactive and the
                    // request clears.
                    self.active.remove(&(xcc, me, pipe, queue));
                    if let Some(active) = hw.map.find(RegIp::Gc, "CP_HQD_ACTIVE", xcc) {
                        self.banks.insert((me, pipe, queue, active), 0);
                    }
                    self.banks.insert((me, pipe, queue, reg.id), 0);
                    return Ok(());
                }
                _ => {}
            }
            self.banks.insert((me, pipe, queue, reg.id), value);
            return Ok(());
        }
        match name {
            "RLC_SAFE_MODE" => {
                let cmd = field(hw, reg.id, "CMD")?;
                let running = self.rlc_autoload_requested || self.rlc_firmware_loaded;
                if cmd.get(value) != 0 && running {
                    if field(hw, reg.id, "MESSAGE")?.get(value) != 0 {
                        self.safe_mode.insert(xcc);
                    } else {
                        self.safe_mode.remove(&xcc);
                    }
                    // The RLC acknowledges the command.
                    hw.regs.set(reg.id, cmd.set(value, 0));
                    return Ok(());
                }
            }
            // Linux (gfx_v11_0_update_gfx_clock_gating) and tinygrad bracket these with RLC
            // safe mode so the RLC does not race them; no source says the write is refused.
            "RLC_CGCG_CGLS_CTRL" | "RLC_CGTT_MGCG_OVERRIDE" if !self.safe_mode.contains(&xcc) => {
                hw.warn(format!("{name} of XCC {xcc} written outside RLC safe mode"));
            }
            _ => {}
        }
        hw.regs.set(reg.id, value);
        if name == "GRBM_SOFT_RESET" && field(hw, reg.id, "SOFT_RESET_CP")?.get(value) != 0 {
            self.reset_cp(hw, xcc);
        }
        Ok(())
    }

    fn reset(&mut self, kind: ResetKind) {
        let _ = kind;
        self.banks.clear();
        self.active.clear();
        self.rlc_autoload_requested = false;
        self.rlc_firmware_loaded = false;
        self.safe_mode.clear();
        // `mec_ucode_start` describes the firmware files, not device state: kept.
    }
}
