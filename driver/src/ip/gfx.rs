//! GFX: RLC autoload wait, GC hubs, MEC, golden registers, apertures, compute queues.
//!
//! The compute engine (MEC1) is started from the firmware the PSP loaded: on RS64 parts
//! (GC ≥ 10) its program counter is pointed at the MEC firmware's `ucode_start_addr` and the
//! pipe is toggled through reset — on GC 12 the PFP and ME cores too, whose firmware the plan
//! loads there; on GC 9 `CP_MEC_CNTL` halts and un-halts it. Compute queues
//! are hardware queue descriptors (HQDs) selected through `GRBM_GFX_CNTL` (me 1, pipe,
//! queue): the driver builds the compute MQD, copies it to VRAM and writes its register image
//! `CP_MQD_BASE_ADDR..=CP_HQD_PQ_WPTR_HI` into the selected HQD, then sets `CP_HQD_ACTIVE`.
//! An AQL queue on a multi-XCC part is set on every XCC (each XCC's MQD is one stride
//! further).

use super::*;

use am_autogen::doorbell::AMDGPU_NAVI10_DOORBELL_MEC_RING0;
use am_autogen::mqd::{v9::v9_mqd, v11::v11_compute_mqd};

use crate::regs::gc::*;

/// Queues per MEC pipe.
const MEC_QUEUES: u8 = 8;
/// One MQD slot (the compute MQD is 2 KiB; 4 KiB keeps the per-XCC stride the CP expects).
const MQD_SLOT: u64 = 0x1000;
/// The first compute ring's doorbell (64-bit slots), the default for the runtime.
pub const MEC_RING0_DOORBELL: u32 = AMDGPU_NAVI10_DOORBELL_MEC_RING0;

/// What the runtime needs to start a compute queue. Addresses are what the CP uses (MC
/// addresses of VRAM, or GPU virtual addresses of VM context 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ComputeQueueDesc {
    /// Ring base (256-byte aligned).
    pub ring: u64,
    /// Ring size in bytes: a power of two, 256 B to 8 MiB.
    pub ring_size: u64,
    /// Where the CP writes the read pointer back.
    pub rptr_addr: u64,
    /// Where the CP polls the write pointer.
    pub wptr_addr: u64,
    /// End-of-pipe buffer (256-byte aligned).
    pub eop_addr: u64,
    /// End-of-pipe buffer size in bytes: a power of two, at least 8.
    pub eop_size: u64,
    /// Doorbell slot (64-bit units in BAR2), e.g. [`MEC_RING0_DOORBELL`].
    pub doorbell: u32,
    /// An AQL (HSA) queue instead of a PM4 ring; on multi-XCC parts set on every XCC.
    pub aql: bool,
    /// MEC1 pipe.
    pub pipe: u8,
    /// Queue within the pipe.
    pub queue: u8,
}

/// A compute queue this driver started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueId {
    /// MEC1 pipe.
    pub pipe: u8,
    /// Queue within the pipe.
    pub queue: u8,
}

/// GFX state.
#[derive(Debug)]
pub struct Gfx {
    /// The RS64 start addresses of the CP cores `[PFP, ME, MEC]` from the firmware plan
    /// (MEC on GC ≥ 10, PFP and ME too on GC 12).
    ucode_start: [Option<u64>; 3],
    /// Live XCCs.
    xccs: Vec<u8>,
    /// MEC1 pipes this driver uses.
    pipes: u8,
    /// Boot-pool area of the MQD slots: `((pipe * MEC_QUEUES + queue) * xccs + xcc_index)`.
    mqd_paddr: u64,
    /// Offsets (dwords from `CP_MQD_BASE_ADDR`) of the registers of the MQD burst; holes of
    /// the register file are skipped.
    burst: Vec<usize>,
    /// Queues started by this instance, and whether each is AQL (then set on every XCC).
    queues: Vec<(QueueId, bool)>,
}

