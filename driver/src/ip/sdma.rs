//! SDMA: engines and copy queues.
//!
//! Two register layouts:
//! - SDMA 5/6/7 (navi31: SDMA 6.0.0): the engines' registers live in the GC block
//!   (`SDMA0_*`, `SDMA1_*`, instance 0); each engine's ring is `SDMAn_QUEUE0_*`.
//! - SDMA 4.4.x (MI300): one register block per engine instance (`SDMA_*`, discovery
//!   instance = AID × 4 + engine within the AID); the ring is `SDMA_GFX_*`. The reference
//!   driver numbers its queue index `pipe + queue × 4` onto these instances; here the queue
//!   names the instance directly.
//!
//! Doorbells: engine `e` rings slot `sDMA_ENGINE0 + e × 0xA` (64-bit units, NAVI10 layout).

use am_autogen::doorbell::AMDGPU_NAVI10_DOORBELL_sDMA_ENGINE0;

use super::*;
use crate::ip::gfx::refuse;
use crate::regs::alt::*;

/// What the runtime needs to start an SDMA ring. Addresses are what the engine uses (MC
/// addresses of VRAM, or GPU virtual addresses of VM context 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SdmaQueueDesc {
    /// Engine: `SDMAn` on SDMA ≥ 5, the discovery instance on SDMA 4.4.x.
    pub engine: u8,
    /// Ring base (256-byte aligned).
    pub ring: u64,
    /// Ring size in bytes: a power of two, 256 B to 1 MiB.
    pub ring_size: u64,
    /// Where the engine writes the read pointer back (4-byte aligned).
    pub rptr_addr: u64,
    /// Where the engine polls the write pointer (8-byte aligned).
    pub wptr_addr: u64,
}

/// An SDMA ring this driver started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SdmaQueueId {
    /// The engine.
    pub engine: u8,
    /// Its doorbell slot (64-bit units in BAR2).
    pub doorbell: u32,
}

/// SDMA state.
#[derive(Debug)]
pub struct Sdma {
    version: IpVersion,
    /// The engines queues may use: `SDMAn` on SDMA ≥ 5, the discovery instance on SDMA 4.4.x.
    engines: Vec<u8>,
    /// Rings started by this instance.
    queues: Vec<SdmaQueueId>,
}

impl Sdma {
    /// Nothing to allocate until a queue is made; the layout follows the SDMA version.
    pub fn init_sw(ctx: &Ctx) -> Result<Self> {
        let version = ctx.version(HwIp::SDMA0)?;
        let engines = if version.major >= 5 {
            // The first two engines discovery lists: SDMA0 (its version was read), then a
            // second one if SDMA1, SDMA2 or SDMA3 is there.
            let second = [HwIp::SDMA1, HwIp::SDMA2, HwIp::SDMA3]
                .into_iter()
                .any(|ip| ctx.discovery.version(ip).is_some());
            (0..=u8::from(second)).collect()
        } else {
            ctx.regs.instances(HwIp::SDMA0).into_iter().collect()
        };
        Ok(Sdma {
            version,
            engines,
            queues: Vec::new(),
        })
    }

    /// An engine's register instance and its place in the `SDMA_*` lists (SDMA0 and
    /// SDMA1 of the GC block, then the SDMA 4.4 block; lists without that place are
    /// registers the layout lacks).
    fn regs(&self, engine: u8) -> (u8, usize) {
        if self.version.major >= 5 {
            (0, engine.into())
        } else {
            (engine, 2)
        }
    }

