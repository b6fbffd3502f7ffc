//! The SMU model driven through BAR5 as a driver would: message tables per MP1 version, real
//! answers, metrics in VRAM, mode1 reset, fault injection.

use std::sync::Arc;

use am_autogen::hwid::{GC_HWID, MP0_HWID, MP1_HWID};
use am_autogen::regs::{IpVersion, RegIp, table};
use am_autogen::smu::{v13_0_0 as s0, v13_0_6 as s6, v14_0_2 as s14};
use am_driver::{Bar, PciDevice};
use am_mock::MockGpu;
use am_mock::ip::gmc::FB_BASE;
use am_mock::ip::smu::clk_13_0_6;
use zerocopy::FromBytes;

const TABLE: u64 = 0x0040_0000;
const POLLS: usize = 50;

struct Drv {
    gpu: MockGpu,
    mmio: Arc<dyn Bar>,
    vram: Arc<dyn Bar>,
}

impl Drv {
    fn new(gpu: &MockGpu) -> Self {
        let dev = gpu.open();
        Self {
            gpu: gpu.clone(),
            mmio: dev.bar(5).unwrap(),
            vram: dev.bar(0).unwrap(),
        }
    }

    /// BAR5 byte offset of an `MP1_*` register: the MP table of the profile's MP0 instance
    /// (MP 14.0.3 is served by the 14.0.2 table) at the MP1 instance's bases.
    fn reg(&self, name: &str) -> u64 {
        let t = self.gpu.profile().instances(MP0_HWID).next().unwrap().regs;
        let t = t.unwrap();
        let r = table(t.ip, t.version).unwrap().by_name(name).unwrap();
        let i = self.gpu.profile().instances(MP1_HWID).next().unwrap();
        (i.bases[usize::from(r.base_idx())] + u64::from(r.offset())) * 4
    }

    fn wr(&self, n: u32, v: u32) -> am_driver::Result<()> {
        self.mmio
            .write32(self.reg(&format!("MP1_SMN_C2PMSG_{n}")), v)
    }

    fn rd(&self, n: u32) -> am_driver::Result<u32> {
        self.mmio.read32(self.reg(&format!("MP1_SMN_C2PMSG_{n}")))
    }

    /// One message: Ok((response, result)) or Err on a violation or a timeout.
    fn msg(&self, msg: u32, param: u32) -> Result<(u32, u32), String> {
        self.wr(90, 0).map_err(|e| e.to_string())?;
        self.wr(82, param).map_err(|e| e.to_string())?;
        self.wr(66, msg).map_err(|e| e.to_string())?;
        for _ in 0..POLLS {
            let r = self.rd(90).map_err(|e| e.to_string())?;
            if r != 0 {
                return Ok((r, self.rd(82).unwrap()));
            }
        }
        Err(format!("timeout on message {msg:#x}"))
    }

    fn ok(&self, msg: u32, param: u32) -> u32 {
        let (resp, result) = self.msg(msg, param).unwrap();
        assert_eq!(resp, 1, "message {msg:#x}");
        result
    }
}

#[test]
fn navi31_version_and_dpm_levels() {
    let gpu = MockGpu::new("navi31").unwrap();
    let d = Drv::new(&gpu);
    assert_eq!(d.ok(s0::PPSMC_MSG_GetSmuVersion, 0), 0x004e_4a00);
    assert_eq!(
        d.ok(s0::PPSMC_MSG_GetDriverIfVersion, 0),
        s0::SMU13_0_0_DRIVER_IF_VERSION
    );
    let gfx = s0::PPCLK_GFXCLK << 16;
    assert_eq!(d.ok(s0::PPSMC_MSG_GetDpmFreqByIndex, gfx | 0xff), 3);
    let levels: Vec<u32> = (0..3)
        .map(|i| d.ok(s0::PPSMC_MSG_GetDpmFreqByIndex, gfx | i))
        .collect();
    assert_eq!(levels, [500, 1500, 2500]);
    let uclk = s0::PPCLK_UCLK << 16;
    assert_eq!(d.ok(s0::PPSMC_MSG_GetDpmFreqByIndex, uclk | 0xff), 4);
    // Soft limits inside the table are taken as they are.
    assert_eq!(d.ok(s0::PPSMC_MSG_SetSoftMaxByFreq, gfx | 2000), 0);
    assert_eq!(
        gpu.with_smu(|s| s.soft_limits(s0::PPCLK_GFXCLK)),
        Some((500, 2000))
    );
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
}

