//! Hardware queues: a ring in system memory the CPU writes packets into, a write pointer in
//! memory, a doorbell. The engine writes its read pointer back; the CPU waits for room with
//! it before overwriting packets the engine has not read.

use std::time::{Duration, Instant};

use am_driver::ip::gfx::QueueId;
use am_driver::ip::sdma::SdmaQueueId;

use std::sync::{Arc, Mutex, MutexGuard};

use zerocopy::IntoBytes;

use crate::commands::Launches;
use crate::device::{Device, Inner};
use crate::encode::{DataSel, Pm4, Sdma};
use crate::memory::Buffer;
use crate::signal::Signal;
use crate::{Error, Result};
use am_autogen::packets::{aql, qword};

/// Packets of a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueKind {
    /// PM4 type-3 packets on a compute ring (write pointer in dwords).
    Pm4,
    /// 64-byte AQL packets on an HSA queue (write pointer in packets).
    Aql,
    /// SDMA packets (write pointer in bytes).
    Sdma,
}

/// Offsets in a queue's control page: the engine's read pointer and the write pointer it
/// polls (an `amd_queue_t`'s `read_dispatch_id` and `write_dispatch_id` for compute queues).
pub(crate) const COMPUTE_RPTR: u64 = 0x80;
pub(crate) const COMPUTE_WPTR: u64 = 0x38;
pub(crate) const SDMA_RPTR: u64 = 0;
pub(crate) const SDMA_WPTR: u64 = 8;

/// How the driver knows the queue (to remove or recreate it).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Handle {
    Compute(QueueId),
    Sdma(SdmaQueueId),
}

/// One hardware queue of a device.
pub(crate) struct HwQueue {
    pub(crate) kind: QueueKind,
    pub(crate) name: String,
    pub(crate) ring: Buffer,
    pub(crate) ring_size: u64,
    pub(crate) ctl: Buffer,
    pub(crate) doorbell: u32,
    /// Units written so far (dwords, packets or bytes).
    pub(crate) put: u64,
    /// The engine's read pointer when last read, plus the ring's capacity: writing below it
    /// overwrites nothing unread.
    room_until: u64,
    pub(crate) handle: Handle,
    /// Memory the queue needs as long as it runs (its EOP buffer).
    _keep: Vec<Buffer>,
    /// The queue's timeline: every submission ends by setting it to the submission's value.
    pub(crate) timeline: crate::Signal,
    /// The value of the last submission.
    pub(crate) last: u64,
    /// AQL queues: memory for the PM4 IBs the vendor packets run, reused as a ring.
    pub(crate) ibs: Option<(Buffer, u64)>,
    /// The launches of submissions with their timeline values, kept until they are done:
    /// named in fault reports, their code kept alive.
    pub(crate) inflight: std::collections::VecDeque<(u64, Arc<Launches>)>,
    /// The end of every submission, encoded once: it signals the timeline
    /// ([`HwQueue::tail`] patches the value in at `tail_at`).
    pub(crate) tail_words: Vec<u32>,
    pub(crate) tail_at: usize,
    /// GFX9 (MI300: SDMA 4.4) packet layouts, for reports.
    gfx9: bool,
}

/// Submissions with launches a queue holds before it looks which have finished.
const INFLIGHT_PRUNE: usize = 256;

/// How long the CPU waits for room in a ring before the engine is taken for hung.
const ROOM_TIMEOUT: Duration = Duration::from_secs(30);

/// How a queue is made, kept to start it again after a recovery.
pub(crate) struct HwQueueParts {
    pub(crate) kind: QueueKind,
    pub(crate) name: String,
    pub(crate) ring: Buffer,
    pub(crate) ctl: Buffer,
    pub(crate) doorbell: u32,
    pub(crate) handle: Handle,
    pub(crate) keep: Vec<Buffer>,
    pub(crate) timeline: Signal,
    pub(crate) last: u64,
    pub(crate) ibs: Option<Buffer>,
    pub(crate) gfx9: bool,
}

