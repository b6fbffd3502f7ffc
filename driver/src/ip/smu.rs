//! SMU (MP1): messages, features, clocks, power limit, mode1 reset, metrics, ACA banks.
//!
//! A message is `C2PMSG_90 = 0` (response), `C2PMSG_82 = param`, `C2PMSG_66 = id`; the SMU
//! answers in `C2PMSG_90` (1 = `PPSMC_Result_OK`) with the result in `C2PMSG_82`. A message
//! is named by the generated [`Msg`] (its `PPSMC_MSG_*` name); its id differs per MP1
//! version and comes from the generated `am_autogen::smu` table of the version's family:
//! 13.0.0, 13.0.6 (which also serves 13.0.12/13.0.14) or 14.0.2 (whose clock ids are
//! 13.0.0's: a test checks).

use super::*;

pub use am_autogen::smu::Msg;
use am_autogen::smu::{v13_0_0 as s0, v13_0_6 as s6, v14_0_2 as s14};
use std::sync::Arc;

use zerocopy::FromBytes;

use crate::pci::SmuAnswer;
use crate::regs::Regs;

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
/// `C2PMSG_54` response).
const DEBUG_MSG_MODE1_RESET: u32 = 2;
/// Bit 31 of a `GetDpmFreqByIndex` answer flags a fine-grained clock; the rest is the value.
const DPM_VALUE_MASK: u32 = 0x7fff_ffff;
/// At most this many ACA banks are read per kind (the count comes from the firmware).
const MAX_ACA_BANKS: u32 = 32;
/// The clocks the driver pins, in the order of [`Family::clocks`].
const CLOCK_NAMES: [&str; 4] = ["GFXCLK", "SOCCLK", "UCLK", "FCLK"];
/// Stand-in id for 13.0.6's GFXCLK, which the firmware ranges with GetMin/MaxGfxDpmFreq and
/// pins with SetSoftMin/MaxGfxClk instead of a DPM table.
const GFXCLK_13_0_6: u32 = u32::MAX;

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
        match self {
            Family::V13_0_0 => s0::msg_id(msg),
            Family::V13_0_6 => s6::msg_id(msg),
            Family::V14_0_2 => s14::msg_id(msg),
        }
    }

    /// The `PPCLK_*` ids of [`CLOCK_NAMES`]. GFXCLK of 13.0.6 has no DPM table and is
    /// handled by its own messages ([`GFXCLK_13_0_6`]).
    fn clocks(self) -> [u32; 4] {
        match self {
            // 14.0.2's `PPCLK_e` begins as 13.0.0's does (a test checks).
            Family::V13_0_0 | Family::V14_0_2 => [
                s0::PPCLK_GFXCLK,
                s0::PPCLK_SOCCLK,
                s0::PPCLK_UCLK,
                s0::PPCLK_FCLK,
            ],
            // `PPCLK_e` of `smu13_driver_if_v13_0_6.h` (the generated module lacks the enum).
            Family::V13_0_6 => [GFXCLK_13_0_6, 2, 3, 4],
        }
    }
}

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
}

/// SMU state: the driver table in VRAM.
#[derive(Debug)]
pub struct Smu {
    mp1: Option<IpVersion>,
    /// Physical address of the driver table (none on a VF).
    table: Option<u64>,
    /// A message that timed out: the next one waits for its answer first (writing a new
    /// message over an unanswered one is a protocol error).
    unanswered: Option<Msg>,
    /// Opened to inspect, beside the instance that runs the device: a message goes through
    /// the sharing server's mailbox transaction where there is one
    /// ([`PciDevice::smu_query`]), so that it never lands between the owner's writes.
    beside: bool,
}

impl Smu {
    /// Allocate the driver table. `beside`: the device was opened to inspect (see
    /// [`Smu::beside`]).
    pub fn init_sw(ctx: &Ctx, beside: bool) -> Result<Self> {
        Ok(Smu {
            mp1: ctx.discovery.version(HwIp::MP1),
            table: (!ctx.is_vf)
                .then(|| ctx.palloc(DRIVER_TABLE_SIZE, 0x1000, Pool::Boot))
                .transpose()?,
            unanswered: None,
            beside,
        })
    }

