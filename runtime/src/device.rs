//! A device: a GPU booted by the driver, with a compute queue (PM4 on GFX10+, AQL on every XCC
//! of multi-XCC parts) and an SDMA queue, signals, kernel-argument memory and scratch.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use am_driver::ip::gfx::{ComputeQueueDesc, MEC_RING0_DOORBELL};
use am_driver::ip::sdma::SdmaQueueDesc;
use am_driver::regs::{gc, nbio};
use am_driver::{AmDevice, Bar, HwIp, Options, PciDevice};
use am_isa::GfxTarget;
use am_isa::sync::lock;

use crate::memory::{Allocation, Backing, Buffer, MemKind};
use crate::queue::{Handle, HwQueue, HwQueueParts, Queue, QueueCell, QueueKind};
use crate::signal::{SIGNAL_SIZE, Signal, SignalPool};
use crate::{Error, Result};

/// What a device is, as the runtime and the compiler need it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device name (its spec or BDF).
    pub name: String,
    /// Shader ISA, from the GC version.
    pub target: GfxTarget,
    /// GC major version.
    pub gc_major: u8,
    /// XCCs.
    pub xccs: u32,
    /// Compute units in all.
    pub cus: u32,
    /// LDS bytes a workgroup may use.
    pub lds_bytes: u32,
    /// VRAM bytes.
    pub vram_bytes: u64,
    /// BAR0 covers all of VRAM (the CPU reaches any VRAM buffer).
    pub large_bar: bool,
    /// An SR-IOV virtual function.
    pub is_vf: bool,
    /// The compute queue takes AQL packets (multi-XCC parts), else PM4.
    pub aql: bool,
}

/// SH register offsets (dword address − 0x2C00) the dispatch path sets.
#[derive(Clone, Debug)]
pub(crate) struct ShRegs {
    pub pgm_lo: u32,
    pub rsrc1: u32,
    pub rsrc3: u32,
    pub tmpring: u32,
    pub scratch_base: Option<u32>,
    pub user_data: u32,
    pub start_x: u32,
    pub num_thread_x: u32,
}

/// Kernel-argument memory: a ring in system memory, reused once the GPU is past it.
pub(crate) struct KernargRing {
    buf: Buffer,
    next: u64,
    /// Times the ring started over (arguments of an older lap may have been overwritten).
    laps: u64,
}

/// Where a command buffer's kernel arguments lie in the ring: the lap and offset of the
/// first, to tell whether they are still there when it is submitted again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KernargMark {
    lap: u64,
    at: u64,
}

/// Scratch for kernels with private memory.
pub(crate) struct Scratch {
    pub buf: Buffer,
    pub per_item: u32,
    pub tmpring: u32,
}

pub(crate) struct Inner {
    pub(crate) name: String,
    pub(crate) info: DeviceInfo,
    drv: Mutex<Option<AmDevice>>,
    pub(crate) vram: am_driver::Vram,
    pub(crate) doorbells: Arc<dyn Bar>,
    pub(crate) pci: Arc<dyn PciDevice>,
    pub(crate) sh: ShRegs,
    /// The GPU-side HDP flush pair (`GPU_HDP_FLUSH_REQ`, `_DONE` dwords).
    pub(crate) hdp: Option<(u32, u32)>,
    /// CPU writes to VRAM through BAR0 that have landed, counted; and how many of them the
    /// last finished HDP flush covers. A flag cleared when a flush starts would let another
    /// thread take the flush for done while it still waits for the driver.
    hdp_writes: AtomicU64,
    hdp_flushed: AtomicU64,
    /// The default compute and copy queues, then any added.
    pub(crate) compute0: Arc<QueueCell>,
    pub(crate) copy0: Arc<QueueCell>,
    pub(crate) extra: Mutex<Vec<Arc<QueueCell>>>,
    signals: Mutex<Vec<Arc<SignalPool>>>,
    kernargs: Mutex<Option<KernargRing>>,
    pub(crate) scratch: Mutex<Option<Scratch>>,
    /// Scratch buffers replaced by larger ones, kept until the work that may use them ends.
    retired: Mutex<Vec<Buffer>>,
    pub(crate) profiling: AtomicBool,
    /// How long [`crate::Fence::wait`] and [`Device::synchronize`] wait before calling a
    /// queue hung, in milliseconds ([`Device::set_wait_timeout`]).
    wait_timeout_ms: AtomicU64,
    pub(crate) trace: Mutex<Vec<crate::trace::Pending>>,
    /// Hive members whose VRAM this device was seen to reach over XGMI ([`Device::map_peer`]):
    /// what their CPU writes through their BAR0 is flushed before this device's submissions.
    peers: Mutex<Vec<Weak<Inner>>>,
    /// The PCIe peer path to each device this one has asked for ([`Device::link_to`]): the
    /// other's BAR0 as this device's DMA reaches it, or why not. Kept while this device
    /// lives: its mappings through a BAR need what the backend set up for it.
    pub(crate) pcie: Mutex<Vec<crate::link::PcieRoute>>,
    /// Devices that map this one's VRAM through its BAR0 (PCIe peer-to-peer), with their
    /// submission count at this device's last HDP flush: their engines' writes through the
    /// BAR sit in this device's HDP as its CPU's do, so a submission of theirs since makes
    /// this device flush before its own next submission.
    bar_writers: Mutex<Vec<(Weak<Inner>, u64)>>,
    /// Bytes [`Device::copy_between`] moved into this device through host memory.
    host_staged: AtomicU64,
    /// Submissions to any of its queues (write pointer published, doorbell rung).
    pub(crate) submissions: AtomicU64,
    /// CPU waits ([`Device::wait`], fences included) that found the signal short of the
    /// value and had to wait.
    host_waits: AtomicU64,
}

impl Inner {
    /// Run `f` on the driver.
    pub(crate) fn with_driver<T>(
        &self,
        f: impl FnOnce(&mut AmDevice) -> am_driver::Result<T>,
    ) -> Result<T> {
        let mut g = lock(&self.drv);
        let d = g.as_mut().ok_or_else(|| Error::State {
            device: self.name.clone(),
            reason: "the device is closed".into(),
        })?;
        Ok(f(d)?)
    }

