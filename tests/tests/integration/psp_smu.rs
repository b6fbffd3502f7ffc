//! PSP and SMU bring-up on the mock with the real firmware of Debian's package: the loads
//! match the firmware plan, faults end in errors that name the command or message, clocks,
//! power limit, metrics and mode1 reset reach the SMU.
//!
//! Mock device indices 100..149 belong to this file.

use std::path::PathBuf;
use std::time::Duration;

use am_autogen::smu::{v13_0_0 as s0, v13_0_6 as s6};
use am_driver::ip::smu::{ClockLevel, Metrics};
use am_driver::{AmDevice, BootKind, Error, ErrorKind, Options};
use am_firmware::locate::sha256;
use am_firmware::{FirmwareSet, IpVersions, Locator, PlanOptions, PspStep};
use am_mock::MockGpu;
use am_mock::ip::psp::{BL_BUFFER, PspLoad};
use am_mock::ip::smu::clk_13_0_6;

const FIRMWARE: &str = "/lib/firmware/amdgpu";

fn locator() -> Locator {
    Locator::new(vec![PathBuf::from(FIRMWARE)])
}

/// Options of a test: the Debian firmware, no environment, no 500 ms mode1 wait.
/// The test rig's options, with firmware from the test's own locator.
fn fw_opts() -> Options {
    Options {
        firmware: locator(),
        ..am_tests::rig::opts()
    }
}

/// Options whose waits give up quickly (fault cases).
fn short_opts() -> Options {
    let mut o = fw_opts();
    o.timeouts.psp = Duration::from_millis(50);
    o.timeouts.smu = Duration::from_millis(50);
    o.timeouts.smu_alive = Duration::from_millis(20);
    o
}

fn plan(ips: IpVersions) -> am_firmware::LoadPlan {
    FirmwareSet::load(ips, &locator())
        .unwrap()
        .plan(PlanOptions::default())
        .unwrap()
}

/// What the mock's PSP must have logged for a plan (as `am fw list` prints it).
fn expected_log(plan: &am_firmware::LoadPlan) -> Vec<PspLoad> {
    plan.steps
        .iter()
        .map(|step| match step {
            PspStep::Bootloader {
                command, payload, ..
            } => {
                let bytes = payload.bytes();
                let mut buf = vec![0u8; BL_BUFFER];
                buf[..bytes.len()].copy_from_slice(bytes);
                PspLoad::Bootloader {
                    command: *command,
                    size: bytes.iter().rposition(|&b| b != 0).unwrap() + 1,
                    sha256: sha256(&buf),
                }
            }
            PspStep::LoadToc { payload } => PspLoad::LoadToc {
                size: payload.len() as u32,
                sha256: sha256(payload.bytes()),
            },
            PspStep::SetupTmr => PspLoad::SetupTmr,
            PspStep::LoadIpFw { fw_type, payload } => PspLoad::LoadIpFw {
                fw_type: *fw_type,
                size: payload.len() as u32,
                sha256: sha256(payload.bytes()),
            },
            PspStep::AutoloadRlc => PspLoad::AutoloadRlc,
        })
        .collect()
}

fn no_violations(gpu: &MockGpu) {
    let v = gpu.violations();
    assert!(v.is_empty(), "{v:#?}");
    let w = gpu.warnings();
    assert!(w.is_empty(), "warnings: {w:#?}");
}

/// The clocks the driver pins, as the mock names them: (clock id, DPM min, DPM max).
fn pinned_clocks(gpu: &MockGpu, mi300x: bool) -> Vec<(u32, u32, u32)> {
    let ids: Vec<u32> = if mi300x {
        vec![clk_13_0_6::SOCCLK, clk_13_0_6::UCLK, clk_13_0_6::FCLK]
    } else {
        vec![
            s0::PPCLK_GFXCLK,
            s0::PPCLK_SOCCLK,
            s0::PPCLK_UCLK,
            s0::PPCLK_FCLK,
        ]
    };
    let mut out: Vec<(u32, u32, u32)> = gpu.with_smu(|s| {
        ids.iter()
            .map(|&c| {
                let l = s.dpm(c).unwrap().levels;
                (c, l[0], l[l.len() - 1])
            })
            .collect()
    });
    if mi300x {
        // GFXCLK of 13.0.6 has no table: the mock keys its limits under u32::MAX, range
        // 500..2100 MHz (its GetMin/MaxGfxDpmFreq answers).
        out.push((u32::MAX, 500, 2100));
    }
    out
}

