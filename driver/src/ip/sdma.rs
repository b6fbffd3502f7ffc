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

use crate::Result;
use crate::ctx::Ctx;
use crate::discovery::IpVersion;
use crate::hwip::HwIp;
use crate::ip::soc::{DoorbellRoute, Soc};
use crate::mmio::{hi32, lo32};
use crate::regs::{Reg, alt, gc, nbio};

/// Doorbell slots between two engines' doorbells.
const DOORBELL_STRIDE: u32 = 0xA;
/// Watchdog: queue hang count in units of 100 ms (10 s).
const QUEUE_HANG_COUNT: u32 = 100;
/// NBIO 7.9 routes doorbells through `DOORBELL0_CTRL_ENTRY_1..=16` (four per AID).
const DOORBELL_ENTRIES: u8 = 16;

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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SdmaQueueId {
    /// The engine.
    pub engine: u8,
    /// Its doorbell slot (64-bit units in BAR2).
    pub doorbell: u32,
}

/// One engine: its number, its register instance, and its place in the `alt::SDMA_*` lists
/// (SDMA0 and SDMA1 of the GC block, then the SDMA 4.4 block; lists without that place are
/// registers the layout lacks).
#[derive(Clone, Copy, Debug)]
struct Engine {
    id: u8,
    inst: u8,
    k: usize,
}

/// SDMA state.
#[derive(Debug)]
pub struct Sdma {
    version: IpVersion,
    engines: Vec<Engine>,
    /// Rings started by this instance.
    queues: Vec<SdmaQueueId>,
}

impl Sdma {
    /// Nothing to allocate until a queue is made; the layout follows the SDMA version.
    pub fn init_sw(ctx: &Ctx) -> Result<Self> {
        let version = ctx.version(HwIp::SDMA0)?;
        let engines = if version.major >= 5 {
            let n = [HwIp::SDMA0, HwIp::SDMA1, HwIp::SDMA2, HwIp::SDMA3]
                .iter()
                .filter(|ip| ctx.discovery.version(**ip).is_some())
                .count()
                .min(2) as u8;
            (0..n)
                .map(|id| Engine {
                    id,
                    inst: 0,
                    k: id.into(),
                })
                .collect()
        } else {
            let inst = ctx.regs.instances(HwIp::SDMA0);
            inst.into_iter()
                .map(|i| Engine {
                    id: i,
                    inst: i,
                    k: 2,
                })
                .collect()
        };
        Ok(Sdma {
            version,
            engines,
            queues: Vec::new(),
        })
    }

    /// The engine numbers queues may use.
    pub fn engine_ids(&self) -> Vec<u8> {
        self.engines.iter().map(|e| e.id).collect()
    }

    fn engine(&self, id: u8) -> Option<Engine> {
        self.engines.iter().copied().find(|e| e.id == id)
    }