    /// The CPU wrote VRAM through BAR0: flush the HDP before the GPU reads — this device's,
    /// and those of the hive members whose VRAM it maps (its engines read theirs too).
    pub(crate) fn flush_hdp_if_dirty(&self) -> Result<()> {
        self.flush_own_hdp()?;
        let peers: Vec<Arc<Inner>> = lock(&self.peers).iter().filter_map(Weak::upgrade).collect();
        peers.iter().try_for_each(|p| p.flush_own_hdp())
    }

    fn flush_own_hdp(&self) -> Result<()> {
        let covered = |s: &Inner| {
            let written = s.hdp_writes.load(Ordering::Acquire);
            (s.hdp_flushed.load(Ordering::Acquire) >= written, written)
        };
        if covered(self).0 && !self.bar_writers_dirty() {
            return Ok(());
        }
        self.with_driver(|d| {
            // Counted before the flush: a write that lands during it may miss it and stays
            // to be flushed.
            let (done, written) = covered(self);
            let writers = self.bar_writer_counts();
            if !done || writers.iter().any(|&(_, now, seen)| now > seen) {
                d.hdp_flush()?;
                self.hdp_flushed.fetch_max(written, Ordering::AcqRel);
                let mut w = lock(&self.bar_writers);
                for (i, now, _) in writers {
                    if let Some(e) = w.get_mut(i) {
                        e.1 = e.1.max(now);
                    }
                }
            }
            Ok(())
        })
    }

    /// Whether a device mapping this one's VRAM through its BAR0 has submitted work since
    /// this device's last HDP flush.
    fn bar_writers_dirty(&self) -> bool {
        lock(&self.bar_writers).iter().any(|(d, seen)| {
            d.upgrade()
                .is_some_and(|d| d.submissions.load(Ordering::Acquire) > *seen)
        })
    }

    /// Each live BAR writer: its index, its submissions now and at the last flush.
    fn bar_writer_counts(&self) -> Vec<(usize, u64, u64)> {
        let mut w = lock(&self.bar_writers);
        w.retain(|(d, _)| d.strong_count() > 0);
        w.iter()
            .enumerate()
            .filter_map(|(i, (d, seen))| {
                d.upgrade()
                    .map(|d| (i, d.submissions.load(Ordering::Acquire), *seen))
            })
            .collect()
    }

    /// `writer` maps this device's VRAM through its BAR0 (once per device).
    pub(crate) fn add_bar_writer(&self, writer: &Arc<Inner>) {
        let mut w = lock(&self.bar_writers);
        w.retain(|(d, _)| d.strong_count() > 0);
        if !w
            .iter()
            .any(|(d, _)| std::ptr::eq(d.as_ptr(), Arc::as_ptr(writer)))
        {
            // Its work so far could not write through a mapping not made yet.
            let now = writer.submissions.load(Ordering::Acquire);
            w.push((Arc::downgrade(writer), now));
        }
    }
}

/// A GPU this process runs work on. Cloning shares it.
#[derive(Clone)]
pub struct Device(pub(crate) Arc<Inner>);

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Device({})", self.0.name)
    }
}

/// Size of each queue's ring.
const RING_SIZE: u64 = 1 << 20;
/// Kernel-argument ring.
const KERNARG_RING: u64 = 16 << 20;
/// Signals per pool page.
const SIGNAL_POOL: u64 = 0x1000;
/// Scratch slots per CU a dispatch may use (the hardware's wave slots that can hold scratch).
const SCRATCH_SLOTS_PER_CU: u64 = 32;
/// Bytes after each launch's kernel arguments that compiled code may read.
const KERNARG_SLACK: u64 = 256;
/// How often a CPU wait looks at the interrupt ring for faults.
const FAULT_POLL: Duration = Duration::from_millis(20);

impl Device {
    /// Open the device a spec names (`0000:03:00.0`, `mock:navi31[:N]` once the mock backend
    /// is registered, `remote:HOST:PORT[:N]`) with the driver's options from the environment
    /// (`AM_RESET`, `AM_POWER_LIMIT`, …).
    pub fn open(spec: &str) -> Result<Device> {
        let pci = am_driver::pci::open_spec(spec)?;
        Device::open_with(pci, Options::from_env(spec)?)
    }

    /// Boot `pci` with the driver and set up queues, signals and argument memory.
    pub fn open_with(pci: Arc<dyn PciDevice>, opts: Options) -> Result<Device> {
        let drv = AmDevice::open_with(pci.clone(), opts)?;
        let ctx = drv.ctx();
        let name = ctx.name.clone();
        let gc_ver = ctx.version(HwIp::GC)?;
        let xccs = ctx.xccs().len() as u32;
        let target = GfxTarget::from_gc(gc_ver.major, gc_ver.minor, gc_ver.rev).map_err(|e| {
            Error::Target {
                device: name.clone(),
                source: e,
            }
        })?;
        let info = DeviceInfo {
            name: name.clone(),
            target,
            gc_major: gc_ver.major,
            xccs,
            cus: ctx.discovery.cu_count().unwrap_or(0) as u32,
            lds_bytes: target.max_lds(),
            vram_bytes: ctx.discovery.vram_size,
            large_bar: ctx.discovery.large_bar,
            is_vf: ctx.is_vf,
            aql: xccs > 1,
        };
        let sh_off = |r| -> Result<u32> { Ok(ctx.regs.reg(r)?.addr(0)? as u32 - 0x2c00) };
        let sh = ShRegs {
            pgm_lo: sh_off(gc::COMPUTE_PGM_LO)?,
            rsrc1: sh_off(gc::COMPUTE_PGM_RSRC1)?,
            rsrc3: sh_off(gc::COMPUTE_PGM_RSRC3)?,
            tmpring: sh_off(gc::COMPUTE_TMPRING_SIZE.untyped())?,
            scratch_base: if ctx.regs.has(gc::COMPUTE_DISPATCH_SCRATCH_BASE_LO) {
                Some(sh_off(gc::COMPUTE_DISPATCH_SCRATCH_BASE_LO)?)
            } else {
                None
            },
            user_data: sh_off(gc::COMPUTE_USER_DATA_0)?,
            start_x: sh_off(gc::COMPUTE_START_X)?,
            num_thread_x: sh_off(gc::COMPUTE_NUM_THREAD_X)?,
        };
        let reg_dword = |r| {
            ctx.regs
                .reg(r)
                .and_then(|x| x.addr(0))
                .ok()
                .map(|a| a as u32)
        };
        let hdp = reg_dword(nbio::BIF_BX_PF0_GPU_HDP_FLUSH_REQ)
            .zip(reg_dword(nbio::BIF_BX_PF0_GPU_HDP_FLUSH_DONE));
        let vram = ctx.vram.clone();
        let doorbells = ctx.doorbells.clone();
        let inner = Arc::new(Inner {
            name,
            info,
            drv: Mutex::new(Some(drv)),
            vram,
            doorbells,
            pci,
            sh,
            hdp,
            hdp_writes: AtomicU64::new(0),
            hdp_flushed: AtomicU64::new(0),
            compute0: QueueCell::new(true, 0),
            copy0: QueueCell::new(false, 0),
            extra: Mutex::new(Vec::new()),
            signals: Mutex::new(Vec::new()),
            kernargs: Mutex::new(None),
            scratch: Mutex::new(None),
            retired: Mutex::new(Vec::new()),
            profiling: AtomicBool::new(false),
            wait_timeout_ms: AtomicU64::new(crate::queue::DEFAULT_TIMEOUT.as_millis() as u64),
            trace: Mutex::new(Vec::new()),
            peers: Mutex::new(Vec::new()),
            pcie: Mutex::new(Vec::new()),
            bar_writers: Mutex::new(Vec::new()),
            host_staged: AtomicU64::new(0),
            submissions: AtomicU64::new(0),
            host_waits: AtomicU64::new(0),
        });
        let dev = Device(inner);
        dev.setup()?;
        Ok(dev)
    }

