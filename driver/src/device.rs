//! `AmDevice`: one GPU brought up from its BARs, and the boot state machine that decides how
//! much of the bring-up a new driver instance has to do.
//!
//! ```text
//! open ─ VF? ─ yes ─ INIT_DATA, INIT_ACCESS (lease) ─┐
//!          └─ no ───────────────────────────────────┤
//!   discovery, registers, init_sw of every block ───┤
//!   VF ──────────────────────────────────────────────────────── SOC, GMC, IH ─┐
//!   SCRATCH_REG7 == VERSION, !AM_RESET, SCRATCH_REG6 == 0, no VM fault → warm ┤ (skip)
//!   else: foreign firmware alive? → hive? refuse : bus-master off, mode1 reset│
//!         SOC, GMC, IH, PSP, SMU ─────────────────────────────────────────────┤
//!   GFX, SDMA (always) ── PF: clocks / power limit, clock gating, SCRATCH_REG7/6
//! ```

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use am_firmware::{FirmwareSet, IpVersions, LoadPlan, Locator, PlanOptions, Role, SosVariant};

use crate::ctx::CountingBar;
use crate::hive::{PeerVram, check_one_hive};
use crate::ip::gfx::{ComputeQueueDesc, Gfx, QueueId};
use crate::ip::sdma::{Sdma, SdmaQueueDesc, SdmaQueueId};
use crate::ip::smu::{ClockLevel, Smu};
use crate::ip::{gmc::Gmc, ih::Ih, psp::Psp, soc::Soc};
use crate::irq::IrqEvent;
use crate::mm::{MapFlags, MemoryManager, NoVram, PAGE_SIZE, PteFormat, VirtMapping};
use crate::regs::{Regs, alt, gc};
use crate::vf::{MailboxTimings, VfLease, VfMailbox};
use crate::*;

/// What `SCRATCH_REG7` holds after a boot by this driver: the state layout version. A later
/// instance that reads it back (and a clean `SCRATCH_REG6`) may warm boot.
pub const AM_VERSION: u32 = 0xA000_0008;

/// How a device is to be opened.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `AM_RESET=1`: always a full boot (a warm boot is not even considered).
    pub force_reset: bool,
    /// `AM_POWER_LIMIT=W`: set the SMU power limit (watts) and leave clocks unpinned,
    /// instead of pinning every clock to its highest level.
    pub power_limit_w: Option<u32>,
    /// Open only to reset (`am reset`, `am hive-reset`): discovery, registers and `init_sw`,
    /// but no bring-up at all — not even of a hive member running foreign firmware, which a
    /// normal open refuses. Only [`AmDevice::mode1_reset`] is meant to follow.
    pub reset_mode: bool,
    /// Open only to look (`am smi`): discovery, registers and `init_sw` — so every block
    /// knows the addresses the instance that booted the device allocated (the SMU driver
    /// table) — but nothing is written: no bring-up, the root page table is not cleared (the
    /// memory manager zeroes a host-side stand-in), and dropping it touches nothing. A PF
    /// only: a VF would have to take the PF's lease, which is the holder's.
    pub inspect: bool,
    /// Where firmware is looked up (`$AM_FIRMWARE_PATH`, then `/lib/firmware/amdgpu`).
    pub firmware: Locator,
    /// Which component set of a two-set sOS package to load.
    pub sos: SosVariant,
    /// Wait limits.
    pub timeouts: Timeouts,
    /// VF mailbox timings.
    pub mailbox: MailboxTimings,
}

impl Options {
    /// Options from the environment: `AM_RESET`, `AM_POWER_LIMIT`, `AM_FIRMWARE_PATH`.
    pub fn from_env(device: &str) -> Result<Self> {
        let err = |kind| Error::new(device, kind);
        let firmware = Locator::from_env().map_err(|source| err(ErrorKind::Firmware { source }))?;
        let value = std::env::var("AM_POWER_LIMIT").unwrap_or_default();
        let power_limit_w = match value.trim() {
            "" => None,
            watts => Some(watts.parse().map_err(|_| {
                let (var, reason) = ("AM_POWER_LIMIT", "is not a whole number of watts");
                err(ErrorKind::BadEnv { var, value, reason })
            })?),
        };
        Ok(Options {
            force_reset: std::env::var("AM_RESET").is_ok_and(|v| v.trim() == "1"),
            power_limit_w,
            firmware,
            ..Options::default()
        })
    }
}