impl Gfx {
    /// Reserve the MQD slots in the boot pool. `ucode_start` are the RS64 start addresses of
    /// `[PFP, ME, MEC]` from the PSP's load plan (`LoadPlan::ucode_start`).
    pub fn init_sw(ctx: &Ctx, ucode_start: [Option<u64>; 3]) -> Result<Self> {
        let xccs = ctx.xccs();
        // RS64 parts (GC ≥ 10) run only pipe 0: the firmware plan loads only its stack
        // (`config_mec` and `enable_mec` reset and activate pipe 0). On GC 9 (F32 MEC) every
        // pipe of MEC1 runs.
        let pipes = if ctx.version(HwIp::GC)?.major >= 10 {
            1
        } else {
            4
        };
        Ok(Gfx {
            mqd_paddr: ctx.palloc(
                u64::from(pipes * MEC_QUEUES) * xccs.len() as u64 * MQD_SLOT,
                MQD_SLOT,
                Pool::Boot,
            )?,
            ucode_start,
            xccs,
            pipes,
            burst: mqd_burst(ctx)?,
            queues: Vec::new(),
        })
    }

    /// Full init (or, on a warm boot, only a MEC reset). The GC hubs belong to GMC, which
    /// programs them here, once the RLC runs.
    pub fn init_hw(&mut self, ctx: &Ctx, gmc: &mut Gmc, soc: &Soc, warm: bool) -> Result<()> {
        // The RLC runs: `RLC_RLCS_BOOTLOAD_STATUS.BOOTLOAD_COMPLETE` where the GC has it (RLC
        // autoload, GC ≥ 11), else an idle `CP_STAT` (every GC has it). A VF does not wait:
        // the PF brought the RLC up.
        let status = RLC_RLCS_BOOTLOAD_STATUS;
        if !ctx.is_vf {
            let (reg, mask, want, what) = if ctx.regs.has(status) {
                let done = ctx.encode(status, |f| f.bootload_complete(1))?;
                (status.untyped(), done, done, "RLC autoload")
            } else {
                (CP_STAT, u32::MAX, 0, "RLC start (idle CP)")
            };
            for &xcc in &self.xccs {
                ctx.wait_reg(
                    reg,
                    xcc,
                    mask,
                    want,
                    ctx.timeouts.reg,
                    format_args!("{what} on XCC {xcc}"),
                )?;
            }
        }
        gmc.init_hw(ctx, true)?;
        if warm {
            return self.reset_mec(ctx);
        }
        self.config_mec(ctx)?;
        for &xcc in &self.xccs {
            // Golden settings: the kernel ORs bit 29 into TCP_CNTL and gives no value.
            ctx.wreg(TCP_CNTL, xcc, ctx.rreg(TCP_CNTL, xcc)? | 0x2000_0000)?;
            ctx.wreg(RLC_CNTL, xcc, 0x1)?;
            ctx.update(RLC_SRM_CNTL, xcc, |f| f.srm_enable(1).auto_incr_addr(1))?;
            ctx.wreg(RLC_SPM_MC_CNTL, xcc, 0xf)?;
        }
        if !soc.per_aid {
            // S2A ports of the CP doorbells: port 0 (gfx rings) and port 3 (MEC).
            for (port, awid) in [(0, 0x3), (3, 0x6)] {
                soc.doorbell_enable(ctx, (port, 0), awid, 0x3, (0, 0))?;
            }
        }
        let v = ctx.version(HwIp::GC)?;
        // SH_MEM_ADDRESS_MODE_64 = 0, SH_MEM_ALIGNMENT_MODE_UNALIGNED = 3.
        let sh_mem_config = ctx.encode(SH_MEM_CONFIG, |f| {
            let f = f.address_mode(0).alignment_mode(3);
            let f = match v.major {
                10.. => f.initial_inst_prefetch(3),
                _ => f.retry_disable(1),
            };
            if (v.major, v.minor) == (9, 4) {
                f.f8_mode(1)
            } else {
                f
            }
        })?;
        // LDS aperture at 0x1000_0000_0000_0000, scratch at 0x2000_0000_0000_0000.
        let bases = ctx.encode(SH_MEM_BASES, |f| f.shared_base(1).private_base(2))?;
        for (i, &xcc) in self.xccs.iter().enumerate() {
            // GC 9.4.3 and 9.5.0 golden settings.
            if matches!((v.major, v.minor, v.rev), (9, 4, 3) | (9, 5, 0)) {
                ctx.wreg(GB_ADDR_CONFIG, xcc, 0x2a11_4042)?;
                ctx.update(TCP_UTCL1_CNTL2, xcc, |f| f.spare(1))?;
            }
            ctx.update(GRBM_CNTL, xcc, |f| f.read_timeout(0xff))?;
            for vmid in 0..16 {
                grbm_select(ctx, xcc, 0, 0, 0, vmid)?;
                ctx.wreg(SH_MEM_CONFIG, xcc, sh_mem_config)?;
                ctx.wreg(SH_MEM_BASES, xcc, bases)?;
            }
            grbm_select(ctx, xcc, 0, 0, 0, 0)?;
            let lower = 0x100 * i as u32;
            ctx.wreg(CP_MEC_DOORBELL_RANGE_LOWER, xcc, lower)?;
            ctx.wreg(CP_MEC_DOORBELL_RANGE_UPPER, xcc, lower + 0xf8)?;
        }
        self.enable_mec(ctx)
    }

