//! SMU (MP1): the message protocol, a message table per MP1 version with real answers, the
//! driver table, mode1 reset (`mock-device.md` item 4) and fault injection (item 14).
//!
//! Protocol: the driver clears `C2PMSG_90`, writes the argument to `C2PMSG_82` and the
//! message to `C2PMSG_66`; the answer is `C2PMSG_90 = 1` (`PPSMC_Result_OK`) or an error
//! code, with the result in `C2PMSG_82`. On 13.0.0 and 14.0.2 the debug channel (`C2PMSG_53` argument,
//! `C2PMSG_75` message, `C2PMSG_54` response) takes mode1 reset (message 2). PMFW polls its
//! mailboxes, so it takes a debug request once a new message and a cleared response are
//! both in place, in either order: Linux (`__smu_cmn_send_debug_msg`) writes 53, 75, then
//! clears 54 and does not wait; tinygrad's AM clears 54 first, writes 53 and 75, and polls
//! 54 for 1, on real Navi 31. The answer is 54 = 1.
//!
//! Mode1 (`Mode1Reset`, `GfxDriverReset`, or the debug channel) is answered first, then the
//! ASIC resets: Linux's `smu_v13_0_6_mode1_reset` waits for the answer and then sleeps. The
//! model resets right after the driver's read of the answer, or before its next access
//! outside MP1 (a driver that does not wait finds the reset done when it comes back).
//! Message ids come from `am_autogen::smu`; a message the version's table does not know, or
//! that the model does not handle, is a [`Fault`].
//!
//! DPM tables, versions and power limits are chosen plausible values (documented in
//! `docs/MOCK.md`), not measurements.

use am_autogen::smu::{v13_0_0 as s0, v13_0_6 as s6, v14_0_2 as s14};
use zerocopy::{FromZeros, IntoBytes};

use super::psp::mem_write;
use super::{Fault, Hw, IpModel, Reg, ResetKind};
use crate::log::BoundedLog;
use crate::profile::{Profile, RegIp};

/// `DEBUGSMU_MSG_Mode1Reset` of the 13.0.0 debug channel.
pub const DEBUG_MSG_MODE1_RESET: u32 = 2;

/// 13.0.6 clock ids of `PPCLK_e` in `smu_v13_0_6_pmfw.h` (the generated module lacks the
/// enum): VCLK 0, DCLK 1, SOCCLK 2, UCLK 3, FCLK 4, LCLK 5.
pub mod clk_13_0_6 {
    /// `PPCLK_VCLK`.
    pub const VCLK: u32 = 0;
    /// `PPCLK_DCLK`.
    pub const DCLK: u32 = 1;
    /// `PPCLK_SOCCLK`.
    pub const SOCCLK: u32 = 2;
    /// `PPCLK_UCLK`.
    pub const UCLK: u32 = 3;
    /// `PPCLK_FCLK`.
    pub const FCLK: u32 = 4;
    /// `PPCLK_LCLK`.
    pub const LCLK: u32 = 5;
}

/// The MP1 versions the model speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mp1 {
    /// 13.0.0 (navi31).
    V13_0_0,
    /// 13.0.6 (MI300X; also serves 13.0.14).
    V13_0_6,
    /// 14.0.2 (navi44; also serves navi48's 14.0.3, driven by the same `smu_v14_0_2` code).
    V14_0_2,
}

/// Fault injection (test hook, kept across resets).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SmuFaults {
    /// Never answer: `C2PMSG_90` stays 0.
    pub no_answer: bool,
    /// Answer every message with this response code instead of `PPSMC_Result_OK`.
    pub error_response: Option<u32>,
    /// Answer only after this many reads of `C2PMSG_90`.
    pub late_polls: u32,
}

/// One message as the SMU took it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmuMessage {
    /// Message id.
    pub msg: u32,
    /// Argument.
    pub param: u32,
    /// Response code the SMU chose (also logged when the answer is never delivered).
    pub response: u32,
    /// Result in `C2PMSG_82`.
    pub result: u32,
}

/// One clock's DPM levels in MHz.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DpmClock {
    /// `PPCLK_*` id of the version.
    pub id: u32,
    /// Name, for messages.
    pub name: &'static str,
    /// Level frequencies in MHz, ascending.
    pub levels: &'static [u32],
}

/// navi31 (13.0.0) DPM tables: chosen plausible values for an RX 7900 XTX class part.
const NAVI31_DPM: &[DpmClock] = &[
    DpmClock {
        id: s0::PPCLK_GFXCLK,
        name: "GFXCLK",
        levels: &[500, 1500, 2500],
    },
    DpmClock {
        id: s0::PPCLK_SOCCLK,
        name: "SOCCLK",
        levels: &[500, 960, 1200],
    },
    DpmClock {
        id: s0::PPCLK_UCLK,
        name: "UCLK",
        levels: &[96, 456, 772, 1250],
    },
    DpmClock {
        id: s0::PPCLK_FCLK,
        name: "FCLK",
        levels: &[400, 1200, 1600, 1900],
    },
    DpmClock {
        id: s0::PPCLK_VCLK_0,
        name: "VCLK0",
        levels: &[500, 1550],
    },
    DpmClock {
        id: s0::PPCLK_DCLK_0,
        name: "DCLK0",
        levels: &[500, 1400],
    },
];