    fn setup(&self) -> Result<()> {
        let kernargs = self.alloc(KERNARG_RING, MemKind::System { uncached: true })?;
        *lock(&self.0.kernargs) = Some(KernargRing {
            buf: kernargs,
            next: 0,
            laps: 0,
        });
        self.start_queue(&self.0.compute0, None)?;
        self.start_queue(&self.0.copy0, None)?;
        Ok(())
    }

    /// Start the queue of `cell` on a fresh ring. `timeline` carries an earlier queue's
    /// timeline and last value over (a recovery), so fences of before stay meaningful.
    fn start_queue(&self, cell: &QueueCell, timeline: Option<(Signal, u64)>) -> Result<()> {
        let (timeline, last) = match timeline {
            Some(t) => t,
            None => (self.new_signal()?, 0),
        };
        let ring = self.alloc(RING_SIZE, MemKind::System { uncached: true })?;
        let ctl = self.alloc(0x1000, MemKind::System { uncached: true })?;
        let gfx9 = self.0.info.gc_major < 10;
        let parts = if cell.compute {
            let aql = self.0.info.aql;
            let eop = self.alloc(0x1000, MemKind::Vram)?;
            let doorbell = MEC_RING0_DOORBELL + u32::from(cell.slot);
            let desc = ComputeQueueDesc {
                ring: ring.va(),
                ring_size: RING_SIZE,
                rptr_addr: ctl.va() + crate::queue::COMPUTE_RPTR,
                wptr_addr: ctl.va() + crate::queue::COMPUTE_WPTR,
                eop_addr: eop.va(),
                eop_size: 0x1000,
                doorbell,
                aql,
                pipe: 0,
                queue: cell.slot,
            };
            let id = self.0.with_driver(|d| d.create_compute_queue(&desc))?;
            HwQueueParts {
                kind: if aql { QueueKind::Aql } else { QueueKind::Pm4 },
                name: format!(
                    "{} {} compute queue {}",
                    self.0.name,
                    if aql { "AQL" } else { "PM4" },
                    cell.slot
                ),
                ring,
                ctl,
                doorbell,
                handle: Handle::Compute(id),
                // The EOP buffer lives as long as the queue.
                keep: vec![eop],
                timeline,
                last,
                ibs: if aql {
                    Some(self.alloc(4 << 20, MemKind::System { uncached: true })?)
                } else {
                    None
                },
                gfx9,
            }
        } else {
            let desc = SdmaQueueDesc {
                engine: cell.slot,
                ring: ring.va(),
                ring_size: RING_SIZE,
                rptr_addr: ctl.va() + crate::queue::SDMA_RPTR,
                wptr_addr: ctl.va() + crate::queue::SDMA_WPTR,
            };
            let id = self.0.with_driver(|d| d.create_sdma_queue(&desc))?;
            HwQueueParts {
                kind: QueueKind::Sdma,
                name: format!("{} SDMA{} copy queue", self.0.name, cell.slot),
                ring,
                ctl,
                doorbell: id.doorbell,
                handle: Handle::Sdma(id),
                keep: vec![],
                timeline,
                last,
                ibs: None,
                gfx9,
            }
        };
        // A timeline carried over ends where its queue stopped: what was submitted before
        // will not run, and waiting for it must not hang.
        if last > 0 {
            parts.timeline.set(last)?;
        }
        *cell.lock() = Some(HwQueue::new(parts));
        Ok(())
    }

    /// The default compute queue.
    pub fn compute_queue(&self) -> Queue {
        Queue {
            dev: self.clone(),
            cell: self.0.compute0.clone(),
        }
    }

    /// The default copy queue (SDMA engine 0).
    pub fn copy_queue(&self) -> Queue {
        Queue {
            dev: self.clone(),
            cell: self.0.copy0.clone(),
        }
    }

    /// Start another compute queue (the next MEC queue of pipe 0, its own doorbell).
    pub fn new_compute_queue(&self) -> Result<Queue> {
        self.new_queue(true)
    }

    /// Start another copy queue (the ring of the next SDMA engine; the driver refuses an
    /// engine the device does not have).
    pub fn new_copy_queue(&self) -> Result<Queue> {
        self.new_queue(false)
    }

    fn new_queue(&self, compute: bool) -> Result<Queue> {
        let mut extra = lock(&self.0.extra);
        let slot = 1 + extra.iter().filter(|c| c.compute == compute).count();
        let slot = u8::try_from(slot).map_err(|_| Error::State {
            device: self.0.name.clone(),
            reason: "too many queues".into(),
        })?;
        let cell = QueueCell::new(compute, slot);
        self.start_queue(&cell, None)?;
        extra.push(cell.clone());
        Ok(Queue {
            dev: self.clone(),
            cell,
        })
    }