/// How the device was brought up; displayed by its lower-case name for reports (`cold`,
/// `warm`, `mode1-reset`, `vf`, `reset-only`, `inspect`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, derive_more::Display)]
#[display(rename_all = "kebab-case")]
pub enum BootKind {
    /// Everything from the PSP bootloader on.
    Cold,
    /// A previous instance of this driver left the firmware running cleanly: only GFX and
    /// SDMA were initialised.
    Warm,
    /// Firmware of another driver was running: mode1 reset, then a full boot.
    #[display("mode1-reset")]
    AfterMode1Reset,
    /// SR-IOV VF: the PF owns PSP and SMU; SOC, GMC, IH, GFX and SDMA were initialised.
    Vf,
    /// Opened in reset mode: nothing was initialised.
    ResetOnly,
    /// Opened to look ([`Options::inspect`]): nothing was initialised or written.
    Inspect,
}

/// One phase of the bring-up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Phase {
    /// `init_sw`, `probe`, `mode1_reset`, `soc`, `gmc`, `ih`, `psp`, `smu`, `gfx`, `sdma`,
    /// `partition`, `clocks`, `clockgating`.
    pub name: &'static str,
    /// Wall time.
    pub duration: Duration,
    /// Register reads during the phase.
    pub reg_reads: u64,
    /// Register writes during the phase.
    pub reg_writes: u64,
}

/// What happened during [`AmDevice::open`].
#[derive(Clone, Debug)]
pub struct BootReport {
    /// The kind of boot.
    pub kind: BootKind,
    /// Why a full boot was done where a warm one might have been (malformed state, AM_RESET).
    pub reason: Option<String>,
    /// The phases, in order.
    pub phases: Vec<Phase>,
    /// What the PSP loaded: `(step name, bytes)`; empty on a warm boot and on a VF.
    pub firmware: Vec<(String, usize)>,
    /// Total register accesses of the open (reads + writes).
    pub reg_accesses: u64,
    /// Total wall time of the open.
    pub duration: Duration,
}

#[derive(Debug)]
struct Blocks {
    soc: Soc,
    gmc: Gmc,
    ih: Ih,
    psp: Psp,
    smu: Smu,
    gfx: Gfx,
    sdma: Sdma,
}

/// A GPU this process drives.
#[derive(Debug)]
pub struct AmDevice {
    ctx: Ctx,
    blocks: Blocks,
    report: BootReport,
    /// The VF's init-access lease (released exactly once: `fini`, `Drop`, or a failed open).
    lease: Option<VfLease>,
    error_state: Option<IrqEvent>,
    finalized: bool,
}

/// Where VRAM sits in MC space, and the XGMI hive segment of this device (`am info` reads it
/// too, without opening the device).
pub fn read_mc_layout(regs: &Regs) -> Result<McLayout> {
    let (base, top) = (
        regs.first(alt::FB_LOCATION_BASE)?,
        regs.first(alt::FB_LOCATION_TOP)?,
    );
    let base = regs.get(base, regs.reg(base)?.read(0)?, |f| f.fb_base(0))?;
    let top = regs.get(top, regs.reg(top)?.read(0)?, |f| f.fb_top(0))?;
    let mut mc = McLayout {
        fb_base: u64::from(base) << 24,
        fb_top: (u64::from(top) << 24) | 0xff_ffff,
        ..McLayout::default()
    };
    // Linux reads the hive layout from GC instance 0 (`gfxhub_v1_1/v1_2_get_xgmi_info`);
    // firmware programs it in every hub, so the MMHUB copy serves where GC has none.
    if let (Ok(cntl), Ok(size)) = (
        regs.first(alt::XGMI_LFB_CNTL),
        regs.first(alt::XGMI_LFB_SIZE),
    ) {
        let c = regs.reg(cntl)?.read(0)?;
        let seg = u64::from(regs.get(size, regs.reg(size)?.read(0)?, |f| f.pf_lfb_size(0))?) << 24;
        let max = regs.get(cntl, c, |f| f.pf_max_region(0))?;
        if seg > 0 && max > 0 {
            mc.xgmi_seg_size = seg;
            mc.xgmi_regions = max + 1;
            mc.xgmi_paddr_base = u64::from(regs.get(cntl, c, |f| f.pf_lfb_region(0))?) * seg;
        }
    }
    Ok(mc)
}