impl HwQueue {
    pub(crate) fn new(p: HwQueueParts) -> HwQueue {
        let (tail_words, tail_at) = match p.kind {
            QueueKind::Sdma => {
                let mut s = Sdma::new(!p.gfx9);
                let at = s.write64(p.timeline.va(), 0);
                (s.words, at)
            }
            QueueKind::Pm4 | QueueKind::Aql => {
                let mut m = Pm4::new(p.gfx9);
                let at = m.release_mem(p.timeline.va(), 0, DataSel::Data64, false, 0);
                (m.words, at)
            }
        };
        HwQueue {
            kind: p.kind,
            name: p.name,
            ring_size: p.ring.size(),
            ring: p.ring,
            ctl: p.ctl,
            doorbell: p.doorbell,
            put: 0,
            room_until: 0,
            handle: p.handle,
            _keep: p.keep,
            timeline: p.timeline,
            last: p.last,
            ibs: p.ibs.map(|b| (b, 0)),
            inflight: std::collections::VecDeque::new(),
            tail_words,
            tail_at,
            gfx9: p.gfx9,
        }
    }

    /// Bytes per ring unit.
    fn unit(&self) -> u64 {
        match self.kind {
            QueueKind::Pm4 => 4,
            QueueKind::Aql => 64,
            QueueKind::Sdma => 1,
        }
    }

    /// The read pointer the engine wrote back, in ring units, as a total comparable with
    /// `put` (a PM4 ring reports an offset inside the ring: the total is reconstructed from
    /// `put`, which is never more than a ring ahead).
    pub(crate) fn rptr(&self) -> Result<u64> {
        let (mem, base) = self.ctl.sysmem().ok_or_else(|| Error::State {
            device: self.name.clone(),
            reason: "queue control page is not in system memory".into(),
        })?;
        let mut b = [0u8; 8];
        let off = match self.kind {
            QueueKind::Sdma => SDMA_RPTR,
            _ => COMPUTE_RPTR,
        };
        mem.read_bytes(base + off, &mut b)?;
        let raw = u64::from_le_bytes(b);
        Ok(match self.kind {
            QueueKind::Pm4 => {
                let ring_dw = self.ring_size / 4;
                let off = (raw & 0xffff_ffff) % ring_dw;
                let put_off = self.put % ring_dw;
                let behind = (put_off + ring_dw - off) % ring_dw;
                self.put - behind
            }
            _ => raw,
        })
    }

    /// Wait until `units` more fit without overwriting what the engine has not read.
    fn wait_room(&mut self, units: u64) -> Result<()> {
        let capacity = self.ring_size / self.unit();
        if units >= capacity {
            return Err(Error::State {
                device: self.name.clone(),
                reason: format!("a submission of {units} units does not fit a ring of {capacity}"),
            });
        }
        // What the engine had read when last looked at bounds the room: only when that is
        // not enough is the read pointer read again.
        if self.put + units < self.room_until {
            return Ok(());
        }
        let start = Instant::now();
        loop {
            let rptr = self.rptr()?.min(self.put);
            self.room_until = rptr + capacity;
            let used = self.put - rptr;
            if used + units < capacity {
                return Ok(());
            }
            if start.elapsed() > ROOM_TIMEOUT {
                return Err(Error::State {
                    device: self.name.clone(),
                    reason: format!(
                        "no room in the ring for {:?} (read pointer stuck {used} units behind)",
                        start.elapsed()
                    ),
                });
            }
            std::thread::yield_now();
        }
    }

