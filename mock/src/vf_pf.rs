//! The host PF's side of the VF/PF mailbox, as a VF sees it in its BAR5 (`mxgpu_nv.h`,
//! `sriov-vf.md`).
//!
//! Registers (BAR5 dwords): `MAILBOX_MSGBUF_TRN_DW0..3` (0xE56..0xE59, the VF's request),
//! `MAILBOX_MSGBUF_RCV_DW0..3` (0xE5A..0xE5D, the PF's event) and `MAILBOX_CONTROL`
//! (0xE5E), used one byte at a time: byte 0 (TRN) bit 0 `TRN_MSG_VALID` (VF), bit 1
//! `TRN_MSG_ACK` (PF); byte 1 (RCV) bit 0 `RCV_MSG_VALID` (PF), write 2 to acknowledge.
//!
//! The PF answers `IDH_REQ_GPU_INIT_DATA` with `IDH_REQ_GPU_INIT_DATA_READY`,
//! `IDH_REQ_GPU_INIT_ACCESS` with `IDH_READY_TO_ACCESS_GPU` (and grants MMIO/VRAM access),
//! and takes `IDH_REL_GPU_INIT_ACCESS` without an answer (and revokes access). The device
//! gates everything but the mailbox and `RCC_IOV_FUNC_IDENTIFIER` on
//! [`VfPf::access_granted`].
//!
//! Time is counted in polls, not wall time, so tests are deterministic: every read of the
//! control register (either byte, or the dword) and every read of `RCV_DW0` is one poll, and
//! the PF acts before the read returns. With no faults, the first poll after `TRN_MSG_VALID`
//! sees the ack and the event is in `RCV_DW0` at once.
//!
//! This file is written independently of the driver's mailbox code (its own constants from
//! the Linux header), so that a mistake in one is not mirrored by the other.

/// `MAILBOX_MSGBUF_TRN_DW0` (BAR5 dword): request code; `TRN_DW1..3` follow with its data.
pub const MAILBOX_MSGBUF_TRN_DW0: u64 = 0xe56;
/// `MAILBOX_MSGBUF_RCV_DW0` (BAR5 dword): event code; `RCV_DW1..3` follow.
pub const MAILBOX_MSGBUF_RCV_DW0: u64 = 0xe5a;
/// `MAILBOX_CONTROL` (BAR5 dword).
pub const MAILBOX_CONTROL: u64 = 0xe5e;

/// Byte address of the TRN control byte.
const TRN_BYTE: u64 = MAILBOX_CONTROL * 4;
/// Byte address of the RCV control byte.
const RCV_BYTE: u64 = MAILBOX_CONTROL * 4 + 1;
const TRN_MSG_VALID: u8 = 1 << 0;
const TRN_MSG_ACK: u8 = 1 << 1;
const RCV_MSG_VALID: u8 = 1 << 0;
const RCV_MSG_ACK: u8 = 1 << 1;

/// `IDH_REQ_GPU_INIT_ACCESS` (`enum idh_request`).
pub const IDH_REQ_GPU_INIT_ACCESS: u32 = 1;
/// `IDH_REL_GPU_INIT_ACCESS`.
pub const IDH_REL_GPU_INIT_ACCESS: u32 = 2;
/// `IDH_REQ_GPU_INIT_DATA`.
pub const IDH_REQ_GPU_INIT_DATA: u32 = 6;
/// `IDH_READY_TO_ACCESS_GPU` (`enum idh_event`).
pub const IDH_READY_TO_ACCESS_GPU: u32 = 1;
/// `IDH_REQ_GPU_INIT_DATA_READY`.
pub const IDH_REQ_GPU_INIT_DATA_READY: u32 = 7;

