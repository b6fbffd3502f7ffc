//! The fault matrix (docs/RELIABILITY.md): every fault the mock can inject, the error the
//! user sees, and proof that the next operation on the same device succeeds. One test per
//! row, named after it; the table in the doc lists them in this order.
//!
//! Mock device indices 400..449 belong to this file.

use std::sync::Arc;
use std::time::{Duration, Instant};

use am_autogen::smu::v13_0_6 as s6;
use am_driver::pci::remote::{RemoteOptions, RemotePciDevice, ServeOptions, serve};
use am_driver::{AmDevice, BootKind, Error, ErrorKind, Options, PciDevice};
use am_mock::MockGpu;
use am_runtime::{Arg, ComputeCommands, Device, MemKind};
use am_tests::rig::{Rig, opts};
use am_tests::runtime::{download, kernel, open, upload};
use am_tests::sdma;

/// Waits that give up quickly: the fault rows wait for answers that never come.
fn short() -> Options {
    let mut o = opts();
    o.timeouts.psp = Duration::from_millis(50);
    o.timeouts.smu = Duration::from_millis(50);
    o.timeouts.smu_alive = Duration::from_millis(20);
    o.mailbox.init_tries = 2;
    o.mailbox.init_event_timeout = Duration::from_millis(20);
    o.mailbox.event_poll = Duration::from_millis(1);
    o
}

/// What the user does after a failed boot.
#[derive(Clone, Copy)]
enum Next {
    /// Opens again.
    Open,
    /// Resets the function (FLR, what `RESET` of the remote protocol does), then opens: a
    /// firmware still owing a late answer to the failed boot's last command takes no new
    /// command from a new driver instance until it is reset (see docs/RELIABILITY.md).
    ResetAndOpen,
}

/// The device opens with `arm`'s fault and fails with an error `check` accepts; with the
/// fault cleared by `disarm`, the next open (as `next` says) boots and the device finalises
/// cleanly.
fn boot_fault_then_recovery(
    profile: &str,
    index: u32,
    arm: impl FnOnce(&MockGpu),
    check: impl FnOnce(&Error) -> bool,
    disarm: impl FnOnce(&MockGpu),
    next: Next,
) {
    let gpu = am_mock::gpu(profile, index).unwrap();
    arm(&gpu);
    let err = AmDevice::open_with(gpu.open(), short()).err().unwrap();
    assert!(check(&err), "unexpected error: {err}");
    disarm(&gpu);
    if matches!(next, Next::ResetAndOpen) {
        gpu.open().reset().unwrap();
    }
    let dev = AmDevice::open_with(gpu.open(), opts())
        .unwrap_or_else(|e| panic!("the next open after \"{err}\" failed: {e}"));
    assert_ne!(
        dev.boot_report().kind,
        BootKind::Warm,
        "a failed boot is not warm"
    );
    dev.fini().unwrap();
}

fn timeout_naming(err: &Error, what: &str) -> bool {
    matches!(err, Error { kind: ErrorKind::Timeout { what: w, .. }, .. } if w.contains(what))
}

#[test]
fn psp_no_answer() {
    boot_fault_then_recovery(
        "navi31",
        400,
        |g| g.with_psp(|p| p.faults.no_answer = true),
        |e| timeout_naming(e, "PSP_BL__LOAD_KEY_DATABASE"),
        |g| g.with_psp(|p| p.faults = Default::default()),
        Next::Open,
    );
}

#[test]
fn psp_error() {
    boot_fault_then_recovery(
        "navi31",
        401,
        |g| g.with_psp(|p| p.faults.error_status = Some(0xffff_000a)),
        |e| {
            matches!(e, Error { kind: ErrorKind::PspCommand { command, status: 0xa, .. }, .. }
                if command == "PSP_BL__LOAD_KEY_DATABASE")
        },
        |g| g.with_psp(|p| p.faults = Default::default()),
        Next::Open,
    );
}

#[test]
fn psp_late_answer() {
    boot_fault_then_recovery(
        "navi31",
        402,
        |g| g.with_psp(|p| p.faults.late_polls = u32::MAX),
        |e| timeout_naming(e, "PSP_BL__LOAD_KEY_DATABASE"),
        |g| g.with_psp(|p| p.faults = Default::default()),
        Next::ResetAndOpen,
    );
}

#[test]
fn smu_no_answer() {
    boot_fault_then_recovery(
        "navi31",
        403,
        |g| g.with_smu(|s| s.faults.no_answer = true),
        |e| timeout_naming(e, "SMU message SetDriverDramAddrHigh"),
        |g| g.with_smu(|s| s.faults = Default::default()),
        Next::Open,
    );
}