fn cold_boot(profile: &str, index: u32, ips: IpVersions) {
    let mi300x = profile == "mi300x";
    let gpu = am_mock::gpu(profile, index).unwrap();
    let pci = am_mock::open(profile, index).unwrap();
    let dev = AmDevice::open_with(pci, fw_opts()).unwrap();
    assert_eq!(dev.boot_report().kind, BootKind::Cold);
    no_violations(&gpu);

    // The PSP took exactly the plan, byte for byte; the spatial partition follows on MI300X.
    let plan = plan(ips);
    let mut want = expected_log(&plan);
    if mi300x {
        want.push(PspLoad::SpatialPartition { mode: 1 });
    }
    assert!(want.len() > 10);
    assert_eq!(gpu.with_psp(|p| p.log().to_vec()), want);
    // The boot report lists the same steps (name and size) as `am fw list`.
    let listed: Vec<(String, usize)> = plan
        .steps
        .iter()
        .map(|s| (s.name(), s.payload().map_or(0, |p| p.len())))
        .collect();
    assert_eq!(dev.boot_report().firmware, listed);
    assert_eq!(gpu.with_psp(|p| p.rlc_autoload_requested()), !mi300x);
    assert!(gpu.with_psp(|p| p.rlc_firmware_loaded()));

    // SMU: the driver table is in VRAM's MC range, every pinned clock at its top level.
    let table = gpu.with_smu(|s| s.driver_table());
    let mc = dev.ctx().mc;
    assert!(table >= mc.fb_base && table < mc.fb_top, "{table:#x}");
    let clocks = pinned_clocks(&gpu, mi300x);
    for &(clk, _, max) in &clocks {
        assert_eq!(
            gpu.with_smu(|s| s.soft_limits(clk)),
            Some((max, max)),
            "clock {clk}"
        );
    }
    dev.fini().unwrap();
    for &(clk, min, _) in &clocks {
        assert_eq!(
            gpu.with_smu(|s| s.soft_limits(clk)),
            Some((min, min)),
            "clock {clk} after fini"
        );
    }
    no_violations(&gpu);
}

#[test]
fn navi31_cold_boot_loads_the_firmware_plan_and_pins_clocks() {
    cold_boot("navi31", 100, IpVersions::NAVI31);
}

#[test]
fn mi300x_cold_boot_loads_the_firmware_plan_and_pins_clocks() {
    cold_boot("mi300x", 101, IpVersions::MI300X);
}

#[test]
fn navi48_cold_boot_loads_the_firmware_plan_and_pins_clocks() {
    cold_boot("navi48", 118, IpVersions::NAVI48);
}

#[test]
fn navi44_cold_boot_loads_the_firmware_plan_and_pins_clocks() {
    cold_boot("navi44", 119, IpVersions::NAVI44);
}

/// GC 12 starts the PFP and ME cores as well as the MEC: each program counter holds its
/// firmware's `ucode_start_addr` in dwords.
#[test]
fn gc12_boot_points_pfp_and_me_at_their_firmware() {
    use am_firmware::Role;
    use am_mock::profile::RegIp;
    let gpu = am_mock::gpu("navi48", 120).unwrap();
    let dev = AmDevice::open_with(am_mock::open("navi48", 120).unwrap(), fw_opts()).unwrap();
    let plan = plan(IpVersions::NAVI48);
    for (role, lo, hi) in [
        (
            Role::Pfp,
            "CP_PFP_PRGRM_CNTR_START",
            "CP_PFP_PRGRM_CNTR_START_HI",
        ),
        (
            Role::Me,
            "CP_ME_PRGRM_CNTR_START",
            "CP_ME_PRGRM_CNTR_START_HI",
        ),
    ] {
        let start = plan.ucode_start(role).unwrap();
        let (lo, hi) = (gpu.peek(RegIp::Gc, lo, 0), gpu.peek(RegIp::Gc, hi, 0));
        let pc = u64::from(hi.unwrap()) << 32 | u64::from(lo.unwrap());
        assert_eq!(pc, start >> 2, "{role:?}");
    }
    // Each pipe reset was toggled back off (`CP_ME_CNTL` bits 16..=21: CE, PFP, ME pipes).
    let me_cntl = gpu.peek(RegIp::Gc, "CP_ME_CNTL", 0).unwrap();
    assert_eq!(me_cntl & 0x3f_0000, 0, "CP_ME_CNTL = {me_cntl:#x}");
    dev.fini().unwrap();
    no_violations(&gpu);
}