    /// Per engine: watchdog, UTCL1, un-halt (SDMA ≥ 5), trap enable; then doorbell routing.
    pub fn init_hw(&mut self, ctx: &Ctx, soc: &Soc) -> Result<()> {
        let v = self.version;
        let mcu = v.major >= 7;
        for &e in &self.engines {
            let (i, k) = self.regs(e);
            if let Some(&w) = SDMA_WATCHDOG_CNTL.get(k) {
                // Queue hang count in units of 100 ms (10 s).
                ctx.update(w, i, |f| f.queue_hang_count(100))?;
            }
            if v.major >= 6 {
                ctx.update(SDMA_UTCL1_CNTL[k], i, |f| f.resp_mode(3).redo_delay(9))?;
            }
            if let Some(&page) = SDMA_UTCL1_PAGE.get(k) {
                // Reads no-allocate, writes bypass the L2.
                ctx.update(page, i, |f| {
                    let f = f.rd_l2_policy(2).wr_l2_policy(3);
                    if mcu { f } else { f.llc_noalloc(1) }
                })?;
            }
            // Un-halt; from SDMA 6 on also release the (second) thread's reset. SDMA 4.4 runs
            // once the PSP has loaded its firmware, and `F32_CNTL` is left alone then (Linux
            // `sdma_v4_4_2_inst_enable` returns before its halt loop under PSP loading).
            match SDMA_MCU_CNTL.get(k) {
                Some(&r) if mcu => {
                    ctx.update(r, i, |f| f.halt(0).reset(0))?;
                }
                _ if v.major < 5 => {}
                _ => {
                    ctx.update(SDMA_F32_CNTL[k], i, |f| {
                        let f = f.halt(0);
                        if v.major >= 6 { f.th1_reset(0) } else { f }
                    })?;
                }
            }
            ctx.update(SDMA_CNTL[k], i, |f| {
                let f = f.trap_enable(1);
                if (v.major, v.minor) <= (5, 2) {
                    f.utc_l1_enable(1)
                } else {
                    f
                }
            })?;
        }
        if !soc.per_aid {
            let range = (AMDGPU_NAVI10_DOORBELL_sDMA_ENGINE0 * 2, 4);
            return soc.doorbell_enable(ctx, (2, 0), 0xe, 0x3, range);
        }
        // DOORBELL0_CTRL_ENTRY_n is n dwords after entry 0, with entry 0's field layout.
        let entry0 = ctx.regs.reg(nbio::DOORBELL0_CTRL_ENTRY_0)?.addr(0)?;
        // Each AID routes its four engines' doorbells: a BIF entry and an S2A port each
        // (port, awid, awaddr bits 31:28); the range offset is the awid (as Linux's
        // `nbio_v7_9_sdma_doorbell_range` sets them).
        for aid in 0..ctx.regs.instances(HwIp::MMHUB).len() as u8 {
            for (k, (port, awid, awaddr)) in
                (1..).zip([(1, 0xe, 0x1), (2, 0x8, 0x2), (5, 0x9, 0x8), (6, 0xa, 0x9)])
            {
                let entry = 4 * aid + k;
                // NBIO 7.9 has `DOORBELL0_CTRL_ENTRY_1..=16`.
                if entry > 16 {
                    return Err(ctx.bad(format!("no DOORBELL0_CTRL_ENTRY_{entry} for AID {aid}")));
                }
                let v = ctx.encode(nbio::DOORBELL0_CTRL_ENTRY_0, |f| {
                    f.bif_doorbell0_range_size_entry(20)
                        .bif_doorbell0_range_offset_entry(doorbell(entry - 1) * 2)
                })?;
                ctx.regs.wreg(entry0 + u64::from(entry), v)?;
                soc.doorbell_enable(ctx, (port, aid), awid, awaddr, (awid, 4))?;
            }
        }
        Ok(())
    }