impl AmDevice {
    /// Bring the device up with options from the environment.
    pub fn open(pci: Arc<dyn PciDevice>) -> Result<Self> {
        let opts = Options::from_env(pci.name())?;
        Self::open_with(pci, opts)
    }

    /// Bring the device up: the whole boot state machine of the module docs.
    pub fn open_with(pci: Arc<dyn PciDevice>, opts: Options) -> Result<Self> {
        let start = Instant::now();
        let name = pci.name().to_string();
        // An inspecting open leaves the function as it finds it.
        if !opts.inspect {
            if let Err(e) = pci.resize_bar(0) {
                tracing::debug!("{name}: BAR0 not resized: {e}");
            }
            // The engines reach system memory (rings, signals, host buffers) by DMA, which
            // the function does only with bus mastering on; nothing else turns it on for us.
            pci.set_bus_master(true)?;
        }
        let mmio = Arc::new(CountingBar::new(pci.bar(5)?));
        let is_vf = vf::is_vf(&*mmio)?;
        if opts.inspect && is_vf {
            let what = "be opened to inspect (init access is the holder's lease)";
            return Err(Error::new(name, ErrorKind::PfOnly { what }));
        }
        // The PF un-gates MMIO and VRAM only after INIT_ACCESS; from then on the lease is
        // released if anything fails (its Drop).
        let lease = (is_vf.then(|| {
            let mb = VfMailbox::new(&name, mmio.clone(), opts.mailbox);
            mb.request_init_data()?;
            mb.request_init_access()
        }))
        .transpose()?;
        let discovery = Discovery::read(&*pci)?;
        pci.trace(trace::TraceEvent::Discovery(&discovery));
        let regs = Regs::with_mmio(&name, mmio.clone(), &discovery)?;
        let vram = Vram::new(&name, pci.bar(0)?, mmio.clone(), discovery.vram_size);
        let mc = read_mc_layout(&regs)?;
        let mm = MemoryManager::new(
            &name,
            // The first MiB of VF VRAM is not ours.
            if is_vf { 1 << 20 } else { 0 }..discovery.vram_size - discovery.reserved_vram_size(),
            PteFormat::for_gc(discovery.require_version(HwIp::GC)?.major),
            &mc,
            // An inspecting instance must not clear the root table of the instance that
            // runs the device: the allocator's bookkeeping is all it needs.
            if opts.inspect { &NoVram } else { &vram },
        )?;
        let ctx = Ctx {
            name: name.clone(),
            pci: pci.clone(),
            mmio,
            vram,
            doorbells: pci.bar(2)?,
            discovery,
            regs,
            mm: Mutex::new(mm),
            mc,
            is_vf,
            timeouts: opts.timeouts,
        };
        let plan = load_plan(&ctx, &opts)?;
        let (mut phases, mut mark) = (vec![], (Instant::now(), ctx.reg_accesses()));
        // Ends a phase: the time and register accesses since the end of the last one.
        let mut phase = |name| {
            let now = (Instant::now(), ctx.reg_accesses());
            let ((reads, writes), (reads0, writes0)) = (now.1, mark.1);
            phases.push(Phase {
                name,
                duration: now.0 - mark.0,
                reg_reads: reads - reads0,
                reg_writes: writes - writes0,
            });
            ctx.pci.trace(trace::TraceEvent::Phase(name));
            mark = now;
        };
        let ucode_start = [Role::Pfp, Role::Me, Role::Mec]
            .map(|role| plan.as_ref().and_then(|p| p.ucode_start(role)));
        let mut blocks = Blocks {
            soc: Soc::init_sw(&ctx)?,
            gmc: Gmc::init_sw(&ctx)?,
            ih: Ih::init_sw(&ctx)?,
            psp: Psp::init_sw(&ctx, plan)?,
            smu: Smu::init_sw(&ctx, opts.inspect)?,
            gfx: Gfx::init_sw(&ctx, ucode_start)?,
            sdma: Sdma::init_sw(&ctx)?,
        };
        phase("init_sw");
        let (kind, reason) = match (opts.inspect, opts.reset_mode) {
            (true, _) => (
                BootKind::Inspect,
                Some("opened to inspect: nothing initialised or written".into()),
            ),
            (_, true) => (
                BootKind::ResetOnly,
                Some("opened for a reset: nothing initialised".into()),
            ),
            _ => boot(&ctx, &mut blocks, &opts, &mut phase)?,
        };
        let (r, w) = ctx.reg_accesses();
        let report = BootReport {
            kind,
            reason,
            phases,
            firmware: blocks.psp.loaded.clone(),
            reg_accesses: r + w,
            duration: start.elapsed(),
        };
        tracing::info!(
            "{name}: {kind} boot in {:?}, {} register accesses",
            report.duration,
            report.reg_accesses
        );
        Ok(AmDevice {
            ctx,
            blocks,
            report,
            lease,
            error_state: None,
            // A device opened only to be reset, or to look, has nothing to finalise.
            finalized: matches!(kind, BootKind::ResetOnly | BootKind::Inspect),
        })
    }