    /// Per engine: watchdog, UTCL1, un-halt, trap enable; then doorbell routing.
    pub fn init_hw(&mut self, ctx: &Ctx, soc: &Soc) -> Result<()> {
        let v = self.version;
        let mcu = v.major >= 7;
        for &Engine { inst: i, k, .. } in &self.engines {
            if let Some(&w) = alt::SDMA_WATCHDOG_CNTL.get(k) {
                ctx.update(w, i, |f| f.queue_hang_count(QUEUE_HANG_COUNT))?;
            }
            if v.major >= 6 {
                ctx.update(alt::SDMA_UTCL1_CNTL[k], i, |f| f.resp_mode(3).redo_delay(9))?;
            }
            if let Some(&page) = alt::SDMA_UTCL1_PAGE.get(k) {
                // Reads no-allocate, writes bypass the L2.
                ctx.update(page, i, |f| {
                    let f = f.rd_l2_policy(2).wr_l2_policy(3);
                    if mcu { f } else { f.llc_noalloc(1) }
                })?;
            }
            // Un-halt; from SDMA 6 on also release the (second) thread's reset.
            match alt::SDMA_MCU_CNTL.get(k) {
                Some(&r) if mcu => ctx.update(r, i, |f| f.halt(0).reset(0))?,
                _ if v.major >= 6 => {
                    ctx.update(alt::SDMA_F32_CNTL[k], i, |f| f.halt(0).th1_reset(0))?
                }
                _ => ctx.update(alt::SDMA_F32_CNTL[k], i, |f| f.halt(0))?,
            };
            ctx.update(alt::SDMA_CNTL[k], i, |f| {
                let f = f.trap_enable(1);
                if (v.major, v.minor) <= (5, 2) {
                    f.utc_l1_enable(1)
                } else {
                    f
                }
            })?;
        }
        if soc.per_aid_doorbells() {
            // Each AID routes its four engines' doorbells: a BIF entry and an S2A port each.
            const PORTS: [(u8, u32, u32, u32); 4] = [
                (1, 0xe, 0xe, 0x1),
                (2, 0x8, 0x8, 0x2),
                (5, 0x9, 0x9, 0x8),
                (6, 0xa, 0xa, 0x9),
            ];
            let aids = ctx.regs.instances(HwIp::MMHUB).len() as u8;
            // DOORBELL0_CTRL_ENTRY_n is n dwords after entry 0, with entry 0's field layout.
            let entry0 = ctx.regs.reg(nbio::DOORBELL0_CTRL_ENTRY_0)?.addr(0)?;
            for aid in 0..aids {
                for (k, &(port, awid, offset, awaddr)) in PORTS.iter().enumerate() {
                    let entry = k as u8 + 1 + 4 * aid;
                    if entry > DOORBELL_ENTRIES {
                        return Err(
                            ctx.bad(format!("no DOORBELL0_CTRL_ENTRY_{entry} for AID {aid}"))
                        );
                    }
                    let first = AMDGPU_NAVI10_DOORBELL_sDMA_ENGINE0
                        + u32::from(entry - 1) * DOORBELL_STRIDE;
                    let v = ctx.encode(nbio::DOORBELL0_CTRL_ENTRY_0, |f| {
                        f.bif_doorbell0_range_size_entry(20)
                            .bif_doorbell0_range_offset_entry(first * 2)
                    })?;
                    ctx.regs.wreg(entry0 + u64::from(entry), v)?;
                    let route = DoorbellRoute {
                        awid,
                        awaddr_31_28: awaddr,
                        offset,
                        size: 4,
                    };
                    soc.doorbell_enable(ctx, port, route, aid)?;
                }
            }
        } else {
            let route = DoorbellRoute {
                awid: 0xe,
                awaddr_31_28: 0x3,
                offset: AMDGPU_NAVI10_DOORBELL_sDMA_ENGINE0 * 2,
                size: 4,
            };
            soc.doorbell_enable(ctx, 2, route, 0)?;
        }
        Ok(())
    }