/// Drivers written for hardware send 0 and 0xffff to mean "lowest" and "highest": the
/// firmware clamps a soft limit outside the DPM range to it instead of failing.
#[test]
fn soft_limits_outside_the_dpm_range_are_clamped() {
    let gpu = MockGpu::new("navi31").unwrap();
    let d = Drv::new(&gpu);
    let gfx = s0::PPCLK_GFXCLK << 16;
    let soft = || gpu.with_smu(|s| s.soft_limits(s0::PPCLK_GFXCLK));
    assert_eq!(d.ok(s0::PPSMC_MSG_SetSoftMaxByFreq, gfx | 0xffff), 0);
    assert_eq!(d.ok(s0::PPSMC_MSG_SetSoftMinByFreq, gfx), 0);
    assert_eq!(soft(), Some((500, 2500)));
    // "Highest" as the minimum pins the clock at the top level, maximum included.
    assert_eq!(d.ok(s0::PPSMC_MSG_SetSoftMaxByFreq, gfx | 1500), 0);
    assert_eq!(d.ok(s0::PPSMC_MSG_SetSoftMinByFreq, gfx | 0xffff), 0);
    assert_eq!(soft(), Some((2500, 2500)));
    // "Lowest" as the maximum brings the minimum down with it.
    assert_eq!(d.ok(s0::PPSMC_MSG_SetSoftMaxByFreq, gfx), 0);
    assert_eq!(soft(), Some((500, 500)));
    let mi = MockGpu::new("mi300x").unwrap();
    let d = Drv::new(&mi);
    assert_eq!(d.ok(s6::PPSMC_MSG_SetSoftMaxGfxClk, 0xffff), 0);
    assert_eq!(d.ok(s6::PPSMC_MSG_SetSoftMinGfxClk, 0), 0);
    assert_eq!(mi.with_smu(|s| s.soft_limits(u32::MAX)), Some((500, 2100)));
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
    assert!(mi.violations().is_empty(), "{:?}", mi.violations());
}

#[test]
fn navi31_power_limit() {
    let gpu = MockGpu::new("navi31").unwrap();
    let d = Drv::new(&gpu);
    // Power limit.
    assert_eq!(d.ok(s0::PPSMC_MSG_GetPptLimit, 0), 355);
    d.ok(s0::PPSMC_MSG_SetPptLimit, 300);
    assert_eq!(d.ok(s0::PPSMC_MSG_GetPptLimit, 0), 300);
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
}

#[test]
fn message_of_the_other_version_is_a_violation() {
    // GetMetricsTable (9) exists on 13.0.6 only; on 13.0.0 id 9 is EnableSmuFeaturesHigh,
    // which the model does not answer.
    let gpu = MockGpu::new("navi31").unwrap();
    let d = Drv::new(&gpu);
    let err = d.msg(s6::PPSMC_MSG_GetMetricsTable, 0).unwrap_err();
    assert!(err.contains("not in the MP1 13.0.0 table"), "{err}");
    let gpu = MockGpu::new("mi300x").unwrap();
    let d = Drv::new(&gpu);
    // Mode1Reset (47) is 13.0.0's; on 13.0.6 id 47 is TriggerVFFLR, which a PF never sends.
    let err = d.msg(s0::PPSMC_MSG_Mode1Reset, 0).unwrap_err();
    assert!(err.contains("not in the MP1 13.0.6 table"), "{err}");
}

#[test]
fn navi31_metrics_land_in_the_driver_table() {
    let gpu = MockGpu::new("navi31").unwrap();
    let d = Drv::new(&gpu);
    let mc = FB_BASE + TABLE;
    d.ok(s0::PPSMC_MSG_SetDriverDramAddrHigh, (mc >> 32) as u32);
    d.ok(s0::PPSMC_MSG_SetDriverDramAddrLow, mc as u32);
    d.ok(s0::PPSMC_MSG_EnableAllSmuFeatures, 0);
    d.ok(
        s0::PPSMC_MSG_SetSoftMaxByFreq,
        (s0::PPCLK_GFXCLK << 16) | 1500,
    );
    d.ok(s0::PPSMC_MSG_TransferTableSmu2Dram, s0::TABLE_SMU_METRICS);
    let mut buf = vec![0u8; size_of::<s0::SmuMetricsExternal_t>()];
    d.vram.read_bytes(TABLE, &mut buf).unwrap();
    let m = s0::SmuMetricsExternal_t::read_from_bytes(&buf).unwrap();
    assert_eq!(m.SmuMetrics.MetricsCounter, 1);
    assert_eq!(m.SmuMetrics.CurrClock[s0::PPCLK_GFXCLK as usize], 1500);
    assert_eq!(m.SmuMetrics.AverageGfxclkFrequencyTarget, 1500);
}