    /// The shared context (registers, VRAM, memory manager).
    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    /// Device name.
    pub fn name(&self) -> &str {
        &self.ctx.name
    }

    /// What the open did.
    pub fn boot_report(&self) -> &BootReport {
        &self.report
    }

    /// Allocate `size` bytes of VRAM, map them at a fresh GPU virtual address of VM context
    /// 0, and flush the TLBs so the GPU sees the mapping.
    pub fn valloc(&self, size: u64, contiguous: bool) -> Result<VirtMapping> {
        let m = self.ctx.mm().valloc(&self.ctx.vram, size, contiguous)?;
        self.flush_tlb()?;
        Ok(m)
    }

    /// Flush HDP and the TLBs of VM context 0, so the GPU sees a changed mapping.
    fn flush_tlb(&self) -> Result<()> {
        self.blocks.gmc.flush_tlb(&self.ctx, &self.blocks.soc)
    }

    /// Map system memory the device can reach (from [`PciDevice::alloc_sysmem`]) at a fresh
    /// GPU virtual address of VM context 0, page by page at its bus addresses, and flush
    /// the TLBs. `uncached` maps it `MTYPE_UC` (reads always go to memory). A bus address
    /// beyond the GPU's DMA mask is refused.
    pub fn map_sysmem(&self, mem: &dyn SysMem, uncached: bool) -> Result<VirtMapping> {
        let size = (mem.len() as u64).next_multiple_of(PAGE_SIZE);
        let page = pci::SYSMEM_PAGE_SIZE as u64;
        let pages = mem.bus_addrs().iter().map(|&b| (b, page)).collect();
        self.map_borrowed(
            size,
            pages,
            MapFlags {
                uncached,
                ..MapFlags::SYSTEM
            },
            false,
        )
    }

    /// Map memory this device does not own (system memory, or a peer's VRAM at its hive
    /// addresses when `hive`) at a fresh GPU virtual address, and flush the TLBs.
    fn map_borrowed(
        &self,
        size: u64,
        paddrs: Vec<(u64, u64)>,
        flags: MapFlags,
        hive: bool,
    ) -> Result<VirtMapping> {
        let mut mm = self.ctx.mm();
        let va = mm.alloc_va(size)?;
        if let Err(e) = mm.map(&self.ctx.vram, va, &paddrs, flags, hive) {
            mm.va.free(va)?;
            return Err(e);
        }
        drop(mm);
        self.flush_tlb()?;
        Ok(VirtMapping {
            va,
            size,
            paddrs,
            flags,
        })
    }

