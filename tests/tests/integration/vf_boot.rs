//! The VF boot of `mi350x-vf` end to end, through `AmDevice::open_with` on the mock: the
//! mailbox conversation the PF records, the allocator's 1 MiB offset, no PSP or SMU access
//! (the mock makes every one a violation), and the init-access lease given back exactly once
//! however the device goes away.

use std::time::Duration;

use am_driver::discovery::DiscoveryTable;
use am_driver::{AmDevice, BootKind, Discovery, Error, ErrorKind, PciDevice};
use am_mock::MockGpu;
use am_mock::vf_pf::MailboxMessage as M;
use am_tests::rig::opts;

const PROFILE: &str = "mi350x-vf";
const INIT_ACCESS: u32 = 1;
const REL_INIT_ACCESS: u32 = 2;
const INIT_DATA: u32 = 6;

fn log(gpu: &MockGpu) -> Vec<M> {
    gpu.with_vf_pf(|pf| pf.log().to_vec()).unwrap()
}

/// The requests the PF took, in order.
fn requests(gpu: &MockGpu) -> Vec<(u32, [u32; 3])> {
    log(gpu)
        .into_iter()
        .filter_map(|m| match m {
            M::Request { request, data } => Some((request, data)),
            _ => None,
        })
        .collect()
}

fn releases(gpu: &MockGpu) -> usize {
    requests(gpu)
        .iter()
        .filter(|(r, _)| *r == REL_INIT_ACCESS)
        .count()
}

fn access(gpu: &MockGpu) -> bool {
    gpu.with_vf_pf(|pf| pf.access_granted()).unwrap()
}

#[test]
fn vf_boot_takes_the_lease_and_touches_neither_psp_nor_smu() {
    let gpu = am_mock::gpu(PROFILE, 260).unwrap();
    let dev = AmDevice::open_with(gpu.open(), opts()).unwrap();
    assert!(dev.ctx().is_vf);
    assert_eq!(dev.boot_report().kind, BootKind::Vf);
    assert!(access(&gpu), "the lease is held while the device is open");

    // The PF's record: INIT_DATA (data2 = 2, the v2 critical region) answered with
    // INIT_DATA_READY (7), then INIT_ACCESS answered with READY_TO_ACCESS_GPU (1).
    assert_eq!(
        log(&gpu),
        vec![
            M::Request {
                request: INIT_DATA,
                data: [0, 2, 0]
            },
            M::Ack { request: INIT_DATA },
            M::Event { event: 7 },
            M::EventAck { event: 7 },
            M::Request {
                request: INIT_ACCESS,
                data: [0; 3]
            },
            M::Ack {
                request: INIT_ACCESS
            },
            M::Event { event: 1 },
            M::EventAck { event: 1 },
        ]
    );

    // The first MiB of VF VRAM is not the guest's: the first boot allocation (the root page
    // table) sits at 1 MiB, and nothing can be allocated below it.
    assert_eq!(dev.ctx().mm().tables.root, 1 << 20);
    let a = dev
        .ctx()
        .palloc(4096, 4096, am_driver::mm::Pool::Boot)
        .unwrap();
    assert!(a > 1 << 20, "{a:#x}");

    // PF-owned work is skipped: no firmware loaded, no PSP/SMU/clock/partition phase...
    assert!(dev.boot_report().firmware.is_empty());
    let phases: Vec<&str> = dev.boot_report().phases.iter().map(|p| p.name).collect();
    for pf_only in [
        "probe",
        "psp",
        "smu",
        "mode1_reset",
        "partition",
        "clocks",
        "clockgating",
    ] {
        assert!(!phases.contains(&pf_only), "{pf_only} in {phases:?}");
    }
    // ...and no access reached MP0/MP1: every one would be a violation on this profile.
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
    // The scratch registers are the PF's: the VF leaves them as they were (0 at power-on).
    let scratch = |n| {
        gpu.peek(am_autogen::regs::RegIp::Gc, &format!("SCRATCH_REG{n}"), 0)
            .unwrap()
    };
    assert_eq!((scratch(6), scratch(7)), (0, 0));

    dev.fini().unwrap();
    assert_eq!(releases(&gpu), 1, "fini gives the lease back once");
    assert!(!access(&gpu));
    assert_eq!(requests(&gpu).last().unwrap(), &(REL_INIT_ACCESS, [0; 3]));

    // Never a warm boot on a VF: the next open is a VF boot again, with a new lease.
    let dev = AmDevice::open_with(gpu.open(), opts()).unwrap();
    assert_eq!(dev.boot_report().kind, BootKind::Vf);
    assert_eq!(
        requests(&gpu)
            .iter()
            .filter(|(r, _)| *r == INIT_ACCESS)
            .count(),
        2
    );
    drop(dev);
    assert_eq!(releases(&gpu), 2);
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
}

#[test]
fn the_lease_is_released_once_on_drop() {
    let gpu = am_mock::gpu(PROFILE, 261).unwrap();
    let dev = AmDevice::open_with(gpu.open(), opts()).unwrap();
    assert_eq!(releases(&gpu), 0);
    drop(dev);
    assert_eq!(releases(&gpu), 1);
    assert!(!access(&gpu));
    // The release waits for no event: the PF acks it and answers nothing.
    let tail: Vec<M> = log(&gpu).into_iter().rev().take(2).collect();
    assert_eq!(
        tail,
        vec![
            M::Ack {
                request: REL_INIT_ACCESS
            },
            M::Request {
                request: REL_INIT_ACCESS,
                data: [0; 3]
            },
        ]
    );
}