    /// Start the ring of one engine: pointers, base, write-back and poll addresses, doorbell,
    /// then `RB_CNTL` (size, write-back, enable, privileged) and `IB_CNTL`.
    pub fn setup_queue(&mut self, ctx: &Ctx, d: &SdmaQueueDesc) -> Result<SdmaQueueId> {
        let (engine, engines) = (d.engine, &self.engines);
        refuse(
            ctx,
            "SDMA queue",
            (d.ring, d.ring_size, 1 << 20, d.rptr_addr, d.wptr_addr),
            [
                (
                    !engines.contains(&engine),
                    format!("engine {engine} does not exist (engines: {engines:?})"),
                ),
                (
                    self.queues.iter().any(|q| q.engine == engine),
                    format!("engine {engine}'s ring is already started"),
                ),
            ],
        )?;
        let (i, k) = self.regs(engine);
        let doorbell = doorbell(engine);
        // A ring left running (by an instance that did not finish) is stopped first: its
        // base and addresses must not change under it.
        ctx.update(SDMA_RB_CNTL[k], i, |f| f.rb_enable(0))?;
        ctx.update(SDMA_IB_CNTL[k], i, |f| f.ib_enable(0))?;
        ctx.wreg(SDMA_MINOR_PTR_UPDATE[k], i, 1)?;
        ctx.wreg64(SDMA_RB_RPTR[k], SDMA_RB_RPTR_HI[k], i, 0)?;
        ctx.wreg64(SDMA_RB_WPTR[k], SDMA_RB_WPTR_HI[k], i, 0)?;
        ctx.wreg64(SDMA_RB_BASE[k], SDMA_RB_BASE_HI[k], i, d.ring >> 8)?;
        ctx.wreg64(
            SDMA_RB_RPTR_ADDR_LO[k],
            SDMA_RB_RPTR_ADDR_HI[k],
            i,
            d.rptr_addr,
        )?;
        ctx.wreg64(
            SDMA_RB_WPTR_POLL_ADDR_LO[k],
            SDMA_RB_WPTR_POLL_ADDR_HI[k],
            i,
            d.wptr_addr,
        )?;
        ctx.update(SDMA_DOORBELL_OFFSET[k], i, |f| {
            f.offset(doorbell.saturating_mul(2))
        })?;
        ctx.update(SDMA_DOORBELL[k], i, |f| f.enable(1))?;
        ctx.wreg(SDMA_MINOR_PTR_UPDATE[k], i, 0)?;
        ctx.write(SDMA_RB_CNTL[k], i, |f| {
            let f = f
                .rb_vmid(0)
                .rptr_writeback_enable(1)
                .rptr_writeback_timer(4)
                .rb_enable(1)
                .rb_priv(1)
                .rb_size((d.ring_size / 4).trailing_zeros());
            match self.version.major {
                7.. => f.mcu_wptr_poll_enable(1),
                5 | 6 => f.f32_wptr_poll_enable(1),
                _ => f,
            }
        })?;
        ctx.update(SDMA_IB_CNTL[k], i, |f| f.ib_enable(1))?;
        let id = SdmaQueueId { engine, doorbell };
        self.queues.push(id);
        Ok(id)
    }

    /// Stop one ring this instance started.
    pub fn remove_queue(&mut self, ctx: &Ctx, id: SdmaQueueId) -> Result<()> {
        self.queues
            .remove(self.queues.iter().position(|q| *q == id).ok_or_else(|| {
                ctx.bad(format!(
                    "SDMA engine {}'s ring was not started by this driver",
                    id.engine
                ))
            })?);
        self.stop(ctx, id.engine)
    }

    fn stop(&self, ctx: &Ctx, engine: u8) -> Result<()> {
        let (i, k) = self.regs(engine);
        ctx.update(SDMA_RB_CNTL[k], i, |f| f.rb_enable(0))?;
        ctx.update(SDMA_IB_CNTL[k], i, |f| f.ib_enable(0))?;
        ctx.update(SDMA_DOORBELL[k], i, |f| f.enable(0))?;
        ctx.update(SDMA_DOORBELL_OFFSET[k], i, |f| f.offset(0))?;
        Ok(())
    }

    /// Stop every queue this instance started; on SDMA ≥ 6 soft reset the engines that ran
    /// them.
    pub fn fini_hw(&mut self, ctx: &Ctx) -> Result<()> {
        let started = std::mem::take(&mut self.queues);
        let mut result = Ok(());
        for q in &started {
            result = result.and(self.stop(ctx, q.engine));
        }
        if self.version.major >= 6 && !started.is_empty() {
            let ran = |e| started.iter().any(|q| q.engine == e);
            result = result
                .and(ctx.write(gc::GRBM_SOFT_RESET, 0, |f| {
                    f.soft_reset_sdma0(ran(0).into())
                        .soft_reset_sdma1(ran(1).into())
                }))
                .and(ctx.wreg(gc::GRBM_SOFT_RESET, 0, 0));
        }
        result
    }
}

/// Engine `e`'s doorbell slot (64-bit units in BAR2).
fn doorbell(engine: u8) -> u32 {
    AMDGPU_NAVI10_DOORBELL_sDMA_ENGINE0 + u32::from(engine) * 0xA
}