    fn family(&self, ctx: &Ctx) -> Result<Family> {
        let v = self
            .mp1
            .ok_or_else(|| ctx.bad("discovery lists no MP1 (SMU)"))?;
        Family::of(v)
            .ok_or_else(|| ctx.bad(format!("the driver has no SMU message table for MP1 {v}")))
    }

    /// Send one message and wait for its answer (`timeout`); the result in `C2PMSG_82`.
    pub fn send(&mut self, ctx: &Ctx, msg: Msg, param: u32, timeout: Duration) -> Result<u32> {
        let family = self.family(ctx)?;
        let id = family.id(msg).ok_or_else(|| {
            ctx.bad(format!(
                "SMU message {msg:?} is not in the MP1 {family:?} message table"
            ))
        })?;
        if self.beside
            && let Some(a) = ctx.pci.smu_query(id, param, timeout)?
        {
            return self.answered(ctx, msg, id, param, a.response, || Ok(a.value));
        }
        if let Some(prev) = self.unanswered {
            answer(
                ctx,
                mp::MP1_SMN_C2PMSG_90,
                timeout,
                format_args!(
                    "SMU message {msg:?} to be sent: the SMU still owes the answer to {prev:?} (MP1_SMN_C2PMSG_90)"
                ),
            )?;
            self.unanswered = None;
        }
        post(ctx, id, param)?;
        let response = answer(
            ctx,
            mp::MP1_SMN_C2PMSG_90,
            timeout,
            format_args!("SMU message {msg:?} (param {param:#x}) answer in MP1_SMN_C2PMSG_90"),
        )
        .inspect_err(|e| {
            if matches!(e.kind, ErrorKind::Timeout { .. }) {
                self.unanswered = Some(msg);
            }
        })?;
        self.answered(ctx, msg, id, param, response, || {
            ctx.rreg(mp::MP1_SMN_C2PMSG_82, 0)
        })
    }

    /// The end of a message: traced, then its result (`value`) or the SMU's refusal.
    fn answered(
        &self,
        ctx: &Ctx,
        msg: Msg,
        id: u32,
        param: u32,
        response: u32,
        value: impl FnOnce() -> Result<u32>,
    ) -> Result<u32> {
        ctx.pci.trace(crate::trace::TraceEvent::Mailbox {
            block: "smu",
            name: format_args!("{msg:?}"),
            message: id,
            param,
            response,
        });
        if response != RESULT_OK {
            return Err(ctx.err(ErrorKind::SmuMessage {
                message: format!("{msg:?}"),
                param,
                response,
            }));
        }
        value()
    }

    fn msg(&mut self, ctx: &Ctx, msg: Msg, param: u32) -> Result<u32> {
        self.send(ctx, msg, param, ctx.timeouts.smu)
    }