    /// Dequeue every queue this instance started and halt the MEC.
    pub fn fini_hw(&mut self, ctx: &Ctx) -> Result<()> {
        let mut result = Ok(());
        for (id, aql) in std::mem::take(&mut self.queues) {
            for &xcc in self.targets(aql) {
                result = result.and(dequeue(ctx, xcc, id));
            }
        }
        for &xcc in &self.xccs {
            result = result.and(grbm_select(ctx, xcc, 0, 0, 0, 0)).and(
                if ctx.gc_major() >= 10 {
                    ctx.update(CP_MEC_RS64_CNTL, xcc, |f| f.mec_halt(1))
                } else {
                    ctx.update(CP_MEC_CNTL, xcc, |f| f.mec_me1_halt(1).mec_me2_halt(1))
                }
                .map(drop),
            );
        }
        result
    }

    /// Dequeue every active HQD of the pipes this driver uses (whoever started it), soft
    /// reset the CP, reconfigure and re-enable the MEC.
    pub fn reset_mec(&mut self, ctx: &Ctx) -> Result<()> {
        for &xcc in &self.xccs {
            for pipe in 0..self.pipes {
                for queue in 0..MEC_QUEUES {
                    dequeue(ctx, xcc, QueueId { pipe, queue })?;
                }
            }
            grbm_select(ctx, xcc, 0, 0, 0, 0)?;
        }
        if ctx.gc_major() < 12 {
            let reset = ctx.encode(GRBM_SOFT_RESET, |f| f.soft_reset_cp(1).soft_reset_cpc(1))?;
            for &xcc in &self.xccs {
                ctx.wreg(GRBM_SOFT_RESET, xcc, reset)?;
            }
            settle();
            for &xcc in &self.xccs {
                ctx.wreg(GRBM_SOFT_RESET, xcc, 0)?;
            }
        }
        self.queues.clear();
        self.config_mec(ctx)?;
        self.enable_mec(ctx)
    }

