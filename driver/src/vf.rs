//! SR-IOV virtual functions: detection and the VF/PF mailbox.
//!
//! On a VF (e.g. MI350X VF, device 0x75b0) the host's PF gates MMIO and VRAM: until the VF
//! asks for access, the registers and VRAM read all-ones. The VF talks to the PF through a
//! small mailbox in BAR5 (`mxgpu_nv.h`): four request dwords (`TRN_DW0..3`), four event
//! dwords (`RCV_DW0..3`) and a control register used byte-wide, one byte per direction.
//! The protocol is polled; it only asks for access and never for a GPU or PCI reset.
//!
//! Open on a VF: [`VfMailbox::request_init_data`], then [`VfMailbox::request_init_access`],
//! which returns the [`VfLease`] the device keeps for its whole life. Dropping the lease (or
//! [`VfLease::release`]) gives access back with `IDH_REL_GPU_INIT_ACCESS`, exactly once,
//! also when an open fails after the lease was taken.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::*;

/// `RCC_IOV_FUNC_IDENTIFIER` (BAR5 byte address); bit 0 `FUNC_IDENTIFIER` is set on a VF.
/// Readable before the PF grants access, so it is read before discovery.
const RCC_IOV_FUNC_IDENTIFIER: u64 = 0xde5 * 4;
/// `MAILBOX_MSGBUF_TRN_DW0` (BAR5 byte address): the request; `TRN_DW1..3` follow with its
/// data.
const TRN_DW0: u64 = 0xe56 * 4;
/// `MAILBOX_MSGBUF_RCV_DW0` (BAR5 byte address): the PF's last event.
const RCV_DW0: u64 = 0xe5a * 4;
/// The TRN byte of `MAILBOX_CONTROL` (dword 0xe5e, accessed one byte at a time:
/// `NV_MAIBOX_CONTROL_TRN_OFFSET_BYTE`).
const TRN: u64 = 0xe5e * 4;
/// The RCV byte of `MAILBOX_CONTROL` (`NV_MAIBOX_CONTROL_RCV_OFFSET_BYTE`).
const RCV: u64 = TRN + 1;
/// TRN byte bit 0: the VF's request in `TRN_DW0..3` is valid.
const TRN_MSG_VALID: u8 = 1 << 0;
/// TRN byte bit 1: the PF has taken the request.
const TRN_MSG_ACK: u8 = 1 << 1;
/// RCV byte bit 0: an event from the PF is pending.
const RCV_MSG_VALID: u8 = 1 << 0;
/// Value written to the RCV byte to acknowledge the pending event.
const RCV_MSG_ACK: u8 = 1 << 1;

/// Whether the function behind `mmio` (BAR5) is an SR-IOV VF.
pub fn is_vf(mmio: &dyn Bar) -> Result<bool> {
    let v = mmio.read32(RCC_IOV_FUNC_IDENTIFIER)?;
    tracing::debug!("RCC_IOV_FUNC_IDENTIFIER = {v:#x}");
    Ok(v & 1 != 0)
}

/// A mailbox message enum: its codes (the discriminants, `as u32`), Linux names and `code (NAME)`
/// display.
macro_rules! idh_messages {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $v:ident = $code:literal $linux:literal,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, derive_more::Display)]
        #[display("{:#x} ({})", *self as u32, self.name())]
        #[repr(u32)]
        pub enum $name {
            $($(#[$vdoc])* $v = $code,)*
        }

        impl $name {
            /// The Linux name.
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$v => $linux,)*
                }
            }
        }
    };
}

idh_messages! {
    /// The requests this driver sends from the VF to the PF (of `enum idh_request`,
    /// `mxgpu_nv.h`, which also has teardown and reset requests), written to `TRN_DW0`.
    IdhRequest {
        /// Ask for MMIO and VRAM access (answered by [`IdhEvent::ReadyToAccessGpu`]).
        ReqGpuInitAccess = 1 "IDH_REQ_GPU_INIT_ACCESS",
        /// Give the init access back (no answer).
        RelGpuInitAccess = 2 "IDH_REL_GPU_INIT_ACCESS",
        /// Ask the PF to prepare the init data (answered by
        /// [`IdhEvent::ReqGpuInitDataReady`]).
        ReqGpuInitData = 6 "IDH_REQ_GPU_INIT_DATA",
    }
}