    /// Every queue: the defaults first.
    pub(crate) fn cells(&self) -> Vec<Arc<QueueCell>> {
        let mut v = vec![self.0.compute0.clone(), self.0.copy0.clone()];
        v.extend(lock(&self.0.extra).iter().cloned());
        v
    }

    /// Record per-dispatch GPU timestamps from now on (or stop); see [`Device::profile`].
    pub fn set_profiling(&self, on: bool) {
        self.0.profiling.store(on, Ordering::Relaxed);
    }

    /// Whether launches are being profiled.
    pub fn profiling(&self) -> bool {
        self.0.profiling.load(Ordering::Relaxed)
    }

    /// How long a wait for this device's submissions ([`crate::Fence::wait`],
    /// [`Device::synchronize`]) goes before it calls the queue hung ([`Error::Hang`], naming
    /// the device and the queue). [`crate::DEFAULT_TIMEOUT`] unless set; at least 1 ms.
    pub fn set_wait_timeout(&self, timeout: Duration) {
        let ms = u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        self.0.wait_timeout_ms.store(ms, Ordering::Relaxed);
    }

    /// The wait before a hang ([`Device::set_wait_timeout`]).
    pub fn wait_timeout(&self) -> Duration {
        Duration::from_millis(self.0.wait_timeout_ms.load(Ordering::Relaxed))
    }

    /// What the device's shaders executed from `program` so far, where the device is an
    /// emulator that counts it (the mock: dispatches and wave-instructions, deterministic);
    /// `None` on hardware, which has only timestamps ([`Device::profile`]). The difference
    /// around a launch is what the launch executed.
    pub fn executed(&self, program: &crate::Program) -> Result<Option<am_driver::ExecutedCode>> {
        Ok(self.0.pci.executed_code(program.entry)?)
    }

    /// Submissions made to this device's queues so far (each publishes a write pointer and
    /// rings a doorbell): what a graph replay costs the host per device.
    pub fn submissions(&self) -> u64 {
        self.0.submissions.load(Ordering::Relaxed)
    }

    /// Bytes [`Device::copy_between`] has moved into this device through host memory (the
    /// pairs no peer path joins) since it was opened.
    pub fn host_staged_bytes(&self) -> u64 {
        self.0.host_staged.load(Ordering::Relaxed)
    }

    /// CPU waits for a signal of this device ([`Device::wait`], [`crate::Fence::wait`]) that
    /// found it short of the awaited value and had to wait, so far. A wait that finds the
    /// work done is not counted.
    pub fn host_waits(&self) -> u64 {
        self.0.host_waits.load(Ordering::Relaxed)
    }

    /// Device name.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// What the device is.
    pub fn info(&self) -> &DeviceInfo {
        &self.0.info
    }

    /// Allocate `size` bytes (rounded up to 4 KiB) mapped at a fresh GPU virtual address.
    /// A VRAM buffer larger than the device's VRAM is refused before the driver is asked.
    pub fn alloc(&self, size: u64, kind: MemKind) -> Result<Buffer> {
        let size = size.max(1);
        let vram = self.0.info.vram_bytes;
        if kind == MemKind::Vram && size > vram {
            return Err(Error::Limit {
                device: self.0.name.clone(),
                value: size,
                limit: vram,
                reason: format!(
                    "a VRAM buffer of {size} bytes is larger than the device's VRAM ({vram} bytes)"
                ),
            });
        }
        let (mapping, backing) = match kind {
            MemKind::Vram => (
                self.0.with_driver(|d| d.valloc(size, false))?,
                Backing::Vram,
            ),
            MemKind::System { uncached } => {
                let mem = self.0.pci.alloc_sysmem(size as usize, false)?;
                let m = self.0.with_driver(|d| d.map_sysmem(&*mem, uncached))?;
                (m, Backing::Sys(mem))
            }
            MemKind::Peer => {
                return Err(Error::State {
                    device: self.0.name.clone(),
                    reason: "peer memory is another hive member's VRAM: allocate it there and \
                             map it here with Device::map_peer"
                        .into(),
                });
            }
        };
        Ok(Buffer::new(
            Allocation::new(Arc::downgrade(&self.0), mapping, backing, kind),
            size,
        ))
    }

    /// Write `data` into `buf` at `offset` from the CPU: system memory directly, VRAM through
    /// BAR0 (flushed through the HDP before the next submission) or, where BAR0 does not
    /// reach, through the copy queue from a staging buffer.
    pub fn write(&self, buf: &Buffer, offset: u64, data: &[u8]) -> Result<()> {
        buf.check(offset, data.len() as u64)?;
        self.check_own(buf)?;
        if let Some((original, owner)) = buf.peer_original() {
            // Through the device that owns the memory (its BAR0 and HDP: flushed before this
            // device's next submission, as the owner's own).
            return owner.write(&original, offset, data);
        }
        if let Some((mem, base)) = buf.sysmem() {
            mem.write_bytes(base + offset, data)?;
            return Ok(());
        }
        if self.0.info.large_bar {
            let mut done = 0usize;
            for (p, n) in buf.vram_ranges(offset, data.len() as u64) {
                self.0.vram.write(p, &data[done..done + n as usize])?;
                done += n as usize;
            }
            self.0.hdp_writes.fetch_add(1, Ordering::AcqRel);
            return Ok(());
        }
        self.copy_in(buf, offset, data)
    }

    /// Read `buf` at `offset` into `out` from the CPU (the inverse of [`Device::write`]).
    pub fn read(&self, buf: &Buffer, offset: u64, out: &mut [u8]) -> Result<()> {
        buf.check(offset, out.len() as u64)?;
        self.check_own(buf)?;
        if let Some((original, owner)) = buf.peer_original() {
            return owner.read(&original, offset, out);
        }
        if let Some((mem, base)) = buf.sysmem() {
            mem.read_bytes(base + offset, out)?;
            return Ok(());
        }
        if self.0.info.large_bar {
            let mut done = 0usize;
            for (p, n) in buf.vram_ranges(offset, out.len() as u64) {
                self.0.vram.read(p, &mut out[done..done + n as usize])?;
                done += n as usize;
            }
            return Ok(());
        }
        self.copy_out(buf, offset, out)
    }