    /// Write `parts` (whole units, in order) at the write pointer, wrapping around the ring,
    /// publish the write pointer and ring the doorbell.
    pub(crate) fn submit(&mut self, dev: &Inner, parts: &[&[u8]]) -> Result<()> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let units = len as u64 / self.unit();
        self.wait_room(units)?;
        // What the CPU wrote to VRAM through BAR0 (arguments, code, data; this device's and
        // its hive peers') must be visible before the engine can read it. The write pointer
        // below publishes the packets: the engines poll it in memory, so an engine may run
        // them before the doorbell, and the flush cannot wait until then.
        dev.flush_hdp_if_dirty()?;
        let (mem, base) = self.ring.sysmem().ok_or_else(|| Error::State {
            device: self.name.clone(),
            reason: "ring is not in system memory".into(),
        })?;
        let mut at = (self.put * self.unit()) % self.ring_size;
        for bytes in parts {
            let first = (bytes.len() as u64).min(self.ring_size - at) as usize;
            mem.write_bytes(base + at, &bytes[..first])?;
            if first < bytes.len() {
                mem.write_bytes(base, &bytes[first..])?;
            }
            at = (at + bytes.len() as u64) % self.ring_size;
        }
        self.put += units;
        let (ctl, cbase) = self.ctl.sysmem().ok_or_else(|| Error::State {
            device: self.name.clone(),
            reason: "queue control page is not in system memory".into(),
        })?;
        let wptr_off = match self.kind {
            QueueKind::Sdma => SDMA_WPTR,
            _ => COMPUTE_WPTR,
        };
        ctl.write64(cbase + wptr_off, self.put)?;
        let value = match self.kind {
            // An AQL doorbell carries the index of the last packet written.
            QueueKind::Aql => self.put - 1,
            _ => self.put,
        };
        dev.doorbells.write64(u64::from(self.doorbell) * 8, value)?;
        dev.submissions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// The packets that end a submission of value `value`: the timeline signal set once
    /// everything before has finished (PM4 `RELEASE_MEM`, SDMA `WRITE`; on AQL queues a PM4
    /// IB behind a vendor packet, returned as its 64 bytes).
    pub(crate) fn tail(&mut self, value: u64) -> Result<([u8; 64], usize)> {
        let at = self.tail_at;
        let mut out = [0u8; 64];
        let packet;
        let bytes: &[u8] = match self.kind {
            QueueKind::Pm4 | QueueKind::Sdma => {
                self.tail_words[at] = value as u32;
                self.tail_words[at + 1] = (value >> 32) as u32;
                self.tail_words.as_bytes()
            }
            QueueKind::Aql => {
                let mut words = self.tail_words.clone();
                words[at] = value as u32;
                words[at + 1] = (value >> 32) as u32;
                let ib = self.ib(&words)?;
                packet = crate::encode::aql_pm4_ib(ib, words.len());
                packet.as_bytes()
            }
        };
        out[..bytes.len()].copy_from_slice(bytes);
        Ok((out, bytes.len()))
    }

    /// Copy PM4 `words` into the queue's IB memory and return their GPU address. When the IB
    /// ring wraps, it first waits until the queue has finished everything submitted (nothing
    /// in flight still reads the IBs about to be overwritten).
    pub(crate) fn ib(&mut self, words: &[u32]) -> Result<u64> {
        let (buf, next) = self.ibs.as_mut().ok_or_else(|| Error::State {
            device: self.name.clone(),
            reason: "the queue has no IB memory".into(),
        })?;
        let len = (words.len() as u64 * 4).next_multiple_of(256);
        let mut at = *next;
        if at + len > buf.size() {
            let start = Instant::now();
            while self.timeline.value()? < self.last {
                if start.elapsed() > ROOM_TIMEOUT {
                    return Err(Error::State {
                        device: self.name.clone(),
                        reason: "IB memory stayed in use".into(),
                    });
                }
                std::thread::yield_now();
            }
            at = 0;
        }
        let (buf, next) = self.ibs.as_mut().ok_or_else(|| Error::State {
            device: self.name.clone(),
            reason: "the queue has no IB memory".into(),
        })?;
        *next = at + len;
        let (mem, base) = buf.sysmem().ok_or_else(|| Error::State {
            device: self.name.clone(),
            reason: "IB memory is not system memory".into(),
        })?;
        let bytes: Vec<u8> = words.iter().flat_map(|d| d.to_le_bytes()).collect();
        mem.write_bytes(base + at, &bytes)?;
        Ok(buf.va() + at)
    }