/// navi48/navi44 (14.0.2/14.0.3) DPM tables: chosen plausible values for an RX 9070 XT
/// class part.
const NAVI4X_DPM: &[DpmClock] = &[
    DpmClock {
        id: s14::PPCLK_GFXCLK,
        name: "GFXCLK",
        levels: &[600, 1600, 2970],
    },
    DpmClock {
        id: s14::PPCLK_SOCCLK,
        name: "SOCCLK",
        levels: &[600, 1000, 1300],
    },
    DpmClock {
        id: s14::PPCLK_UCLK,
        name: "UCLK",
        levels: &[96, 772, 1258],
    },
    DpmClock {
        id: s14::PPCLK_FCLK,
        name: "FCLK",
        levels: &[400, 1400, 2000],
    },
];

/// MI300X (13.0.6) DPM tables (chosen plausible values). GFXCLK has no table on 13.0.6: its
/// range is answered by GetMin/MaxGfxDpmFreq.
const MI300X_DPM: &[DpmClock] = &[
    DpmClock {
        id: clk_13_0_6::SOCCLK,
        name: "SOCCLK",
        levels: &[200, 600, 1000, 1143],
    },
    DpmClock {
        id: clk_13_0_6::UCLK,
        name: "UCLK",
        levels: &[900, 1100, 1200, 1300],
    },
    DpmClock {
        id: clk_13_0_6::FCLK,
        name: "FCLK",
        levels: &[1200, 1400, 1600, 1800],
    },
    DpmClock {
        id: clk_13_0_6::VCLK,
        name: "VCLK",
        levels: &[914, 1200, 1333, 1480],
    },
    DpmClock {
        id: clk_13_0_6::DCLK,
        name: "DCLK",
        levels: &[711, 1000, 1200, 1333],
    },
    DpmClock {
        id: clk_13_0_6::LCLK,
        name: "LCLK",
        levels: &[600, 800, 1000, 1200],
    },
];
/// MI300X GFXCLK range (MHz).
const MI300X_GFXCLK: (u32, u32) = (500, 2100);

/// What the metrics table reports of the parts the model has no physics for: an idle card
/// at room temperature (chosen plausible values). Temperatures in °C, power in W, activity
/// in percent.
mod idle {
    pub const EDGE_C: u32 = 45;
    pub const HOTSPOT_C: u32 = 52;
    pub const MEM_C: u32 = 50;
    pub const VR_C: u32 = 41;
    pub const NAVI31_POWER_W: u32 = 35;
    pub const MI300X_POWER_W: u32 = 90;
    pub const GFX_BUSY_PCT: u32 = 3;
    pub const MEM_BUSY_PCT: u32 = 1;
    pub const FAN_RPM: u16 = 1100;
    pub const FAN_PWM_PCT: u8 = 30;
}

/// 13.0.6 reports temperatures, power, frequencies and busy percentages in unsigned Q10
/// fixed point (Linux `smu_v13_0_6_ppt.c` reads them with `SMUQ10_ROUND`).
const fn q10(v: u32) -> u32 {
    v << 10
}

/// Per-version constants the model answers with (chosen plausible values).
struct Version {
    /// `GetSmuVersion` (PMFW version major.minor.patch in bytes 2..0).
    smu_version: u32,
    /// `GetDriverIfVersion`.
    driver_if: u32,
    /// Default and largest power limit (W).
    ppt: (u32, u32),
    dpm: &'static [DpmClock],
}

const V13_0_0: Version = Version {
    smu_version: 0x004e_4a00, // 78.74.0
    driver_if: s0::SMU13_0_0_DRIVER_IF_VERSION,
    ppt: (355, 402),
    dpm: NAVI31_DPM,
};

const V13_0_6: Version = Version {
    smu_version: 0x0055_4000, // 85.64.0
    driver_if: 0x08,
    ppt: (750, 750),
    dpm: MI300X_DPM,
};

const V14_0_2: Version = Version {
    smu_version: 0x0068_1400, // 104.20.0
    driver_if: 0x2e,
    ppt: (304, 334),
    dpm: NAVI4X_DPM,
};

#[derive(Clone, Debug, PartialEq, Eq)]
struct Answer {
    response: u32,
    result: u32,
    polls: u32,
}

/// SMU model state.
#[derive(Debug)]
pub struct Smu {
    pf_owned: bool,
    /// XCCs and AIDs the 13.0.6 table reports clocks of.
    xccs: usize,
    aids: usize,
    mp1: Option<Mp1>,
    /// Firmware killed by a mode1 reset and not restarted since.
    dead: bool,
    features_enabled: bool,
    driver_table: u64,
    ppt_limit: u32,
    /// Soft (min, max) in MHz per clock id; GFXCLK of 13.0.6 under `u32::MAX`.
    soft: Vec<(u32, u32, u32)>,
    pending: Option<Answer>,
    /// A debug-channel message was written (`C2PMSG_75`) and not taken yet.
    debug_fresh: bool,
    /// A mode1 reset was taken: the number of the `C2PMSG_n` that carries its answer. The
    /// ASIC goes down once the driver read it, or before an access outside MP1.
    mode1: Option<u32>,
    metrics_counter: u32,
    /// ACA (MCA) error banks the firmware holds: uncorrectable and correctable, each bank
    /// eight 64-bit registers (STATUS at 1, ADDR 2, MISC0 3, IPID 5, SYND 6).
    aca: [Vec<[u64; 8]>; 2],
    /// Fault injection.
    pub faults: SmuFaults,
    log: BoundedLog<SmuMessage>,
}