/// What a GC 12 driver sends on boot (`smu_v14_0_2`): version checks, the driver table,
/// features, DPM levels, soft limits and the metrics table, on both RDNA4 profiles (MP1
/// 14.0.3 on navi48, 14.0.2 on navi44: one message table).
#[test]
fn navi4x_boot_messages_answer_from_the_14_0_2_table() {
    for profile in ["navi48", "navi44"] {
        let gpu = MockGpu::new(profile).unwrap();
        let d = Drv::new(&gpu);
        assert_eq!(d.ok(s14::PPSMC_MSG_TestMessage, 41), 42, "{profile}");
        assert_eq!(d.ok(s14::PPSMC_MSG_GetSmuVersion, 0), 0x0068_1400);
        assert_eq!(d.ok(s14::PPSMC_MSG_GetDriverIfVersion, 0), 0x2e);
        let mc = FB_BASE + TABLE;
        d.ok(s14::PPSMC_MSG_SetDriverDramAddrHigh, (mc >> 32) as u32);
        d.ok(s14::PPSMC_MSG_SetDriverDramAddrLow, mc as u32);
        assert_eq!(d.ok(s14::PPSMC_MSG_GetRunningSmuFeaturesLow, 0), 0);
        d.ok(s14::PPSMC_MSG_EnableAllSmuFeatures, 0);
        assert_eq!(
            d.ok(s14::PPSMC_MSG_GetRunningSmuFeaturesLow, 0),
            u32::MAX,
            "{profile}: features on after EnableAllSmuFeatures"
        );
        let gfx = s14::PPCLK_GFXCLK << 16;
        assert_eq!(d.ok(s14::PPSMC_MSG_GetDpmFreqByIndex, gfx | 0xff), 3);
        assert_eq!(d.ok(s14::PPSMC_MSG_GetMaxDpmFreq, gfx), 2970);
        d.ok(s14::PPSMC_MSG_SetSoftMaxByFreq, gfx | 2000);
        assert_eq!(d.ok(s14::PPSMC_MSG_GetPptLimit, 0), 304);
        d.ok(s14::PPSMC_MSG_TransferTableSmu2Dram, s14::TABLE_SMU_METRICS);
        let mut buf = vec![0u8; size_of::<s14::SmuMetricsExternal_t>()];
        d.vram.read_bytes(TABLE, &mut buf).unwrap();
        let m = s14::SmuMetricsExternal_t::read_from_bytes(&buf).unwrap();
        assert_eq!(m.SmuMetrics.MetricsCounter, 1, "{profile}");
        assert_eq!(m.SmuMetrics.CurrClock[s14::PPCLK_GFXCLK as usize], 2000);
        assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
    }
}

#[test]
fn navi48_refuses_a_message_its_model_does_not_answer() {
    let gpu = MockGpu::new("navi48").unwrap();
    let d = Drv::new(&gpu);
    let err = d.msg(s14::PPSMC_MSG_Mode3Reset, 0).unwrap_err();
    assert!(err.contains("not in the MP1 14.0.2 table"), "{err}");
}

#[test]
fn mi300x_answers_its_own_table() {
    let gpu = MockGpu::new("mi300x").unwrap();
    let d = Drv::new(&gpu);
    assert_eq!(d.ok(s6::PPSMC_MSG_GetSmuVersion, 0), 0x0055_4000);
    let socclk = clk_13_0_6::SOCCLK << 16;
    assert_eq!(d.ok(s6::PPSMC_MSG_GetDpmFreqByIndex, socclk | 0xff), 4);
    assert_eq!(d.ok(s6::PPSMC_MSG_GetDpmFreqByIndex, socclk | 3), 1143);
    assert_eq!(d.ok(s6::PPSMC_MSG_GetMaxGfxDpmFreq, 0), 2100);
    let mc = FB_BASE + TABLE;
    d.ok(s6::PPSMC_MSG_SetDriverDramAddrHigh, (mc >> 32) as u32);
    d.ok(s6::PPSMC_MSG_SetDriverDramAddrLow, mc as u32);
    d.ok(s6::PPSMC_MSG_GetMetricsTable, 0);
    let mut buf = vec![0u8; size_of::<s6::MetricsTableX_t>()];
    d.vram.read_bytes(TABLE, &mut buf).unwrap();
    let m = s6::MetricsTableX_t::read_from_bytes(&buf).unwrap();
    assert_eq!(
        (m.AccumulationCounter, m.SocketPowerLimit),
        (1, 750 << 10),
        "SocketPowerLimit is Q10 watts"
    );
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
}