#[test]
fn warm_boot_loads_nothing() {
    let gpu = am_mock::gpu("navi31", 102).unwrap();
    let pci = am_mock::open("navi31", 102).unwrap();
    AmDevice::open_with(pci.clone(), fw_opts())
        .unwrap()
        .fini()
        .unwrap();
    let before = gpu.with_psp(|p| p.log().len());
    let dev = AmDevice::open_with(pci, fw_opts()).unwrap();
    assert_eq!(dev.boot_report().kind, BootKind::Warm);
    assert!(dev.boot_report().firmware.is_empty());
    assert_eq!(gpu.with_psp(|p| p.log().len()), before);
    dev.fini().unwrap();
    no_violations(&gpu);
}

/// Open with faults armed before the boot; the error.
fn open_with_fault(
    profile: &str,
    index: u32,
    arm: impl FnOnce(&MockGpu),
    options: Options,
) -> Result<AmDevice, Error> {
    let gpu = am_mock::gpu(profile, index).unwrap();
    arm(&gpu);
    AmDevice::open_with(am_mock::open(profile, index).unwrap(), options)
}

#[test]
fn psp_bootloader_never_ready_times_out_naming_the_component() {
    let err = open_with_fault(
        "navi31",
        103,
        |g| g.with_psp(|p| p.faults.no_answer = true),
        short_opts(),
    )
    .unwrap_err();
    match &err {
        Error {
            kind: ErrorKind::Timeout { what, .. },
            ..
        } => {
            assert!(what.contains("PSP_BL__LOAD_KEY_DATABASE"), "{err}");
            assert!(what.contains("C2PMSG_35"), "{err}");
        }
        e => panic!("{e}"),
    }
}

#[test]
fn psp_bootloader_error_status_names_the_component() {
    let err = open_with_fault(
        "navi31",
        104,
        |g| g.with_psp(|p| p.faults.error_status = Some(0xffff_000a)),
        short_opts(),
    )
    .unwrap_err();
    match &err {
        Error {
            kind: ErrorKind::PspCommand {
                command, status, ..
            },
            ..
        } => {
            assert_eq!(command, "PSP_BL__LOAD_KEY_DATABASE", "{err}");
            assert_eq!(*status, 0xa);
        }
        e => panic!("{e}"),
    }
}

#[test]
fn psp_late_answers_within_the_timeout_boot() {
    let gpu = am_mock::gpu("navi31", 105).unwrap();
    gpu.with_psp(|p| p.faults.late_polls = 5);
    let pci = am_mock::open("navi31", 105).unwrap();
    let dev = AmDevice::open_with(pci, fw_opts()).unwrap();
    assert_eq!(dev.boot_report().kind, BootKind::Cold);
    assert_eq!(
        gpu.with_psp(|p| p.log().to_vec()),
        expected_log(&plan(IpVersions::NAVI31))
    );
    dev.fini().unwrap();
    no_violations(&gpu);
}

#[test]
fn psp_answer_later_than_the_timeout_is_a_timeout() {
    let err = open_with_fault(
        "navi31",
        106,
        |g| g.with_psp(|p| p.faults.late_polls = u32::MAX),
        short_opts(),
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error { kind: ErrorKind::Timeout { what, .. }, .. } if what.contains("PSP_BL__LOAD_KEY_DATABASE")),
        "{err}"
    );
}