impl Smu {
    /// SMU of a profile.
    pub fn new(profile: &Profile) -> Self {
        let mp1 = match profile.version(am_autogen::hwid::MP1_HWID) {
            Some(v) if (v.major, v.minor, v.rev) == (13, 0, 0) => Some(Mp1::V13_0_0),
            Some(v) if (v.major, v.minor) == (13, 0) && matches!(v.rev, 6 | 14) => {
                Some(Mp1::V13_0_6)
            }
            Some(v) if (v.major, v.minor) == (14, 0) && matches!(v.rev, 2 | 3) => {
                Some(Mp1::V14_0_2)
            }
            _ => None,
        };
        let mut smu = Self {
            pf_owned: profile.is_vf,
            xccs: usize::from(profile.num_xcc.max(1)),
            aids: usize::from(profile.num_aid.max(1)),
            mp1,
            dead: false,
            features_enabled: false,
            driver_table: 0,
            ppt_limit: 0,
            soft: Vec::new(),
            pending: None,
            debug_fresh: false,
            mode1: None,
            metrics_counter: 0,
            aca: [Vec::new(), Vec::new()],
            faults: SmuFaults::default(),
            log: BoundedLog::new(4096),
        };
        smu.boot();
        smu
    }

    fn version(&self) -> Option<&'static Version> {
        match self.mp1? {
            Mp1::V13_0_0 => Some(&V13_0_0),
            Mp1::V13_0_6 => Some(&V13_0_6),
            Mp1::V14_0_2 => Some(&V14_0_2),
        }
    }

    /// Firmware state at (re)start.
    fn boot(&mut self) {
        self.features_enabled = false;
        self.driver_table = 0;
        self.pending = None;
        self.ppt_limit = self.version().map_or(0, |v| v.ppt.0);
        self.soft = self
            .version()
            .map(|v| {
                v.dpm
                    .iter()
                    .map(|c| (c.id, c.levels[0], c.levels[c.levels.len() - 1]))
                    .collect()
            })
            .unwrap_or_default();
        if self.mp1 == Some(Mp1::V13_0_6) {
            self.soft.push((u32::MAX, MI300X_GFXCLK.0, MI300X_GFXCLK.1));
        }
    }

    /// Test hook: the firmware records an ACA error bank (uncorrectable if `ue`), as after a
    /// RAS event; the driver reads it through the MCA dump messages (13.0.6 family).
    pub fn push_aca_bank(&mut self, ue: bool, regs: [u64; 8]) {
        self.aca[usize::from(!ue)].push(regs);
    }

    /// Every message taken, in order (kept across resets; the latest 4096 at least: a
    /// monitor sends messages for as long as it runs).
    pub fn log(&self) -> &[SmuMessage] {
        self.log.as_slice()
    }

    /// The log, clearing it.
    pub fn take_log(&mut self) -> Vec<SmuMessage> {
        self.log.take()
    }

    /// Whether the firmware answers (false after a mode1 reset until the PSP's sOS runs).
    pub fn alive(&self) -> bool {
        !self.dead
    }

    /// MC address of the driver table (SetDriverDramAddrHigh/Low), 0 if unset.
    pub fn driver_table(&self) -> u64 {
        self.driver_table
    }

    /// The DPM table of a clock id of this version.
    pub fn dpm(&self, clk: u32) -> Option<&'static DpmClock> {
        self.version()?.dpm.iter().find(|c| c.id == clk)
    }

    /// Current soft (min, max) of a clock id.
    pub fn soft_limits(&self, clk: u32) -> Option<(u32, u32)> {
        self.soft
            .iter()
            .find(|s| s.0 == clk)
            .map(|&(_, lo, hi)| (lo, hi))
    }

    /// The register (`MP1_SMN_C2PMSG_n`, by `n`) whose read lets a taken mode1 reset go
    /// ahead, if one is pending. The device resets after that read, or before a register
    /// access outside MP1.
    pub fn mode1_pending(&self) -> Option<u32> {
        self.mode1
    }

    /// Test hook (through [`crate::MockGpu::run_foreign_firmware`]): the firmware runs with
    /// its features enabled, as another driver leaves it.
    pub(crate) fn run_foreign_firmware(&mut self) {
        self.dead = false;
        self.boot();
        self.features_enabled = true;
    }

    fn check(&self, reg: Reg<'_>) -> Result<(), Fault> {
        if self.pf_owned {
            return Err(Fault::new(format!(
                "{}: the SMU belongs to the PF; a VF must not touch it",
                reg.name()
            )));
        }
        Ok(())
    }

    fn set_soft(&mut self, clk: u32, min: Option<u32>, max: Option<u32>) {
        if let Some(s) = self.soft.iter_mut().find(|s| s.0 == clk) {
            if let Some(m) = min {
                s.1 = m;
            }
            if let Some(m) = max {
                s.2 = m;
            }
        }
    }

    /// SetSoftMin/Max: the firmware clamps the frequency to the clock's DPM range (drivers
    /// send 0 and 0xffff to mean "lowest" and "highest"). A new minimum above the current
    /// maximum raises the maximum with it, and a new maximum below the minimum lowers the
    /// minimum (chosen: the firmware's handling of a crossed pair is not documented; this
    /// keeps min ≤ max without refusing what drivers send).
    fn soft_limit(&mut self, param: u32, is_min: bool, gfx: bool) -> Result<u32, u32> {
        let (clk, freq) = if gfx {
            (u32::MAX, param & 0xffff)
        } else {
            (param >> 16, param & 0xffff)
        };
        let Some((lo, hi)) = self.soft_limits(clk) else {
            return Err(s0::PPSMC_Result_CmdRejectedPrereq);
        };
        let (tmin, tmax) = match self.dpm(clk) {
            Some(c) => (c.levels[0], c.levels[c.levels.len() - 1]),
            None => MI300X_GFXCLK,
        };
        let freq = freq.clamp(tmin, tmax);
        if is_min {
            self.set_soft(clk, Some(freq), Some(hi.max(freq)));
        } else {
            self.set_soft(clk, Some(lo.min(freq)), Some(freq));
        }
        Ok(0)
    }

    fn write_metrics(&mut self, hw: &Hw<'_>) -> Result<u32, u32> {
        if self.driver_table == 0 {
            return Err(s0::PPSMC_Result_CmdRejectedPrereq);
        }
        self.metrics_counter = self.metrics_counter.wrapping_add(1);
        // A busy part runs each clock at its soft maximum.
        let soft = |c: u32| self.soft_limits(c).map_or(0, |s| s.1);
        let bytes = match self.mp1 {
            Some(Mp1::V13_0_0) => {
                let mut m = s0::SmuMetricsExternal_t::new_zeroed();
                let sm = &mut m.SmuMetrics;
                for c in NAVI31_DPM {
                    if let Some(slot) = sm.CurrClock.get_mut(c.id as usize) {
                        *slot = soft(c.id);
                    }
                }
                let gfx = soft(s0::PPCLK_GFXCLK) as u16;
                sm.AverageGfxclkFrequencyTarget = gfx;
                sm.AverageGfxclkFrequencyPreDs = gfx;
                sm.AverageGfxclkFrequencyPostDs = gfx;
                sm.AverageMemclkFrequencyPreDs = soft(s0::PPCLK_UCLK) as u16;
                sm.AverageMemclkFrequencyPostDs = soft(s0::PPCLK_UCLK) as u16;
                sm.AverageFclkFrequencyPreDs = soft(s0::PPCLK_FCLK) as u16;
                sm.AverageFclkFrequencyPostDs = soft(s0::PPCLK_FCLK) as u16;
                sm.MetricsCounter = self.metrics_counter;
                sm.AverageSocketPower = idle::NAVI31_POWER_W as u16;
                sm.dGPU_W_MAX = V13_0_0.ppt.1 as u16;
                sm.AvgTemperature[s0::TEMP_EDGE as usize] = idle::EDGE_C as u16;
                sm.AvgTemperature[s0::TEMP_HOTSPOT as usize] = idle::HOTSPOT_C as u16;
                sm.AvgTemperature[s0::TEMP_MEM as usize] = idle::MEM_C as u16;
                sm.AvgTemperature[s0::TEMP_VR_GFX as usize] = idle::VR_C as u16;
                sm.AverageGfxActivity = idle::GFX_BUSY_PCT as u16;
                sm.AverageUclkActivity = idle::MEM_BUSY_PCT as u16;
                sm.AvgFanRpm = idle::FAN_RPM;
                sm.AvgFanPwm = idle::FAN_PWM_PCT;
                m.as_bytes().to_vec()
            }
            Some(Mp1::V14_0_2) => {
                let mut m = s14::SmuMetricsExternal_t::new_zeroed();
                let sm = &mut m.SmuMetrics;
                for c in NAVI4X_DPM {
                    if let Some(slot) = sm.CurrClock.get_mut(c.id as usize) {
                        *slot = soft(c.id);
                    }
                }
                let gfx = soft(s14::PPCLK_GFXCLK) as u16;
                sm.AverageGfxclkFrequencyTarget = gfx;
                sm.AverageGfxclkFrequencyPreDs = gfx;
                sm.AverageGfxclkFrequencyPostDs = gfx;
                sm.AverageMemclkFrequencyPreDs = soft(s14::PPCLK_UCLK) as u16;
                sm.AverageMemclkFrequencyPostDs = soft(s14::PPCLK_UCLK) as u16;
                sm.AverageFclkFrequencyPreDs = soft(s14::PPCLK_FCLK) as u16;
                sm.AverageFclkFrequencyPostDs = soft(s14::PPCLK_FCLK) as u16;
                sm.MetricsCounter = self.metrics_counter;
                sm.AverageSocketPower = idle::NAVI31_POWER_W as u16;
                sm.dGPU_W_MAX = V14_0_2.ppt.1 as u16;
                sm.AvgTemperature[s14::TEMP_EDGE as usize] = idle::EDGE_C as u16;
                sm.AvgTemperature[s14::TEMP_HOTSPOT as usize] = idle::HOTSPOT_C as u16;
                sm.AvgTemperature[s14::TEMP_MEM as usize] = idle::MEM_C as u16;
                sm.AvgTemperature[s14::TEMP_VR_GFX as usize] = idle::VR_C as u16;
                sm.AverageGfxActivity = idle::GFX_BUSY_PCT as u16;
                sm.AverageUclkActivity = idle::MEM_BUSY_PCT as u16;
                sm.AvgFanRpm = idle::FAN_RPM;
                sm.AvgFanPwm = idle::FAN_PWM_PCT;
                m.as_bytes().to_vec()
            }
            Some(Mp1::V13_0_6) => {
                let mut m = s6::MetricsTableX_t::new_zeroed();
                let table = |levels: &[u32]| {
                    let mut t = [0u32; 4];
                    for (slot, l) in t.iter_mut().zip(levels) {
                        *slot = q10(*l);
                    }
                    t
                };
                let levels = |clk| self.dpm(clk).map_or(&[][..], |c| c.levels);
                m.AccumulationCounter = self.metrics_counter;
                m.MaxSocketTemperature = q10(idle::HOTSPOT_C);
                m.MaxHbmTemperature = q10(idle::MEM_C);
                m.MaxVrTemperature = q10(idle::VR_C);
                m.SocketPowerLimit = q10(self.ppt_limit);
                m.MaxSocketPowerLimit = q10(V13_0_6.ppt.1);
                m.SocketPower = q10(idle::MI300X_POWER_W);
                m.GfxclkFrequencyLimit = q10(MI300X_GFXCLK.1);
                m.MinGfxclkFrequency = q10(MI300X_GFXCLK.0);
                m.MaxGfxclkFrequency = q10(MI300X_GFXCLK.1);
                let gfx = q10(soft(u32::MAX));
                for f in m.GfxclkFrequency.iter_mut().take(self.xccs) {
                    *f = gfx;
                }
                for f in m.SocclkFrequency.iter_mut().take(self.aids) {
                    *f = q10(soft(clk_13_0_6::SOCCLK));
                }
                m.UclkFrequency = q10(soft(clk_13_0_6::UCLK));
                m.FclkFrequency = q10(soft(clk_13_0_6::FCLK));
                m.FclkFrequencyTable = table(levels(clk_13_0_6::FCLK));
                m.UclkFrequencyTable = table(levels(clk_13_0_6::UCLK));
                m.SocclkFrequencyTable = table(levels(clk_13_0_6::SOCCLK));
                m.SocketGfxBusy = q10(idle::GFX_BUSY_PCT);
                m.DramBandwidthUtilization = q10(idle::MEM_BUSY_PCT);
                m.as_bytes().to_vec()
            }
            None => return Err(s0::PPSMC_Result_Failed),
        };
        mem_write(hw, self.driver_table, &bytes).map_err(|_| s0::PPSMC_Result_Failed)?;
        Ok(0)
    }

    fn dpm_by_index(&self, param: u32) -> Result<u32, u32> {
        let (clk, idx) = (param >> 16, param & 0xffff);
        let Some(c) = self.dpm(clk) else {
            return Err(s0::PPSMC_Result_CmdRejectedPrereq);
        };
        if idx == 0xff {
            return Ok(c.levels.len() as u32);
        }
        c.levels
            .get(idx as usize)
            .copied()
            .ok_or(s0::PPSMC_Result_Failed)
    }

    /// The answer to one message: Ok(result) or Err(response code); Fault if unknown.
    fn handle(&mut self, hw: &Hw<'_>, msg: u32, param: u32) -> Result<Result<u32, u32>, Fault> {
        let Some(v) = self.version() else {
            return Err(Fault::new(format!(
                "message {msg:#x}: the SMU model has no table for this MP1 version"
            )));
        };
        let on = u32::from(self.features_enabled) * u32::MAX;
        let r = match self.mp1 {
            Some(Mp1::V13_0_0) => match msg {
                s0::PPSMC_MSG_TestMessage => Ok(param.wrapping_add(1)),
                s0::PPSMC_MSG_GetSmuVersion => Ok(v.smu_version),
                s0::PPSMC_MSG_GetDriverIfVersion => Ok(v.driver_if),
                s0::PPSMC_MSG_SetAllowedFeaturesMaskLow
                | s0::PPSMC_MSG_SetAllowedFeaturesMaskHigh
                | s0::PPSMC_MSG_SetToolsDramAddrHigh
                | s0::PPSMC_MSG_SetToolsDramAddrLow
                | s0::PPSMC_MSG_SetSystemVirtualDramAddrHigh
                | s0::PPSMC_MSG_SetSystemVirtualDramAddrLow
                | s0::PPSMC_MSG_SetWorkloadMask
                | s0::PPSMC_MSG_AllowGfxOff
                | s0::PPSMC_MSG_DisallowGfxOff
                | s0::PPSMC_MSG_PrepareMp1ForUnload => Ok(0),
                s0::PPSMC_MSG_EnableAllSmuFeatures => {
                    self.features_enabled = true;
                    Ok(0)
                }
                s0::PPSMC_MSG_DisableAllSmuFeatures => {
                    self.features_enabled = false;
                    Ok(0)
                }
                s0::PPSMC_MSG_GetRunningSmuFeaturesLow
                | s0::PPSMC_MSG_GetRunningSmuFeaturesHigh => Ok(on),
                s0::PPSMC_MSG_SetDriverDramAddrHigh => {
                    self.driver_table = u64::from(param) << 32 | (self.driver_table & 0xffff_ffff);
                    Ok(0)
                }
                s0::PPSMC_MSG_SetDriverDramAddrLow => {
                    self.driver_table = (self.driver_table & !0xffff_ffff) | u64::from(param);
                    Ok(0)
                }
                s0::PPSMC_MSG_TransferTableSmu2Dram if param == s0::TABLE_SMU_METRICS => {
                    self.write_metrics(hw)
                }
                s0::PPSMC_MSG_TransferTableSmu2Dram => Err(s0::PPSMC_Result_CmdRejectedPrereq),
                s0::PPSMC_MSG_GetDpmFreqByIndex => self.dpm_by_index(param),
                s0::PPSMC_MSG_GetMinDpmFreq | s0::PPSMC_MSG_GetMaxDpmFreq => {
                    match self.dpm(param >> 16) {
                        Some(c) if msg == s0::PPSMC_MSG_GetMinDpmFreq => Ok(c.levels[0]),
                        Some(c) => Ok(c.levels[c.levels.len() - 1]),
                        None => Err(s0::PPSMC_Result_CmdRejectedPrereq),
                    }
                }
                s0::PPSMC_MSG_SetSoftMinByFreq => self.soft_limit(param, true, false),
                s0::PPSMC_MSG_SetSoftMaxByFreq => self.soft_limit(param, false, false),
                s0::PPSMC_MSG_SetPptLimit => self.set_ppt(param),
                s0::PPSMC_MSG_GetPptLimit => Ok(self.ppt_limit),
                s0::PPSMC_MSG_Mode1Reset => {
                    self.mode1 = Some(90);
                    Ok(0)
                }
                _ => {
                    return Err(Fault::new(format!(
                        "message {msg:#x} (param {param:#x}) is not in the MP1 13.0.0 table the model answers"
                    )));
                }
            },
            Some(Mp1::V14_0_2) => match msg {
                s14::PPSMC_MSG_TestMessage => Ok(param.wrapping_add(1)),
                s14::PPSMC_MSG_GetSmuVersion => Ok(v.smu_version),
                s14::PPSMC_MSG_GetDriverIfVersion => Ok(v.driver_if),
                s14::PPSMC_MSG_SetAllowedFeaturesMaskLow
                | s14::PPSMC_MSG_SetAllowedFeaturesMaskHigh
                | s14::PPSMC_MSG_SetToolsDramAddrHigh
                | s14::PPSMC_MSG_SetToolsDramAddrLow
                | s14::PPSMC_MSG_SetSystemVirtualDramAddrHigh
                | s14::PPSMC_MSG_SetSystemVirtualDramAddrLow
                | s14::PPSMC_MSG_SetWorkloadMask
                | s14::PPSMC_MSG_AllowGfxOff
                | s14::PPSMC_MSG_DisallowGfxOff
                | s14::PPSMC_MSG_PrepareMp1ForUnload => Ok(0),
                s14::PPSMC_MSG_EnableAllSmuFeatures => {
                    self.features_enabled = true;
                    Ok(0)
                }
                s14::PPSMC_MSG_DisableAllSmuFeatures => {
                    self.features_enabled = false;
                    Ok(0)
                }
                s14::PPSMC_MSG_GetRunningSmuFeaturesLow
                | s14::PPSMC_MSG_GetRunningSmuFeaturesHigh => Ok(on),
                s14::PPSMC_MSG_SetDriverDramAddrHigh => {
                    self.driver_table = u64::from(param) << 32 | (self.driver_table & 0xffff_ffff);
                    Ok(0)
                }
                s14::PPSMC_MSG_SetDriverDramAddrLow => {
                    self.driver_table = (self.driver_table & !0xffff_ffff) | u64::from(param);
                    Ok(0)
                }
                s14::PPSMC_MSG_TransferTableSmu2Dram if param == s14::TABLE_SMU_METRICS => {
                    self.write_metrics(hw)
                }
                s14::PPSMC_MSG_TransferTableSmu2Dram => Err(s14::PPSMC_Result_CmdRejectedPrereq),
                s14::PPSMC_MSG_GetDpmFreqByIndex => self.dpm_by_index(param),
                s14::PPSMC_MSG_GetMinDpmFreq | s14::PPSMC_MSG_GetMaxDpmFreq => {
                    match self.dpm(param >> 16) {
                        Some(c) if msg == s14::PPSMC_MSG_GetMinDpmFreq => Ok(c.levels[0]),
                        Some(c) => Ok(c.levels[c.levels.len() - 1]),
                        None => Err(s14::PPSMC_Result_CmdRejectedPrereq),
                    }
                }
                s14::PPSMC_MSG_SetSoftMinByFreq => self.soft_limit(param, true, false),
                s14::PPSMC_MSG_SetSoftMaxByFreq => self.soft_limit(param, false, false),
                s14::PPSMC_MSG_SetPptLimit => self.set_ppt(param),
                s14::PPSMC_MSG_GetPptLimit => Ok(self.ppt_limit),
                _ => {
                    return Err(Fault::new(format!(
                        "message {msg:#x} (param {param:#x}) is not in the MP1 14.0.2 table the model answers"
                    )));
                }
            },
            Some(Mp1::V13_0_6) => match msg {
                s6::PPSMC_MSG_TestMessage => Ok(param.wrapping_add(1)),
                s6::PPSMC_MSG_GetSmuVersion => Ok(v.smu_version),
                s6::PPSMC_MSG_GetDriverIfVersion => Ok(v.driver_if),
                s6::PPSMC_MSG_GetMetricsVersion => Ok(s6::SMU_METRICS_TABLE_VERSION),
                s6::PPSMC_MSG_SetToolsDramAddrHigh
                | s6::PPSMC_MSG_SetToolsDramAddrLow
                | s6::PPSMC_MSG_SetSystemVirtualDramAddrHigh
                | s6::PPSMC_MSG_SetSystemVirtualDramAddrLow
                | s6::PPSMC_MSG_PrepareForDriverUnload => Ok(0),
                s6::PPSMC_MSG_EnableAllSmuFeatures => {
                    self.features_enabled = true;
                    Ok(0)
                }
                s6::PPSMC_MSG_DisableAllSmuFeatures => {
                    self.features_enabled = false;
                    Ok(0)
                }
                s6::PPSMC_MSG_GetEnabledSmuFeaturesLow
                | s6::PPSMC_MSG_GetEnabledSmuFeaturesHigh => Ok(on),
                s6::PPSMC_MSG_SetDriverDramAddrHigh => {
                    self.driver_table = u64::from(param) << 32 | (self.driver_table & 0xffff_ffff);
                    Ok(0)
                }
                s6::PPSMC_MSG_SetDriverDramAddrLow => {
                    self.driver_table = (self.driver_table & !0xffff_ffff) | u64::from(param);
                    Ok(0)
                }
                s6::PPSMC_MSG_GetMetricsTable => self.write_metrics(hw),
                s6::PPSMC_MSG_GetDpmFreqByIndex => self.dpm_by_index(param),
                s6::PPSMC_MSG_GetMinDpmFreq | s6::PPSMC_MSG_GetMaxDpmFreq => {
                    match self.dpm(param >> 16) {
                        Some(c) if msg == s6::PPSMC_MSG_GetMinDpmFreq => Ok(c.levels[0]),
                        Some(c) => Ok(c.levels[c.levels.len() - 1]),
                        None => Err(s6::PPSMC_Result_CmdRejectedPrereq),
                    }
                }
                s6::PPSMC_MSG_GetMinGfxDpmFreq => Ok(MI300X_GFXCLK.0),
                s6::PPSMC_MSG_GetMaxGfxDpmFreq => Ok(MI300X_GFXCLK.1),
                s6::PPSMC_MSG_SetSoftMinByFreq => self.soft_limit(param, true, false),
                s6::PPSMC_MSG_SetSoftMaxByFreq => self.soft_limit(param, false, false),
                s6::PPSMC_MSG_SetSoftMinGfxClk => self.soft_limit(param, true, true),
                s6::PPSMC_MSG_SetSoftMaxGfxClk => self.soft_limit(param, false, true),
                s6::PPSMC_MSG_SetPptLimit => self.set_ppt(param),
                s6::PPSMC_MSG_GetPptLimit => Ok(self.ppt_limit),
                s6::PPSMC_MSG_GfxDriverReset
                    if param == s6::PPSMC_RESET_TYPE_DRIVER_MODE_1_RESET =>
                {
                    self.mode1 = Some(90);
                    Ok(0)
                }
                s6::PPSMC_MSG_GfxDriverReset => Err(s6::PPSMC_Result_CmdRejectedPrereq),
                s6::PPSMC_MSG_QueryValidMcaCount => Ok(self.aca[0].len() as u32),
                s6::PPSMC_MSG_QueryValidMcaCeCount => Ok(self.aca[1].len() as u32),
                s6::PPSMC_MSG_McaBankDumpDW | s6::PPSMC_MSG_McaBankCeDumpDW => {
                    // param: bank << 16 | byte offset of the dword within the bank.
                    let kind = usize::from(msg == s6::PPSMC_MSG_McaBankCeDumpDW);
                    let (bank, byte) = ((param >> 16) as usize, (param & 0xffff) as usize);
                    match self.aca[kind].get(bank) {
                        Some(regs) if byte % 4 == 0 && byte < 64 => {
                            let r = regs[byte / 8];
                            Ok(if byte % 8 == 0 {
                                r as u32
                            } else {
                                (r >> 32) as u32
                            })
                        }
                        _ => Err(s6::PPSMC_Result_CmdRejectedPrereq),
                    }
                }
                _ => {
                    return Err(Fault::new(format!(
                        "message {msg:#x} (param {param:#x}) is not in the MP1 13.0.6 table the model answers"
                    )));
                }
            },
            None => Err(s0::PPSMC_Result_Failed),
        };
        Ok(r)
    }

    fn set_ppt(&mut self, watts: u32) -> Result<u32, u32> {
        let max = self.version().map_or(0, |v| v.ppt.1);
        if watts == 0 || watts > max {
            return Err(s0::PPSMC_Result_Failed);
        }
        self.ppt_limit = watts;
        Ok(0)
    }

    fn message(&mut self, hw: &mut Hw<'_>, msg: u32) -> Result<(), Fault> {
        if hw.get(RegIp::Mp, "MP1_SMN_C2PMSG_90", 0) != 0 {
            // Every proven driver clears it first; no source says PMFW refuses the message.
            hw.warn(format!(
                "message {msg:#x} written without clearing C2PMSG_90 (the response) first"
            ));
        }
        if self.pending.is_some() {
            return Err(Fault::new(format!(
                "message {msg:#x} while the previous message is unanswered"
            )));
        }
        // A dead SMU comes back once the PSP's sOS runs again (it loads or restarts PMFW).
        if self.dead && hw.get(RegIp::Mp, &super::psp::c2pmsg(hw, 81), 0) != 0 {
            self.dead = false;
            self.boot();
        }
        let param = hw.get(RegIp::Mp, "MP1_SMN_C2PMSG_82", 0);
        let r = self.handle(hw, msg, param)?;
        let (mut response, result) = match r {
            Ok(res) => (s0::PPSMC_Result_OK, res),
            Err(code) => (code, param),
        };
        if let Some(code) = self.faults.error_response {
            response = code;
        }
        self.log.push(SmuMessage {
            msg,
            param,
            response,
            result,
        });
        if self.dead || self.faults.no_answer {
            // Firmware that does not answer does not reset the ASIC either.
            self.mode1 = None;
            return Ok(());
        }
        self.pending = Some(Answer {
            response,
            result,
            polls: self.faults.late_polls,
        });
        if self.faults.late_polls == 0 {
            self.deliver(hw);
        }
        Ok(())
    }

    fn deliver(&mut self, hw: &mut Hw<'_>) {
        if let Some(a) = self.pending.take() {
            hw.set(RegIp::Mp, "MP1_SMN_C2PMSG_82", 0, a.result);
            hw.set(RegIp::Mp, "MP1_SMN_C2PMSG_90", 0, a.response);
        }
    }

    /// The debug channel's request (message in `C2PMSG_75`, argument in `C2PMSG_53`), taken
    /// once message and cleared response are in place; answered at `C2PMSG_54`.
    fn debug_message(&mut self, hw: &mut Hw<'_>) -> Result<(), Fault> {
        let msg = hw.get(RegIp::Mp, "MP1_SMN_C2PMSG_75", 0);
        if msg != DEBUG_MSG_MODE1_RESET {
            // A limit of the model, not of the hardware: PMFW has other debug messages.
            return Err(Fault::new(format!(
                "debug channel message {msg:#x}: only mode1 reset ({DEBUG_MSG_MODE1_RESET}) is modelled"
            )));
        }
        let param = hw.get(RegIp::Mp, "MP1_SMN_C2PMSG_53", 0);
        let answers = !self.dead && !self.faults.no_answer;
        self.log.push(SmuMessage {
            msg: msg | 0x8000_0000,
            param,
            response: u32::from(answers) * s0::PPSMC_Result_OK,
            result: 0,
        });
        if answers {
            hw.set(RegIp::Mp, "MP1_SMN_C2PMSG_54", 0, s0::PPSMC_Result_OK);
            self.mode1 = Some(54);
        }
        Ok(())
    }
}