    /// Start the ring of one engine: pointers, base, write-back and poll addresses, doorbell,
    /// then `RB_CNTL` (size, write-back, enable, privileged) and `IB_CNTL`.
    pub fn setup_queue(&mut self, ctx: &Ctx, desc: &SdmaQueueDesc) -> Result<SdmaQueueId> {
        let Engine { inst: i, k, .. } = self.engine(desc.engine).ok_or_else(|| {
            ctx.bad(format!(
                "SDMA engine {} does not exist (engines: {:?})",
                desc.engine,
                self.engine_ids()
            ))
        })?;
        if self.queues.iter().any(|q| q.engine == desc.engine) {
            return Err(ctx.bad(format!(
                "SDMA engine {}'s ring is already started",
                desc.engine
            )));
        }
        let why = if !(256..=1 << 20).contains(&desc.ring_size) || !desc.ring_size.is_power_of_two()
        {
            Some(format!(
                "ring size {:#x} is not a power of two from 256 B to 1 MiB",
                desc.ring_size
            ))
        } else if !desc.ring.is_multiple_of(256) {
            Some(format!("ring {:#x} is not 256-byte aligned", desc.ring))
        } else if !desc.rptr_addr.is_multiple_of(4) || !desc.wptr_addr.is_multiple_of(8) {
            Some(format!(
                "rptr write-back {:#x} must be 4-byte and wptr poll {:#x} 8-byte aligned",
                desc.rptr_addr, desc.wptr_addr
            ))
        } else {
            None
        };
        if let Some(w) = why {
            return Err(ctx.bad(format!("SDMA queue: {w}")));
        }
        let doorbell =
            AMDGPU_NAVI10_DOORBELL_sDMA_ENGINE0 + u32::from(desc.engine) * DOORBELL_STRIDE;
        let pair = |lo: Reg, hi: Reg, v: u64| -> Result<()> {
            ctx.wreg(lo, i, lo32(v))?;
            ctx.wreg(hi, i, hi32(v))
        };
        // A ring left running (by an instance that did not finish) is stopped first: its
        // base and addresses must not change under it.
        ctx.update(alt::SDMA_RB_CNTL[k], i, |f| f.rb_enable(0))?;
        ctx.update(alt::SDMA_IB_CNTL[k], i, |f| f.ib_enable(0))?;
        ctx.wreg(alt::SDMA_MINOR_PTR_UPDATE[k], i, 1)?;
        pair(
            alt::SDMA_RB_RPTR[k].untyped(),
            alt::SDMA_RB_RPTR_HI[k].untyped(),
            0,
        )?;
        pair(
            alt::SDMA_RB_WPTR[k].untyped(),
            alt::SDMA_RB_WPTR_HI[k].untyped(),
            0,
        )?;
        pair(
            alt::SDMA_RB_BASE[k].untyped(),
            alt::SDMA_RB_BASE_HI[k].untyped(),
            desc.ring >> 8,
        )?;
        pair(
            alt::SDMA_RB_RPTR_ADDR_LO[k].untyped(),
            alt::SDMA_RB_RPTR_ADDR_HI[k].untyped(),
            desc.rptr_addr,
        )?;
        pair(
            alt::SDMA_RB_WPTR_POLL_ADDR_LO[k].untyped(),
            alt::SDMA_RB_WPTR_POLL_ADDR_HI[k].untyped(),
            desc.wptr_addr,
        )?;
        ctx.update(alt::SDMA_DOORBELL_OFFSET[k], i, |f| {
            f.offset(doorbell.saturating_mul(2))
        })?;
        ctx.update(alt::SDMA_DOORBELL[k], i, |f| f.enable(1))?;
        ctx.wreg(alt::SDMA_MINOR_PTR_UPDATE[k], i, 0)?;
        let rb_size = (desc.ring_size / 4).trailing_zeros();
        let major = self.version.major;
        ctx.write(alt::SDMA_RB_CNTL[k], i, |f| {
            let f = f
                .rb_vmid(0)
                .rptr_writeback_enable(1)
                .rptr_writeback_timer(4)
                .rb_enable(1)
                .rb_priv(1)
                .rb_size(rb_size);
            match major {
                7.. => f.mcu_wptr_poll_enable(1),
                5 | 6 => f.f32_wptr_poll_enable(1),
                _ => f,
            }
        })?;
        ctx.update(alt::SDMA_IB_CNTL[k], i, |f| f.ib_enable(1))?;
        let id = SdmaQueueId {
            engine: desc.engine,
            doorbell,
        };
        self.queues.push(id);
        Ok(id)
    }

    /// Stop one ring this instance started.
    pub fn remove_queue(&mut self, ctx: &Ctx, id: SdmaQueueId) -> Result<()> {
        let pos = self.queues.iter().position(|q| *q == id).ok_or_else(|| {
            ctx.bad(format!(
                "SDMA engine {}'s ring was not started by this driver",
                id.engine
            ))
        })?;
        self.queues.remove(pos);
        self.stop(ctx, id.engine)
    }

    /// The rings this instance started.
    pub fn queues(&self) -> Vec<SdmaQueueId> {
        self.queues.clone()
    }

    fn stop(&self, ctx: &Ctx, engine: u8) -> Result<()> {
        let Some(Engine { inst: i, k, .. }) = self.engine(engine) else {
            return Ok(());
        };
        ctx.update(alt::SDMA_RB_CNTL[k], i, |f| f.rb_enable(0))?;
        ctx.update(alt::SDMA_IB_CNTL[k], i, |f| f.ib_enable(0))?;
        ctx.update(alt::SDMA_DOORBELL[k], i, |f| f.enable(0))?;
        ctx.update(alt::SDMA_DOORBELL_OFFSET[k], i, |f| f.offset(0))?;
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
            result = result.and(ctx.write(gc::GRBM_SOFT_RESET, 0, |f| {
                let f = if ran(0) { f.soft_reset_sdma0(1) } else { f };
                if ran(1) { f.soft_reset_sdma1(1) } else { f }
            }));
            result = result.and(ctx.wreg(gc::GRBM_SOFT_RESET, 0, 0));
        }
        result
    }
}
