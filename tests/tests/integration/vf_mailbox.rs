//! The driver's VF mailbox against the mock's PF model: the exact sequence of accesses, the
//! three timeouts, retries, stale events and the init-access lease.
//!
//! Time is virtual: the driver waits on a `VirtualClock` with the sheet's real timings, and
//! the PF model counts polls, so every test is deterministic and runs in microseconds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use am_driver::vf::{Clock, IdhEvent, IdhRequest, MailboxTimings, VfMailbox};
use am_driver::{Bar, Error, ErrorKind, Result};
use am_mock::vf_pf::{MailboxMessage as M, VfPf};

/// A clock whose `sleep` returns at once after moving time forward: the PF model, not wall
/// time, decides when things happen.
#[derive(Debug, Default)]
struct VirtualClock(AtomicU64);

impl VirtualClock {
    /// A clock at time zero.
    fn new() -> Self {
        Self::default()
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }
    fn sleep(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.0.fetch_add(ns, Ordering::Relaxed);
    }
}

const DEVICE: &str = "mock:mi350x-vf:0";
const TRN: u64 = 0xe5e * 4;
const RCV: u64 = 0xe5e * 4 + 1;
const DW0: u64 = 0xe56 * 4;
const DW1: u64 = 0xe57 * 4;
const DW2: u64 = 0xe58 * 4;
const DW3: u64 = 0xe59 * 4;
const RCV_DW0: u64 = 0xe5a * 4;

/// One BAR5 access as the device saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum A {
    R8(u64, u8),
    W8(u64, u8),
    R32(u64, u32),
    W32(u64, u32),
}

/// BAR5 of a VF whose mailbox is the mock PF; it records every access. Anything outside the
/// mailbox fails, which the lease tests use as "a later step of the open failed".
#[derive(Default)]
struct PfBar {
    pf: Mutex<VfPf>,
    accesses: Mutex<Vec<A>>,
}

impl PfBar {
    fn pf(&self) -> std::sync::MutexGuard<'_, VfPf> {
        self.pf.lock().unwrap()
    }
    fn accesses(&self) -> Vec<A> {
        self.accesses.lock().unwrap().clone()
    }
    fn record(&self, a: A) {
        self.accesses.lock().unwrap().push(a);
    }
    fn requests(&self, code: u32) -> usize {
        let pf = self.pf();
        pf.log()
            .iter()
            .filter(|m| matches!(m, M::Request { request, .. } if *request == code))
            .count()
    }
}

fn violation(message: String) -> Error {
    Error::new(DEVICE, ErrorKind::Backend { message })
}

impl Bar for PfBar {
    fn len(&self) -> u64 {
        0x8_0000
    }
    fn read32(&self, offset: u64) -> Result<u32> {
        let v = self.pf().read32(offset).map_err(violation)?;
        self.record(A::R32(offset, v));
        Ok(v)
    }
    fn write32(&self, offset: u64, value: u32) -> Result<()> {
        self.pf().write32(offset, value).map_err(violation)?;
        self.record(A::W32(offset, value));
        Ok(())
    }
    fn read_bytes(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let [b] = buf else {
            return Err(violation(format!("{}-byte read", buf.len())));
        };
        *b = self.pf().read8(offset).map_err(violation)?;
        self.record(A::R8(offset, *b));
        Ok(())
    }
    fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<()> {
        let [b] = data else {
            return Err(violation(format!("{}-byte write", data.len())));
        };
        self.pf().write8(offset, *b).map_err(violation)?;
        self.record(A::W8(offset, *b));
        Ok(())
    }
}

/// A mailbox with the default (sheet) timings on a virtual clock.
fn setup() -> (Arc<PfBar>, Arc<VirtualClock>, VfMailbox) {
    let bar = Arc::new(PfBar::default());
    let clock = Arc::new(VirtualClock::new());
    let mb =
        VfMailbox::new(DEVICE, bar.clone(), MailboxTimings::default()).with_clock(clock.clone());
    (bar, clock, mb)
}

/// The accesses of one request that is acked and answered on the first poll.
fn exchange(stale_rcv: u8, request: u32, data: [u32; 3], event: u32) -> Vec<A> {
    vec![
        A::R8(RCV, stale_rcv),
        A::W8(TRN, 0),
        A::R8(TRN, 0),
        A::W32(DW0, request),
        A::W32(DW1, data[0]),
        A::W32(DW2, data[1]),
        A::W32(DW3, data[2]),
        A::W8(TRN, 1),
        A::R8(TRN, 0b11),
        A::W8(TRN, 0),
        A::R32(RCV_DW0, event),
        A::W8(RCV, 2),
    ]
}