fn scratch7(gpu: &MockGpu) -> u64 {
    let r = table(RegIp::Gc, IpVersion::new(11, 0, 0))
        .unwrap()
        .by_name("SCRATCH_REG7")
        .unwrap();
    let i = gpu.profile().instances(GC_HWID).next().unwrap();
    (i.bases[usize::from(r.base_idx())] + u64::from(r.offset())) * 4
}

#[test]
fn navi31_mode1_reset_kills_firmware_and_keeps_scratch() {
    let gpu = MockGpu::new("navi31").unwrap();
    let d = Drv::new(&gpu);
    d.mmio.write32(scratch7(&gpu), 0x1234).unwrap();
    let c2p81 = d.reg("MP0_SMN_C2PMSG_81");
    // Start the sOS through the bootloader so there is live firmware to kill.
    d.vram.write_bytes(0x0100_0000, &[0x5a; 4096]).unwrap();
    d.mmio
        .write32(
            d.reg("MP0_SMN_C2PMSG_36"),
            ((FB_BASE + 0x0100_0000) >> 20) as u32,
        )
        .unwrap();
    d.mmio.write32(d.reg("MP0_SMN_C2PMSG_35"), 0x20000).unwrap();
    assert_ne!(d.mmio.read32(c2p81).unwrap(), 0, "sOS alive");
    d.ok(s0::PPSMC_MSG_SetPptLimit, 300);
    // Mode1 through the debug channel (13.0.0) in Linux's order: argument, message, then the
    // cleared response. Linux does not wait for the answer: its next access finds the reset.
    d.wr(53, 0).unwrap();
    d.wr(75, am_mock::ip::smu::DEBUG_MSG_MODE1_RESET).unwrap();
    d.wr(54, 0).unwrap();
    assert!(gpu.with_smu(|s| s.alive()), "answered, not reset yet");
    assert_eq!(
        d.mmio.read32(c2p81).unwrap(),
        0,
        "the next access finds the ASIC reset: sOS dead"
    );
    assert!(!gpu.with_smu(|s| s.alive()));
    assert!(!gpu.with_psp(|p| p.sos_alive()));
    assert_eq!(d.mmio.read32(c2p81).unwrap(), 0, "sOS dead");
    assert_eq!(
        d.mmio.read32(scratch7(&gpu)).unwrap(),
        0x1234,
        "scratch kept"
    );
    // A dead SMU does not answer.
    assert!(
        d.msg(s0::PPSMC_MSG_GetSmuVersion, 0)
            .unwrap_err()
            .contains("timeout")
    );
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
}

/// `GfxDriverReset` is answered, then the ASIC resets: Linux's `smu_v13_0_6_mode1_reset`
/// waits for the answer before it sleeps.
#[test]
fn mi300x_gfx_driver_reset_is_answered_then_mode1() {
    let gpu = MockGpu::new("mi300x").unwrap();
    let d = Drv::new(&gpu);
    d.ok(s6::PPSMC_MSG_SetPptLimit, 700);
    d.wr(90, 0).unwrap();
    d.wr(82, s6::PPSMC_RESET_TYPE_DRIVER_MODE_1_RESET).unwrap();
    d.wr(66, s6::PPSMC_MSG_GfxDriverReset).unwrap();
    assert!(
        gpu.with_smu(|s| s.alive()),
        "no reset before the answer is read"
    );
    assert_eq!(d.rd(90).unwrap(), s6::PPSMC_Result_OK, "answered");
    assert!(
        !gpu.with_smu(|s| s.alive()),
        "reset once the answer was read"
    );
    assert_eq!(d.rd(90).unwrap(), 0, "registers back to their defaults");
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
}