    /// Whether the SMU firmware runs (answers GetSmuVersion within `smu_alive`).
    pub fn is_alive(&mut self, ctx: &Ctx) -> Result<bool> {
        if let Err(e) = self.send(ctx, Msg::GetSmuVersion, 0, ctx.timeouts.smu_alive) {
            match e.kind {
                ErrorKind::Timeout { .. } => return Ok(false),
                // An answer, even a refusal, comes from running firmware.
                ErrorKind::SmuMessage { .. } => {}
                _ => return Err(e),
            }
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

    /// Mode1 reset of the ASIC: the request, its answer, then (unless in a hive) a wait of
    /// `timeouts.mode1_settle` (500 ms) while the ASIC resets.
    ///
    /// PMFW answers before it resets the ASIC: Linux's `smu_v13_0_6_mode1_reset` waits for
    /// the answer, then sleeps. 13.0.6 takes it as `GfxDriverReset`, the others through the
    /// debug channel. Linux (`__smu_cmn_send_debug_msg`) writes argument, message, then the
    /// cleared response, and does not wait; PMFW, which polls, may take the message before
    /// that last write and answer into a register the write then clears. tinygrad's AM clears
    /// the response first, writes argument and message, and waits for `C2PMSG_54` = 1 on
    /// real Navi 31; this does the same, so an SMU that never answers is an error here
    /// rather than a reset that silently did not happen.
    pub fn mode1_reset(&mut self, ctx: &Ctx, in_hive: bool) -> Result<()> {
        let family = self.family(ctx)?;
        let (response, what) = if family == Family::V13_0_6 {
            post(
                ctx,
                s6::PPSMC_MSG_GfxDriverReset,
                s6::PPSMC_RESET_TYPE_DRIVER_MODE_1_RESET,
            )?;
            (mp::MP1_SMN_C2PMSG_90, "GfxDriverReset (mode1)")
        } else {
            ctx.wreg(mp::MP1_SMN_C2PMSG_54, 0, 0)?;
            ctx.wreg(mp::MP1_SMN_C2PMSG_53, 0, 0)?;
            ctx.wreg(mp::MP1_SMN_C2PMSG_75, 0, DEBUG_MSG_MODE1_RESET)?;
            (mp::MP1_SMN_C2PMSG_54, "debug-channel Mode1Reset")
        };
        self.unanswered = None;
        let code = answer(
            ctx,
            response,
            ctx.timeouts.smu,
            format_args!("SMU {what} answer in {}", response.name()),
        )?;
        if code != RESULT_OK {
            return Err(ctx.err(ErrorKind::SmuMessage {
                message: what.into(),
                param: 0,
                response: code,
            }));
        }
        tracing::info!("{}: mode1 reset answered (MP1 {family:?})", ctx.name);
        if !in_hive {
            std::thread::sleep(ctx.timeouts.mode1_settle);
        }
        Ok(())
    }

    /// Set each clock's soft limits in the order `limits` gives from its DPM range
    /// (`(min, MHz)`: the floor if `min`, else the ceiling).
    fn set_limits(
        &mut self,
        ctx: &Ctx,
        limits: impl Fn(u32, u32) -> [(bool, u32); 2],
    ) -> Result<()> {
        let clocks = self.family(ctx)?.clocks();
        for (clk, (_, lo, hi)) in clocks.into_iter().zip(self.clock_ranges(ctx)?) {
            for (min, freq) in limits(lo, hi) {
                let freq = freq & 0xffff;
                let (msg, param) = match (clk == GFXCLK_13_0_6, min) {
                    (true, true) => (Msg::SetSoftMinGfxClk, freq),
                    (true, false) => (Msg::SetSoftMaxGfxClk, freq),
                    (false, true) => (Msg::SetSoftMinByFreq, clk << 16 | freq),
                    (false, false) => (Msg::SetSoftMaxByFreq, clk << 16 | freq),
                };
                self.msg(ctx, msg, param)?;
            }
        }
        Ok(())
    }

    /// Pin every clock to a level. The SMU refuses a floor above the ceiling (and the
    /// reverse), so going up moves the ceiling first and going down the floor first.
    pub fn set_clocks(&mut self, ctx: &Ctx, level: ClockLevel) -> Result<()> {
        self.set_limits(ctx, |lo, hi| match level {
            ClockLevel::Max => [(false, hi), (true, hi)],
            ClockLevel::Min => [(true, lo), (false, lo)],
        })
    }

    /// Set the power limit and leave clocks unpinned (floor at the lowest level, ceiling
    /// at the highest: each step is valid whatever the limits were).
    pub fn set_power_limit(&mut self, ctx: &Ctx, watts: u32) -> Result<()> {
        self.msg(ctx, Msg::SetPptLimit, watts)?;
        self.set_limits(ctx, |lo, hi| [(true, lo), (false, hi)])
    }

    /// The DPM range of every clock the driver pins (`GFXCLK`, `SOCCLK`, `UCLK`, `FCLK`):
    /// `(name, lowest MHz, highest MHz)`, as the firmware answers (`am smi`).
    pub fn clock_ranges(&mut self, ctx: &Ctx) -> Result<Vec<(&'static str, u32, u32)>> {
        let clocks = self.family(ctx)?.clocks().into_iter().zip(CLOCK_NAMES);
        clocks
            .map(|(clk, name)| {
                if clk == GFXCLK_13_0_6 {
                    let lo = self.msg(ctx, Msg::GetMinGfxDpmFreq, 0)?;
                    return Ok((name, lo, self.msg(ctx, Msg::GetMaxGfxDpmFreq, 0)?));
                }
                let mut level = |l: u32| -> Result<u32> {
                    Ok(self.msg(ctx, Msg::GetDpmFreqByIndex, clk << 16 | l)? & DPM_VALUE_MASK)
                };
                match level(0xff)? {
                    0 => Err(ctx.bad(format!(
                        "SMU reports no DPM levels for {name} (GetDpmFreqByIndex)"
                    ))),
                    count => Ok((name, level(0)?, level(count - 1)?)),
                }
            })
            .collect()
    }

    /// The running PMFW version (`GetSmuVersion`): `major.minor.patch` from bytes 2..0.
    pub fn firmware_version(&mut self, ctx: &Ctx) -> Result<String> {
        let [_, major, minor, patch] = self.msg(ctx, Msg::GetSmuVersion, 0)?.to_be_bytes();
        Ok(format!("{major}.{minor}.{patch}"))
    }

    /// The MP1 version whose message table this SMU speaks.
    pub fn mp1_version(&self) -> Option<IpVersion> {
        self.mp1
    }

    /// The power limit the SMU enforces (W).
    pub fn power_limit(&mut self, ctx: &Ctx) -> Result<u32> {
        self.msg(ctx, Msg::GetPptLimit, 0)
    }

    /// Have the SMU write its metrics table into the driver table and read it.
    pub fn metrics(&mut self, ctx: &Ctx) -> Result<Metrics> {
        let family = self.family(ctx)?;
        match family {
            Family::V13_0_6 => self.msg(ctx, Msg::GetMetricsTable, 0),
            // 14.0.2's `TABLE_SMU_METRICS` is 13.0.0's (a test checks).
            _ => self.msg(ctx, Msg::TransferTableSmu2Dram, s0::TABLE_SMU_METRICS),
        }?;
        Ok(match family {
            Family::V13_0_0 => Metrics::V13_0_0(self.read_table(ctx)?),
            Family::V13_0_6 => Metrics::V13_0_6(self.read_table(ctx)?),
            Family::V14_0_2 => Metrics::V14_0_2(self.read_table(ctx)?),
        })
    }

    /// The table the SMU wrote into the driver table, as a `T`.
    fn read_table<T: FromBytes + IntoBytes>(&self, ctx: &Ctx) -> Result<Box<T>> {
        let mut t = T::new_zeroed();
        ctx.vram.read(self.table(ctx)?, t.as_mut_bytes())?;
        Ok(Box::new(t))
    }

    /// Read the ACA error banks after a RAS event, as text lines.
    ///
    /// Only MP1 13.0.6 (MI300) dumps banks through SMU messages (QueryValidMcaCount /
    /// McaBankDumpDW, uncorrectable and correctable); other versions return no lines.
    pub fn read_aca_banks(&mut self, ctx: &Ctx) -> Result<Vec<String>> {
        if self.family(ctx)? != Family::V13_0_6 {
            return Ok(vec![]);
        }
        let mut lines = vec![];
        for (kind, count_msg, dump_msg) in [
            ("UE", Msg::QueryValidMcaCount, Msg::McaBankDumpDW),
            ("CE", Msg::QueryValidMcaCeCount, Msg::McaBankCeDumpDW),
        ] {
            for bank in 0..self.msg(ctx, count_msg, 0)?.min(MAX_ACA_BANKS) {
                let mut line = format!("{kind} bank {bank}:");
                // ACA bank registers are 64-bit; the dump addresses them by byte offset
                // (index * 8) in the low 16 bits of its parameter, the bank above.
                for (name, idx) in [
                    ("STATUS", 1),
                    ("ADDR", 2),
                    ("MISC0", 3),
                    ("IPID", 5),
                    ("SYND", 6),
                ] {
                    let at = bank << 16 | (idx * 8);
                    let lo = self.msg(ctx, dump_msg, at)?;
                    let hi = self.msg(ctx, dump_msg, at + 4)?;
                    line += &format!(" {name}={:#018x}", u64::from(hi) << 32 | u64::from(lo));
                }
                lines.push(line);
            }
        }
        Ok(lines)
    }
}

/// The messages a client beside the owner may send through [`SharedMailbox::query`]: they
/// ask and change nothing. `TransferTableSmu2Dram` is allowed for the metrics table only.
const QUERIES: [Msg; 6] = [
    Msg::GetSmuVersion,
    Msg::GetPptLimit,
    Msg::GetDpmFreqByIndex,
    Msg::GetMinGfxDpmFreq,
    Msg::GetMaxGfxDpmFreq,
    Msg::GetMetricsTable,
];

/// How often [`SharedMailbox::query`] looks at `C2PMSG_90`: PMFW answers a query in
/// microseconds to a few milliseconds, and the owner waits while the window lock is held.
const SHARED_POLL: Duration = Duration::from_micros(50);

/// The SMU mailbox of a device several clients share, as the server sharing it runs a
/// query for one of them ([`PciDevice::smu_query`]): `am smi` beside the device's owner.
///
/// The owner writes the mailbox with plain register writes (response cleared, param,
/// message), polls the response, then reads the result, each a request of its own; the
/// server holds the device's window lock around every one of them. A query runs whole
/// under that lock, and only once the mailbox is idle (`C2PMSG_90` non-zero: the owner has
/// no message in flight, and has not begun its next, which clears it first); then it puts
/// `C2PMSG_82` and `C2PMSG_90` back as it found them, so an owner between reading the
/// response and reading the result reads its own. Only queries are sent ([`QUERIES`]): the
/// metrics table lands in the driver table the owner's boot set up, which the AM drivers
/// (ours and tinygrad's) use for that table only.
pub struct SharedMailbox {
    device: String,
    family: Family,
    regs: Regs,
}

impl SharedMailbox {
    /// Find the mailbox of `dev` from its discovery table, holding `window` (the lock the
    /// server takes around every access of the device's BARs) while it reads: on a small
    /// BAR the table is read through the `MM_INDEX` window, which is put back.
    pub fn locate(dev: &dyn PciDevice, window: &std::sync::Mutex<()>) -> Result<SharedMailbox> {
        let _window = am_isa::sync::lock(window);
        let mmio: Arc<dyn Bar> = Arc::new(crate::pci::SharedBar(dev.bar(5)?));
        let bar0 = || -> Result<Arc<dyn Bar>> { Ok(Arc::new(crate::pci::SharedBar(dev.bar(0)?))) };
        let discovery = Discovery::read_through(dev.name(), mmio.clone(), bar0)?;
        let err = |reason: String| Error::new(dev.name(), ErrorKind::BadState { reason });
        let version = discovery
            .version(HwIp::MP1)
            .ok_or_else(|| err("discovery lists no MP1 (SMU)".into()))?;
        let family = Family::of(version)
            .ok_or_else(|| err(format!("there is no SMU message table for MP1 {version}")))?;
        let regs = Regs::with_mmio(dev.name(), mmio, &discovery)?;
        Ok(SharedMailbox {
            device: dev.name().to_string(),
            family,
            regs,
        })
    }

    /// Send query `id` with `param` between the owner's messages (see the type's
    /// documentation) and wait for the answer, all within `timeout`. A message that is not
    /// a query is refused before anything is written.
    pub fn query(
        &self,
        window: &std::sync::Mutex<()>,
        id: u32,
        param: u32,
        timeout: Duration,
    ) -> Result<SmuAnswer> {
        let family = self.family;
        let query = QUERIES.iter().any(|&m| family.id(m) == Some(id))
            || (family.id(Msg::TransferTableSmu2Dram) == Some(id)
                && param == s0::TABLE_SMU_METRICS);
        let name = &self.device;
        if !query {
            return Err(Error::new(
                name,
                ErrorKind::BadState {
                    reason: format!(
                        "SMU message {id:#x} (param {param:#x}) is not a query (MP1 {family:?}): \
                         beside the device's owner only version, power limit, DPM range and \
                         metrics-table requests are sent"
                    ),
                },
            ));
        }
        let response = self.regs.reg(mp::MP1_SMN_C2PMSG_90)?;
        let result = self.regs.reg(mp::MP1_SMN_C2PMSG_82)?;
        let message = self.regs.reg(mp::MP1_SMN_C2PMSG_66)?;
        let start = std::time::Instant::now();
        let timed_out = |what: &str, last: u32| {
            Error::new(
                name,
                ErrorKind::Timeout {
                    what: what.to_string(),
                    waited: start.elapsed(),
                    last,
                },
            )
        };
        let (_window, was) = loop {
            let guard = am_isa::sync::lock(window);
            let was = response.read(0)?;
            if was != 0 {
                break (guard, was);
            }
            drop(guard);
            if start.elapsed() >= timeout {
                return Err(timed_out(
                    "the SMU mailbox to be idle (MP1_SMN_C2PMSG_90 non-zero: no message in \
                     flight; it stays 0 while the SMU runs no firmware, before a boot)",
                    was,
                ));
            }
            std::thread::sleep(SHARED_POLL);
        };
        let kept = result.read(0)?;
        response.write(0, 0)?;
        result.write(0, param)?;
        message.write(0, id)?;
        let code = loop {
            let v = response.read(0)?;
            if v != 0 {
                break v;
            }
            if start.elapsed() >= timeout {
                // The SMU still owes this answer: the owner's next message waits for it.
                return Err(timed_out(
                    &format!("SMU message {id:#x} (param {param:#x}) answer in MP1_SMN_C2PMSG_90"),
                    v,
                ));
            }
            std::thread::sleep(SHARED_POLL);
        };
        let value = result.read(0)?;
        result.write(0, kept)?;
        response.write(0, was)?;
        Ok(SmuAnswer {
            response: code,
            value,
        })
    }
}

/// Wait (at most `timeout`) for `C2PMSG_90` to hold an answer.
fn answer(
    ctx: &Ctx,
    response: am_autogen::regs::Reg,
    timeout: Duration,
    what: std::fmt::Arguments,
) -> Result<u32> {
    let r = ctx.regs.reg(response)?;
    ctx.poll(timeout, what, || {
        let v = r.read(0)?;
        Ok((v != 0, v))
    })
}

/// Write a message to the mailbox (response cleared, param, id last: the id starts it).
fn post(ctx: &Ctx, id: u32, param: u32) -> Result<()> {
    ctx.wreg(mp::MP1_SMN_C2PMSG_90, 0, 0)?;
    ctx.wreg(mp::MP1_SMN_C2PMSG_82, 0, param)?;
    ctx.wreg(mp::MP1_SMN_C2PMSG_66, 0, id)
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
        assert_eq!(
            Family::V14_0_2.id(Msg::TransferTableSmu2Dram),
            Some(s14::PPSMC_MSG_TransferTableSmu2Dram)
        );
        // Only 13.0.6 ranges GFXCLK with its own messages.
        assert_eq!(Family::V13_0_0.id(Msg::GetMinGfxDpmFreq), None);
        assert_eq!(Family::V14_0_2.id(Msg::GetMetricsTable), None);
        assert_eq!(format!("{:?}", Msg::SetSoftMaxByFreq), "SetSoftMaxByFreq");
    }

    #[test]
    fn rdna_clock_ids_are_the_same_in_13_0_0_and_14_0_2() {
        let s14 = [
            s14::PPCLK_GFXCLK,
            s14::PPCLK_SOCCLK,
            s14::PPCLK_UCLK,
            s14::PPCLK_FCLK,
        ];
        assert_eq!(Family::V14_0_2.clocks(), s14);
        assert_eq!(Family::V13_0_0.clocks(), s14);
    }

    #[test]
    fn rdna_metrics_table_id_is_the_same_in_13_0_0_and_14_0_2() {
        // `metrics` asks both families for 13.0.0's table id.
        assert_eq!(s0::TABLE_SMU_METRICS, s14::TABLE_SMU_METRICS);
    }
}
