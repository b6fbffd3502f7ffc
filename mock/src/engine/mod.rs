//! The engines: the command processor's compute queues (PM4 rings and AQL queues) and the
//! SDMA rings, each running on a thread of its own beside the driver, as hardware queues
//! run beside the CPU (`mock-device.md` items 10–12).
//!
//! - **Life of a queue.** The GFX and SDMA register models decide which queues run (an HQD
//!   made active, an SDMA ring enabled). After every register write to those blocks and
//!   every reset the device hands the models' view to [`Engines::sync`], which starts a
//!   worker thread for each new queue and stops the ones that went away. HQDs of several
//!   XCCs that share one ring are one queue (an AQL queue spread over the partition).
//! - **Work.** A doorbell write stores the write pointer and wakes the queue's worker
//!   ([`Engines::ring`]); a queue whose registers ask for it also polls its write pointer in
//!   memory. The worker fetches packets through the GPU's memory view
//!   ([`mem::GpuMem`]: apertures, page tables, TLB snapshot), executes them and writes its
//!   read pointer back.
//! - **Waiting.** A packet that waits on memory or a register leaves the queue blocked: the
//!   worker sleeps until memory changes (a CPU write through BAR0 or to system memory, any
//!   engine's write, a register write) or a short timeout, then evaluates the condition
//!   again. Queues never wait for each other except through memory, as on hardware.
//! - **Failures.** A bad packet, a page fault or an unflushed read halts the queue with an
//!   error naming the queue, packet and address ([`QueueStatus::halted`]); the IH entry
//!   hardware would post is posted. A halted queue does nothing until the driver stops it
//!   (dequeue, reset), after which a new queue on the same ring starts fresh.
//! - **Time.** [`Clock`]: a 100 MHz GPU counter that only moves forward, read by
//!   `RELEASE_MEM` timestamps, `COPY_DATA` and SDMA `TIMESTAMP`.

mod cp;
pub mod mem;
mod program;
mod sdma;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use am_isa::sync::lock;

use crate::device::{DoorbellOwner, Shared};
use crate::ip::gfx::ActiveQueue;
use crate::ip::gmc::Hub;
use crate::ip::sdma::SdmaQueue;
use crate::profile::Profile;

pub use program::ProgramCache;

/// A queue the engines run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QueueKey {
    /// A compute queue: the HQDs (on one or more XCCs) whose ring starts here.
    Compute {
        /// Ring base address.
        ring: u64,
    },
    /// An SDMA ring.
    Sdma {
        /// Engine.
        engine: u8,
        /// Ring of the engine.
        queue: u8,
    },
}

/// What kind of packets a queue holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueKind {
    /// PM4 type-3 packets (a compute ring).
    Pm4,
    /// 64-byte AQL packets (an HSA queue).
    Aql,
    /// SDMA packets.
    Sdma,
}

/// How a queue is programmed, from its registers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// Packets.
    pub kind: QueueKind,
    /// Name for messages: `compute queue (me 1, pipe 0, queue 2) on XCC 0`, `SDMA0 queue 0`.
    pub name: String,
    /// The hub its memory accesses go through.
    pub hub: Hub,
    /// VMID.
    pub vmid: u8,
    /// Ring base (GPU address).
    pub ring: u64,
    /// Ring size in bytes.
    pub ring_size: u64,
    /// Where the read pointer is written back, if anywhere.
    pub rptr_addr: Option<u64>,
    /// Where the write pointer is polled, if the queue polls.
    pub wptr_poll: Option<u64>,
    /// Doorbell dword (BAR2 offset / 4), if the doorbell is enabled.
    pub doorbell: Option<u32>,
    /// Compute: the XCCs whose HQD holds the queue, ascending.
    pub xccs: Vec<u8>,
    /// Compute: (me, pipe, queue); SDMA: (engine, queue, 0).
    pub slot: (u8, u8, u8),
    /// Read and write pointers the registers held at activation (ring units: dwords for PM4,
    /// packets for AQL, bytes for SDMA): work between them runs without a doorbell.
    pub start: (u64, u64),
    /// Compute on multi-XCC parts: workgroups per chunk dealt round-robin over the XCCs.
    pub tg_chunk: u32,
}