idh_messages! {
    /// The events this driver waits for from the PF (of `enum idh_event`, `mxgpu_nv.h`,
    /// which also has FLR notifications, success/fail and alive queries), read from
    /// `RCV_DW0`.
    IdhEvent {
        /// The VF may access MMIO and VRAM.
        ReadyToAccessGpu = 1 "IDH_READY_TO_ACCESS_GPU",
        /// The init data (critical region) is ready.
        ReqGpuInitDataReady = 7 "IDH_REQ_GPU_INIT_DATA_READY",
    }
}

/// `data2` of `IDH_REQ_GPU_INIT_DATA`: the PF is to lay out the critical region in its v2
/// format (`amdgv_sriovmsg.h`).
const GPU_CRIT_REGION_V2: u32 = 2;

/// A monotonic clock the mailbox waits on. The system clock sleeps; a test's clock can just
/// advance, so tests run the real timeouts in microseconds.
pub trait Clock: Send + Sync {
    /// Time since an arbitrary, fixed origin.
    fn now(&self) -> Duration;
    /// Let `d` pass.
    fn sleep(&self, d: Duration);
}

/// The machine's monotonic clock, from the instant the mailbox was made.
impl Clock for Instant {
    fn now(&self) -> Duration {
        self.elapsed()
    }
    fn sleep(&self, d: Duration) {
        std::thread::sleep(d);
    }
}

/// How long the mailbox waits, and how often it looks. Defaults are the values of
/// `sriov-vf.md` (tinygrad's VF driver); tests shorten them or run them on a
/// [`VirtualClock`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MailboxTimings {
    /// Wait for `TRN_MSG_ACK` to drop after clearing `TRN_MSG_VALID`. The hardware drops the
    /// ack as soon as the PF's side sees VALID cleared, so this only fires when the mailbox is
    /// wedged; 1 s leaves room for a PF busy with other VFs.
    pub ack_clear_timeout: Duration,
    /// Poll interval of the ack-clear wait: 1 ms, because the clear normally takes
    /// microseconds.
    pub ack_clear_poll: Duration,
    /// Wait for the PF to acknowledge a request: 500 ms, Linux's
    /// `NV_MAILBOX_POLL_ACK_TIMEDOUT`. The PF acks from its interrupt handler; a PF that does
    /// not ack in that time is not listening, so this is not retried.
    pub ack_timeout: Duration,
    /// Poll interval of the ack wait: 5 ms, a hundred looks within the deadline.
    pub ack_poll: Duration,
    /// Poll interval of the event wait: 10 ms, since the PF's answer takes milliseconds to
    /// seconds (it may be preparing the VF's VRAM).
    pub event_poll: Duration,
    /// Event wait of each try of `INIT_DATA` and `INIT_ACCESS`: 2 s per try, which is what
    /// the MI350X host answers within (tinygrad); Linux waits up to 15 s
    /// (`NV_MAILBOX_POLL_MSG_TIMEDOUT`) once, we instead ask again.
    pub init_event_timeout: Duration,
    /// Tries of `INIT_DATA` and `INIT_ACCESS` when the event does not come: 5, so a PF that
    /// lost one message (it answers one VF at a time) gets asked again within 10 s.
    pub init_tries: u32,
}

impl Default for MailboxTimings {
    fn default() -> Self {
        Self {
            ack_clear_timeout: Duration::from_secs(1),
            ack_clear_poll: Duration::from_millis(1),
            ack_timeout: Duration::from_millis(500),
            ack_poll: Duration::from_millis(5),
            event_poll: Duration::from_millis(10),
            init_event_timeout: Duration::from_secs(2),
            init_tries: 5,
        }
    }
}

/// The VF side of the VF/PF mailbox in BAR5.
#[derive(Clone)]
pub struct VfMailbox {
    device: String,
    mmio: Arc<dyn Bar>,
    timings: MailboxTimings,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for VfMailbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VfMailbox({}, {:?})", self.device, self.timings)
    }
}