fn reg_num(reg: Reg<'_>) -> Option<u32> {
    reg.name()
        .strip_prefix("MP1_SMN_C2PMSG_")
        .and_then(|s| s.parse().ok())
}

impl IpModel for Smu {
    fn read(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>) -> Result<u32, Fault> {
        self.check(reg)?;
        if reg_num(reg) == Some(90)
            && let Some(a) = &mut self.pending
        {
            if a.polls == 0 {
                self.deliver(hw);
            } else {
                a.polls -= 1;
            }
        }
        Ok(hw.regs.get(reg.id))
    }

    fn write(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>, value: u32) -> Result<(), Fault> {
        self.check(reg)?;
        match reg_num(reg) {
            Some(66) => return self.message(hw, value),
            // 14.0.2 has no Mode1Reset message: it takes mode1 on the debug channel too.
            Some(n @ (54 | 75)) if matches!(self.mp1, Some(Mp1::V13_0_0 | Mp1::V14_0_2)) => {
                hw.regs.set(reg.id, value);
                if n == 75 {
                    self.debug_fresh = true;
                }
                let cleared = hw.get(RegIp::Mp, "MP1_SMN_C2PMSG_54", 0) == 0;
                if self.debug_fresh && cleared {
                    self.debug_fresh = false;
                    return self.debug_message(hw);
                }
                return Ok(());
            }
            _ => {}
        }
        hw.regs.set(reg.id, value);
        Ok(())
    }

    fn reset(&mut self, kind: ResetKind) {
        self.pending = None;
        self.debug_fresh = false;
        self.mode1 = None;
        self.boot();
        // After mode1 the PMFW is gone until the PSP brings the firmware back; an FLR of
        // the function leaves it running.
        if kind == ResetKind::Mode1 {
            self.dead = true;
        }
    }
}