    /// Unmap a [`map_sysmem`](Self::map_sysmem) or [`map_peer`](Self::map_peer) mapping
    /// (the memory stays its owner's), give the virtual range back and flush the TLBs.
    pub fn unmap_borrowed(&self, m: &VirtMapping) -> Result<()> {
        let mut mm = self.ctx.mm();
        mm.unmap(&self.ctx.vram, m.va, m.size)?;
        mm.va.free(m.va)?;
        drop(mm);
        self.flush_tlb()
    }

    /// This device's VRAM behind `m` (a [`valloc`](Self::valloc) mapping), as another member
    /// of its hive maps it with [`map_peer`](Self::map_peer).
    pub fn peer_vram(&self, m: &VirtMapping) -> PeerVram {
        PeerVram {
            device: self.ctx.name.clone(),
            layout: self.ctx.mc,
            paddrs: m.paddrs.clone(),
        }
    }

    /// Map another hive member's VRAM (`peer`, from its [`peer_vram`](Self::peer_vram)) at
    /// a fresh GPU virtual address of VM context 0 and flush the TLBs: this device's engines
    /// and shaders then read and write the peer's memory over XGMI. The entries hold the
    /// peer's hive physical addresses with VRAM-style flags ([`MapFlags::PEER_VRAM`]). A
    /// device that is not in one hive with this one is refused ([`crate::ErrorKind::NotInOneHive`],
    /// see [`check_one_hive`]). The mapping's `paddrs` are the peer's VRAM addresses;
    /// undo it with [`unmap_borrowed`](Self::unmap_borrowed).
    pub fn map_peer(&self, peer: &PeerVram) -> Result<VirtMapping> {
        check_one_hive(&self.ctx.name, &self.ctx.mc, peer)?;
        let size = peer.paddrs.iter().map(|r| r.1).sum();
        let mut m = self.map_borrowed(size, peer.hive_ranges(), MapFlags::PEER_VRAM, true)?;
        m.paddrs.clone_from(&peer.paddrs);
        Ok(m)
    }

    /// Map another device's VRAM (`peer`, from its [`peer_vram`](Self::peer_vram)) through
    /// its BAR0 as this device's DMA reaches it (`bar`, from [`PciDevice::peer_bar`]), at a
    /// fresh GPU virtual address of VM context 0, and flush the TLBs: PCIe peer-to-peer. The
    /// entries are system pages at `bar.dma_addr` plus each VRAM address, not snooped and
    /// uncached — as Linux's KFD attaches a peer's VRAM outside a hive (`kfd_mem_attach`:
    /// a dma-buf of the peer's BAR, `amdgpu_vram_mgr_alloc_sgt`'s `dma_map_resource` of
    /// the aperture plus the offset). A range past what the BAR shows (a small BAR) is
    /// refused, naming the peer; a BAR beyond this GPU's DMA mask is refused by the mapping.
    /// The mapping's `paddrs` are the peer's VRAM addresses; undo it with
    /// [`unmap_borrowed`](Self::unmap_borrowed) before dropping `bar`.
    pub fn map_peer_bar(&self, peer: &PeerVram, bar: &pci::PeerBar) -> Result<VirtMapping> {
        if let Some(&(a, n)) =
            (peer.paddrs.iter()).find(|&&(a, n)| a.checked_add(n).is_none_or(|e| e > bar.size))
        {
            return Err(self.ctx.err(ErrorKind::NoPeerAccess {
                peer: peer.device.clone(),
                reason: format!(
                    "VRAM range {a:#x}+{n:#x} is beyond the {:#x} bytes its BAR{} shows",
                    bar.size, bar.index
                ),
            }));
        }
        let size = peer.paddrs.iter().map(|r| r.1).sum();
        let pages = (peer.paddrs.iter())
            .map(|&(a, n)| (bar.dma_addr + a, n))
            .collect();
        let flags = MapFlags {
            snooped: false,
            uncached: true,
            ..MapFlags::SYSTEM
        };
        let mut m = self.map_borrowed(size, pages, flags, false)?;
        m.paddrs.clone_from(&peer.paddrs);
        Ok(m)
    }

    /// Width of the system bus addresses this GPU reaches (its DMA mask, in bits).
    pub fn dma_bits(&self) -> u32 {
        self.ctx.mm().tables.format.dma_bits()
    }