impl VfMailbox {
    /// The mailbox of `device` in its BAR5 `mmio`, waiting with `timings` on the system
    /// clock.
    pub fn new(device: impl Into<String>, mmio: Arc<dyn Bar>, timings: MailboxTimings) -> Self {
        Self {
            device: device.into(),
            mmio,
            timings,
            clock: Arc::new(Instant::now()),
        }
    }

    /// The same mailbox waiting on another clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// `IDH_REQ_GPU_INIT_DATA` (data2 = v2 critical region) until
    /// `IDH_REQ_GPU_INIT_DATA_READY`: the first message of a VF open.
    pub fn request_init_data(&self) -> Result<()> {
        self.send(
            IdhRequest::ReqGpuInitData,
            [0, GPU_CRIT_REGION_V2, 0],
            Some(IdhEvent::ReqGpuInitDataReady),
        )
    }

    /// `IDH_REQ_GPU_INIT_ACCESS` until `IDH_READY_TO_ACCESS_GPU`. From then on MMIO and VRAM
    /// are the VF's until the returned lease is released or dropped. When this fails no lease
    /// exists and nothing is released.
    pub fn request_init_access(&self) -> Result<VfLease> {
        self.send(
            IdhRequest::ReqGpuInitAccess,
            [0; 3],
            Some(IdhEvent::ReadyToAccessGpu),
        )?;
        Ok(VfLease(Some(self.clone())))
    }

    /// Send `request` with `data` (`TRN_DW1..3`) and, with `event`, poll for that answer
    /// ([`MailboxTimings::init_event_timeout`] per try, up to `init_tries` tries).
    ///
    /// A stale pending event is acknowledged first. Only the event wait is retried: a
    /// mailbox whose ack does not clear, or a request the PF does not acknowledge, fails at
    /// once.
    fn send(&self, request: IdhRequest, data: [u32; 3], event: Option<IdhEvent>) -> Result<()> {
        let (mmio, t) = (&*self.mmio, &self.timings);
        if mmio.read8(RCV)? & RCV_MSG_VALID != 0 {
            // An event left from an earlier exchange would otherwise stay pending while the
            // PF posts ours.
            tracing::debug!("{}: acknowledging a stale VF mailbox event", self.device);
            mmio.write8(RCV, RCV_MSG_ACK)?;
        }
        let Some(event) = event else {
            return self.transmit(request, data);
        };
        let (tries, timeout) = (t.init_tries.max(1), t.init_event_timeout);
        let mut last = 0;
        for attempt in 1..=tries {
            self.transmit(request, data)?;
            let seen = self.wait(timeout, t.event_poll, || {
                last = mmio.read32(RCV_DW0)?;
                Ok(last == event as u32)
            })?;
            if seen {
                return mmio.write8(RCV, RCV_MSG_ACK);
            }
            if attempt < tries {
                tracing::debug!(
                    "{}: retrying VF mailbox request {request} ({attempt}/{tries})",
                    self.device
                );
            }
        }
        Err(Error::new(
            &self.device,
            ErrorKind::VfMailboxNoEvent {
                request,
                event,
                tries,
                timeout,
                last,
            },
        ))
    }

    /// One transmission: wait for the previous ack to drop, write the message, set VALID,
    /// wait for the PF's ack, clear VALID.
    fn transmit(&self, request: IdhRequest, data: [u32; 3]) -> Result<()> {
        let (mmio, t) = (&*self.mmio, &self.timings);
        // Clearing VALID is what makes the hardware drop the PF's ack of the last message;
        // until it has, a fresh VALID would see the old ack and look acknowledged at once.
        if !self.wait(t.ack_clear_timeout, t.ack_clear_poll, || {
            mmio.write8(TRN, 0)?;
            Ok(mmio.read8(TRN)? & TRN_MSG_ACK == 0)
        })? {
            return Err(Error::new(
                &self.device,
                ErrorKind::VfMailboxAckNotCleared {
                    request,
                    timeout: t.ack_clear_timeout,
                },
            ));
        }
        for (at, dw) in (TRN_DW0..)
            .step_by(4)
            .zip([request as u32, data[0], data[1], data[2]])
        {
            mmio.write32(at, dw)?;
        }
        mmio.write8(TRN, TRN_MSG_VALID)?;
        if !self.wait(t.ack_timeout, t.ack_poll, || {
            Ok(mmio.read8(TRN)? & TRN_MSG_ACK != 0)
        })? {
            return Err(Error::new(
                &self.device,
                ErrorKind::VfMailboxNotAcknowledged {
                    request,
                    timeout: t.ack_timeout,
                },
            ));
        }
        mmio.write8(TRN, 0)
    }