/// A booted MI300X whose PSP then misbehaves: the ring command (spatial partition) fails
/// with an error naming it, and a late fence within the timeout is fine.
#[test]
fn psp_ring_command_faults_name_the_command() {
    let gpu = am_mock::gpu("mi300x", 107).unwrap();
    let mut o = fw_opts();
    o.timeouts.psp = Duration::from_millis(50);
    let mut dev = AmDevice::open_with(am_mock::open("mi300x", 107).unwrap(), o).unwrap();
    let part =
        |dev: &mut AmDevice| dev.with_psp(|ctx, soc, psp| psp.spatial_partition(ctx, soc, 1));

    gpu.with_psp(|p| p.faults.late_polls = 5);
    part(&mut dev).unwrap();

    gpu.with_psp(|p| {
        p.faults.late_polls = 0;
        p.faults.error_status = Some(0xffff_0002);
    });
    match part(&mut dev).unwrap_err() {
        Error {
            kind: ErrorKind::PspCommand {
                command, status, ..
            },
            ..
        } => {
            assert!(
                command.contains("GFX_CMD_ID_SRIOV_SPATIAL_PART"),
                "{command}"
            );
            assert_eq!(status, 0xffff_0002);
        }
        e => panic!("{e}"),
    }

    gpu.with_psp(|p| {
        p.faults.error_status = None;
        p.faults.no_answer = true;
    });
    let err = part(&mut dev).unwrap_err();
    assert!(
        matches!(&err, Error { kind: ErrorKind::Timeout { what, .. }, .. } if what.contains("PSP fence of GFX_CMD_ID_SRIOV_SPATIAL_PART")),
        "{err}"
    );
    no_violations(&gpu);
}

#[test]
fn smu_no_answer_times_out_naming_the_message() {
    let err = open_with_fault(
        "navi31",
        108,
        |g| g.with_smu(|s| s.faults.no_answer = true),
        short_opts(),
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error { kind: ErrorKind::Timeout { what, .. }, .. } if what.contains("SMU message SetDriverDramAddrHigh")),
        "{err}"
    );
}

#[test]
fn smu_error_response_names_the_message() {
    let err = open_with_fault(
        "mi300x",
        109,
        |g| g.with_smu(|s| s.faults.error_response = Some(s6::PPSMC_Result_CmdRejectedBusy)),
        short_opts(),
    )
    .unwrap_err();
    match &err {
        Error {
            kind: ErrorKind::SmuMessage {
                message, response, ..
            },
            ..
        } => {
            assert_eq!(message, "SetDriverDramAddrHigh");
            assert_eq!(*response, s6::PPSMC_Result_CmdRejectedBusy);
        }
        e => panic!("{e}"),
    }
}

#[test]
fn smu_late_answer_within_the_timeout_boots_and_later_than_it_times_out() {
    let gpu = am_mock::gpu("navi31", 110).unwrap();
    gpu.with_smu(|s| s.faults.late_polls = 3);
    // Short waits: the owed answer never comes, and `Drop` still talks to the SMU.
    let mut dev = AmDevice::open_with(am_mock::open("navi31", 110).unwrap(), short_opts()).unwrap();
    assert_eq!(dev.boot_report().kind, BootKind::Cold);
    no_violations(&gpu);

    // An answer that comes too late: the error names the message, and the next message
    // waits for the owed answer instead of writing over it.
    gpu.with_smu(|s| s.faults.late_polls = u32::MAX);
    let err = dev
        .with_smu(|ctx, smu| {
            smu.send(
                ctx,
                am_driver::ip::smu::Msg::GetPptLimit,
                0,
                Duration::from_millis(20),
            )
        })
        .unwrap_err();
    assert!(
        matches!(&err, Error { kind: ErrorKind::Timeout { what, .. }, .. } if what.contains("SMU message GetPptLimit")),
        "{err}"
    );
    let err = dev
        .with_smu(|ctx, smu| {
            smu.send(
                ctx,
                am_driver::ip::smu::Msg::GetSmuVersion,
                0,
                Duration::from_millis(20),
            )
        })
        .unwrap_err();
    assert!(
        matches!(&err, Error { kind: ErrorKind::Timeout { what, .. }, .. } if what.contains("owes the answer to GetPptLimit")),
        "{err}"
    );
    no_violations(&gpu);
}

