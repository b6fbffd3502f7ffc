//! SMU (MP1): messages, features, clocks, power limit, mode1 reset, metrics, ACA banks.
//!
//! A message is `C2PMSG_90 = 0` (response), `C2PMSG_82 = param`, `C2PMSG_66 = id`; the SMU
//! answers in `C2PMSG_90` (1 = `PPSMC_Result_OK`) with the result in `C2PMSG_82`. Message
//! ids differ per MP1 version: they come from the generated `am_autogen::smu` tables
//! (13.0.0, 13.0.6 — which also serves 13.0.12/13.0.14 — and 14.0.2).

use std::mem::size_of;
use std::sync::Mutex;
use std::time::Duration;

use am_autogen::smu::{v13_0_0 as s0, v13_0_6 as s6, v14_0_2 as s14};
use zerocopy::FromBytes;

use crate::ctx::Ctx;
use crate::discovery::IpVersion;
use crate::hwip::HwIp;
use crate::mm::Pool;
use crate::mmio::{hi32, lo32};
use crate::regs::mp;
use crate::{Error, ErrorKind, Result};

/// Which DPM level every clock is pinned to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockLevel {
    /// Lowest level (idle, after `fini`).
    Min,
    /// Highest level (after boot).
    Max,
}

/// Size of the driver table in VRAM (the SMU writes the metrics table there).
const DRIVER_TABLE_SIZE: u64 = 0x1_0000;
/// `PPSMC_Result_OK`, the same in every version.
const RESULT_OK: u32 = 1;
/// `DEBUGSMU_MSG_Mode1Reset` of the debug channel (`C2PMSG_53` param, `C2PMSG_75` message,
/// `C2PMSG_54` response written last).
const DEBUG_MSG_MODE1_RESET: u32 = 2;
/// Bit 31 of a `GetDpmFreqByIndex` answer flags a fine-grained clock; the rest is the value.
const DPM_VALUE_MASK: u32 = 0x7fff_ffff;
/// At most this many ACA banks are read per kind (the count comes from the firmware).
const MAX_ACA_BANKS: u32 = 32;

/// 13.0.6 `PPCLK_e` of `smu13_driver_if_v13_0_6.h` (the generated module lacks the enum).
mod clk_13_0_6 {
    pub const SOCCLK: u32 = 2;
    pub const UCLK: u32 = 3;
    pub const FCLK: u32 = 4;
}

macro_rules! messages {
    ($($name:ident),* $(,)?) => {
        /// The SMU messages the driver sends (Linux `PPSMC_MSG_*` names).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Msg {
            $(
                #[doc = concat!("`PPSMC_MSG_", stringify!($name), "`.")]
                $name,
            )*
        }

        impl Msg {
            /// The message's name without the `PPSMC_MSG_` prefix.
            pub fn name(self) -> &'static str {
                match self {
                    $(Msg::$name => stringify!($name),)*
                }
            }
        }
    };
}

messages!(
    GetSmuVersion,
    SetDriverDramAddrHigh,
    SetDriverDramAddrLow,
    EnableAllSmuFeatures,
    GetDpmFreqByIndex,
    SetSoftMinByFreq,
    SetSoftMaxByFreq,
    GetMinGfxDpmFreq,
    GetMaxGfxDpmFreq,
    SetSoftMinGfxClk,
    SetSoftMaxGfxClk,
    SetPptLimit,
    GetPptLimit,
    TransferTableSmu2Dram,
    GetMetricsTable,
    Mode1Reset,
    GfxDriverReset,
    QueryValidMcaCount,
    QueryValidMcaCeCount,
    McaBankDumpDW,
    McaBankCeDumpDW,
);

/// The message table family of an MP1 version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    /// 13.0.0 / 13.0.7 / 13.0.10 (RDNA3 dGPUs).
    V13_0_0,
    /// 13.0.6 / 13.0.12 / 13.0.14 (MI300, MI350).
    V13_0_6,
    /// 14.0.2 / 14.0.3 (RDNA4 dGPUs).
    V14_0_2,
}