#[test]
fn init_data_then_init_access_is_the_exact_byte_sequence() {
    let (bar, _, mb) = setup();
    mb.request_init_data().unwrap();
    assert!(
        !bar.pf().access_granted(),
        "INIT_DATA alone does not grant access"
    );
    let lease = mb.request_init_access().unwrap();
    assert!(bar.pf().access_granted());

    let mut expected = exchange(0, 6, [0, 2, 0], 7);
    expected.extend(exchange(0, 1, [0, 0, 0], 1));
    assert_eq!(bar.accesses(), expected);
    assert_eq!(
        bar.pf().log(),
        [
            M::Request {
                request: 6,
                data: [0, 2, 0]
            },
            M::Ack { request: 6 },
            M::Event { event: 7 },
            M::EventAck { event: 7 },
            M::Request {
                request: 1,
                data: [0, 0, 0]
            },
            M::Ack { request: 1 },
            M::Event { event: 1 },
            M::EventAck { event: 1 },
        ]
    );
    drop(lease);
}

#[test]
fn release_sends_rel_init_access_and_waits_for_no_event() {
    let (bar, _, mb) = setup();
    let mut lease = mb.request_init_access().unwrap();
    let before = bar.accesses().len();
    lease.release();
    assert_eq!(
        bar.accesses()[before..],
        [
            A::R8(RCV, 0),
            A::W8(TRN, 0),
            A::R8(TRN, 0),
            A::W32(DW0, 2),
            A::W32(DW1, 0),
            A::W32(DW2, 0),
            A::W32(DW3, 0),
            A::W8(TRN, 1),
            A::R8(TRN, 0b11),
            A::W8(TRN, 0),
        ]
    );
    assert!(
        !bar.pf().access_granted(),
        "the PF revoked access on REL_GPU_INIT_ACCESS"
    );
}

#[test]
fn stale_event_is_acknowledged_before_the_request() {
    let (bar, _, mb) = setup();
    bar.pf().post_stale_event(7);
    mb.request_init_data().unwrap();
    let acc = bar.accesses();
    assert_eq!(acc[..3], [A::R8(RCV, 1), A::W8(RCV, 2), A::W8(TRN, 0)]);
    assert_eq!(acc[2..], exchange(0, 6, [0, 2, 0], 7)[1..]);
    assert_eq!(
        bar.pf().log()[..3],
        [
            M::StaleEvent { event: 7 },
            M::EventAck { event: 7 },
            M::Request {
                request: 6,
                data: [0, 2, 0]
            }
        ]
    );
}