    /// GFX clock gating (what the reference driver sets): ATC L2 clock gating, then per XCC
    /// inside RLC safe mode coarse- and medium-grain clock gating, CP idle polling and
    /// context interrupts.
    pub fn set_clockgating(&self, ctx: &Ctx) -> Result<()> {
        if ctx.regs.has(mmhub::MM_ATC_L2_MISC_CG) {
            ctx.write(mmhub::MM_ATC_L2_MISC_CG, 0, |f| {
                f.enable(1).mem_ls_enable(1)
            })?;
        }
        let major = ctx.gc_major();
        let cmd = ctx.encode(RLC_SAFE_MODE, |f| f.cmd(1))?;
        for &xcc in &self.xccs {
            ctx.write(RLC_SAFE_MODE, xcc, |f| f.message(1).cmd(1))?;
            ctx.wait_reg(
                RLC_SAFE_MODE,
                xcc,
                cmd,
                0,
                ctx.timeouts.reg,
                format_args!("RLC safe mode entry on XCC {xcc}"),
            )?;
            ctx.update(RLC_CGCG_CGLS_CTRL, xcc, |f| {
                f.cgcg_gfx_idle_threshold(0x36)
                    .cgcg_en(1)
                    .cgls_rep_compansat_delay(0xf)
                    .cgls_en(1)
            })?;
            ctx.update(CP_RB_WPTR_POLL_CNTL, xcc, |f| {
                f.poll_frequency(0x100).idle_poll_count(0x90)
            })?;
            ctx.update(CP_INT_CNTL, xcc, |f| {
                f.cntx_busy_int_enable(1)
                    .cntx_empty_int_enable(1)
                    .cmp_busy_int_enable(1)
            })?;
            if major >= 10 {
                ctx.update(SDMA0_RLC_CGCG_CTRL, xcc, |f| f.cgcg_int_enable(1))?;
                ctx.update(SDMA1_RLC_CGCG_CTRL, xcc, |f| f.cgcg_int_enable(1))?;
            }
            ctx.update(RLC_CGTT_MGCG_OVERRIDE, xcc, |f| {
                let f = f
                    .gfxip_fgcg_override(0)
                    .grbm_cgtt_sclk_override(0)
                    .rlc_cgtt_sclk_override(0)
                    .gfxip_mgcg_override(0)
                    .gfxip_cgls_override(0)
                    .gfxip_cgcg_override(0);
                match major {
                    9 => f.gfxip_mgls_override(0).gfxip_rep_fgcg_override(0),
                    11.. => f.perfmon_clock_state(1).gfxip_repeater_fgcg_override(0),
                    _ => f,
                }
            })?;
            ctx.write(RLC_SAFE_MODE, xcc, |f| f.message(0).cmd(1))?;
        }
        Ok(())
    }