    /// An AQL packet for a report: a dispatch's kernel object, or the PM4 packets of a
    /// vendor packet's IB (when the IB is the queue's own).
    fn describe_aql(&self, mem: &dyn am_driver::SysMem, at: u64, h: u32) -> String {
        let mut p = [0u8; 64];
        if mem.read_bytes(at, &mut p).is_err() {
            return format!("AQL packet type {}", aql::TYPE.get(h));
        }
        let dw = |i: usize| u32::from_le_bytes(p[4 * i..4 * i + 4].try_into().unwrap_or_default());
        let qw = |i: usize| qword(dw(i), dw(i + 1));
        match aql::TYPE.get(h) {
            aql::KERNEL_DISPATCH => {
                format!(
                    "AQL kernel dispatch of the kernel object {:#x}",
                    qw(aql::dispatch::KERNEL_OBJECT)
                )
            }
            aql::BARRIER_AND => "AQL barrier-AND".into(),
            aql::VENDOR_SPECIFIC => {
                use am_autogen::packets::pm4::indirect_buffer as ib;
                let cmd = aql::vendor::PM4 + 1;
                let ib = qword(
                    dw(cmd + ib::BASE_LO),
                    ib::BASE_HI.get(dw(cmd + ib::BASE_HI.dw)),
                );
                let dwords = ib::IB_SIZE.get(dw(cmd + ib::IB_SIZE.dw)) as usize;
                let names = self.ibs.as_ref().and_then(|(buf, _)| {
                    let off = ib.checked_sub(buf.va())?;
                    let (m, b) = buf.sysmem()?;
                    let mut words = vec![0u8; dwords * 4];
                    m.read_bytes(b + off, &mut words).ok()?;
                    let words: Vec<u32> = words
                        .chunks(4)
                        .map(|c| u32::from_le_bytes(c.try_into().unwrap_or_default()))
                        .collect();
                    Some(crate::encode::pm4_names(&words).join(", "))
                });
                match names {
                    Some(n) => {
                        format!("AQL vendor packet running a PM4 IB of {dwords} dwords ({n})")
                    }
                    None => format!("AQL vendor packet running the PM4 IB at {ib:#x}"),
                }
            }
            t => format!("AQL packet type {t}"),
        }
    }

    /// The kernels of submissions not finished yet, oldest first.
    pub(crate) fn kernels_in_flight(&self) -> Vec<String> {
        let done = self.timeline.value().unwrap_or(0);
        self.inflight
            .iter()
            .filter(|(v, _)| *v > done)
            .flat_map(|(_, k)| k.names.iter().map(|n| n.to_string()))
            .collect()
    }

    /// The dwords at the read pointer, decoded as far as the runtime can, for a hang report.
    pub(crate) fn describe_at_rptr(&self) -> String {
        let Ok(r) = self.rptr() else {
            return "(read pointer unreadable)".into();
        };
        if r >= self.put {
            return format!("none pending (all {} units read)", self.put);
        }
        let Some((mem, base)) = self.ring.sysmem() else {
            return "(ring unreadable)".into();
        };
        let at = (r * self.unit()) % self.ring_size;
        let mut b = [0u8; 4];
        if mem.read_bytes(base + at, &mut b).is_err() {
            return "(ring unreadable)".into();
        }
        let h = u32::from_le_bytes(b);
        let what = match self.kind {
            QueueKind::Pm4 => crate::encode::pm4_name(h),
            QueueKind::Aql => self.describe_aql(mem.as_ref(), base + at, h),
            QueueKind::Sdma => crate::encode::sdma_name(h, !self.gfx9),
        };
        format!("{what} (header {h:#010x}) at ring offset {at:#x}")
    }
}

/// A queue slot of a device: which engine queue it is, and the running queue (absent while
/// the device is closed or being recovered).
pub(crate) struct QueueCell {
    /// Compute (a MEC queue) or copy (an SDMA engine's ring).
    pub(crate) compute: bool,
    /// The MEC queue index (pipe 0) or the SDMA engine.
    pub(crate) slot: u8,
    pub(crate) hw: Mutex<Option<HwQueue>>,
}