/// The debug channel takes its request once message and cleared response are both in
/// place, in either order: tinygrad's AM clears 54 first, then writes 53 and 75 and polls
/// 54 for 1 (on real Navi 31); the ASIC resets after that read. 13.0.0 and 14.0.3 alike.
#[test]
fn debug_channel_mode1_in_tinygrads_order_is_answered_at_54_then_reset() {
    for profile in ["navi31", "navi48"] {
        let gpu = MockGpu::new(profile).unwrap();
        let d = Drv::new(&gpu);
        d.mmio.write32(scratch7(&gpu), 0x1234).unwrap();
        d.wr(54, 0).unwrap();
        d.wr(53, 0).unwrap();
        assert_eq!(d.rd(54).unwrap(), 0, "{profile}: no message yet, no answer");
        d.wr(75, am_mock::ip::smu::DEBUG_MSG_MODE1_RESET).unwrap();
        assert!(
            gpu.with_smu(|s| s.alive()),
            "{profile}: not reset before the answer"
        );
        assert_eq!(d.rd(54).unwrap(), 1, "{profile}: answered at C2PMSG_54");
        assert!(
            !gpu.with_smu(|s| s.alive()),
            "{profile}: reset after the answer"
        );
        assert_eq!(
            d.rd(54).unwrap(),
            0,
            "{profile}: registers back to their defaults"
        );
        assert_eq!(
            d.mmio.read32(scratch7(&gpu)).unwrap(),
            0x1234,
            "{profile}: scratch kept"
        );
        let last = gpu.with_smu(|s| s.log().last().cloned()).unwrap();
        assert_eq!(
            last.msg,
            0x8000_0000 | am_mock::ip::smu::DEBUG_MSG_MODE1_RESET
        );
        assert!(
            gpu.violations().is_empty(),
            "{profile}: {:?}",
            gpu.violations()
        );
    }
}

#[test]
fn never_answering_smu_times_out() {
    let gpu = MockGpu::new("navi31").unwrap();
    gpu.with_smu(|s| s.faults.no_answer = true);
    let d = Drv::new(&gpu);
    assert!(
        d.msg(s0::PPSMC_MSG_GetSmuVersion, 0)
            .unwrap_err()
            .contains("timeout")
    );
}

#[test]
fn error_response_is_given() {
    let gpu = MockGpu::new("navi31").unwrap();
    gpu.with_smu(|s| s.faults.error_response = Some(s0::PPSMC_Result_CmdRejectedBusy));
    let d = Drv::new(&gpu);
    assert_eq!(
        d.msg(s0::PPSMC_MSG_GetSmuVersion, 0).unwrap().0,
        s0::PPSMC_Result_CmdRejectedBusy
    );
}

#[test]
fn late_answer_comes_after_the_polls() {
    let gpu = MockGpu::new("navi31").unwrap();
    gpu.with_smu(|s| s.faults.late_polls = 3);
    let d = Drv::new(&gpu);
    d.wr(90, 0).unwrap();
    d.wr(66, s0::PPSMC_MSG_GetSmuVersion).unwrap();
    let mut polls = 0;
    while d.rd(90).unwrap() == 0 {
        polls += 1;
        assert!(polls < POLLS);
    }
    assert_eq!(polls, 3);
    // A second message before the first is answered is a violation.
    gpu.with_smu(|s| s.faults.late_polls = 10);
    d.wr(90, 0).unwrap();
    d.wr(66, s0::PPSMC_MSG_GetSmuVersion).unwrap();
    assert!(d.wr(66, s0::PPSMC_MSG_GetSmuVersion).is_err());
}

#[test]
fn smu_answers_again_once_the_sos_runs_after_mode1() {
    let gpu = MockGpu::new("navi31").unwrap();
    let d = Drv::new(&gpu);
    d.ok(s0::PPSMC_MSG_SetPptLimit, 300);
    d.wr(90, 0).unwrap();
    d.wr(66, s0::PPSMC_MSG_Mode1Reset).unwrap();
    assert_eq!(
        d.rd(90).unwrap(),
        s0::PPSMC_Result_OK,
        "answered, then reset"
    );
    assert!(
        d.msg(s0::PPSMC_MSG_GetSmuVersion, 0)
            .unwrap_err()
            .contains("timeout")
    );
    // The next driver boots the sOS again; the SMU restarts with its power-on state.
    d.vram.write_bytes(0x0100_0000, &[0x5a; 4096]).unwrap();
    d.mmio
        .write32(
            d.reg("MP0_SMN_C2PMSG_36"),
            ((FB_BASE + 0x0100_0000) >> 20) as u32,
        )
        .unwrap();
    d.mmio.write32(d.reg("MP0_SMN_C2PMSG_35"), 0x20000).unwrap();
    assert_eq!(d.ok(s0::PPSMC_MSG_GetPptLimit, 0), 355);
    assert!(gpu.with_smu(|s| s.alive()));
}