    /// Make the CPU's writes through BAR0 so far visible to the GPU (an HDP flush): needed
    /// before the GPU reads what the CPU wrote there (a ring before its doorbell, kernel
    /// arguments, code).
    pub fn hdp_flush(&self) -> Result<()> {
        self.blocks.soc.hdp_flush(&self.ctx)
    }

    /// Unmap and free a [`valloc`](Self::valloc) mapping, then flush the TLBs.
    pub fn vfree(&self, m: &VirtMapping) -> Result<()> {
        self.ctx.mm().vfree(&self.ctx.vram, m)?;
        self.flush_tlb()
    }

    /// Run `f` on the PSP (a ring command after boot, e.g. the spatial partition).
    pub fn with_psp<T>(&mut self, f: impl FnOnce(&Ctx, &Soc, &mut Psp) -> Result<T>) -> Result<T> {
        f(&self.ctx, &self.blocks.soc, &mut self.blocks.psp)
    }

    /// Run `f` on the SMU (metrics, power limit, ACA banks: `am smi`).
    pub fn with_smu<T>(&mut self, f: impl FnOnce(&Ctx, &mut Smu) -> Result<T>) -> Result<T> {
        f(&self.ctx, &mut self.blocks.smu)
    }

    /// How many times the interrupt ring overflowed (entries were lost) since open.
    pub fn ih_overflows(&self) -> u64 {
        self.blocks.ih.overflows
    }

    /// The fault the GPU reported, if the device is in its error state.
    pub fn error_state(&self) -> Option<&IrqEvent> {
        self.error_state.as_ref()
    }

    /// Drain the interrupt rings and decode every entry. A fault (shader error, page fault,
    /// RAS event) puts the device in its error state and is returned as
    /// [`crate::ErrorKind::GpuFault`] naming what happened and where; other events are returned.
    pub fn handle_interrupts(&mut self) -> Result<Vec<IrqEvent>> {
        let (ctx, b) = (&self.ctx, &mut self.blocks);
        let mut events = (b.ih.drain(ctx)?.iter())
            .map(|e| irq::decode(ctx, &b.gmc, e))
            .collect::<Result<Vec<_>>>()?;
        events.extend(irq::check_ras(ctx, &mut b.smu)?);
        for ev in events.iter().filter(|ev| ev.is_fatal()) {
            tracing::error!("{}: GPU fault: {ev}", ctx.name);
        }
        let Some(fault) = events.iter().find(|ev| ev.is_fatal()) else {
            return Ok(events);
        };
        self.error_state.get_or_insert(fault.clone());
        Err(ctx.err(ErrorKind::GpuFault(fault.clone())))
    }

    /// Leave the error state: drain interrupts, reset the MEC (dequeue every HQD, soft reset
    /// the CP, re-enable it) and clear the error.
    pub fn recover(&mut self) -> Result<()> {
        let _ = self.blocks.ih.drain(&self.ctx)?;
        self.blocks.gfx.reset_mec(&self.ctx)?;
        self.error_state = None;
        Ok(())
    }

    /// Start a compute queue on MEC1 (on every XCC for an AQL queue of a multi-XCC part).
    pub fn create_compute_queue(&mut self, desc: &ComputeQueueDesc) -> Result<QueueId> {
        let b = &mut self.blocks;
        b.gfx.setup_compute_queue(&self.ctx, &b.soc, desc)
    }

    /// Dequeue a compute queue started with [`AmDevice::create_compute_queue`].
    pub fn remove_compute_queue(&mut self, id: QueueId) -> Result<()> {
        self.blocks.gfx.remove_compute_queue(&self.ctx, id)
    }

    /// Start the ring of an SDMA engine.
    pub fn create_sdma_queue(&mut self, desc: &SdmaQueueDesc) -> Result<SdmaQueueId> {
        self.blocks.sdma.setup_queue(&self.ctx, desc)
    }

    /// Stop a ring started with [`AmDevice::create_sdma_queue`].
    pub fn remove_sdma_queue(&mut self, id: SdmaQueueId) -> Result<()> {
        self.blocks.sdma.remove_queue(&self.ctx, id)
    }