    /// A buffer of another device is read and written through that device.
    fn check_own(&self, buf: &Buffer) -> Result<()> {
        if buf.belongs_to(self) {
            return Ok(());
        }
        Err(Error::Buffer {
            device: self.0.name.clone(),
            va: buf.va(),
            size: buf.size(),
            reason: "the buffer belongs to another device: read and write it through that \
                     device"
                .into(),
        })
    }

    /// Staging size of [`Device::copy_in`]/[`Device::copy_out`].
    const STAGING: u64 = 4 << 20;

    /// Write `data` into `buf` through the copy queue: the bytes go to a system-memory
    /// staging buffer, SDMA copies them (4 MiB at a time), and the call returns when they
    /// have landed.
    pub fn copy_in(&self, buf: &Buffer, offset: u64, data: &[u8]) -> Result<()> {
        buf.check(offset, data.len() as u64)?;
        let staging = self.alloc(
            Self::STAGING.min(data.len() as u64),
            MemKind::System { uncached: false },
        )?;
        for (i, chunk) in data.chunks(Self::STAGING as usize).enumerate() {
            self.write(&staging, 0, chunk)?;
            let mut c = crate::CopyCommands::new(self);
            c.copy(
                &buf.view(offset + (i as u64) * Self::STAGING, chunk.len() as u64)?,
                &staging.view(0, chunk.len() as u64)?,
            )?;
            c.submit()?.wait()?;
        }
        Ok(())
    }

    /// Read `buf` into `out` through the copy queue and a staging buffer.
    pub fn copy_out(&self, buf: &Buffer, offset: u64, out: &mut [u8]) -> Result<()> {
        buf.check(offset, out.len() as u64)?;
        let staging = self.alloc(
            Self::STAGING.min(out.len() as u64),
            MemKind::System { uncached: false },
        )?;
        for (i, chunk) in out.chunks_mut(Self::STAGING as usize).enumerate() {
            let mut c = crate::CopyCommands::new(self);
            c.copy(
                &staging.view(0, chunk.len() as u64)?,
                &buf.view(offset + (i as u64) * Self::STAGING, chunk.len() as u64)?,
            )?;
            c.submit()?.wait()?;
            self.read(&staging, 0, chunk)?;
        }
        Ok(())
    }

    /// A fresh signal (value 0).
    pub fn new_signal(&self) -> Result<Signal> {
        let mut pools = lock(&self.0.signals);
        for p in pools.iter() {
            if let Some(s) = p.take() {
                return Ok(s);
            }
        }
        let buf = self.alloc(SIGNAL_POOL, MemKind::System { uncached: true })?;
        let pool = SignalPool::new(buf);
        let s = pool.take().ok_or_else(|| Error::State {
            device: self.0.name.clone(),
            reason: "a fresh signal pool has no signal".into(),
        })?;
        pools.push(pool);
        Ok(s)
    }

    /// Signals handed out and not dropped (for leak checks).
    pub fn signals_in_use(&self) -> usize {
        let pools = lock(&self.0.signals);
        pools.len() * (SIGNAL_POOL / SIGNAL_SIZE) as usize
            - pools.iter().map(|p| p.available()).sum::<usize>()
    }

    /// Load kernel `name` of a code object.
    pub fn load(&self, code_object: &[u8], name: &str) -> Result<crate::Program> {
        crate::Program::load(self, code_object, name)
    }

    /// Kernel-argument memory for one launch: `bytes` written at an `align`ed address with
    /// slack after them (compiled code may read past the end of its arguments with wide
    /// scalar loads). The ring starts over (after the GPU has finished everything submitted)
    /// when it runs out. Returns the GPU address and where in the ring it lies.
    pub(crate) fn kernarg(&self, bytes: &[u8], align: u64) -> Result<(u64, KernargMark)> {
        let len = bytes.len() as u64 + KERNARG_SLACK;
        let mut g = lock(&self.0.kernargs);
        let closed = || Error::State {
            device: self.0.name.clone(),
            reason: "no kernel-argument memory (closed?)".into(),
        };
        let ring = g.as_mut().ok_or_else(closed)?;
        if len > ring.buf.size() {
            return Err(Error::State {
                device: self.0.name.clone(),
                reason: format!(
                    "{} bytes of kernel arguments exceed the {KERNARG_RING}-byte ring",
                    bytes.len()
                ),
            });
        }
        let mut at = ring.next.next_multiple_of(align.max(16));
        if at + len > ring.buf.size() {
            drop(g);
            self.synchronize()?;
            g = lock(&self.0.kernargs);
            let ring = g.as_mut().ok_or_else(closed)?;
            ring.next = 0;
            ring.laps += 1;
            at = 0;
        }
        let ring = g.as_mut().ok_or_else(closed)?;
        ring.next = at + len;
        let (mem, base) = ring.buf.sysmem().ok_or_else(|| Error::State {
            device: self.0.name.clone(),
            reason: "kernel-argument memory is not system memory".into(),
        })?;
        mem.write_bytes(base + at, bytes)?;
        Ok((ring.buf.va() + at, KernargMark { lap: ring.laps, at }))
    }

    /// Whether arguments written at `mark` are still in the ring (not overwritten by a later
    /// lap).
    pub(crate) fn kernarg_valid(&self, mark: KernargMark) -> bool {
        let g = lock(&self.0.kernargs);
        let Some(ring) = g.as_ref() else { return false };
        ring.laps == mark.lap || (ring.laps == mark.lap + 1 && ring.next <= mark.at)
    }