#[test]
fn smu_error() {
    boot_fault_then_recovery(
        "mi300x",
        404,
        |g| g.with_smu(|s| s.faults.error_response = Some(s6::PPSMC_Result_CmdRejectedBusy)),
        |e| {
            matches!(e, Error { kind: ErrorKind::SmuMessage { message, response, .. }, .. }
                if message == "SetDriverDramAddrHigh" && *response == s6::PPSMC_Result_CmdRejectedBusy)
        },
        |g| g.with_smu(|s| s.faults = Default::default()),
        Next::Open,
    );
}

#[test]
fn smu_late_answer() {
    boot_fault_then_recovery(
        "navi31",
        405,
        |g| g.with_smu(|s| s.faults.late_polls = u32::MAX),
        |e| timeout_naming(e, "SMU message SetDriverDramAddrHigh"),
        |g| g.with_smu(|s| s.faults = Default::default()),
        Next::ResetAndOpen,
    );
}

#[test]
fn vf_mailbox_no_answer() {
    boot_fault_then_recovery(
        "mi350x-vf",
        406,
        |g| g.with_vf_pf(|pf| pf.faults.drop_acks = u32::MAX).unwrap(),
        |e| {
            matches!(
                e,
                Error {
                    kind: ErrorKind::VfMailboxNotAcknowledged { .. },
                    ..
                }
            )
        },
        |g| g.with_vf_pf(|pf| pf.faults = Default::default()).unwrap(),
        Next::Open,
    );
}

#[test]
fn vf_mailbox_error() {
    // The PF protocol has no error answer: a PF in trouble wedges the mailbox (its ack
    // never drops), which the VF must see before it sends anything.
    boot_fault_then_recovery(
        "mi350x-vf",
        407,
        |g| g.with_vf_pf(|pf| pf.faults.ack_stuck = true).unwrap(),
        |e| {
            matches!(
                e,
                Error {
                    kind: ErrorKind::VfMailboxAckNotCleared { .. },
                    ..
                }
            )
        },
        |g| g.with_vf_pf(|pf| pf.faults = Default::default()).unwrap(),
        Next::Open,
    );
}

#[test]
fn vf_mailbox_late_answer() {
    boot_fault_then_recovery(
        "mi350x-vf",
        408,
        |g| {
            g.with_vf_pf(|pf| pf.faults.event_delay_polls = 1 << 40)
                .unwrap()
        },
        |e| {
            matches!(
                e,
                Error {
                    kind: ErrorKind::VfMailboxNoEvent { tries: 2, .. },
                    ..
                }
            )
        },
        |g| g.with_vf_pf(|pf| pf.faults = Default::default()).unwrap(),
        Next::Open,
    );
}

/// `vadd` of `n` ones and twos into a new buffer; its result.
fn vadd_runs(dev: &Device, n: usize) -> Vec<f32> {
    let (ba, bb) = (upload(dev, &vec![1f32; n]), upload(dev, &vec![2f32; n]));
    let bc = dev.alloc(4 * n as u64, MemKind::Vram).unwrap();
    let mut c = ComputeCommands::new(dev);
    c.exec(
        &kernel(dev, "vadd"),
        &[(&ba).into(), (&bb).into(), (&bc).into(), Arg::U32(n as u32)],
        [1, 1, 1],
        [256, 1, 1],
    )
    .unwrap();
    c.submit().unwrap().wait().unwrap();
    download::<f32>(dev, &bc, n)
}

#[test]
fn page_fault_in_a_dispatch() {
    let (_gpu, dev) = open("navi31");
    let n = 256usize;
    let (ba, bb) = (upload(&dev, &vec![1f32; n]), upload(&dev, &vec![2f32; n]));
    let mut c = ComputeCommands::new(&dev);
    c.exec(
        &kernel(&dev, "vadd"),
        &[
            (&ba).into(),
            (&bb).into(),
            Arg::Ptr(0x7f00_0000_0000),
            Arg::U32(n as u32),
        ],
        [1, 1, 1],
        [256, 1, 1],
    )
    .unwrap();
    let e = c
        .submit()
        .unwrap()
        .wait_timeout(Duration::from_secs(20))
        .err()
        .unwrap();
    let msg = e.to_string();
    assert!(matches!(e, am_runtime::Error::GpuFault { .. }), "{msg}");
    assert!(
        msg.contains("0x7f0000000000") && msg.contains("vadd"),
        "{msg}"
    );
    dev.recover().unwrap();
    assert_eq!(vadd_runs(&dev, n), vec![3.0; n]);
}