#[test]
fn unacknowledged_request_fails_at_once_without_retry() {
    let (bar, clock, mb) = setup();
    bar.pf().faults.drop_acks = 1;
    let err = mb.request_init_data().unwrap_err();
    assert!(
        matches!(
            err,
            Error {
                kind: ErrorKind::VfMailboxNotAcknowledged {
                    request: IdhRequest::ReqGpuInitData,
                    ..
                },
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().starts_with(
            "mock:mi350x-vf:0: VF mailbox request 0x6 (IDH_REQ_GPU_INIT_DATA) was not acknowledged"
        ),
        "{err}"
    );
    assert_eq!(
        bar.pf().log(),
        [
            M::Request {
                request: 6,
                data: [0, 2, 0]
            },
            M::AckDropped { request: 6 }
        ],
        "an ack timeout is not retried"
    );
    // One ack deadline (0.5 s), not five event timeouts.
    assert!(clock.now() < Duration::from_secs(1), "{:?}", clock.now());
}

#[test]
fn ack_is_waited_for_up_to_its_deadline() {
    // 0.5 s of 5 ms polls is a hundred polls after VALID.
    let (bar, _, mb) = setup();
    bar.pf().faults.ack_delay_polls = 100;
    mb.request_init_data().unwrap();

    let (bar, _, mb) = setup();
    bar.pf().faults.ack_delay_polls = 110;
    let err = mb.request_init_data().unwrap_err();
    assert!(
        matches!(
            err,
            Error {
                kind: ErrorKind::VfMailboxNotAcknowledged { .. },
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn missing_event_is_retried_then_reported() {
    let (bar, clock, mb) = setup();
    bar.pf().faults.drop_events = 5;
    let err = mb.request_init_data().unwrap_err();
    match &err {
        Error {
            kind:
                ErrorKind::VfMailboxNoEvent {
                    request,
                    event,
                    tries,
                    timeout,
                    last,
                    ..
                },
            ..
        } => {
            assert_eq!(*request, IdhRequest::ReqGpuInitData);
            assert_eq!(*event, IdhEvent::ReqGpuInitDataReady);
            assert_eq!(*tries, 5);
            assert_eq!(*timeout, Duration::from_secs(2));
            assert_eq!(*last, 0, "RCV_DW0 never held an event");
        }
        other => panic!("expected VfMailboxNoEvent, got {other:?}"),
    }
    assert!(
        err.to_string().contains(
            "VF mailbox request 0x6 (IDH_REQ_GPU_INIT_DATA) did not receive event 0x7 (IDH_REQ_GPU_INIT_DATA_READY)"
        ),
        "{err}"
    );
    let log = bar.pf().log().to_vec();
    let one_try = [
        M::Request {
            request: 6,
            data: [0, 2, 0],
        },
        M::Ack { request: 6 },
        M::EventDropped { event: 7 },
    ];
    assert_eq!(log, one_try.repeat(5), "five full tries, each acked");
    assert!(
        clock.now() >= Duration::from_secs(10),
        "five 2 s event waits: {:?}",
        clock.now()
    );
}

#[test]
fn dropped_first_event_recovers_on_retry() {
    let (bar, _, mb) = setup();
    bar.pf().faults.drop_events = 1;
    let _lease = mb.request_init_access().unwrap();
    assert_eq!(
        bar.pf().log(),
        [
            M::Request {
                request: 1,
                data: [0; 3]
            },
            M::Ack { request: 1 },
            M::EventDropped { event: 1 },
            M::Request {
                request: 1,
                data: [0; 3]
            },
            M::Ack { request: 1 },
            M::Event { event: 1 },
            M::EventAck { event: 1 },
        ]
    );
}

#[test]
fn last_of_five_tries_still_counts() {
    let (bar, _, mb) = setup();
    bar.pf().faults.drop_events = 4;
    mb.request_init_data().unwrap();
    assert_eq!(bar.requests(6), 5);
}

#[test]
fn delayed_event_within_the_wait_is_received_on_the_first_try() {
    let (bar, _, mb) = setup();
    // 2 s of 10 ms polls is two hundred polls.
    bar.pf().faults.event_delay_polls = 150;
    mb.request_init_data().unwrap();
    assert_eq!(bar.requests(6), 1);
}

#[test]
fn wedged_ack_fails_before_the_request_is_sent() {
    let (bar, _, mb) = setup();
    mb.request_init_data().unwrap();
    // The ack of INIT_DATA never drops.
    bar.pf().faults.ack_stuck = true;
    mb.request_init_data().unwrap();
    let err = mb.request_init_access().unwrap_err();
    assert!(
        matches!(
            err,
            Error {
                kind: ErrorKind::VfMailboxAckNotCleared {
                    request: IdhRequest::ReqGpuInitAccess,
                    ..
                },
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("VF mailbox acknowledgement did not clear"),
        "{err}"
    );
    assert_eq!(bar.requests(1), 0, "nothing was sent while the ack was set");
}

#[test]
fn lease_is_released_once_by_explicit_release() {
    let (bar, _, mb) = setup();
    let mut lease = mb.request_init_access().unwrap();
    assert!(!lease.is_released());
    lease.release();
    assert!(lease.is_released());
    assert!(!bar.pf().access_granted());
    lease.release();
    drop(lease);
    assert_eq!(
        bar.requests(2),
        1,
        "released once despite release + release + drop"
    );
}

#[test]
fn lease_is_released_on_drop() {
    let (bar, _, mb) = setup();
    let lease = mb.request_init_access().unwrap();
    assert_eq!(bar.requests(2), 0);
    drop(lease);
    assert_eq!(bar.requests(2), 1);
    assert!(!bar.pf().access_granted());
}

/// What a device open does on a VF, with a later step that can fail.
struct Opened {
    _lease: am_driver::vf::VfLease,
}

fn open(mb: &VfMailbox, mmio: &dyn Bar) -> Result<Opened> {
    mb.request_init_data()?;
    let lease = mb.request_init_access()?;
    // Discovery: outside the mailbox, which this BAR refuses.
    mmio.read32(0)?;
    Ok(Opened { _lease: lease })
}

#[test]
fn failed_open_releases_the_lease_once() {
    let (bar, _, mb) = setup();
    let err = open(&mb, &*bar).err().unwrap();
    assert!(
        err.to_string().contains("not a VF mailbox register"),
        "{err}"
    );
    let log = bar.pf().log().to_vec();
    let requests: Vec<u32> = log
        .iter()
        .filter_map(|m| match m {
            M::Request { request, .. } => Some(*request),
            _ => None,
        })
        .collect();
    assert_eq!(
        requests,
        [6, 1, 2],
        "INIT_DATA, INIT_ACCESS, then one REL_INIT_ACCESS"
    );
    assert_eq!(log.last(), Some(&M::Ack { request: 2 }));
    assert!(!bar.pf().access_granted());
}

#[test]
fn failed_init_access_leaves_no_lease_to_release() {
    let (bar, _, mb) = setup();
    mb.request_init_data().unwrap();
    bar.pf().faults.drop_acks = 1;
    assert!(mb.request_init_access().is_err());
    assert_eq!(
        bar.requests(2),
        0,
        "no lease was taken, so none is released"
    );
}

#[test]
fn failed_release_is_ignored_and_not_repeated() {
    let (bar, _, mb) = setup();
    let mut lease = mb.request_init_access().unwrap();
    bar.pf().faults.drop_acks = 1;
    lease.release();
    assert!(lease.is_released());
    drop(lease);
    assert_eq!(bar.pf().log().last(), Some(&M::AckDropped { request: 2 }));
    assert_eq!(bar.requests(2), 1);
}