    /// Look at `done` every `poll` until it holds (`true`) or `timeout` has passed
    /// (`false`).
    fn wait(
        &self,
        timeout: Duration,
        poll: Duration,
        mut done: impl FnMut() -> Result<bool>,
    ) -> Result<bool> {
        let deadline = self.clock.now() + timeout;
        while !done()? {
            if self.clock.now() > deadline {
                return Ok(false);
            }
            self.clock.sleep(poll);
        }
        Ok(true)
    }
}

/// The init-access lease a VF holds from `READY_TO_ACCESS_GPU` on.
///
/// Released with `IDH_REL_GPU_INIT_ACCESS` exactly once: by [`VfLease::release`] or on
/// drop, whichever comes first. A release that fails is logged and otherwise ignored: the
/// driver is going away either way, and the PF reclaims the VF's access when it resets it.
#[derive(Debug)]
pub struct VfLease(Option<VfMailbox>);

impl VfLease {
    /// Give MMIO and VRAM access back to the PF. Later calls (and the drop) do nothing.
    pub fn release(&mut self) {
        let Some(mb) = self.0.take() else { return };
        match mb.send(IdhRequest::RelGpuInitAccess, [0; 3], None) {
            Ok(()) => tracing::debug!("{}: VF init access released", mb.device),
            Err(e) => tracing::warn!("{}: releasing VF init access failed: {e}", mb.device),
        }
    }

    /// Whether the lease has been given back.
    pub fn is_released(&self) -> bool {
        self.0.is_none()
    }
}

impl Drop for VfLease {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BAR5 with only `RCC_IOV_FUNC_IDENTIFIER`.
    struct FuncId(u32);

    impl Bar for FuncId {
        fn len(&self) -> u64 {
            0x8_0000
        }
        fn read32(&self, offset: u64) -> Result<u32> {
            assert_eq!(offset, RCC_IOV_FUNC_IDENTIFIER);
            Ok(self.0)
        }
        fn write32(&self, _: u64, _: u32) -> Result<()> {
            panic!("is_vf must not write")
        }
        fn read_bytes(&self, _: u64, _: &mut [u8]) -> Result<()> {
            panic!("is_vf reads one dword")
        }
        fn write_bytes(&self, _: u64, _: &[u8]) -> Result<()> {
            panic!("is_vf must not write")
        }
    }

    #[test]
    fn is_vf_reads_func_identifier_bit0() {
        assert!(is_vf(&FuncId(0x8000_0001)).unwrap());
        assert!(is_vf(&FuncId(1)).unwrap());
        assert!(!is_vf(&FuncId(0x8000_0000)).unwrap());
        assert!(!is_vf(&FuncId(0)).unwrap());
    }

    #[test]
    fn message_codes_are_linux_values() {
        use IdhEvent as E;
        use IdhRequest as R;
        let reqs = [
            (R::ReqGpuInitAccess, 1),
            (R::RelGpuInitAccess, 2),
            (R::ReqGpuInitData, 6),
        ];
        for (r, code) in reqs {
            assert_eq!(r as u32, code, "{}", r.name());
        }
        assert_eq!(E::ReadyToAccessGpu as u32, 1);
        assert_eq!(E::ReqGpuInitDataReady as u32, 7);
        assert_eq!(R::ReqGpuInitData.to_string(), "0x6 (IDH_REQ_GPU_INIT_DATA)");
    }
}