#[test]
fn page_fault_in_a_copy() {
    let mut r = Rig::new("mi300x");
    let mut d = r.sdma_queue(0, 0x1000);
    let src = r.vram(0x1000);
    d.submit(&r, &sdma::copy(src.va, 0x7000_0000_0000, 0x100));
    let deadline = Instant::now() + Duration::from_secs(20);
    let halted = loop {
        if let Some(h) = r.gpu.queues().iter().find_map(|q| q.1.halted.clone()) {
            break h;
        }
        assert!(Instant::now() < deadline, "the SDMA queue never stopped");
        std::thread::sleep(Duration::from_micros(200));
    };
    assert!(
        halted.contains("COPY_LINEAR") && halted.contains("page fault"),
        "{halted}"
    );
    let err = r.dev.handle_interrupts().unwrap_err();
    assert!(
        matches!(
            err,
            Error {
                kind: ErrorKind::GpuFault(_),
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("0x700000000000"), "{err}");
    r.dev.recover().unwrap();
    // The next copy, on a new queue, lands.
    let dst = r.vram(0x1000);
    r.write(&src, 0, &[0x5a; 0x100]);
    let done = r.vram(0x1000);
    let mut d = r.sdma_queue(1, 0x1000);
    let mut p = sdma::copy(src.va, dst.va, 0x100);
    p.extend(sdma::fence(done.va, 7));
    d.submit(&r, &p);
    r.wait_u32(&done, 0, |v| v == 7, Duration::from_secs(20));
    assert_eq!(r.u32_at(&dst, 0xfc), 0x5a5a_5a5a);
}

#[test]
fn kernel_hang() {
    let (gpu, dev) = open("navi31");
    // The mock stops a wave after this many instructions, as a job timeout would.
    gpu.set_watchdog(200_000);
    let out = dev.alloc(4 * 256, MemKind::Vram).unwrap();
    let mut c = ComputeCommands::new(&dev);
    c.exec(
        &kernel(&dev, "spin"),
        &[(&out).into(), Arg::U32(u32::MAX)],
        [1, 1, 1],
        [256, 1, 1],
    )
    .unwrap();
    let e = c
        .submit()
        .unwrap()
        .wait_timeout(Duration::from_secs(2))
        .err()
        .unwrap();
    let msg = e.to_string();
    assert!(matches!(e, am_runtime::Error::Hang { .. }), "{msg}");
    assert!(
        msg.contains("hung") && msg.contains("last packet read: DISPATCH_DIRECT"),
        "the error names the queue and the packet: {msg}"
    );
    dev.recover().unwrap();
    gpu.set_watchdog(u64::MAX);
    assert_eq!(vadd_runs(&dev, 64), vec![3.0; 64]);
}

#[test]
fn ih_overflow() {
    use am_mock::ip::ih::{IhEntry, Posted};
    let gpu = am_mock::gpu("navi31", 410).unwrap();
    let mut dev = AmDevice::open_with(gpu.open(), opts()).unwrap();
    let eop = IhEntry {
        client_id: am_autogen::ih::SOC21_IH_CLIENTID_GFX as u8,
        src_id: am_autogen::ih::gfx_11_0_0::GFX_11_0_0__SRCID__CP_EOP_INTERRUPT as u8,
        ..IhEntry::default()
    };
    while let Posted::Written { .. } = gpu.post_interrupt(0, eop).unwrap() {}
    // What the user sees: the entries that fitted, and the overflow counted.
    assert_eq!(dev.handle_interrupts().unwrap().len(), 8191);
    assert_eq!(dev.ih_overflows(), 1);
    // Next: the ring takes entries again and each is seen once.
    assert!(matches!(
        gpu.post_interrupt(0, eop).unwrap(),
        Posted::Written { .. }
    ));
    assert_eq!(dev.handle_interrupts().unwrap().len(), 1);
    assert!(gpu.violations().is_empty(), "{:#?}", gpu.violations());
}

#[test]
fn ras_event() {
    let gpu = am_mock::gpu("mi300x", 411).unwrap();
    let mut dev = AmDevice::open_with(gpu.open(), opts()).unwrap();
    let mut bank = [0u64; 8];
    bank[1] = (1 << 63) | (1 << 61) | 0x1234;
    bank[5] = 0x2e << 32;
    gpu.with_smu(|s| s.push_aca_bank(true, bank));
    assert!(gpu.raise_ras(false, true));
    let err = dev.handle_interrupts().unwrap_err().to_string();
    assert!(err.contains("RAS fatal hardware error: RAS_CNTLR"), "{err}");
    assert!(
        err.contains("UE bank 0: STATUS=0xa000000000001234"),
        "{err}"
    );
    dev.recover().unwrap();
    assert!(dev.handle_interrupts().unwrap().is_empty());
    // The device is usable: memory maps and the SMU answers.
    let m = dev.valloc(2 << 20, false).unwrap();
    assert!(m.va != 0);
    assert!(gpu.violations().is_empty(), "{:#?}", gpu.violations());
}

#[test]
fn vram_buffer_past_the_vram() {
    let (_gpu, dev) = open("navi31");
    let vram = dev.info().vram_bytes;
    for size in [vram + 1, u64::MAX] {
        let e = dev.alloc(size, MemKind::Vram).err().unwrap();
        let msg = e.to_string();
        assert!(
            matches!(e, am_runtime::Error::Limit { value, limit, .. } if value == size && limit == vram),
            "{msg}"
        );
        assert_eq!(
            msg,
            format!(
                "{}: a VRAM buffer of {size} bytes is larger than the device's VRAM \
                 ({vram} bytes)",
                dev.name()
            )
        );
    }
    assert_eq!(vadd_runs(&dev, 64), vec![3.0; 64]);
}

#[test]
fn grid_past_the_dispatch_packet() {
    // PM4 (navi31) and AQL (MI300X) queues alike: the packet holds 32 bits of work-items.
    for profile in ["navi31", "mi300x"] {
        let (_gpu, dev) = open(profile);
        let out = dev.alloc(4 * 256, MemKind::Vram).unwrap();
        let mut c = ComputeCommands::new(&dev);
        let e = c
            .exec(
                &kernel(&dev, "vadd"),
                &[(&out).into(), (&out).into(), (&out).into(), Arg::U32(0)],
                [1 << 24, 1, 1],
                [256, 1, 1],
            )
            .err()
            .unwrap();
        let msg = e.to_string();
        assert!(
            matches!(e, am_runtime::Error::Limit { value, limit, .. }
                if value == 1 << 32 && limit == u64::from(u32::MAX)),
            "{msg}"
        );
        assert!(
            msg.ends_with(
                "kernel vadd: a grid of 4294967296 work-items in x (16777216 workgroups of 256) \
                 is more than a dispatch packet holds (4294967295 a dimension)"
            ),
            "{msg}"
        );
        assert_eq!(c.dispatches(), 0, "{profile}: nothing encoded");
        assert_eq!(vadd_runs(&dev, 64), vec![3.0; 64], "{profile}");
    }
}

#[test]
fn code_object_for_another_target() {
    let (_gpu, dev) = open("navi31");
    let gfx942 = am_tests::runtime::code_object(am_isa::GfxTarget::Gfx942);
    let e = dev.load(gfx942, "vadd").err().unwrap();
    let msg = e.to_string();
    assert!(matches!(e, am_runtime::Error::Program { .. }), "{msg}");
    assert_eq!(
        msg,
        format!(
            "{}: kernel vadd: the code object is for gfx942, the device is gfx1100",
            dev.name()
        )
    );
    assert_eq!(vadd_runs(&dev, 64), vec![3.0; 64]);
}

/// The victim of `process_killed_mid_work`: run only as a child of that test (the variable
/// names the server's port), it opens the served device and launches kernels until killed.
#[test]
#[ignore = "a child process of process_killed_mid_work"]
fn process_killed_mid_work_victim() {
    let Ok(port) = std::env::var("AM_FAULT_MATRIX_PORT") else {
        return;
    };
    let pci = RemotePciDevice::connect(
        "127.0.0.1",
        port.parse().unwrap(),
        0,
        &RemoteOptions::default(),
    )
    .unwrap();
    let dev = Device::open_with(Arc::new(pci), opts()).unwrap();
    loop {
        vadd_runs(&dev, 256);
    }
}

#[test]
fn process_killed_mid_work() {
    let gpu = am_mock::gpu("navi31", 412).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let exported: Vec<Arc<dyn PciDevice>> = vec![gpu.open()];
    std::thread::spawn(move || serve(listener, exported, ServeOptions::default()));

    let mut victim = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "fault_matrix::process_killed_mid_work_victim",
            "--ignored",
            "--nocapture",
        ])
        .env("AM_FAULT_MATRIX_PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Mid-work: a queue is live and has dispatched kernels.
    let deadline = Instant::now() + Duration::from_secs(300);
    while !gpu.queues().iter().any(|q| q.1.dispatches >= 3) {
        assert!(
            victim.try_wait().unwrap().is_none(),
            "the victim ended before it was killed"
        );
        assert!(Instant::now() < deadline, "the victim never got to work");
        std::thread::sleep(Duration::from_millis(20));
    }
    victim.kill().unwrap();
    victim.wait().unwrap();

    // The device outlived its client: the next one boots it through the same server and
    // its work runs.
    let pci = RemotePciDevice::connect("127.0.0.1", port, 0, &RemoteOptions::default()).unwrap();
    let dev = Device::open_with(Arc::new(pci), opts()).unwrap();
    assert_eq!(vadd_runs(&dev, 256), vec![3.0; 256]);
}