impl Family {
    fn of(v: IpVersion) -> Option<Family> {
        match (v.major, v.minor, v.rev) {
            (13, 0, 0 | 7 | 10) => Some(Family::V13_0_0),
            (13, 0, 6 | 12 | 14) => Some(Family::V13_0_6),
            (14, 0, 2 | 3) => Some(Family::V14_0_2),
            _ => None,
        }
    }

    /// The message id, or `None` if this version's table has no such message.
    fn id(self, msg: Msg) -> Option<u32> {
        use Msg::*;
        let id = match self {
            Family::V13_0_0 => match msg {
                GetSmuVersion => s0::PPSMC_MSG_GetSmuVersion,
                SetDriverDramAddrHigh => s0::PPSMC_MSG_SetDriverDramAddrHigh,
                SetDriverDramAddrLow => s0::PPSMC_MSG_SetDriverDramAddrLow,
                EnableAllSmuFeatures => s0::PPSMC_MSG_EnableAllSmuFeatures,
                GetDpmFreqByIndex => s0::PPSMC_MSG_GetDpmFreqByIndex,
                SetSoftMinByFreq => s0::PPSMC_MSG_SetSoftMinByFreq,
                SetSoftMaxByFreq => s0::PPSMC_MSG_SetSoftMaxByFreq,
                SetPptLimit => s0::PPSMC_MSG_SetPptLimit,
                GetPptLimit => s0::PPSMC_MSG_GetPptLimit,
                TransferTableSmu2Dram => s0::PPSMC_MSG_TransferTableSmu2Dram,
                Mode1Reset => s0::PPSMC_MSG_Mode1Reset,
                _ => return None,
            },
            Family::V13_0_6 => match msg {
                GetSmuVersion => s6::PPSMC_MSG_GetSmuVersion,
                SetDriverDramAddrHigh => s6::PPSMC_MSG_SetDriverDramAddrHigh,
                SetDriverDramAddrLow => s6::PPSMC_MSG_SetDriverDramAddrLow,
                EnableAllSmuFeatures => s6::PPSMC_MSG_EnableAllSmuFeatures,
                GetDpmFreqByIndex => s6::PPSMC_MSG_GetDpmFreqByIndex,
                SetSoftMinByFreq => s6::PPSMC_MSG_SetSoftMinByFreq,
                SetSoftMaxByFreq => s6::PPSMC_MSG_SetSoftMaxByFreq,
                GetMinGfxDpmFreq => s6::PPSMC_MSG_GetMinGfxDpmFreq,
                GetMaxGfxDpmFreq => s6::PPSMC_MSG_GetMaxGfxDpmFreq,
                SetSoftMinGfxClk => s6::PPSMC_MSG_SetSoftMinGfxClk,
                SetSoftMaxGfxClk => s6::PPSMC_MSG_SetSoftMaxGfxClk,
                SetPptLimit => s6::PPSMC_MSG_SetPptLimit,
                GetPptLimit => s6::PPSMC_MSG_GetPptLimit,
                GetMetricsTable => s6::PPSMC_MSG_GetMetricsTable,
                GfxDriverReset => s6::PPSMC_MSG_GfxDriverReset,
                QueryValidMcaCount => s6::PPSMC_MSG_QueryValidMcaCount,
                QueryValidMcaCeCount => s6::PPSMC_MSG_QueryValidMcaCeCount,
                McaBankDumpDW => s6::PPSMC_MSG_McaBankDumpDW,
                McaBankCeDumpDW => s6::PPSMC_MSG_McaBankCeDumpDW,
                _ => return None,
            },
            Family::V14_0_2 => match msg {
                GetSmuVersion => s14::PPSMC_MSG_GetSmuVersion,
                SetDriverDramAddrHigh => s14::PPSMC_MSG_SetDriverDramAddrHigh,
                SetDriverDramAddrLow => s14::PPSMC_MSG_SetDriverDramAddrLow,
                EnableAllSmuFeatures => s14::PPSMC_MSG_EnableAllSmuFeatures,
                GetDpmFreqByIndex => s14::PPSMC_MSG_GetDpmFreqByIndex,
                SetSoftMinByFreq => s14::PPSMC_MSG_SetSoftMinByFreq,
                SetSoftMaxByFreq => s14::PPSMC_MSG_SetSoftMaxByFreq,
                SetPptLimit => s14::PPSMC_MSG_SetPptLimit,
                GetPptLimit => s14::PPSMC_MSG_GetPptLimit,
                TransferTableSmu2Dram => s14::PPSMC_MSG_TransferTableSmu2Dram,
                _ => return None,
            },
        };
        Some(id)
    }