    /// Mode1 reset of the whole ASIC through the SMU (`am reset`, `am hive-reset`), with
    /// bus mastering off around it. Returns `false` when the SMU firmware was not running
    /// (nothing to reset: the device is already as a reset leaves it). The device must be
    /// opened again afterwards.
    pub fn mode1_reset(mut self) -> Result<bool> {
        if self.ctx.is_vf {
            let what = "reset the GPU";
            return Err(self.ctx.err(ErrorKind::PfOnly { what }));
        }
        // Nothing left to finalise afterwards: the reset takes the firmware and the queues.
        self.finalized = true;
        if !self.blocks.smu.is_alive(&self.ctx)? {
            return Ok(false);
        }
        // The scratch registers outlive a mode1 reset but the firmware does not: without
        // this, a device that was finalised cleanly before the reset would be warm booted
        // on dead firmware. Written before the reset, while the device still answers.
        self.ctx.wreg(gc::SCRATCH_REG7, 0, 0)?;
        mode1_reset(&self.ctx, &mut self.blocks.smu)?;
        Ok(true)
    }

    /// Finalise: stop SDMA and GFX, clocks to their lowest level, drain interrupts, and
    /// record in `SCRATCH_REG6` whether the device is clean (0) or in its error state; a VF
    /// releases its lease instead of touching the scratch registers.
    pub fn fini(mut self) -> Result<()> {
        self.fini_inner()
    }

    fn fini_inner(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        let (ctx, b, pf) = (&self.ctx, &mut self.blocks, !self.ctx.is_vf);
        // Every step runs whatever the others did; the first error is returned.
        let results = [
            b.sdma.fini_hw(ctx),
            b.gfx.fini_hw(ctx),
            if pf {
                b.smu.set_clocks(ctx, ClockLevel::Min)
            } else {
                Ok(())
            },
            b.ih.drain(ctx).map(drop),
            if pf {
                ctx.wreg(gc::SCRATCH_REG6, 0, self.error_state.is_some().into())
            } else {
                Ok(())
            },
        ];
        // Dropping the lease gives the init access back.
        self.lease = None;
        results.into_iter().collect()
    }
}

impl Drop for AmDevice {
    fn drop(&mut self) {
        if let Err(e) = self.fini_inner() {
            tracing::warn!("{}: finalising on drop: {e}", self.ctx.name);
        }
    }
}

/// The firmware load plan for the device's IP versions, built once for the whole bring-up
/// (the PSP walks it, GFX takes the CP start addresses from it). A VF still builds what it
/// can but needs none of it (the PF loaded the firmware): a failure is only logged there.
fn load_plan(ctx: &Ctx, opts: &Options) -> Result<Option<LoadPlan>> {
    let v = |ip| ctx.version(ip);
    let ips = IpVersions {
        gc: v(HwIp::GC)?,
        mp0: v(HwIp::MP0)?,
        mp1: v(HwIp::MP1)?,
        sdma: v(HwIp::SDMA0)?,
    };
    match FirmwareSet::load(ips, &opts.firmware)
        .and_then(|set| set.plan(PlanOptions { sos: opts.sos }))
    {
        Ok(plan) => Ok(Some(plan)),
        Err(e) if ctx.is_vf => {
            tracing::info!(
                "{}: VF: no firmware load plan ({e}); the PF loaded it",
                ctx.name
            );
            Ok(None)
        }
        Err(source) => Err(ctx.err(ErrorKind::Firmware { source })),
    }
}

/// Mode1 reset through the SMU with bus mastering off around it, so no DMA of the dying
/// firmware lands while the ASIC resets.
fn mode1_reset(ctx: &Ctx, smu: &mut Smu) -> Result<()> {
    ctx.pci.set_bus_master(false)?;
    let r = smu.mode1_reset(ctx, ctx.mc.is_hive());
    ctx.pci.set_bus_master(true)?;
    r
}