/// Misbehaviour to inject into the PF. Counters apply to the next requests and count down.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PfFaults {
    /// Polls the PF lets pass after `TRN_MSG_VALID` before it acks (0: the first poll sees
    /// the ack).
    pub ack_delay_polls: u64,
    /// The next this many requests are never acknowledged (nor acted on).
    pub drop_acks: u32,
    /// Polls between the ack and the PF's answer (and its effect on access).
    pub event_delay_polls: u64,
    /// The next this many answers are lost: the PF acts on the request (grants or revokes
    /// access) but `RCV_DW0`/`RCV_MSG_VALID` are not written.
    pub drop_events: u32,
    /// Polls after the VF clears `TRN_MSG_VALID` before `TRN_MSG_ACK` drops.
    pub ack_clear_delay_polls: u64,
    /// `TRN_MSG_ACK` never drops once set: a wedged mailbox.
    pub ack_stuck: bool,
}

/// One step of the conversation, in the order it happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MailboxMessage {
    /// The VF set `TRN_MSG_VALID` with this request in `TRN_DW0` and data in `TRN_DW1..3`.
    Request {
        /// `TRN_DW0`.
        request: u32,
        /// `TRN_DW1..3`.
        data: [u32; 3],
    },
    /// The PF set `TRN_MSG_ACK` for a request.
    Ack {
        /// The request acknowledged.
        request: u32,
    },
    /// The PF took a request and, by fault injection, never acknowledged it.
    AckDropped {
        /// The request.
        request: u32,
    },
    /// The PF posted an event (`RCV_DW0`, `RCV_MSG_VALID`).
    Event {
        /// The event code.
        event: u32,
    },
    /// The PF's event was lost by fault injection.
    EventDropped {
        /// The event code that was not posted.
        event: u32,
    },
    /// An event left pending from before, posted by [`VfPf::post_stale_event`].
    StaleEvent {
        /// The event code.
        event: u32,
    },
    /// The VF acknowledged the pending event (wrote 2 to the RCV byte while
    /// `RCV_MSG_VALID` was set).
    EventAck {
        /// The code in `RCV_DW0` at that time.
        event: u32,
    },
}

/// The PF side of one VF's mailbox. Accesses take BAR5 byte offsets; a read or write that
/// breaks the mailbox's contract (wrong width, a PF-owned register, a reserved bit) is an
/// `Err` with the reason, for the device to report as a violation.
#[derive(Clone, Debug, Default)]
pub struct VfPf {
    trn_dw: [u32; 4],
    rcv_dw: [u32; 4],
    trn_valid: bool,
    trn_ack: bool,
    rcv_valid: bool,
    access: bool,
    polls: u64,
    /// Poll at which the pending request is acked, and the request.
    ack_due: Option<(u64, u32)>,
    /// Poll at which `TRN_MSG_ACK` drops.
    ack_clear_due: Option<u64>,
    /// Poll at which the PF answers, and the request it answers.
    answer_due: Option<(u64, u32)>,
    /// Faults still to inject.
    pub faults: PfFaults,
    log: crate::log::BoundedLog<MailboxMessage>,
}

impl VfPf {
    /// A PF with an empty mailbox and the VF's access not granted.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the VF holds init access (MMIO and VRAM readable).
    pub fn access_granted(&self) -> bool {
        self.access
    }

    /// The conversation so far (the latest 1024 messages at least).
    pub fn log(&self) -> &[MailboxMessage] {
        self.log.as_slice()
    }

    /// The conversation so far, leaving the record empty.
    pub fn take_log(&mut self) -> Vec<MailboxMessage> {
        self.log.take()
    }

    /// How many polls the VF has made.
    pub fn polls(&self) -> u64 {
        self.polls
    }

    /// Leave `event` pending in `RCV_DW0` with `RCV_MSG_VALID` set, as an earlier driver
    /// instance that did not acknowledge its last event would.
    pub fn post_stale_event(&mut self, event: u32) {
        self.rcv_dw = [event, 0, 0, 0];
        self.rcv_valid = true;
        self.log.push(MailboxMessage::StaleEvent { event });
    }

    /// Whether a BAR5 byte offset falls in the mailbox registers.
    pub fn contains(offset: u64) -> bool {
        (MAILBOX_MSGBUF_TRN_DW0 * 4..(MAILBOX_CONTROL + 1) * 4).contains(&offset)
    }