impl QueueCell {
    pub(crate) fn new(compute: bool, slot: u8) -> Arc<QueueCell> {
        Arc::new(QueueCell {
            compute,
            slot,
            hw: Mutex::new(None),
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Option<HwQueue>> {
        am_isa::sync::lock(&self.hw)
    }
}

/// A hardware queue of a device: its compute queue(s) or its copy (SDMA) queue(s). Command
/// buffers are submitted to a queue; cloning shares it.
#[derive(Clone)]
pub struct Queue {
    pub(crate) dev: Device,
    pub(crate) cell: Arc<QueueCell>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Queue({})", self.name())
    }
}

impl Queue {
    /// A compute queue (else a copy queue).
    pub fn is_compute(&self) -> bool {
        self.cell.compute
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.dev
    }

    /// Its name in messages (`mock:navi31 PM4 compute queue 0`).
    pub fn name(&self) -> String {
        match self.cell.lock().as_ref() {
            Some(q) => q.name.clone(),
            None => format!(
                "{} {} queue {} (stopped)",
                self.dev.name(),
                if self.cell.compute { "compute" } else { "copy" },
                self.cell.slot
            ),
        }
    }

    /// The packets it takes.
    pub fn kind(&self) -> Result<QueueKind> {
        self.with(|q| Ok(q.kind))
    }

    /// Run `f` on the running queue.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut HwQueue) -> Result<T>) -> Result<T> {
        let mut g = self.cell.lock();
        let q = g.as_mut().ok_or_else(|| Error::State {
            device: self.dev.name().into(),
            reason: format!(
                "{} queue {} is not running (device closed?)",
                if self.cell.compute { "compute" } else { "copy" },
                self.cell.slot
            ),
        })?;
        f(q)
    }

    /// The fence of the last submission (done at once if there was none).
    pub fn last(&self) -> Result<Fence> {
        self.with(|q| {
            Ok(Fence {
                dev: self.dev.clone(),
                signal: q.timeline.clone(),
                value: q.last,
            })
        })
    }

    /// Submit `body` (whole units of this queue's packets), then the timeline signal. The
    /// closure encodes with the queue locked, so it may use the queue's ring position and IB
    /// memory. Returns the submission's fence.
    pub(crate) fn submit_with(
        &self,
        kernels: Option<&Arc<Launches>>,
        body: impl FnOnce(&mut HwQueue) -> Result<Vec<u8>>,
    ) -> Result<Fence> {
        self.with(|q| {
            let bytes = body(q)?;
            self.finish(q, &bytes, kernels)
        })
    }

    /// Submit `bytes` of packets, then the timeline signal; `kernels` names the launches
    /// among them.
    pub(crate) fn submit_bytes(
        &self,
        bytes: &[u8],
        kernels: Option<&Arc<Launches>>,
    ) -> Result<Fence> {
        self.with(|q| self.finish(q, bytes, kernels))
    }

    fn finish(
        &self,
        q: &mut HwQueue,
        bytes: &[u8],
        kernels: Option<&Arc<Launches>>,
    ) -> Result<Fence> {
        let value = q.last + 1;
        let (tail, n) = q.tail(value)?;
        q.submit(&self.dev.0, &[bytes, &tail[..n]])?;
        q.last = value;
        if let Some(k) = kernels.filter(|k| !k.names.is_empty()) {
            if q.inflight.len() >= INFLIGHT_PRUNE {
                let done = q.timeline.value()?;
                while q.inflight.front().is_some_and(|(v, _)| *v <= done) {
                    q.inflight.pop_front();
                }
            }
            q.inflight.push_back((value, k.clone()));
        }
        Ok(Fence {
            dev: self.dev.clone(),
            signal: q.timeline.clone(),
            value,
        })
    }
}

/// The end of a submission: the queue's timeline signal reaching a value.
#[derive(Clone, Debug)]
pub struct Fence {
    dev: Device,
    signal: Signal,
    value: u64,
}

/// How long [`Fence::wait`] waits before calling the queue hung, unless the device was told
/// otherwise ([`Device::set_wait_timeout`]).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

impl Fence {
    /// The timeline value that marks the submission's end.
    pub fn value(&self) -> u64 {
        self.value
    }

    /// The timeline signal.
    pub fn signal(&self) -> &Signal {
        &self.signal
    }

    /// Whether the submission has finished.
    pub fn done(&self) -> Result<bool> {
        Ok(self.signal.value()? >= self.value)
    }

    /// Wait until the submission has finished, at most the device's wait timeout
    /// ([`Device::wait_timeout`], [`DEFAULT_TIMEOUT`] unless set).
    pub fn wait(&self) -> Result<()> {
        self.dev
            .wait(&self.signal, self.value, self.dev.wait_timeout())
    }

    /// Wait at most `timeout`: longer is a hang ([`Error::Hang`]).
    pub fn wait_timeout(&self, timeout: Duration) -> Result<()> {
        self.dev.wait(&self.signal, self.value, timeout)
    }
}