    /// Start a compute queue: build its MQD, copy it to VRAM, load the HQD selected by
    /// (me 1, `pipe`, `queue`) and activate it — on every XCC for an AQL queue, on the first
    /// XCC otherwise.
    pub fn setup_compute_queue(
        &mut self,
        ctx: &Ctx,
        soc: &Soc,
        d: &ComputeQueueDesc,
    ) -> Result<QueueId> {
        let ComputeQueueDesc {
            ring,
            ring_size,
            rptr_addr,
            wptr_addr,
            eop_addr,
            eop_size,
            doorbell,
            aql,
            pipe,
            queue,
        } = *d;
        let (id, pipes) = (QueueId { pipe, queue }, self.pipes);
        refuse(
            ctx,
            "compute queue",
            (ring, ring_size, 8 << 20, rptr_addr, wptr_addr),
            [
                (
                    self.queues.iter().any(|q| q.0 == id),
                    format!("(pipe {pipe}, queue {queue}) is already started"),
                ),
                (
                    pipe >= pipes,
                    format!("MEC pipe {pipe} is not running (this GC runs pipes 0..{pipes})"),
                ),
                (
                    queue >= MEC_QUEUES,
                    format!("queue {queue} is past the {MEC_QUEUES} queues of a pipe"),
                ),
                (
                    eop_size < 8 || !eop_size.is_power_of_two(),
                    format!("EOP size {eop_size:#x} is not a power of two of at least 8 bytes"),
                ),
                (
                    !eop_addr.is_multiple_of(256),
                    format!("EOP buffer {eop_addr:#x} is not 256-byte aligned"),
                ),
            ],
        )?;
        let nx = self.xccs.len();
        // Both sizes are powers of two (checked above): log2 of their dwords, minus one.
        let log2_dwords_minus_1 = |bytes: u64| (bytes / 4).trailing_zeros() - 1;
        for (xi, &xcc) in self.targets(aql).iter().enumerate() {
            // Slot ((pipe × MEC_QUEUES + queue) × XCCs + XCC index); pipe and queue are in
            // range (checked above).
            let q = u64::from(pipe * MEC_QUEUES + queue);
            let paddr = self.mqd_paddr + (q * nx as u64 + xi as u64) * MQD_SLOT;
            let mqd_mc = ctx.mc.mc(paddr);
            // One fill for both layouts: the v9 MQD (GC 9) has every field set here where the
            // v11 one (GC ≥ 10; GC 12's v12 is the same here) has it, but SE4..7 (the test
            // `mqd_layouts_agree` pins this). VMID and the rest stay 0.
            let mut m = v11_compute_mqd { dw: [0; 512] };
            // `PACKET3(PACKET3_SET_RESOURCES…)`-style header the CP firmware expects
            // (Linux writes the same constant).
            m.set_header(0xC031_0800);
            m.set_cp_mqd_base_addr_lo(lo32(mqd_mc));
            m.set_cp_mqd_base_addr_hi(hi32(mqd_mc));
            m.set_cp_hqd_pipe_priority(0x2);
            m.set_cp_hqd_queue_priority(0xf);
            m.set_cp_hqd_quantum(0x111);
            m.set_cp_hqd_persistent_state(ctx.encode(CP_HQD_PERSISTENT_STATE, |f| {
                f.preload_size(0x55).preload_req(1)
            })?);
            m.set_cp_hqd_pq_base_lo(lo32(ring >> 8));
            m.set_cp_hqd_pq_base_hi(hi32(ring >> 8));
            m.set_cp_hqd_pq_rptr_report_addr_lo(lo32(rptr_addr));
            m.set_cp_hqd_pq_rptr_report_addr_hi(hi32(rptr_addr));
            m.set_cp_hqd_pq_wptr_poll_addr_lo(lo32(wptr_addr));
            m.set_cp_hqd_pq_wptr_poll_addr_hi(hi32(wptr_addr));
            m.set_cp_hqd_pq_doorbell_control(ctx.encode(CP_HQD_PQ_DOORBELL_CONTROL, |f| {
                f.doorbell_offset(doorbell.saturating_mul(2)).doorbell_en(1)
            })?);
            m.set_cp_hqd_pq_control(ctx.encode(CP_HQD_PQ_CONTROL, |f| {
                let f = f
                    .rptr_block_size(5)
                    .unord_dispatch(0)
                    .queue_size(log2_dwords_minus_1(ring_size));
                if !aql {
                    return f;
                }
                // Only one XCC reports the read pointer of a queue spread over several.
                f.queue_full_en(1)
                    .slot_based_wptr(2)
                    .no_update_rptr((xi != 0 || nx == 1).into())
            })?);
            m.set_cp_hqd_ib_control(ctx.encode(CP_HQD_IB_CONTROL, |f| f.min_ib_avail_size(3))?);
            m.set_cp_hqd_hq_status0(0x2000_4000);
            m.set_cp_mqd_control(ctx.encode(CP_MQD_CONTROL, |f| f.priv_state(1))?);
            m.set_cp_hqd_aql_control(aql.into());
            m.set_cp_hqd_eop_base_addr_lo(lo32(eop_addr >> 8));
            m.set_cp_hqd_eop_base_addr_hi(hi32(eop_addr >> 8));
            m.set_cp_hqd_eop_control(ctx.encode(CP_HQD_EOP_CONTROL, |f| {
                f.eop_size(log2_dwords_minus_1(eop_size))
            })?);
            m.set_compute_static_thread_mgmt_se0(u32::MAX);
            m.set_compute_static_thread_mgmt_se1(u32::MAX);
            m.set_compute_static_thread_mgmt_se2(u32::MAX);
            m.set_compute_static_thread_mgmt_se3(u32::MAX);
            let dw = if ctx.gc_major() >= 10 {
                m.set_compute_static_thread_mgmt_se4(u32::MAX);
                m.set_compute_static_thread_mgmt_se5(u32::MAX);
                m.set_compute_static_thread_mgmt_se6(u32::MAX);
                m.set_compute_static_thread_mgmt_se7(u32::MAX);
                m.dw
            } else {
                let mut m = v9_mqd { dw: m.dw };
                if aql && nx > 1 {
                    m.set_compute_tg_chunk_size(1);
                    m.set_compute_current_logic_xcc_id(xi as u32);
                    m.set_cp_mqd_stride_size(MQD_SLOT as u32);
                }
                m.dw
            };
            ctx.vram.write(paddr, dw.as_bytes())?;
            // The CP reads the MQD from VRAM: make the copy visible before it starts.
            soc.hdp_flush(ctx)?;
            // An HQD left active (by an instance that did not finish) is dequeued before it
            // is loaded again; this also selects it.
            dequeue(ctx, xcc, id)?;
            let base = ctx.regs.reg(CP_MQD_BASE_ADDR)?.addr(xcc)?;
            for &off in &self.burst {
                ctx.regs.wreg(base + off as u64, dw[0x80 + off])?;
            }
            ctx.wreg(CP_HQD_ACTIVE, xcc, 1)?;
            grbm_select(ctx, xcc, 0, 0, 0, 0)?;
        }
        self.queues.push((id, aql));
        Ok(id)
    }