    /// The clocks pinned by [`Smu::set_clocks`]: (`PPCLK_*` id, name). GFXCLK of 13.0.6
    /// has no DPM table and is handled by its own messages ([`GFXCLK_13_0_6`]).
    fn clocks(self) -> &'static [(u32, &'static str)] {
        match self {
            Family::V13_0_0 => &[
                (s0::PPCLK_GFXCLK, "GFXCLK"),
                (s0::PPCLK_SOCCLK, "SOCCLK"),
                (s0::PPCLK_UCLK, "UCLK"),
                (s0::PPCLK_FCLK, "FCLK"),
            ],
            Family::V13_0_6 => &[
                (GFXCLK_13_0_6, "GFXCLK"),
                (clk_13_0_6::SOCCLK, "SOCCLK"),
                (clk_13_0_6::UCLK, "UCLK"),
                (clk_13_0_6::FCLK, "FCLK"),
            ],
            Family::V14_0_2 => &[
                (s14::PPCLK_GFXCLK, "GFXCLK"),
                (s14::PPCLK_SOCCLK, "SOCCLK"),
                (s14::PPCLK_UCLK, "UCLK"),
                (s14::PPCLK_FCLK, "FCLK"),
            ],
        }
    }
}

/// Stand-in id for 13.0.6's GFXCLK, which the firmware ranges with GetMin/MaxGfxDpmFreq and
/// pins with SetSoftMin/MaxGfxClk instead of a DPM table.
const GFXCLK_13_0_6: u32 = u32::MAX;

/// The SMU metrics table, typed by the MP1 version that wrote it.
#[derive(Clone, Debug)]
pub enum Metrics {
    /// MP1 13.0.0: `SmuMetricsExternal_t`.
    V13_0_0(Box<s0::SmuMetricsExternal_t>),
    /// MP1 13.0.6: `MetricsTableX_t`.
    V13_0_6(Box<s6::MetricsTableX_t>),
    /// MP1 14.0.2: `SmuMetricsExternal_t`.
    V14_0_2(Box<s14::SmuMetricsExternal_t>),
}

impl Metrics {
    /// The firmware's update counter (`MetricsCounter` / `AccumulationCounter`): it moves
    /// every time the SMU refreshes the table.
    pub fn counter(&self) -> u32 {
        match self {
            Metrics::V13_0_0(m) => m.SmuMetrics.MetricsCounter,
            Metrics::V13_0_6(m) => m.AccumulationCounter,
            Metrics::V14_0_2(m) => m.SmuMetrics.MetricsCounter,
        }
    }

    /// Current GFXCLK in MHz where the table has it as a plain value (`CurrClock`).
    pub fn gfxclk_mhz(&self) -> Option<u32> {
        match self {
            Metrics::V13_0_0(m) => m
                .SmuMetrics
                .CurrClock
                .get(s0::PPCLK_GFXCLK as usize)
                .copied(),
            Metrics::V14_0_2(m) => m
                .SmuMetrics
                .CurrClock
                .get(s14::PPCLK_GFXCLK as usize)
                .copied(),
            Metrics::V13_0_6(_) => None,
        }
    }
}

/// SMU state: the driver table in VRAM.
#[derive(Debug)]
pub struct Smu {
    mp1: Option<IpVersion>,
    family: Option<Family>,
    /// Physical address of the driver table (none on a VF).
    table: Option<u64>,
    /// A message that timed out: the next one waits for its answer first (writing a new
    /// message over an unanswered one is a protocol error).
    unanswered: Mutex<Option<&'static str>>,
}