#[test]
fn an_open_that_fails_after_access_was_granted_releases_the_lease_once() {
    let gpu = am_mock::gpu(PROFILE, 262).unwrap();
    // A discovery table the firmware never wrote: the open fails at discovery, which it
    // can only reach once INIT_ACCESS has been granted.
    let at = gpu.profile().vram_size - (64 << 10);
    gpu.vram().write(at, &[0u8; 10 << 10]).unwrap();
    let err = AmDevice::open_with(gpu.open(), opts()).unwrap_err();
    assert!(
        matches!(
            err,
            Error {
                kind: ErrorKind::DiscoverySignature { .. },
                ..
            }
        ),
        "{err}: the failure is after access was granted"
    );
    assert!(
        err.to_string()
            .contains("has not written a discovery table"),
        "{err}"
    );
    assert_eq!(
        requests(&gpu).iter().map(|r| r.0).collect::<Vec<_>>(),
        vec![INIT_DATA, INIT_ACCESS, REL_INIT_ACCESS],
        "released exactly once, after the grant"
    );
    assert!(!access(&gpu));
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
}

#[test]
fn an_open_whose_init_access_is_never_answered_has_no_lease_to_release() {
    let gpu = am_mock::gpu(PROFILE, 263).unwrap();
    let mut o = opts();
    o.mailbox.init_tries = 2;
    o.mailbox.init_event_timeout = Duration::from_millis(20);
    o.mailbox.event_poll = Duration::from_millis(1);
    // INIT_DATA is answered; both tries of INIT_ACCESS lose their answer (the PF still
    // grants access, but the VF never learns it and holds no lease).
    let pci = gpu.open();
    let mb = am_driver::vf::VfMailbox::new(pci.name(), pci.bar(5).unwrap(), o.mailbox);
    mb.request_init_data().unwrap();
    gpu.with_vf_pf(|pf| pf.faults.drop_events = 2).unwrap();
    let err = mb.request_init_access().unwrap_err();
    assert!(
        matches!(
            err,
            Error {
                kind: ErrorKind::VfMailboxNoEvent { tries: 2, .. },
                ..
            }
        ),
        "{err}"
    );
    // The failed request created no lease: nothing is released.
    assert_eq!(releases(&gpu), 0);

    // Through the device, on a PF that answers nothing: the open fails naming the request
    // and the event, and releases nothing either.
    let gpu = am_mock::gpu(PROFILE, 265).unwrap();
    gpu.with_vf_pf(|pf| pf.faults.drop_events = u32::MAX)
        .unwrap();
    let err = AmDevice::open_with(gpu.open(), o).unwrap_err();
    assert!(
        err.to_string()
            .contains("did not receive event 0x7 (IDH_REQ_GPU_INIT_DATA_READY)"),
        "{err}"
    );
    assert_eq!(releases(&gpu), 0);
}

#[test]
fn discovery_before_access_sees_the_gated_vram_and_says_so() {
    let gpu = am_mock::gpu(PROFILE, 264).unwrap();
    let pci = gpu.open();
    assert!(am_driver::vf::is_vf(&*pci.bar(5).unwrap()).unwrap());
    // The VRAM size register is gated like the rest of MMIO.
    let err = Discovery::read(&*pci).unwrap_err();
    assert!(
        matches!(
            err,
            Error {
                kind: ErrorKind::BadVramSize {
                    value: u32::MAX,
                    ..
                },
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("a VF without init access"),
        "{err}"
    );
    // Where the table lives, BAR0 reads all 0xFF; parsing that says why.
    let at = gpu.profile().vram_size - (64 << 10);
    let mut bytes = vec![0u8; 10 << 10];
    pci.bar(0).unwrap().read_bytes(at, &mut bytes).unwrap();
    assert!(bytes.iter().all(|&b| b == 0xff));
    let err = DiscoveryTable::parse(pci.name(), &bytes).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("discovery signatures mismatch"), "{msg}");
    assert!(msg.contains("VRAM is gated"), "{msg}");
    // Reading while gated is not a contract violation (the PF answers all-ones), and no
    // request was sent.
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
    assert!(requests(&gpu).is_empty());
}

#[test]
fn a_stale_pf_event_is_acknowledged_before_the_first_request_of_the_open() {
    let gpu = am_mock::gpu(PROFILE, 266).unwrap();
    // An event a previous instance never acknowledged.
    gpu.with_vf_pf(|pf| pf.post_stale_event(1)).unwrap();
    let dev = AmDevice::open_with(gpu.open(), opts()).unwrap();
    assert_eq!(dev.boot_report().kind, BootKind::Vf);
    let log = log(&gpu);
    assert_eq!(
        &log[..3],
        &[
            M::StaleEvent { event: 1 },
            M::EventAck { event: 1 },
            M::Request {
                request: INIT_DATA,
                data: [0, 2, 0]
            },
        ]
    );
    drop(dev);
    assert_eq!(releases(&gpu), 1);
    assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
}