#[test]
fn power_limit_leaves_clocks_unpinned() {
    let gpu = am_mock::gpu("navi31", 111).unwrap();
    let mut o = fw_opts();
    o.power_limit_w = Some(300);
    let mut dev = AmDevice::open_with(am_mock::open("navi31", 111).unwrap(), o).unwrap();
    let ppt = gpu.with_smu(|s| {
        s.log()
            .iter()
            .filter(|m| m.msg == s0::PPSMC_MSG_SetPptLimit)
            .map(|m| (m.param, m.response))
            .collect::<Vec<_>>()
    });
    assert_eq!(ppt, vec![(300, s0::PPSMC_Result_OK)]);
    assert_eq!(dev.with_smu(|ctx, smu| smu.power_limit(ctx)).unwrap(), 300);
    for (clk, min, max) in pinned_clocks(&gpu, false) {
        assert_eq!(gpu.with_smu(|s| s.soft_limits(clk)), Some((min, max)));
    }
    // Over the part's limit: the SMU refuses, the error names the message.
    let err = dev
        .with_smu(|ctx, smu| smu.set_power_limit(ctx, 1000))
        .unwrap_err();
    assert!(
        matches!(&err, Error { kind: ErrorKind::SmuMessage { message, param: 1000, .. }, .. } if message == "SetPptLimit"),
        "{err}"
    );
    dev.fini().unwrap();
    no_violations(&gpu);
}

#[test]
fn metrics_are_read_from_the_driver_table() {
    let gpu = am_mock::gpu("navi31", 112).unwrap();
    let mut dev = AmDevice::open_with(am_mock::open("navi31", 112).unwrap(), fw_opts()).unwrap();
    let m1 = dev.with_smu(|ctx, smu| smu.metrics(ctx)).unwrap();
    let gfxclk_mhz = |m: &Metrics| match m {
        Metrics::V13_0_0(m) => m.SmuMetrics.CurrClock[s0::PPCLK_GFXCLK as usize],
        other => panic!("navi31 metrics are 13.0.0's, not {other:?}"),
    };
    // Clocks are pinned at the top: GFXCLK 2500 MHz in the mock's table.
    assert_eq!(gfxclk_mhz(&m1), 2500);
    dev.with_smu(|ctx, smu| smu.set_clocks(ctx, ClockLevel::Min))
        .unwrap();
    let m2 = dev.with_smu(|ctx, smu| smu.metrics(ctx)).unwrap();
    assert_eq!(gfxclk_mhz(&m2), 500);
    assert_eq!(m2.counter(), m1.counter() + 1);
    dev.fini().unwrap();

    let gpu6 = am_mock::gpu("mi300x", 113).unwrap();
    let mut o = fw_opts();
    o.power_limit_w = Some(700);
    let mut dev = AmDevice::open_with(am_mock::open("mi300x", 113).unwrap(), o).unwrap();
    match dev.with_smu(|ctx, smu| smu.metrics(ctx)).unwrap() {
        // 13.0.6 reports power in Q10 fixed point.
        Metrics::V13_0_6(m) => assert_eq!(m.SocketPowerLimit, 700 << 10),
        other => panic!("{other:?}"),
    }
    dev.fini().unwrap();
    no_violations(&gpu);
    no_violations(&gpu6);
}