impl Smu {
    /// Allocate the driver table.
    pub fn init_sw(ctx: &Ctx) -> Result<Self> {
        let mp1 = ctx.discovery.version(HwIp::MP1);
        let table = if ctx.is_vf {
            None
        } else {
            Some(ctx.palloc(DRIVER_TABLE_SIZE, 0x1000, Pool::Boot)?)
        };
        Ok(Smu {
            mp1,
            family: mp1.and_then(Family::of),
            table,
            unanswered: Mutex::new(None),
        })
    }

    fn family(&self, ctx: &Ctx) -> Result<Family> {
        self.family.ok_or_else(|| {
            ctx.bad(match self.mp1 {
                Some(v) => format!("the driver has no SMU message table for MP1 {v}"),
                None => "discovery lists no MP1 (SMU)".into(),
            })
        })
    }

    fn id(&self, ctx: &Ctx, msg: Msg) -> Result<u32> {
        let family = self.family(ctx)?;
        family.id(msg).ok_or_else(|| {
            ctx.bad(format!(
                "SMU message {} does not exist on MP1 {}",
                msg.name(),
                self.mp1.map(|v| v.to_string()).unwrap_or_default()
            ))
        })
    }

    fn unanswered(&self) -> std::sync::MutexGuard<'_, Option<&'static str>> {
        self.unanswered.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Send one message and wait for its answer (`timeout`); the result in `C2PMSG_82`.
    pub fn send(&self, ctx: &Ctx, msg: Msg, param: u32, timeout: Duration) -> Result<u32> {
        let id = self.id(ctx, msg)?;
        let resp_reg = ctx.regs.reg(mp::MP1_SMN_C2PMSG_90)?;
        let previous = *self.unanswered();
        if let Some(prev) = previous {
            ctx.poll(
                timeout,
                format_args!(
                    "SMU message {} to be sent: the SMU still owes the answer to {prev} (MP1_SMN_C2PMSG_90)",
                    msg.name()
                ),
                || {
                    let v = resp_reg.read(0)?;
                    Ok((v != 0, v))
                },
            )?;
            *self.unanswered() = None;
        }
        ctx.wreg(mp::MP1_SMN_C2PMSG_90, 0, 0)?;
        ctx.wreg(mp::MP1_SMN_C2PMSG_82, 0, param)?;
        ctx.wreg(mp::MP1_SMN_C2PMSG_66, 0, id)?;
        let response = ctx
            .poll(
                timeout,
                format_args!(
                    "SMU message {} (param {param:#x}) answer in MP1_SMN_C2PMSG_90",
                    msg.name()
                ),
                || {
                    let v = resp_reg.read(0)?;
                    Ok((v != 0, v))
                },
            )
            .inspect_err(|e| {
                if matches!(
                    e,
                    Error {
                        kind: ErrorKind::Timeout { .. },
                        ..
                    }
                ) {
                    *self.unanswered() = Some(msg.name());
                }
            })?;
        if response != RESULT_OK {
            return Err(ctx.err(ErrorKind::SmuMessage {
                message: msg.name().to_string(),
                param,
                response,
            }));
        }
        ctx.rreg(mp::MP1_SMN_C2PMSG_82, 0)
    }

    fn msg(&self, ctx: &Ctx, msg: Msg, param: u32) -> Result<u32> {
        self.send(ctx, msg, param, ctx.timeouts.smu)
    }

    /// Whether the SMU firmware runs (answers GetSmuVersion within `smu_alive`).
    pub fn is_alive(&self, ctx: &Ctx) -> Result<bool> {
        match self.send(ctx, Msg::GetSmuVersion, 0, ctx.timeouts.smu_alive) {
            Ok(_) => {}
            Err(Error {
                kind: ErrorKind::Timeout { .. },
                ..
            }) => return Ok(false),
            // An answer, even a refusal, comes from running firmware.
            Err(Error {
                kind: ErrorKind::SmuMessage { .. },
                ..
            }) => {}
            Err(e) => return Err(e),
        }
        Ok(ctx.rreg(mp::MP1_SMN_C2PMSG_90, 0)? != 0)
    }

    fn table(&self, ctx: &Ctx) -> Result<u64> {
        self.table
            .ok_or_else(|| ctx.bad("the SMU belongs to the PF: a VF has no SMU driver table"))
    }

    /// Driver table address, features.
    pub fn init_hw(&mut self, ctx: &Ctx) -> Result<()> {
        let mc = ctx.mc.mc(self.table(ctx)?);
        self.msg(ctx, Msg::SetDriverDramAddrHigh, hi32(mc))?;
        self.msg(ctx, Msg::SetDriverDramAddrLow, lo32(mc))?;
        self.msg(ctx, Msg::EnableAllSmuFeatures, 0)?;
        Ok(())
    }

    /// Mode1 reset of the ASIC (waits `timeouts.mode1_settle`, 500 ms, unless in a hive).
    ///
    /// The request is not answered: the ASIC, SMU included, resets under it.
    pub fn mode1_reset(&mut self, ctx: &Ctx, in_hive: bool) -> Result<()> {
        let family = self.family(ctx)?;
        let v = self.mp1.unwrap_or(IpVersion::new(0, 0, 0));
        let debug_channel =
            v.major >= 14 || matches!((v.major, v.minor, v.rev), (13, 0, 0 | 7 | 10));
        if debug_channel {
            ctx.wreg(mp::MP1_SMN_C2PMSG_53, 0, 0)?;
            ctx.wreg(mp::MP1_SMN_C2PMSG_75, 0, DEBUG_MSG_MODE1_RESET)?;
            ctx.wreg(mp::MP1_SMN_C2PMSG_54, 0, 0)?;
        } else {
            let (msg, param) = if family == Family::V13_0_6 {
                (
                    Msg::GfxDriverReset,
                    s6::PPSMC_RESET_TYPE_DRIVER_MODE_1_RESET,
                )
            } else {
                (Msg::Mode1Reset, 0)
            };
            let id = self.id(ctx, msg)?;
            ctx.wreg(mp::MP1_SMN_C2PMSG_90, 0, 0)?;
            ctx.wreg(mp::MP1_SMN_C2PMSG_82, 0, param)?;
            ctx.wreg(mp::MP1_SMN_C2PMSG_66, 0, id)?;
        }
        *self.unanswered() = None;
        tracing::info!("{}: mode1 reset requested (MP1 {v})", ctx.name);
        if !in_hive {
            std::thread::sleep(ctx.timeouts.mode1_settle);
        }
        Ok(())
    }

    /// The (lowest, highest) DPM frequency of a clock in MHz.
    fn dpm_range(&self, ctx: &Ctx, clk: u32, name: &str) -> Result<(u32, u32)> {
        if clk == GFXCLK_13_0_6 {
            let lo = self.msg(ctx, Msg::GetMinGfxDpmFreq, 0)?;
            let hi = self.msg(ctx, Msg::GetMaxGfxDpmFreq, 0)?;
            return Ok((lo, hi));
        }
        let count = self.msg(ctx, Msg::GetDpmFreqByIndex, clk << 16 | 0xff)? & DPM_VALUE_MASK;
        if count == 0 {
            return Err(ctx.bad(format!(
                "SMU reports no DPM levels for {name} (GetDpmFreqByIndex)"
            )));
        }
        let lo = self.msg(ctx, Msg::GetDpmFreqByIndex, clk << 16)? & DPM_VALUE_MASK;
        let hi = self.msg(ctx, Msg::GetDpmFreqByIndex, clk << 16 | (count - 1))? & DPM_VALUE_MASK;
        Ok((lo, hi))
    }

    /// Set one soft limit of a clock (`min` or max) to `freq` MHz.
    fn set_limit(&self, ctx: &Ctx, clk: u32, min: bool, freq: u32) -> Result<()> {
        let freq = freq & 0xffff;
        let (msg, param) = match (clk == GFXCLK_13_0_6, min) {
            (true, true) => (Msg::SetSoftMinGfxClk, freq),
            (true, false) => (Msg::SetSoftMaxGfxClk, freq),
            (false, true) => (Msg::SetSoftMinByFreq, clk << 16 | freq),
            (false, false) => (Msg::SetSoftMaxByFreq, clk << 16 | freq),
        };
        self.msg(ctx, msg, param).map(drop)
    }

    /// Pin every clock to a level. The SMU refuses a floor above the ceiling (and the
    /// reverse), so going up moves the ceiling first and going down the floor first.
    pub fn set_clocks(&mut self, ctx: &Ctx, level: ClockLevel) -> Result<()> {
        let family = self.family(ctx)?;
        for &(clk, name) in family.clocks() {
            let (lo, hi) = self.dpm_range(ctx, clk, name)?;
            match level {
                ClockLevel::Max => {
                    self.set_limit(ctx, clk, false, hi)?;
                    self.set_limit(ctx, clk, true, hi)?;
                }
                ClockLevel::Min => {
                    self.set_limit(ctx, clk, true, lo)?;
                    self.set_limit(ctx, clk, false, lo)?;
                }
            }
        }
        Ok(())
    }

    /// Set the power limit and leave clocks unpinned (floor at the lowest level, ceiling
    /// at the highest: each step is valid whatever the limits were).
    pub fn set_power_limit(&mut self, ctx: &Ctx, watts: u32) -> Result<()> {
        let family = self.family(ctx)?;
        self.msg(ctx, Msg::SetPptLimit, watts)?;
        for &(clk, name) in family.clocks() {
            let (lo, hi) = self.dpm_range(ctx, clk, name)?;
            self.set_limit(ctx, clk, true, lo)?;
            self.set_limit(ctx, clk, false, hi)?;
        }
        Ok(())
    }

    /// The DPM range of every clock the driver pins (`GFXCLK`, `SOCCLK`, `UCLK`, `FCLK`):
    /// `(name, lowest MHz, highest MHz)`, as the firmware answers (`am smi`).
    pub fn clock_ranges(&self, ctx: &Ctx) -> Result<Vec<(&'static str, u32, u32)>> {
        let family = self.family(ctx)?;
        family
            .clocks()
            .iter()
            .map(|&(clk, name)| {
                let (lo, hi) = self.dpm_range(ctx, clk, name)?;
                Ok((name, lo, hi))
            })
            .collect()
    }

    /// The running PMFW version (`GetSmuVersion`): `major.minor.patch` from bytes 2..0.
    pub fn firmware_version(&self, ctx: &Ctx) -> Result<String> {
        let v = self.msg(ctx, Msg::GetSmuVersion, 0)?;
        Ok(format!(
            "{}.{}.{}",
            (v >> 16) & 0xff,
            (v >> 8) & 0xff,
            v & 0xff
        ))
    }

    /// The MP1 version whose message table this SMU speaks.
    pub fn mp1_version(&self) -> Option<IpVersion> {
        self.mp1
    }

    /// The power limit the SMU enforces (W).
    pub fn power_limit(&self, ctx: &Ctx) -> Result<u32> {
        self.msg(ctx, Msg::GetPptLimit, 0)
    }

    /// Have the SMU write its metrics table into the driver table and read it.
    pub fn metrics(&mut self, ctx: &Ctx) -> Result<Metrics> {
        Ok(match self.family(ctx)? {
            Family::V13_0_0 => {
                self.msg(ctx, Msg::TransferTableSmu2Dram, s0::TABLE_SMU_METRICS)?;
                Metrics::V13_0_0(self.read_table(ctx, "SmuMetricsExternal_t")?)
            }
            Family::V13_0_6 => {
                self.msg(ctx, Msg::GetMetricsTable, 0)?;
                Metrics::V13_0_6(self.read_table(ctx, "MetricsTableX_t")?)
            }
            Family::V14_0_2 => {
                self.msg(ctx, Msg::TransferTableSmu2Dram, s14::TABLE_SMU_METRICS)?;
                Metrics::V14_0_2(self.read_table(ctx, "SmuMetricsExternal_t")?)
            }
        })
    }

    /// The table the SMU wrote into the driver table, as a `T`.
    fn read_table<T: FromBytes>(&self, ctx: &Ctx, what: &str) -> Result<Box<T>> {
        let mut b = vec![0u8; size_of::<T>()];
        ctx.vram.read(self.table(ctx)?, &mut b)?;
        T::read_from_bytes(&b)
            .map(Box::new)
            .map_err(|_| ctx.bad(format!("SMU metrics: short read of {what}")))
    }

    /// Read the ACA error banks after a RAS event, as text lines.
    ///
    /// Only MP1 13.0.6 (MI300) dumps banks through SMU messages (QueryValidMcaCount /
    /// McaBankDumpDW, uncorrectable and correctable); other versions return no lines.
    pub fn read_aca_banks(&mut self, ctx: &Ctx) -> Result<Vec<String>> {
        if self.family(ctx)? != Family::V13_0_6 {
            return Ok(vec![]);
        }
        // ACA bank registers are 64-bit; the dump addresses them by byte offset (index * 8).
        const REGS: [(&str, u32); 5] = [
            ("STATUS", 1),
            ("ADDR", 2),
            ("MISC0", 3),
            ("IPID", 5),
            ("SYND", 6),
        ];
        let mut lines = vec![];
        for (kind, count_msg, dump_msg) in [
            ("UE", Msg::QueryValidMcaCount, Msg::McaBankDumpDW),
            ("CE", Msg::QueryValidMcaCeCount, Msg::McaBankCeDumpDW),
        ] {
            let count = self.msg(ctx, count_msg, 0)?.min(MAX_ACA_BANKS);
            for bank in 0..count {
                let mut line = format!("{kind} bank {bank}:");
                for (name, idx) in REGS {
                    let at = (bank & 0xffff) << 16 | (idx * 8);
                    let lo = self.msg(ctx, dump_msg, at)?;
                    let hi = self.msg(ctx, dump_msg, at + 4)?;
                    line.push_str(&format!(
                        " {name}={:#018x}",
                        u64::from(hi) << 32 | u64::from(lo)
                    ));
                }
                lines.push(line);
            }
        }
        Ok(lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mp1_version_uses_its_family_table() {
        let f = |a, b, c| Family::of(IpVersion::new(a, b, c));
        assert_eq!(f(13, 0, 0), Some(Family::V13_0_0));
        assert_eq!(f(13, 0, 10), Some(Family::V13_0_0));
        assert_eq!(f(13, 0, 6), Some(Family::V13_0_6));
        // MI350 (13.0.14) speaks 13.0.6's messages.
        assert_eq!(f(13, 0, 14), Some(Family::V13_0_6));
        assert_eq!(f(14, 0, 2), Some(Family::V14_0_2));
        assert_eq!(f(11, 0, 7), None);
    }

    #[test]
    fn message_ids_differ_per_version() {
        assert_eq!(
            Family::V13_0_0.id(Msg::TransferTableSmu2Dram),
            Some(s0::PPSMC_MSG_TransferTableSmu2Dram)
        );
        assert_eq!(
            Family::V13_0_6.id(Msg::GetMetricsTable),
            Some(s6::PPSMC_MSG_GetMetricsTable)
        );
        assert_ne!(
            Family::V13_0_0.id(Msg::SetDriverDramAddrHigh),
            Family::V13_0_6.id(Msg::SetDriverDramAddrHigh)
        );
        // 13.0.6 resets through GfxDriverReset; it has no Mode1Reset message.
        assert_eq!(Family::V13_0_6.id(Msg::Mode1Reset), None);
        assert_eq!(Family::V13_0_0.id(Msg::GfxDriverReset), None);
        assert_eq!(Msg::SetSoftMaxByFreq.name(), "SetSoftMaxByFreq");
    }
}