    /// Scratch for a launch of `per_item` bytes of private memory per work-item: the buffer
    /// (grown as needed, sized for every wave slot of every CU) and the `COMPUTE_TMPRING_SIZE`
    /// value.
    pub(crate) fn scratch(&self, per_item: u32) -> Result<Option<(u64, u32)>> {
        if per_item == 0 {
            return Ok(None);
        }
        let mut g = lock(&self.0.scratch);
        if let Some(s) = g.as_ref()
            && s.per_item >= per_item
        {
            return Ok(Some((s.buf.va(), s.tmpring)));
        }
        // 64 lanes per wave; WAVESIZE in 256-byte units on GC ≥ 10, 1 KiB on GC 9.
        let unit: u64 = if self.0.info.gc_major >= 10 {
            256
        } else {
            1024
        };
        let per_lane = u64::from(per_item).next_multiple_of(unit / 64);
        let wave_bytes = (64 * per_lane).next_multiple_of(unit);
        let waves = SCRATCH_SLOTS_PER_CU * u64::from(self.0.info.cus.max(1));
        let buf = self.alloc(waves * wave_bytes, MemKind::Vram)?;
        if let Some(old) = g.take() {
            lock(&self.0.retired).push(old.buf);
        }
        let tmpring = self.0.with_driver(|d| {
            // A size past u32 is past the field too: `wavesize` reports the overflow.
            let wavesize = u32::try_from(wave_bytes / unit).unwrap_or(u32::MAX);
            d.ctx().encode(gc::COMPUTE_TMPRING_SIZE, |f| {
                f.waves(waves.min(0xfff) as u32).wavesize(wavesize)
            })
        })?;
        let r = (buf.va(), tmpring);
        *g = Some(Scratch {
            buf,
            per_item: per_lane as u32,
            tmpring,
        });
        Ok(Some(r))
    }

    /// The profiled launches that have finished since the last call (see
    /// [`Device::set_profiling`]), in submission order.
    pub fn profile(&self) -> Result<Vec<crate::trace::Event>> {
        let mut pending = lock(&self.0.trace);
        let mut done = Vec::new();
        let mut left = Vec::new();
        for p in pending.drain(..) {
            match p.finished()? {
                Some(e) => done.push(e),
                None => left.push(p),
            }
        }
        *pending = left;
        Ok(done)
    }

    /// Copy `src` of device `from` into `dst` of this device, `len` bytes from the start of
    /// each: with this device's copy queue reading `src` in place when `src` is VRAM this
    /// device reaches — over XGMI in a hive, or over PCIe through `from`'s BAR0
    /// ([`Link::PciePeer`](crate::Link::PciePeer)) — else through host memory, staged in
    /// 4 MiB pieces. Returns when the bytes have landed.
    ///
    /// The peer path maps `src`'s allocation into this device once (checked as
    /// [`Device::map_peer`] checks) and keeps the mapping for later copies from it, until that
    /// allocation is freed: mapping costs page-table writes and a TLB flush on every copy
    /// otherwise.
    pub fn copy_between(&self, dst: &Buffer, from: &Device, src: &Buffer, len: u64) -> Result<()> {
        match self.copy_between_start(dst, from, src, len)? {
            Some(fence) => fence.wait(),
            None => Ok(()),
        }
    }