    /// Stop a compute queue this instance started (on every XCC that holds it).
    pub fn remove_compute_queue(&mut self, ctx: &Ctx, id: QueueId) -> Result<()> {
        let (_, aql) = self
            .queues
            .remove(self.queues.iter().position(|q| q.0 == id).ok_or_else(|| {
                ctx.bad(format!(
                    "compute queue (pipe {}, queue {}) was not started by this driver",
                    id.pipe, id.queue
                ))
            })?);
        for &xcc in self.targets(aql) {
            dequeue(ctx, xcc, id)?;
            grbm_select(ctx, xcc, 0, 0, 0, 0)?;
        }
        Ok(())
    }

    /// The XCCs whose HQD holds a queue: every XCC for an AQL queue, else the first.
    fn targets(&self, aql: bool) -> &[u8] {
        if aql { &self.xccs } else { &self.xccs[..1] }
    }

    /// Point the MEC at its firmware and hold it halted: the RS64 program counter of pipe 0
    /// (the only pipe RS64 parts run) and a pipe reset toggle on GC ≥ 10 (and of the PFP and
    /// ME where the plan loads them: GC 12, as tinygrad's `_config_mec` and Linux's
    /// `gfx_v12_0_config_gfx_rs64`); on GC 9 halt both MECs and invalidate their instruction
    /// cache.
    fn config_mec(&self, ctx: &Ctx) -> Result<()> {
        let [pfp, me, mec] = self.ucode_start;
        for &xcc in &self.xccs {
            if ctx.gc_major() < 10 {
                ctx.update(CP_MEC_CNTL, xcc, |f| {
                    f.mec_invalidate_icache(1)
                        .mec_me1_pipe0_reset(1)
                        .mec_me2_pipe0_reset(1)
                        .mec_me1_halt(1)
                        .mec_me2_halt(1)
                })?;
                continue;
            }
            for (start, pc, pc_hi, reset) in [
                (
                    pfp,
                    CP_PFP_PRGRM_CNTR_START,
                    CP_PFP_PRGRM_CNTR_START_HI,
                    Fields::pfp_pipe0_reset as fn(_, _) -> _,
                ),
                (
                    me,
                    CP_ME_PRGRM_CNTR_START,
                    CP_ME_PRGRM_CNTR_START_HI,
                    Fields::me_pipe0_reset,
                ),
            ] {
                if let Some(start) = start {
                    start_rs64(ctx, xcc, 0, (pc, pc_hi), start, CP_ME_CNTL, reset)?;
                }
            }
            let mec = mec.ok_or_else(|| {
                ctx.bad("the MEC firmware gives no RS64 start address (ucode_start_addr)")
            })?;
            let pc = (
                CP_MEC_RS64_PRGRM_CNTR_START,
                CP_MEC_RS64_PRGRM_CNTR_START_HI,
            );
            start_rs64(
                ctx,
                xcc,
                1,
                pc,
                mec,
                CP_MEC_RS64_CNTL,
                Fields::mec_pipe0_reset,
            )?;
        }
        Ok(())
    }