/// What a queue is doing, for tests and tools.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueStatus {
    /// Name (see [`QueueConfig::name`]).
    pub name: String,
    /// Read pointer (total units consumed: dwords, packets or bytes).
    pub rptr: u64,
    /// Write pointer last seen.
    pub wptr: u64,
    /// Packets executed.
    pub packets: u64,
    /// Dispatches run.
    pub dispatches: u64,
    /// Blocked on a wait packet.
    pub waiting: bool,
    /// In the middle of work that spans steps (an indirect buffer, an AQL vendor packet).
    pub busy: bool,
    /// Why the queue stopped, if it did: it does nothing until the driver removes it.
    pub halted: Option<String>,
    /// The last packet the engine read: GPU address and a description.
    pub last_packet: Option<(u64, String)>,
}

/// The 100 MHz GPU clock (`RELEASE_MEM` `send_gpu_clock_counter`, SDMA `TIMESTAMP`): host
/// time since the device was made, in 10 ns ticks, and strictly increasing from one read
/// to the next, so two timestamps around any work differ by the (emulated) time it took.
#[derive(Debug)]
pub struct Clock {
    start: Instant,
    last: AtomicU64,
}

impl Clock {
    fn new() -> Clock {
        Clock {
            start: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    /// The current count.
    pub fn now(&self) -> u64 {
        let t = (self.start.elapsed().as_nanos() / 10) as u64;
        let prev = self
            .last
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |l| Some(t.max(l + 1)))
            .unwrap_or(t);
        t.max(prev + 1)
    }
}

/// Sleepers on "memory changed": queues blocked on a wait packet. CPU writes (BAR0,
/// system memory), engine writes and register writes wake them.
///
/// Every change advances `seq`, waiters or not: a queue reads it before it looks at memory
/// and sleeps only while it is unchanged, so a write that lands between the look and the
/// sleep is never lost (it would otherwise cost the queue a whole `BLOCKED_SLEEP`). The
/// condition variable is signalled only when someone waits (the notification is a system
/// call). Both sides order `seq` and `waiters` sequentially consistently: either the waiter
/// counted itself before the notifier looked, and the notifier signals under the mutex the
/// waiter holds until it sleeps, or the notifier's increment came first and the waiter sees it.
#[derive(Debug, Default)]
pub struct Wake {
    waiters: AtomicUsize,
    seq: AtomicU64,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Wake {
    /// Memory changed: wake the blocked queues (an atomic increment when none is blocked).
    pub fn notify(&self) {
        self.seq.fetch_add(1, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            drop(lock(&self.lock));
            self.cv.notify_all();
        }
    }

    fn seq(&self) -> u64 {
        self.seq.load(Ordering::SeqCst)
    }

    /// Sleep until a notification after `seen`, or `timeout`.
    fn wait(&self, seen: u64, timeout: Duration) {
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let g = lock(&self.lock);
        if self.seq.load(Ordering::SeqCst) == seen {
            let _ = self.cv.wait_timeout(g, timeout);
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One running queue, shared by the device and its worker thread.
pub(crate) struct QueueCtl {
    config: Mutex<Arc<QueueConfig>>,
    /// Last doorbell value, and whether one was written.
    doorbell: AtomicU64,
    rung: AtomicBool,
    stop: Arc<AtomicBool>,
    events: Mutex<u64>,
    cv: Condvar,
    /// Workers asleep on `cv` (a kick wakes someone only when there is someone to wake:
    /// the notification is a system call).
    sleepers: AtomicUsize,
    /// Bumped when the configuration is replaced; `running` is the generation the worker's
    /// current step was given. A step starts no new packet with a stale configuration (the
    /// HQDs of an AQL queue are activated XCC by XCC while its worker already runs).
    generation: AtomicU64,
    running: AtomicU64,
    status: Mutex<QueueStatus>,
}

impl QueueCtl {
    fn config(&self) -> Arc<QueueConfig> {
        lock(&self.config).clone()
    }

    fn kick(&self) {
        *lock(&self.events) += 1;
        // A worker going to sleep counts itself while it holds `events`, before it sleeps:
        // after the increment above either it saw the new count, or it is counted here.
        if self.sleepers.load(Ordering::Acquire) > 0 {
            self.cv.notify_all();
        }
    }

    fn events(&self) -> u64 {
        *lock(&self.events)
    }

    /// Whether the configuration changed since the current step began: the step should
    /// return (with progress) before it starts another packet.
    pub(crate) fn config_stale(&self) -> bool {
        self.generation.load(Ordering::Acquire) != self.running.load(Ordering::Relaxed)
    }

    fn wait_events(&self, seen: u64, timeout: Duration) {
        let g = lock(&self.events);
        if *g == seen && !self.stop.load(Ordering::Acquire) {
            self.sleepers.fetch_add(1, Ordering::AcqRel);
            let _ = self.cv.wait_timeout(g, timeout);
            self.sleepers.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// The last doorbell value, if any doorbell was written.
    fn doorbell(&self) -> Option<u64> {
        self.rung
            .load(Ordering::Acquire)
            .then(|| self.doorbell.load(Ordering::Acquire))
    }

    fn set_status(&self, f: impl FnOnce(&mut QueueStatus)) {
        f(&mut lock(&self.status));
    }
}

/// What one step of a worker did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Work was done; go on.
    Progress,
    /// Nothing to do until the write pointer moves (`poll`: the queue polls memory for it).
    Idle {
        /// Whether to look at the write pointer in memory again soon.
        poll: bool,
    },
    /// A wait packet's condition does not hold yet.
    Blocked,
    /// The queue stopped on an error.
    Halted,
}

/// A queue's packet processor, run by its worker.
trait Runner: Send {
    /// Do what can be done now.
    fn step(&mut self, sh: &Shared, ctl: &QueueCtl, cfg: &QueueConfig) -> Step;
}

/// Instruction limit of one dispatch unless a test sets another: about a minute of
/// emulation. A kernel that runs longer is taken for hung: its queue stops and never
/// signals, as a hung queue on hardware.
pub const DEFAULT_WATCHDOG: u64 = 1 << 31;

/// All engines of a device.
pub(crate) struct Engines {
    queues: Mutex<BTreeMap<QueueKey, Arc<QueueCtl>>>,
    /// The running queues by doorbell dword (rebuilt by every [`Engines::sync`]).
    by_doorbell: Mutex<std::collections::HashMap<u32, (DoorbellOwner, Arc<QueueCtl>)>>,
    /// Bumped by every write to a GMC register and every reset: engines re-read their
    /// hub views.
    vm_epoch: AtomicU64,
    /// `PCI_COMMAND.MASTER`, mirrored so engines need no lock to check it.
    bus_master: AtomicBool,
    /// Blocked queues wait here.
    pub wake: Arc<Wake>,
    /// The GPU clock.
    pub clock: Clock,
    /// Instructions a dispatch may execute before it counts as hung.
    watchdog: AtomicU64,
    /// Decoded shader code.
    pub programs: ProgramCache,
    /// Whether dispatches count their wave-instructions by class and mnemonic (read once per
    /// dispatch; the emulator's plain run loop counts nothing).
    counting: AtomicBool,
    /// What the counted dispatches executed, and where to write it after each dispatch.
    statistics: Mutex<(ShaderStatistics, Option<std::path::PathBuf>)>,
    /// Dispatches and wave-instructions by code entry address, of every dispatch that ran
    /// to its end (counting on or off: the emulator's plain run loop counts instructions
    /// too), for [`am_driver::PciDevice::executed_code`].
    executed: Mutex<std::collections::HashMap<u64, am_driver::ExecutedCode>>,
}

/// What the dispatches a device ran while counting executed (see
/// [`crate::MockGpu::set_shader_statistics`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShaderStatistics {
    /// Dispatches run (a dispatch spread over several XCCs counts once per XCC).
    pub dispatches: u64,
    /// Wave-instructions executed.
    pub instructions: u64,
    /// Waves run.
    pub waves: u64,
    /// Executed wave-instructions by class and by mnemonic.
    pub histogram: am_emu::Histogram,
}

impl ShaderStatistics {
    /// The statistics as one JSON object: `dispatches`, `waves`, `wave_instructions`,
    /// `classes` (by [`am_emu::Class::name`]) and `mnemonics`.
    pub fn to_json(&self) -> String {
        let classes: Vec<String> = am_emu::Class::ALL
            .iter()
            .map(|&c| format!("\"{}\": {}", c.name(), self.histogram.class(c)))
            .collect();
        let mnemonics: Vec<String> = self
            .histogram
            .mnemonics
            .iter()
            .map(|(m, n)| format!("\"{m}\": {n}"))
            .collect();
        format!(
            "{{\"dispatches\": {}, \"waves\": {}, \"wave_instructions\": {}, \"classes\": {{{}}}, \"mnemonics\": {{{}}}}}\n",
            self.dispatches,
            self.waves,
            self.instructions,
            classes.join(", "),
            mnemonics.join(", ")
        )
    }
}

impl Engines {
    pub(crate) fn new(wake: Arc<Wake>) -> Engines {
        Engines {
            queues: Mutex::new(BTreeMap::new()),
            by_doorbell: Mutex::new(std::collections::HashMap::new()),
            vm_epoch: AtomicU64::new(0),
            bus_master: AtomicBool::new(false),
            wake,
            clock: Clock::new(),
            watchdog: AtomicU64::new(DEFAULT_WATCHDOG),
            programs: ProgramCache::default(),
            counting: AtomicBool::new(false),
            statistics: Mutex::new((ShaderStatistics::default(), None)),
            executed: Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// Adds a finished dispatch of the code at `entry` to what that code executed.
    pub(crate) fn add_executed(&self, entry: u64, stats: &am_emu::Stats) {
        let mut m = lock(&self.executed);
        let e = m.entry(entry).or_default();
        e.dispatches += 1;
        e.wave_instructions += stats.instructions;
    }

    /// What the code at `entry` executed so far (`None`: no dispatch of it finished).
    pub(crate) fn executed(&self, entry: u64) -> Option<am_driver::ExecutedCode> {
        lock(&self.executed).get(&entry).copied()
    }

    /// Whether dispatches count what they execute.
    pub(crate) fn counting(&self) -> bool {
        self.counting.load(Ordering::Relaxed)
    }

    pub(crate) fn set_counting(&self, on: bool) {
        self.counting.store(on, Ordering::Relaxed);
    }

    /// The statistics so far.
    pub(crate) fn statistics(&self) -> ShaderStatistics {
        lock(&self.statistics).0.clone()
    }

    /// Starts the statistics again from zero.
    pub(crate) fn reset_statistics(&self) {
        lock(&self.statistics).0 = ShaderStatistics::default();
    }

    /// Writes the statistics to `path` (replacing it whole) after every counted dispatch.
    pub(crate) fn write_statistics_to(&self, path: Option<std::path::PathBuf>) {
        lock(&self.statistics).1 = path;
    }

    /// Adds one counted dispatch. The file, if any, is written before the dispatch can be
    /// seen to complete, so a client that waited for it reads counts that include it.
    pub(crate) fn add_dispatch(&self, stats: Option<am_emu::Stats>, histogram: &am_emu::Histogram) {
        let mut s = lock(&self.statistics);
        s.0.dispatches += 1;
        s.0.instructions += histogram.total();
        s.0.waves += stats.map_or(0, |st| st.waves);
        s.0.histogram.merge(histogram);
        if let Some(path) = &s.1 {
            // Written beside and renamed over, so a reader never sees half a file; a file
            // that cannot be written is logged, and the dispatch goes on.
            let tmp = path.with_extension("tmp");
            let r = std::fs::write(&tmp, s.0.to_json()).and_then(|()| std::fs::rename(&tmp, path));
            if let Err(e) = r {
                tracing::warn!("shader statistics {}: {e}", path.display());
            }
        }
    }

    /// The GMC epoch (see [`Engines::vm_changed`]).
    pub fn vm_epoch(&self) -> u64 {
        self.vm_epoch.load(Ordering::Acquire)
    }

    /// A GMC register changed (or the device reset): hub views are stale.
    pub fn vm_changed(&self) {
        self.vm_epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether bus mastering is on.
    pub fn bus_master(&self) -> bool {
        self.bus_master.load(Ordering::Acquire)
    }

    /// Mirror `PCI_COMMAND.MASTER`.
    pub fn set_bus_master(&self, on: bool) {
        self.bus_master.store(on, Ordering::Release);
    }

    /// Memory (or a register) changed: blocked queues look again.
    pub fn memory_changed(&self) {
        self.wake.notify();
    }

    pub(crate) fn watchdog(&self) -> u64 {
        self.watchdog.load(Ordering::Relaxed)
    }

    pub(crate) fn set_watchdog(&self, instructions: u64) {
        self.watchdog.store(instructions, Ordering::Relaxed);
    }

    /// A doorbell write to dword `dword`: the queue that owns it takes `value` as its write
    /// pointer. Returns the owner, if a running queue owns it.
    pub fn ring(&self, dword: u32, value: u64) -> Option<DoorbellOwner> {
        let (owner, q) = lock(&self.by_doorbell).get(&dword).cloned()?;
        q.doorbell.store(value, Ordering::Release);
        q.rung.store(true, Ordering::Release);
        // The write pointer in ring units: an AQL doorbell names the last packet written.
        let wptr = if q.config().kind == QueueKind::Aql {
            value.wrapping_add(1)
        } else {
            value
        };
        q.set_status(|s| s.wptr = s.wptr.max(wptr));
        q.kick();
        Some(owner)
    }

    /// Bring the running queues in line with what the register models hold active: start
    /// workers for new queues, update the configuration of changed ones, stop the rest.
    pub(crate) fn sync(
        &self,
        me: &Weak<Shared>,
        profile: &Profile,
        compute: &[ActiveQueue],
        sdma: &[SdmaQueue],
        device: &str,
    ) {
        let mut want: BTreeMap<QueueKey, QueueConfig> = BTreeMap::new();
        for q in compute {
            let key = QueueKey::Compute { ring: q.pq_base };
            match want.get_mut(&key) {
                Some(cfg) => {
                    cfg.xccs.push(q.xcc);
                    cfg.xccs.sort_unstable();
                }
                None => {
                    want.insert(key, compute_config(q));
                }
            }
        }
        for q in sdma {
            want.insert(
                QueueKey::Sdma {
                    engine: q.engine,
                    queue: q.queue,
                },
                sdma_config(profile, q),
            );
        }
        let mut queues = lock(&self.queues);
        queues.retain(|key, ctl| {
            let keep = want.get(key).is_some_and(|c| {
                // A queue programmed anew (another ring size, kind) is a new queue.
                let old = ctl.config();
                old.kind == c.kind && old.ring_size == c.ring_size && old.slot == c.slot
            });
            if !keep {
                ctl.stop.store(true, Ordering::Release);
                ctl.kick();
                self.wake.notify_all_now();
            }
            keep
        });
        for (key, cfg) in want {
            if let Some(ctl) = queues.get(&key) {
                let mut c = lock(&ctl.config);
                if **c != cfg {
                    *c = Arc::new(cfg);
                    ctl.generation.fetch_add(1, Ordering::AcqRel);
                    drop(c);
                    ctl.kick();
                }
                continue;
            }
            let ctl = Arc::new(QueueCtl {
                config: Mutex::new(Arc::new(cfg.clone())),
                doorbell: AtomicU64::new(0),
                rung: AtomicBool::new(false),
                stop: Arc::new(AtomicBool::new(false)),
                events: Mutex::new(0),
                cv: Condvar::new(),
                sleepers: AtomicUsize::new(0),
                generation: AtomicU64::new(0),
                running: AtomicU64::new(0),
                status: Mutex::new(QueueStatus {
                    name: cfg.name.clone(),
                    rptr: cfg.start.0,
                    wptr: cfg.start.1,
                    ..Default::default()
                }),
            });
            let runner: Box<dyn Runner> = match cfg.kind {
                QueueKind::Pm4 | QueueKind::Aql => Box::new(cp::Cp::new(&cfg)),
                QueueKind::Sdma => Box::new(sdma::Sdma::new(&cfg)),
            };
            let weak = me.clone();
            let worker = ctl.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("{device} {}", cfg.name))
                .spawn(move || run(weak, worker, runner));
            if let Err(e) = spawned {
                ctl.set_status(|s| s.halted = Some(format!("no thread for the queue: {e}")));
            }
            queues.insert(key, ctl);
        }
        let mut by_doorbell = lock(&self.by_doorbell);
        by_doorbell.clear();
        for ctl in queues.values() {
            let cfg = ctl.config();
            let Some(dword) = cfg.doorbell else {
                continue;
            };
            let (a, b, c) = cfg.slot;
            let owner = match cfg.kind {
                QueueKind::Sdma => DoorbellOwner::Sdma {
                    engine: a,
                    queue: b,
                },
                _ => DoorbellOwner::Compute {
                    xcc: cfg.xccs.first().copied().unwrap_or(0),
                    me: a,
                    pipe: b,
                    queue: c,
                },
            };
            by_doorbell.entry(dword).or_insert((owner, ctl.clone()));
        }
    }

    /// Every running queue's status.
    pub(crate) fn status(&self) -> Vec<(QueueKey, QueueStatus)> {
        lock(&self.queues)
            .iter()
            .map(|(k, q)| (*k, lock(&q.status).clone()))
            .collect()
    }

    /// Stop every queue (the device is reset).
    pub(crate) fn stop_all(&self) {
        let mut queues = lock(&self.queues);
        for ctl in queues.values() {
            ctl.stop.store(true, Ordering::Release);
            ctl.kick();
        }
        queues.clear();
        lock(&self.by_doorbell).clear();
        self.wake.notify_all_now();
    }
}

impl Wake {
    /// Wake every blocked queue whatever the waiter count says (a queue is being stopped).
    fn notify_all_now(&self) {
        self.seq.fetch_add(1, Ordering::SeqCst);
        drop(lock(&self.lock));
        self.cv.notify_all();
    }
}

/// How long an idle queue sleeps before it looks at its stop flag again (a doorbell wakes
/// it at once).
const IDLE_SLEEP: Duration = Duration::from_millis(100);
/// How often an idle queue that polls its write pointer in memory reads it.
const WPTR_POLL: Duration = Duration::from_micros(500);
/// How long a blocked queue sleeps before it evaluates its wait again if nothing wakes it.
const BLOCKED_SLEEP: Duration = Duration::from_millis(2);

fn run(me: Weak<Shared>, ctl: Arc<QueueCtl>, mut runner: Box<dyn Runner>) {
    loop {
        if ctl.stop.load(Ordering::Acquire) {
            return;
        }
        let Some(sh) = me.upgrade() else {
            return;
        };
        let wake = sh.engines.wake.clone();
        let seen_mem = wake.seq();
        let seen = ctl.events();
        // The generation first: a replacement after it shows as stale during the step.
        ctl.running
            .store(ctl.generation.load(Ordering::Acquire), Ordering::Relaxed);
        let cfg = ctl.config();
        let step = runner.step(&sh, &ctl, &cfg);
        drop(sh);
        ctl.set_status(|s| s.waiting = step == Step::Blocked);
        match step {
            Step::Progress => {}
            Step::Idle { poll } => {
                ctl.wait_events(seen, if poll { WPTR_POLL } else { IDLE_SLEEP });
            }
            Step::Blocked => wake.wait(seen_mem, BLOCKED_SLEEP),
            Step::Halted => ctl.wait_events(seen, IDLE_SLEEP),
        }
    }
}

/// The configuration of a compute queue from one of its HQDs.
fn compute_config(q: &ActiveQueue) -> QueueConfig {
    let kind = if q.aql {
        QueueKind::Aql
    } else {
        QueueKind::Pm4
    };
    let kind_name = if q.aql { "AQL" } else { "PM4" };
    QueueConfig {
        kind,
        name: format!(
            "{kind_name} compute queue (me {}, pipe {}, queue {}, ring {:#x})",
            q.me, q.pipe, q.queue, q.pq_base
        ),
        hub: Hub::gc(q.xcc),
        vmid: q.vmid,
        ring: q.pq_base,
        ring_size: q.pq_size,
        rptr_addr: (q.rptr_report_addr != 0).then_some(q.rptr_report_addr),
        wptr_poll: (q.wptr_poll_enabled && q.wptr_poll_addr != 0).then_some(q.wptr_poll_addr),
        doorbell: q.doorbell_enabled.then_some(q.doorbell_offset),
        xccs: vec![q.xcc],
        slot: (q.me, q.pipe, q.queue),
        start: (u64::from(q.rptr), q.wptr),
        tg_chunk: q.tg_chunk.max(1),
    }
}

/// The configuration of an SDMA ring.
fn sdma_config(profile: &Profile, q: &SdmaQueue) -> QueueConfig {
    // SDMA ≥ 5 sits in GC and uses the GC hub; SDMA 4.4 engines are behind their AID's
    // MMHUB (four engines per AID).
    let in_gc = profile
        .version(am_autogen::hwid::GC_HWID)
        .is_some_and(|v| v.major >= 10);
    let hub = if in_gc {
        Hub::gc(0)
    } else {
        Hub::mm(q.engine / 4)
    };
    QueueConfig {
        kind: QueueKind::Sdma,
        name: format!("SDMA{} queue {}", q.engine, q.queue),
        hub,
        vmid: q.vmid,
        ring: q.rb_base,
        ring_size: q.rb_size,
        rptr_addr: q.rptr_addr,
        wptr_poll: q.wptr_poll_addr,
        doorbell: q.doorbell_enabled.then_some(q.doorbell_offset),
        xccs: vec![],
        slot: (q.engine, q.queue, 0),
        start: (q.rptr, q.wptr),
        tg_chunk: 1,
    }
}