    /// [`Device::copy_between`] without waiting for an XGMI copy: its fence (`None` when
    /// the copy went through host memory, or moved nothing, and is done already). `src` and
    /// `dst` must be held until the fence has passed. Several copies started before waiting
    /// on any run at once, each on its destination's copy queue.
    pub fn copy_between_start(
        &self,
        dst: &Buffer,
        from: &Device,
        src: &Buffer,
        len: u64,
    ) -> Result<Option<crate::Fence>> {
        dst.check(0, len)?;
        src.check(0, len)?;
        if len > 0 && src.kind() == MemKind::Vram && !Arc::ptr_eq(&self.0, &from.0) {
            match self.kept_peer_mapping(src) {
                Ok(m) => {
                    let mut c = crate::CopyCommands::new(self);
                    c.copy_from_peer(&dst.view(0, len)?, m.va + src.offset())?;
                    return c.submit().map(Some);
                }
                Err(Error::Driver(am_driver::Error {
                    kind: am_driver::ErrorKind::NotInOneHive { .. },
                    ..
                })) => {}
                Err(e) => return Err(e),
            }
        }
        let mut piece = vec![0u8; Self::STAGING.min(len) as usize];
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(Self::STAGING) as usize;
            from.read(src, done, &mut piece[..n])?;
            self.write(dst, done, &piece[..n])?;
            done += n as u64;
            self.0.host_staged.fetch_add(n as u64, Ordering::Relaxed);
        }
        Ok(None)
    }

    /// `src`, VRAM of another device this one reaches (a member of its hive over XGMI, or a
    /// device over PCIe through its BAR0), as a buffer of this device ([`MemKind::Peer`])
    /// for its kernels and copy commands to read in place: through the mapping of `src`'s
    /// allocation that [`Device::copy_between`] keeps (made here the first time, checked as
    /// [`Device::map_peer`] checks), so a view costs no page-table write after the first.
    /// The view holds `src`'s memory, and so the mapping, while it lives. Refused as
    /// `map_peer` refuses (`NotInOneHive` for a device reached neither way); a buffer of
    /// this device comes back as it is.
    pub fn peer_view(&self, src: &Buffer) -> Result<Buffer> {
        if src.belongs_to(self) {
            return Ok(src.clone());
        }
        if let Some((original, _)) = src.peer_original() {
            return self.peer_view(&original);
        }
        let owner = self.vram_owner_to_map(src)?;
        let mapping = self.kept_peer_mapping(src)?;
        let view = Allocation::new(
            Arc::downgrade(&self.0),
            mapping,
            Backing::Peer {
                alloc: src.alloc.clone(),
                owner,
                kept: true,
            },
            MemKind::Peer,
        );
        Ok(src.same_range_of(Arc::new(view)))
    }

    /// Map `buf`, VRAM of another device this one reaches — a member of its XGMI hive, or
    /// over PCIe through that device's BAR0 ([`Link::PciePeer`](crate::Link::PciePeer)) —
    /// into this device: the returned buffer (same size, [`MemKind::Peer`]) is at a GPU
    /// address of this device, for its copy commands and as a kernel argument; the CPU reads
    /// and writes it through the device that owns it ([`Device::read`], [`Device::write`]
    /// forward there). The mapping keeps `buf`'s memory and its device alive until the last
    /// handle on it goes. A buffer of this device comes back as it is; a peer mapping is
    /// mapped from its original.
    ///
    /// Refused ([`Error::Driver`] with `NotInOneHive`, naming both devices and why PCIe does
    /// not join them either) unless the two are members of one hive or a PCIe peer path
    /// joins them. The first XGMI mapping from a device checks, once, that this device
    /// really reaches that one over XGMI: its copy queue reads a value the other device
    /// wrote (the registers cannot tell two hives of the same shape apart); a device that
    /// reaches something else is refused the same way, and one whose read faults is
    /// recovered ([`Device::recover`]) before the refusal.
    pub fn map_peer(&self, buf: &Buffer) -> Result<Buffer> {
        if buf.belongs_to(self) {
            return Ok(buf.clone());
        }
        if let Some((original, _)) = buf.peer_original() {
            return self.map_peer(&original);
        }
        let owner = self.vram_owner_to_map(buf)?;
        let (peer, xgmi) = self.map_allocation(&owner, &buf.alloc)?;
        if xgmi {
            self.check_fabric(&owner)?;
        }
        Ok(buf.same_range_of(peer))
    }

    /// The device `buf` belongs to, for mapping it into this one: refused once that device
    /// is closed.
    /// [`Device::owner_to_map`] of `buf`, which must be VRAM (the only memory mapped into
    /// another hive member).
    fn vram_owner_to_map(&self, buf: &Buffer) -> Result<Device> {
        let owner = self.owner_to_map(buf)?;
        if buf.kind() != MemKind::Vram {
            return Err(Error::Buffer {
                device: owner.0.name.clone(),
                va: buf.va(),
                size: buf.size(),
                reason: format!(
                    "{:?} memory: only VRAM is mapped into another hive member ({})",
                    buf.kind(),
                    self.0.name
                ),
            });
        }
        Ok(owner)
    }

    fn owner_to_map(&self, buf: &Buffer) -> Result<Device> {
        buf.alloc
            .dev
            .upgrade()
            .map(Device)
            .ok_or_else(|| Error::State {
                device: self.0.name.clone(),
                reason: format!(
                    "cannot map the buffer at {:#x}: its device is closed",
                    buf.va()
                ),
            })
    }

    /// The mapping into this device of `src`'s allocation (VRAM of another hive member)
    /// that [`Device::copy_between`] keeps (made here the first time). Valid while `src` is
    /// held: the mapping goes when its allocation is freed.
    fn kept_peer_mapping(&self, src: &Buffer) -> Result<am_driver::mm::VirtMapping> {
        let alloc = &src.alloc;
        let mut maps = lock(&alloc.peer_maps);
        maps.retain(|m| m.dev.strong_count() > 0);
        let mine = Arc::as_ptr(&self.0);
        if let Some(m) = maps.iter().find(|m| std::ptr::eq(m.dev.as_ptr(), mine)) {
            return Ok(m.mapping.clone());
        }
        let owner = self.owner_to_map(src)?;
        let pv = owner.0.with_driver(|d| Ok(d.peer_vram(&alloc.mapping)))?;
        let (mapping, xgmi) = self.map_peer_vram(&owner, &pv)?;
        let checked = if xgmi {
            self.check_fabric(&owner)
        } else {
            Ok(())
        };
        if let Err(e) = checked {
            if let Err(u) = self.0.with_driver(|d| d.unmap_borrowed(&mapping)) {
                tracing::warn!("{}: unmapping a refused peer mapping: {u}", self.0.name);
            }
            return Err(e);
        }
        maps.push(crate::memory::PeerMap {
            dev: Arc::downgrade(&self.0),
            mapping: mapping.clone(),
        });
        Ok(mapping)
    }

    /// Map the whole of `alloc` (VRAM of `owner`) into this device; whether over XGMI.
    fn map_allocation(
        &self,
        owner: &Device,
        alloc: &Arc<Allocation>,
    ) -> Result<(Arc<Allocation>, bool)> {
        // One driver at a time: the owner's describes its memory, then this one maps it.
        let pv = owner.0.with_driver(|d| Ok(d.peer_vram(&alloc.mapping)))?;
        let (mapping, xgmi) = self.map_peer_vram(owner, &pv)?;
        let mapped = Arc::new(Allocation::new(
            Arc::downgrade(&self.0),
            mapping,
            Backing::Peer {
                alloc: alloc.clone(),
                owner: owner.clone(),
                kept: false,
            },
            MemKind::Peer,
        ));
        Ok((mapped, xgmi))
    }

    /// Whether this device's copy queue reads, through a peer mapping, what `owner` wrote
    /// into its own VRAM (done once per pair; see [`Device::map_peer`]).
    fn check_fabric(&self, owner: &Device) -> Result<()> {
        let seen = |dev: &Device| {
            lock(&self.0.peers)
                .iter()
                .any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(&dev.0)))
        };
        if seen(owner) {
            return Ok(());
        }
        let refuse = |reason: String| {
            Error::Driver(am_driver::Error::new(
                &self.0.name,
                am_driver::ErrorKind::NotInOneHive {
                    peer: owner.0.name.clone(),
                    reason,
                },
            ))
        };
        let cookie = fabric_cookie(&self.0.name, &owner.0.name);
        let probe = owner.alloc(cookie.len() as u64, MemKind::Vram)?;
        owner.write(&probe, 0, &cookie)?;
        owner.0.flush_hdp_if_dirty()?;
        let remote = probe.same_range_of(self.map_allocation(owner, &probe.alloc)?.0);
        let landing = self.alloc(cookie.len() as u64, MemKind::System { uncached: true })?;
        let mut c = crate::CopyCommands::new(self);
        c.copy(&landing, &remote)?;
        match c.submit()?.wait() {
            Ok(()) => {}
            Err(Error::GpuFault { event, .. }) => {
                self.recover()?;
                return Err(refuse(format!(
                    "this device's read of the other's VRAM over XGMI faulted ({event}): no \
                     member of its hive answers there"
                )));
            }
            Err(e) => return Err(e),
        }
        let mut got = vec![0u8; cookie.len()];
        self.read(&landing, 0, &mut got)?;
        if got != cookie {
            return Err(refuse(
                "the hive region where its VRAM should be holds other memory: the two are \
                 members of different hives of the same shape"
                    .into(),
            ));
        }
        let mut peers = lock(&self.0.peers);
        peers.retain(|w| w.strong_count() > 0);
        peers.push(Arc::downgrade(&owner.0));
        Ok(())
    }

    /// Wait until everything submitted so far to any queue has finished.
    pub fn synchronize(&self) -> Result<()> {
        for cell in self.cells() {
            let pending = cell.lock().as_ref().map(|q| (q.timeline.clone(), q.last));
            if let Some((signal, last)) = pending
                && last > 0
            {
                self.wait(&signal, last, self.wait_timeout())?;
            }
            if let Some(q) = cell.lock().as_mut() {
                let done = q.timeline.value()?;
                q.inflight.retain(|(v, _)| *v > done);
            }
        }
        lock(&self.0.retired).clear();
        Ok(())
    }

    /// Wait until `signal` reaches `value` (≥). Faults the GPU reports meanwhile end the wait
    /// with [`Error::GpuFault`]; a timeout is a hang ([`Error::Hang`]) naming the queue that
    /// still has work, its read pointer and the packet there.
    pub fn wait(&self, signal: &Signal, value: u64, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        let mut next_check = start + FAULT_POLL;
        let mut spins = 0u32;
        if signal.value()? >= value {
            return Ok(());
        }
        self.0.host_waits.fetch_add(1, Ordering::Relaxed);
        loop {
            if signal.value()? >= value {
                return Ok(());
            }
            let now = Instant::now();
            if now >= next_check {
                self.check_faults("waiting for a signal")?;
                next_check = now + FAULT_POLL;
            }
            if now.duration_since(start) > timeout {
                return Err(self.hang(signal, value, now.duration_since(start)));
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else if spins < 1024 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    fn hang(&self, signal: &Signal, value: u64, waited: Duration) -> Error {
        let mut report = None;
        for cell in self.cells() {
            let g = cell.lock();
            let Some(q) = g.as_ref() else { continue };
            let rptr = q.rptr().unwrap_or(0);
            if rptr < q.put || report.is_none() {
                report = Some((q.name.clone(), rptr, q.describe_at_rptr()));
                if rptr < q.put {
                    break;
                }
            }
        }
        let (queue, rptr, last_packet) = report.unwrap_or_default();
        Error::Hang {
            device: self.0.name.clone(),
            queue,
            awaited: value,
            current: signal.value().unwrap_or(0),
            waited_ms: waited.as_millis() as u64,
            rptr,
            last_packet,
        }
    }

    /// Drain the interrupt ring; a fault the GPU reported is an error.
    pub fn check_faults(&self, during: &str) -> Result<()> {
        match self.0.with_driver(|d| d.handle_interrupts()) {
            Err(Error::Driver(am_driver::Error {
                kind: am_driver::ErrorKind::GpuFault(event),
                ..
            })) => Err(Error::GpuFault {
                device: self.0.name.clone(),
                during: during.into(),
                in_flight: self.in_flight(),
                event: Box::new(event),
            }),
            Err(e) => Err(e),
            Ok(_) => Ok(()),
        }
    }

    /// The kernels of unfinished submissions, by queue, for reports.
    fn in_flight(&self) -> String {
        let mut parts = Vec::new();
        for cell in self.cells() {
            let g = cell.lock();
            let Some(q) = g.as_ref() else { continue };
            let k = q.kernels_in_flight();
            if !k.is_empty() {
                parts.push(format!("{} on {}", k.join(", "), q.name));
            }
        }
        if parts.is_empty() {
            "no kernel in flight".into()
        } else {
            format!("kernels in flight: {}", parts.join("; "))
        }
    }

    /// Run `f` on the driver (what the runtime does not wrap: registers, SMU, memory
    /// manager state).
    pub fn with_driver<T>(
        &self,
        f: impl FnOnce(&mut AmDevice) -> am_driver::Result<T>,
    ) -> Result<T> {
        self.0.with_driver(f)
    }

    /// Make the device usable after a hang or a fault: the driver resets the MEC (every
    /// compute queue goes) and clears its error state; the runtime stops its copy queues and
    /// starts every queue again on a fresh ring. Work submitted before and not finished is
    /// dropped: its fences read as done.
    pub fn recover(&self) -> Result<()> {
        self.0.with_driver(|d| d.recover())?;
        let cells = self.cells();
        let mut carried = Vec::with_capacity(cells.len());
        for cell in &cells {
            let old = cell.lock().take();
            if let Some(q) = old {
                if let Handle::Sdma(id) = q.handle {
                    self.0.with_driver(|d| d.remove_sdma_queue(id))?;
                }
                carried.push(Some((q.timeline, q.last)));
            } else {
                carried.push(None);
            }
        }
        for (cell, timeline) in cells.iter().zip(carried) {
            self.start_queue(cell, timeline)?;
        }
        lock(&self.0.retired).clear();
        Ok(())
    }

    /// Stop the queues and finalise the driver (also what dropping the last handle does).
    pub fn close(self) -> Result<()> {
        self.0.shutdown()
    }
}

/// 16 bytes no other pair of devices (or earlier check) writes: the devices' names, the
/// time and a process-wide count, mixed.
fn fabric_cookie(a: &str, b: &str) -> Vec<u8> {
    use std::hash::{Hash, Hasher};
    use std::sync::atomic::AtomicU64;
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (a, b, COUNT.fetch_add(1, Ordering::Relaxed)).hash(&mut h);
    std::time::SystemTime::now().hash(&mut h);
    let x = h.finish();
    let mut out = x.to_le_bytes().to_vec();
    out.extend_from_slice(&(!x).rotate_left(17).to_le_bytes());
    out
}

impl Inner {
    fn shutdown(&self) -> Result<()> {
        let mut first = Ok(());
        let mut cells = vec![self.compute0.clone(), self.copy0.clone()];
        cells.extend(lock(&self.extra).iter().cloned());
        for cell in cells.iter().rev() {
            let q = cell.lock().take();
            if let Some(q) = q {
                let r = match q.handle {
                    Handle::Compute(id) => self.with_driver(|d| d.remove_compute_queue(id)),
                    Handle::Sdma(id) => self.with_driver(|d| d.remove_sdma_queue(id)),
                };
                if first.is_ok() {
                    first = r;
                }
            }
        }
        let drv = lock(&self.drv).take();
        if let Some(d) = drv {
            let r = d.fini().map_err(Error::from);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::warn!("{}: closing: {e}", self.name);
        }
    }
}