    /// Let the MEC run.
    fn enable_mec(&self, ctx: &Ctx) -> Result<()> {
        for &xcc in &self.xccs {
            if ctx.gc_major() >= 10 {
                ctx.update(CP_MEC_RS64_CNTL, xcc, |f| {
                    f.mec_pipe0_reset(0).mec_pipe0_active(1).mec_halt(0)
                })?;
            } else {
                ctx.wreg(CP_MEC_CNTL, xcc, 0)?;
            }
        }
        settle();
        Ok(())
    }
}

/// The first of `problems` that holds, then of those of the ring `(base, size, max, rptr,
/// wptr)` (compute or SDMA): its size (a power of two from 256 B to `max`), its alignment,
/// and that of its read-pointer write-back and write-pointer poll; as an error about `what`.
pub(crate) fn refuse<const N: usize>(
    ctx: &Ctx,
    what: &str,
    (ring, size, max, rptr, wptr): (u64, u64, u64, u64, u64),
    problems: [(bool, String); N],
) -> Result<()> {
    let ring_problems = [
        (
            !(256..=max).contains(&size) || !size.is_power_of_two(),
            format!("ring size {size:#x} is not a power of two from 256 B to {max:#x} B"),
        ),
        (
            !ring.is_multiple_of(256),
            format!("ring {ring:#x} is not 256-byte aligned"),
        ),
        (
            !rptr.is_multiple_of(4) || !wptr.is_multiple_of(8),
            format!(
                "rptr write-back {rptr:#x} must be 4-byte and wptr poll {wptr:#x} 8-byte aligned"
            ),
        ),
    ];
    (problems.into_iter().chain(ring_problems).find(|p| p.0))
        .map_or(Ok(()), |(_, why)| Err(ctx.bad(format!("{what}: {why}"))))
}

/// Wait 50 µs after a CP soft reset and after un-halting the MEC (Linux: `udelay(50)`), as
/// `udelay` does: spinning, since a sleep this short costs a scheduler round trip (often
/// milliseconds on a busy machine).
fn settle() {
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_micros(50) {
        std::hint::spin_loop();
    }
}

/// Point the program counter (`pc`, in dwords) of pipe 0 of RS64 core `me` at `start` and
/// toggle the pipe 0 reset bit of its control register (`reset`). RS64 parts run only pipe 0
/// (`Gfx::init_sw`).
fn start_rs64<F>(
    ctx: &Ctx,
    xcc: u8,
    me: u8,
    (pc, pc_hi): (Reg, Reg),
    start: u64,
    cntl: Reg<F>,
    reset: impl Fn(Fields<F>, u32) -> Fields<F>,
) -> Result<()> {
    grbm_select(ctx, xcc, me, 0, 0, 0)?;
    ctx.wreg64(pc, pc_hi, xcc, start >> 2)?;
    grbm_select(ctx, xcc, 0, 0, 0, 0)?;
    for v in [1, 0] {
        ctx.update(cntl, xcc, |f| reset(f, v))?;
    }
    Ok(())
}

/// Select (me, pipe, queue, vmid) for the banked CP registers of `xcc`.
fn grbm_select(ctx: &Ctx, xcc: u8, me: u8, pipe: u8, queue: u8, vmid: u8) -> Result<()> {
    ctx.write(GRBM_GFX_CNTL, xcc, |f| {
        f.meid(me.into())
            .pipeid(pipe.into())
            .queueid(queue.into())
            .vmid(vmid.into())
    })
}

/// Dequeue one HQD of `xcc` if it is active: reset its waves, wait until it is inactive.
/// Leaves the queue selected.
fn dequeue(ctx: &Ctx, xcc: u8, QueueId { pipe, queue }: QueueId) -> Result<()> {
    grbm_select(ctx, xcc, 1, pipe, queue, 0)?;
    if ctx.rreg(CP_HQD_ACTIVE, xcc)? & 1 == 0 {
        return Ok(());
    }
    // 1 = drain the pipe, 2 = reset the waves.
    ctx.wreg(CP_HQD_DEQUEUE_REQUEST, xcc, 2)?;
    if ctx.regs.has(SPI_COMPUTE_QUEUE_RESET) {
        ctx.wreg(SPI_COMPUTE_QUEUE_RESET, xcc, 1)?;
    }
    ctx.wait_reg(
        CP_HQD_ACTIVE,
        xcc,
        1,
        0,
        ctx.timeouts.reg,
        format_args!("dequeue of compute queue (xcc {xcc}, pipe {pipe}, queue {queue})"),
    )
    .map(drop)
}