    /// The register name at a dword-aligned BAR5 byte offset.
    pub fn register_name(offset: u64) -> Option<&'static str> {
        const NAMES: [&str; 9] = [
            "MAILBOX_MSGBUF_TRN_DW0",
            "MAILBOX_MSGBUF_TRN_DW1",
            "MAILBOX_MSGBUF_TRN_DW2",
            "MAILBOX_MSGBUF_TRN_DW3",
            "MAILBOX_MSGBUF_RCV_DW0",
            "MAILBOX_MSGBUF_RCV_DW1",
            "MAILBOX_MSGBUF_RCV_DW2",
            "MAILBOX_MSGBUF_RCV_DW3",
            "MAILBOX_CONTROL",
        ];
        if !Self::contains(offset) || !offset.is_multiple_of(4) {
            return None;
        }
        let i = usize::try_from(offset / 4 - MAILBOX_MSGBUF_TRN_DW0).ok()?;
        NAMES.get(i).copied()
    }

    /// Read one byte: only the control register's bytes.
    pub fn read8(&mut self, offset: u64) -> Result<u8, String> {
        match offset {
            TRN_BYTE => {
                self.poll();
                Ok(self.trn_byte())
            }
            RCV_BYTE => {
                self.poll();
                Ok(self.rcv_byte())
            }
            o if o / 4 == MAILBOX_CONTROL => Ok(0),
            o => Err(self.width_error(o, 1)),
        }
    }

    /// Write one byte: only the control register's bytes.
    pub fn write8(&mut self, offset: u64, value: u8) -> Result<(), String> {
        match offset {
            TRN_BYTE => self.write_trn(value),
            RCV_BYTE => self.write_rcv(value),
            o if o / 4 == MAILBOX_CONTROL => Err(format!(
                "MAILBOX_CONTROL byte {} is reserved (write {value:#x})",
                o % 4
            )),
            o => Err(self.width_error(o, 1)),
        }
    }

    /// Read a dword: the message buffers, or the whole control register (a poll).
    pub fn read32(&mut self, offset: u64) -> Result<u32, String> {
        let Some(i) = self.dword_index(offset)? else {
            self.poll();
            return Ok(u32::from(self.trn_byte()) | u32::from(self.rcv_byte()) << 8);
        };
        Ok(match i {
            0..4 => self.trn_dw[i],
            _ => {
                if i == 4 {
                    self.poll();
                }
                self.rcv_dw[i - 4]
            }
        })
    }

    /// Write a dword: only `TRN_DW0..3`. The control register takes byte writes only (a
    /// dword write would also write the RCV byte).
    pub fn write32(&mut self, offset: u64, value: u32) -> Result<(), String> {
        match self.dword_index(offset)? {
            Some(i @ 0..4) => {
                self.trn_dw[i] = value;
                Ok(())
            }
            Some(i) => Err(format!(
                "MAILBOX_MSGBUF_RCV_DW{} is written by the PF only (VF wrote {value:#x})",
                i - 4
            )),
            None => Err(format!(
                "MAILBOX_CONTROL is byte-wide: write TRN at byte {TRN_BYTE:#x} and RCV at byte \
                 {RCV_BYTE:#x}, not the dword ({value:#x})"
            )),
        }
    }

    /// `Some(i)` for `TRN_DW0..3` (0..4) and `RCV_DW0..3` (4..8), `None` for the control
    /// register.
    fn dword_index(&self, offset: u64) -> Result<Option<usize>, String> {
        if !Self::contains(offset) || !offset.is_multiple_of(4) {
            return Err(self.width_error(offset, 4));
        }
        let i = offset / 4 - MAILBOX_MSGBUF_TRN_DW0;
        Ok(if i == 8 {
            None
        } else {
            usize::try_from(i).ok()
        })
    }

    fn width_error(&self, offset: u64, size: u8) -> String {
        match Self::register_name(offset & !3) {
            Some(name) => format!("{size}-byte access at {offset:#x} inside {name}"),
            None => format!("{offset:#x} is not a VF mailbox register"),
        }
    }

    fn trn_byte(&self) -> u8 {
        (u8::from(self.trn_valid) * TRN_MSG_VALID) | (u8::from(self.trn_ack) * TRN_MSG_ACK)
    }

    fn rcv_byte(&self) -> u8 {
        u8::from(self.rcv_valid) * RCV_MSG_VALID
    }

    fn write_trn(&mut self, value: u8) -> Result<(), String> {
        if value & !TRN_MSG_VALID != 0 {
            return Err(format!(
                "MAILBOX_CONTROL TRN byte: the VF sets only TRN_MSG_VALID (bit 0), wrote \
                 {value:#x} (TRN_MSG_ACK belongs to the PF)"
            ));
        }
        let valid = value & TRN_MSG_VALID != 0;
        match (self.trn_valid, valid) {
            (false, true) => {
                let request = self.trn_dw[0];
                let data = [self.trn_dw[1], self.trn_dw[2], self.trn_dw[3]];
                self.log.push(MailboxMessage::Request { request, data });
                if self.faults.drop_acks > 0 {
                    self.faults.drop_acks -= 1;
                    self.log.push(MailboxMessage::AckDropped { request });
                } else {
                    self.ack_due = Some((
                        (self.polls + 1).saturating_add(self.faults.ack_delay_polls),
                        request,
                    ));
                }
            }
            (true, false) => {
                // A request withdrawn before the ack is never taken.
                self.ack_due = None;
            }
            _ => {}
        }
        self.trn_valid = valid;
        if !valid && self.trn_ack && self.ack_clear_due.is_none() && !self.faults.ack_stuck {
            self.ack_clear_due =
                Some((self.polls + 1).saturating_add(self.faults.ack_clear_delay_polls));
        }
        Ok(())
    }

    fn write_rcv(&mut self, value: u8) -> Result<(), String> {
        if value != RCV_MSG_ACK {
            return Err(format!(
                "MAILBOX_CONTROL RCV byte: the only write is {RCV_MSG_ACK} (acknowledge), \
                 wrote {value:#x}"
            ));
        }
        if self.rcv_valid {
            self.rcv_valid = false;
            self.log.push(MailboxMessage::EventAck {
                event: self.rcv_dw[0],
            });
        }
        Ok(())
    }

    /// One poll: the PF does whatever has come due.
    fn poll(&mut self) {
        self.polls += 1;
        let now = self.polls;
        if self.ack_clear_due.is_some_and(|due| due <= now) {
            self.ack_clear_due = None;
            self.trn_ack = false;
        }
        if let Some((due, request)) = self.ack_due
            && due <= now
        {
            self.ack_due = None;
            self.trn_ack = true;
            self.log.push(MailboxMessage::Ack { request });
            self.answer_due = Some((now.saturating_add(self.faults.event_delay_polls), request));
        }
        if let Some((due, request)) = self.answer_due
            && due <= now
        {
            self.answer_due = None;
            self.answer(request);
        }
    }

    /// The PF acts on a request and posts its event, if it has one.
    fn answer(&mut self, request: u32) {
        let event = match request {
            IDH_REQ_GPU_INIT_DATA => IDH_REQ_GPU_INIT_DATA_READY,
            IDH_REQ_GPU_INIT_ACCESS => {
                self.access = true;
                IDH_READY_TO_ACCESS_GPU
            }
            IDH_REL_GPU_INIT_ACCESS => {
                self.access = false;
                return;
            }
            // Requests this PF does not serve (FINI access, reset) are acked and ignored,
            // and the driver never sends them.
            _ => return,
        };
        if self.faults.drop_events > 0 {
            self.faults.drop_events -= 1;
            self.log.push(MailboxMessage::EventDropped { event });
            return;
        }
        self.rcv_dw = [event, 0, 0, 0];
        self.rcv_valid = true;
        self.log.push(MailboxMessage::Event { event });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DW0: u64 = MAILBOX_MSGBUF_TRN_DW0 * 4;
    const RCV0: u64 = MAILBOX_MSGBUF_RCV_DW0 * 4;

    fn send(pf: &mut VfPf, request: u32) {
        pf.write32(DW0, request).unwrap();
        pf.write8(TRN_BYTE, TRN_MSG_VALID).unwrap();
    }

    #[test]
    fn init_access_is_acked_answered_and_grants_access() {
        let mut pf = VfPf::new();
        send(&mut pf, IDH_REQ_GPU_INIT_ACCESS);
        assert!(!pf.access_granted());
        assert_eq!(pf.read8(TRN_BYTE).unwrap(), TRN_MSG_VALID | TRN_MSG_ACK);
        assert!(pf.access_granted());
        pf.write8(TRN_BYTE, 0).unwrap();
        assert_eq!(
            pf.read8(TRN_BYTE).unwrap(),
            0,
            "ACK drops once VALID is cleared"
        );
        assert_eq!(pf.read8(RCV_BYTE).unwrap(), RCV_MSG_VALID);
        assert_eq!(pf.read32(RCV0).unwrap(), IDH_READY_TO_ACCESS_GPU);
        pf.write8(RCV_BYTE, RCV_MSG_ACK).unwrap();
        assert_eq!(pf.read8(RCV_BYTE).unwrap(), 0);
        send(&mut pf, IDH_REL_GPU_INIT_ACCESS);
        pf.read8(TRN_BYTE).unwrap();
        assert!(!pf.access_granted());
        use MailboxMessage as M;
        assert_eq!(
            pf.log(),
            [
                M::Request {
                    request: 1,
                    data: [0; 3]
                },
                M::Ack { request: 1 },
                M::Event { event: 1 },
                M::EventAck { event: 1 },
                M::Request {
                    request: 2,
                    data: [0; 3]
                },
                M::Ack { request: 2 },
            ]
        );
    }

    #[test]
    fn ack_delay_counts_polls() {
        let mut pf = VfPf::new();
        pf.faults.ack_delay_polls = 3;
        send(&mut pf, IDH_REQ_GPU_INIT_DATA);
        for _ in 0..3 {
            assert_eq!(pf.read8(TRN_BYTE).unwrap(), TRN_MSG_VALID);
        }
        assert_eq!(pf.read8(TRN_BYTE).unwrap(), TRN_MSG_VALID | TRN_MSG_ACK);
    }

    #[test]
    fn stuck_ack_never_drops() {
        let mut pf = VfPf::new();
        pf.faults.ack_stuck = true;
        send(&mut pf, IDH_REQ_GPU_INIT_DATA);
        pf.read8(TRN_BYTE).unwrap();
        pf.write8(TRN_BYTE, 0).unwrap();
        for _ in 0..100 {
            assert_eq!(pf.read8(TRN_BYTE).unwrap(), TRN_MSG_ACK);
        }
    }

    #[test]
    fn dropped_event_still_acts_on_the_request() {
        let mut pf = VfPf::new();
        pf.faults.drop_events = 1;
        send(&mut pf, IDH_REQ_GPU_INIT_ACCESS);
        pf.read8(TRN_BYTE).unwrap();
        assert!(pf.access_granted());
        assert_eq!(pf.read32(RCV0).unwrap(), 0);
        assert_eq!(pf.read8(RCV_BYTE).unwrap(), 0);
        assert_eq!(pf.faults.drop_events, 0);
    }

    #[test]
    fn contract_violations_are_errors() {
        let mut pf = VfPf::new();
        let ctl = MAILBOX_CONTROL * 4;
        assert!(pf.write32(ctl, 1).unwrap_err().contains("byte-wide"));
        assert!(
            pf.write32(RCV0, 1)
                .unwrap_err()
                .contains("written by the PF only")
        );
        assert!(
            pf.write8(TRN_BYTE, TRN_MSG_ACK)
                .unwrap_err()
                .contains("TRN_MSG_ACK")
        );
        assert!(pf.write8(RCV_BYTE, 1).unwrap_err().contains("acknowledge"));
        assert!(
            pf.read8(DW0)
                .unwrap_err()
                .contains("MAILBOX_MSGBUF_TRN_DW0")
        );
        assert!(
            pf.read32(0x1000)
                .unwrap_err()
                .contains("not a VF mailbox register")
        );
        assert!(pf.log().is_empty());
    }
}