/// MP1 13.0.0 (navi31) and 14.0.3 (navi48) both reset through the debug channel.
#[test]
fn rdna_mode1_reset_goes_through_the_debug_channel() {
    for (profile, index) in [("navi31", 114), ("navi48", 121)] {
        let gpu = am_mock::gpu(profile, index).unwrap();
        let pci = am_mock::open(profile, index).unwrap();
        let dev = AmDevice::open_with(pci.clone(), fw_opts()).unwrap();
        dev.mode1_reset().unwrap();
        let last = gpu.with_smu(|s| s.log().last().cloned()).unwrap();
        // Debug-channel messages are logged with bit 31 set: DEBUGSMU_MSG_Mode1Reset = 2.
        assert_eq!(last.msg, 0x8000_0002, "{profile}");
        assert!(!gpu.with_smu(|s| s.alive()), "{profile}");
        assert!(!gpu.with_psp(|p| p.sos_alive()), "{profile}");
        // The next driver instance finds a reset device and boots it from the bootloader.
        let dev = AmDevice::open_with(pci, fw_opts()).unwrap();
        assert_eq!(dev.boot_report().kind, BootKind::Cold, "{profile}");
        assert!(gpu.with_smu(|s| s.alive()), "{profile}");
        dev.fini().unwrap();
        no_violations(&gpu);
    }
}

#[test]
fn mi300x_mode1_reset_is_gfx_driver_reset() {
    let gpu = am_mock::gpu("mi300x", 115).unwrap();
    let dev = AmDevice::open_with(am_mock::open("mi300x", 115).unwrap(), fw_opts()).unwrap();
    dev.mode1_reset().unwrap();
    let last = gpu.with_smu(|s| s.log().last().cloned()).unwrap();
    assert_eq!(
        (last.msg, last.param),
        (
            s6::PPSMC_MSG_GfxDriverReset,
            s6::PPSMC_RESET_TYPE_DRIVER_MODE_1_RESET
        )
    );
    assert!(!gpu.with_smu(|s| s.alive()));
    no_violations(&gpu);
}

#[test]
fn live_firmware_with_forced_reset_is_mode1_reset_then_full_boot() {
    let gpu = am_mock::gpu("navi31", 116).unwrap();
    let pci = am_mock::open("navi31", 116).unwrap();
    AmDevice::open_with(pci.clone(), fw_opts())
        .unwrap()
        .fini()
        .unwrap();
    gpu.with_psp(|p| p.take_log());
    let mut o = fw_opts();
    o.force_reset = true;
    let dev = AmDevice::open_with(pci, o).unwrap();
    assert_eq!(dev.boot_report().kind, BootKind::AfterMode1Reset);
    assert!(
        gpu.with_smu(|s| s.log().iter().any(|m| m.msg == 0x8000_0002)),
        "mode1 reset reached the SMU"
    );
    // The whole plan again, from the bootloader.
    assert_eq!(
        gpu.with_psp(|p| p.log().to_vec()),
        expected_log(&plan(IpVersions::NAVI31))
    );
    dev.fini().unwrap();
    no_violations(&gpu);
}

/// A full boot that finds the sOS and its ring alive (the SMU does not answer, so the boot
/// does not take it for foreign firmware) destroys the ring first; faults on that command
/// name it.
#[test]
fn psp_ring_destroy_faults_name_the_command() {
    let gpu = am_mock::gpu("navi31", 117).unwrap();
    let pci = am_mock::open("navi31", 117).unwrap();
    AmDevice::open_with(pci.clone(), fw_opts())
        .unwrap()
        .fini()
        .unwrap();
    assert!(gpu.with_psp(|p| p.sos_alive() && p.ring_exists()));
    gpu.with_smu(|s| s.faults.no_answer = true);
    let mut o = short_opts();
    o.force_reset = true;

    gpu.with_psp(|p| p.faults.no_answer = true);
    let err = AmDevice::open_with(pci.clone(), o.clone()).unwrap_err();
    assert!(
        matches!(&err, Error { kind: ErrorKind::Timeout { what, .. }, .. } if what.contains("GFX_CTRL_CMD_ID_DESTROY_RINGS") && what.contains("C2PMSG_64")),
        "{err}"
    );

    gpu.with_psp(|p| {
        p.faults.no_answer = false;
        p.faults.error_status = Some(0x7);
    });
    match AmDevice::open_with(pci, o).unwrap_err() {
        Error {
            kind: ErrorKind::PspCommand {
                command, status, ..
            },
            ..
        } => {
            assert_eq!(command, "GFX_CTRL_CMD_ID_DESTROY_RINGS");
            assert_eq!(status, 0x7);
        }
        e => panic!("{e}"),
    }
    no_violations(&gpu);
}