/// Why the last driver instance did not leave a state a warm boot can build on, or `None`
/// if it did.
fn full_boot_reason(ctx: &Ctx, psp: &Psp, opts: &Options) -> Result<Option<String>> {
    if opts.force_reset {
        return Ok(Some("AM_RESET=1".into()));
    }
    let version = ctx.rreg(gc::SCRATCH_REG7, 0)?;
    if version != AM_VERSION {
        return Ok(Some(format!(
            "SCRATCH_REG7 = {version:#x}: no previous instance of this driver"
        )));
    }
    let live = ctx.rreg(gc::SCRATCH_REG6, 0)?;
    if live != 0 {
        return Ok(Some(format!(
            "malformed state: SCRATCH_REG6 = {live:#x}, the previous driver instance did not finish cleanly"
        )));
    }
    let fault_status = ip::gmc::Hub::Gc(0).fault_status(ctx)?;
    let status = ctx.rreg(fault_status, 0)?;
    if status != 0 {
        return Ok(Some(format!(
            "malformed state: {} = {status:#x}, a page fault is pending",
            fault_status.name()
        )));
    }
    // The scratch registers survive a function-level reset (VFIO resets on open) and a
    // mode1 reset; the firmware does not. A warm boot needs it running.
    Ok((!psp.is_sos_alive(ctx)?).then(|| {
        "the scratch registers say this driver booted the device, but the PSP sOS is not running: it was reset since".into()
    }))
}

fn boot(
    ctx: &Ctx,
    b: &mut Blocks,
    opts: &Options,
    phase: &mut impl FnMut(&'static str),
) -> Result<(BootKind, Option<String>)> {
    let reason = if ctx.is_vf {
        None
    } else {
        let reason = full_boot_reason(ctx, &b.psp, opts)?;
        // From here until `fini` the device is "in use": an open that fails part-way leaves
        // SCRATCH_REG6 = 1, so the next instance does a full boot instead of building on a
        // half-initialised device.
        ctx.wreg(gc::SCRATCH_REG6, 0, 1)?;
        reason
    };
    let kind = match &reason {
        _ if ctx.is_vf => BootKind::Vf,
        None => BootKind::Warm,
        Some(why) => {
            tracing::info!("{}: full boot: {why}", ctx.name);
            let foreign = b.psp.is_sos_alive(ctx)? && b.smu.is_alive(ctx)?;
            phase("probe");
            match (foreign, ctx.mc.is_hive()) {
                (false, _) => BootKind::Cold,
                (true, true) => {
                    let regions = ctx.mc.xgmi_regions;
                    return Err(ctx.err(ErrorKind::HiveMalformed { regions }));
                }
                (true, false) => {
                    mode1_reset(ctx, &mut b.smu)?;
                    phase("mode1_reset");
                    BootKind::AfterMode1Reset
                }
            }
        }
    };
    let warm = kind == BootKind::Warm;
    if !warm {
        b.soc.init_hw(ctx)?;
        phase("soc");
        b.gmc.init_hw(ctx, false)?;
        phase("gmc");
        b.ih.init_hw(ctx)?;
        phase("ih");
    }
    if !warm && !ctx.is_vf {
        b.psp.init_hw(ctx, &b.soc)?;
        phase("psp");
        b.smu.init_hw(ctx)?;
        phase("smu");
    }
    ctx.mm().finish_boot();
    b.gfx.init_hw(ctx, &mut b.gmc, &b.soc, warm)?;
    phase("gfx");
    b.sdma.init_hw(ctx, &b.soc)?;
    phase("sdma");
    if !ctx.is_vf {
        if ctx.xccs().len() > 1 && !warm {
            b.psp.spatial_partition(ctx, &b.soc, 1)?;
            phase("partition");
        }
        match opts.power_limit_w {
            Some(w) => b.smu.set_power_limit(ctx, w),
            None => b.smu.set_clocks(ctx, ClockLevel::Max),
        }?;
        phase("clocks");
        b.soc.set_clockgating(ctx)?;
        b.gfx.set_clockgating(ctx)?;
        phase("clockgating");
        // SCRATCH_REG6 stays 1 (written above) until `fini` clears it.
        ctx.wreg(gc::SCRATCH_REG7, 0, AM_VERSION)?;
    }
    Ok((kind, reason))
}