/// Dword offsets from `CP_MQD_BASE_ADDR` of the registers up to `CP_HQD_PQ_WPTR_HI` (the MQD
/// register image, dwords 0x80.. of the MQD). Offsets without a register are holes of the
/// register file, skipped. The table is the one `ctx.regs` found the two registers in.
fn mqd_burst(ctx: &Ctx) -> Result<Vec<usize>> {
    let first = ctx.regs.reg(CP_MQD_BASE_ADDR)?.def();
    let range = first.offset()..=ctx.regs.reg(CP_HQD_PQ_WPTR_HI)?.def().offset();
    let mut offs: Vec<usize> = (first.table().iter())
        .filter(|r| r.base_idx() == first.base_idx() && range.contains(&r.offset()))
        .map(|r| (r.offset() - first.offset()) as usize)
        .collect();
    offs.sort_unstable();
    offs.dedup();
    if offs.last().is_some_and(|&o| 0x80 + o >= 512) {
        return Err(ctx.bad("the MQD register image is longer than the MQD"));
    }
    Ok(offs)
}

#[cfg(test)]
mod tests {
    use am_autogen::mqd::{v9::v9_mqd, v11::v11_compute_mqd, v12::v12_compute_mqd};

    /// `setup_compute_queue` fills every compute MQD through the v11 setters and only then
    /// takes the v9 view (GC 9) or sets SE4..7 (GC ≥ 10): each field of that common fill must
    /// sit at the same dword in v9, v11 and v12.
    #[test]
    fn mqd_layouts_agree() {
        macro_rules! common_fill {
            ($ty:ident) => {{
                let mut m = $ty { dw: [0; 512] };
                let mut n = 0;
                let mut next = || {
                    n += 1;
                    n
                };
                m.set_header(next());
                m.set_cp_mqd_base_addr_lo(next());
                m.set_cp_mqd_base_addr_hi(next());
                m.set_cp_hqd_pipe_priority(next());
                m.set_cp_hqd_queue_priority(next());
                m.set_cp_hqd_quantum(next());
                m.set_cp_hqd_persistent_state(next());
                m.set_cp_hqd_pq_base_lo(next());
                m.set_cp_hqd_pq_base_hi(next());
                m.set_cp_hqd_pq_rptr_report_addr_lo(next());
                m.set_cp_hqd_pq_rptr_report_addr_hi(next());
                m.set_cp_hqd_pq_wptr_poll_addr_lo(next());
                m.set_cp_hqd_pq_wptr_poll_addr_hi(next());
                m.set_cp_hqd_pq_doorbell_control(next());
                m.set_cp_hqd_pq_control(next());
                m.set_cp_hqd_ib_control(next());
                m.set_cp_hqd_hq_status0(next());
                m.set_cp_mqd_control(next());
                m.set_cp_hqd_aql_control(next());
                m.set_cp_hqd_eop_base_addr_lo(next());
                m.set_cp_hqd_eop_base_addr_hi(next());
                m.set_cp_hqd_eop_control(next());
                m.set_compute_static_thread_mgmt_se0(next());
                m.set_compute_static_thread_mgmt_se1(next());
                m.set_compute_static_thread_mgmt_se2(next());
                m.set_compute_static_thread_mgmt_se3(next());
                m.dw
            }};
        }
        let v11 = common_fill!(v11_compute_mqd);
        assert_eq!(
            common_fill!(v9_mqd),
            v11,
            "v9 places a field of the common fill elsewhere"
        );
        assert_eq!(
            common_fill!(v12_compute_mqd),
            v11,
            "v12 places a field of the common fill elsewhere"
        );
    }
}
