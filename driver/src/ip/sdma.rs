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

use crate::ctx::Ctx;
use crate::discovery::IpVersion;
use crate::hwip::HwIp;
use crate::ip::soc::{DoorbellRoute, Soc};
use crate::regs::{Reg, gc, nbio, sdma};
use crate::{Error, ErrorKind, Result};

/// Doorbell slots between two engines' doorbells.
const DOORBELL_STRIDE: u32 = 0xA;
/// Watchdog: queue hang count in units of 100 ms (10 s).
const QUEUE_HANG_COUNT: u64 = 100;

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

/// The registers of one engine's ring.
#[derive(Clone, Copy, Debug)]
struct RingRegs {
    rb_cntl: Reg,
    rb_base: Reg,
    rb_base_hi: Reg,
    rb_rptr: Reg,
    rb_rptr_hi: Reg,
    rb_wptr: Reg,
    rb_wptr_hi: Reg,
    rptr_addr_lo: Reg,
    rptr_addr_hi: Reg,
    wptr_poll_lo: Reg,
    wptr_poll_hi: Reg,
    doorbell: Reg,
    doorbell_offset: Reg,
    ib_cntl: Reg,
    minor_ptr_update: Reg,
}

/// The engine-wide registers.
#[derive(Clone, Copy, Debug)]
struct EngineRegs {
    cntl: Reg,
    /// `F32_CNTL` (SDMA < 7) or `MCU_CNTL`.
    ucode_cntl: Reg,
    utcl1_cntl: Reg,
    utcl1_page: Option<Reg>,
    watchdog: Option<Reg>,
}

/// Ring registers of `SDMA0_QUEUE0_*` / `SDMA1_QUEUE0_*` (GC table).
fn gc_ring(engine: u8) -> Option<RingRegs> {
    Some(match engine {
        0 => RingRegs {
            rb_cntl: gc::SDMA0_QUEUE0_RB_CNTL,
            rb_base: gc::SDMA0_QUEUE0_RB_BASE,
            rb_base_hi: gc::SDMA0_QUEUE0_RB_BASE_HI,
            rb_rptr: gc::SDMA0_QUEUE0_RB_RPTR,
            rb_rptr_hi: gc::SDMA0_QUEUE0_RB_RPTR_HI,
            rb_wptr: gc::SDMA0_QUEUE0_RB_WPTR,
            rb_wptr_hi: gc::SDMA0_QUEUE0_RB_WPTR_HI,
            rptr_addr_lo: gc::SDMA0_QUEUE0_RB_RPTR_ADDR_LO,
            rptr_addr_hi: gc::SDMA0_QUEUE0_RB_RPTR_ADDR_HI,
            wptr_poll_lo: gc::SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO,
            wptr_poll_hi: gc::SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_HI,
            doorbell: gc::SDMA0_QUEUE0_DOORBELL,
            doorbell_offset: gc::SDMA0_QUEUE0_DOORBELL_OFFSET,
            ib_cntl: gc::SDMA0_QUEUE0_IB_CNTL,
            minor_ptr_update: gc::SDMA0_QUEUE0_MINOR_PTR_UPDATE,
        },
        1 => RingRegs {
            rb_cntl: gc::SDMA1_QUEUE0_RB_CNTL,
            rb_base: gc::SDMA1_QUEUE0_RB_BASE,
            rb_base_hi: gc::SDMA1_QUEUE0_RB_BASE_HI,
            rb_rptr: gc::SDMA1_QUEUE0_RB_RPTR,
            rb_rptr_hi: gc::SDMA1_QUEUE0_RB_RPTR_HI,
            rb_wptr: gc::SDMA1_QUEUE0_RB_WPTR,
            rb_wptr_hi: gc::SDMA1_QUEUE0_RB_WPTR_HI,
            rptr_addr_lo: gc::SDMA1_QUEUE0_RB_RPTR_ADDR_LO,
            rptr_addr_hi: gc::SDMA1_QUEUE0_RB_RPTR_ADDR_HI,
            wptr_poll_lo: gc::SDMA1_QUEUE0_RB_WPTR_POLL_ADDR_LO,
            wptr_poll_hi: gc::SDMA1_QUEUE0_RB_WPTR_POLL_ADDR_HI,
            doorbell: gc::SDMA1_QUEUE0_DOORBELL,
            doorbell_offset: gc::SDMA1_QUEUE0_DOORBELL_OFFSET,
            ib_cntl: gc::SDMA1_QUEUE0_IB_CNTL,
            minor_ptr_update: gc::SDMA1_QUEUE0_MINOR_PTR_UPDATE,
        },
        _ => return None,
    })
}

/// Engine registers of `SDMA0_*` / `SDMA1_*` (GC table).
fn gc_engine_regs(engine: u8, mcu: bool) -> Option<EngineRegs> {
    Some(match engine {
        0 => EngineRegs {
            cntl: gc::SDMA0_CNTL,
            ucode_cntl: if mcu {
                gc::SDMA0_MCU_CNTL
            } else {
                gc::SDMA0_F32_CNTL
            },
            utcl1_cntl: gc::SDMA0_UTCL1_CNTL,
            utcl1_page: Some(gc::SDMA0_UTCL1_PAGE),
            watchdog: Some(gc::SDMA0_WATCHDOG_CNTL),
        },
        1 => EngineRegs {
            cntl: gc::SDMA1_CNTL,
            ucode_cntl: if mcu {
                gc::SDMA1_MCU_CNTL
            } else {
                gc::SDMA1_F32_CNTL
            },
            utcl1_cntl: gc::SDMA1_UTCL1_CNTL,
            utcl1_page: Some(gc::SDMA1_UTCL1_PAGE),
            watchdog: Some(gc::SDMA1_WATCHDOG_CNTL),
        },
        _ => return None,
    })
}

const SDMA4_RING: RingRegs = RingRegs {
    rb_cntl: sdma::SDMA_GFX_RB_CNTL,
    rb_base: sdma::SDMA_GFX_RB_BASE,
    rb_base_hi: sdma::SDMA_GFX_RB_BASE_HI,
    rb_rptr: sdma::SDMA_GFX_RB_RPTR,
    rb_rptr_hi: sdma::SDMA_GFX_RB_RPTR_HI,
    rb_wptr: sdma::SDMA_GFX_RB_WPTR,
    rb_wptr_hi: sdma::SDMA_GFX_RB_WPTR_HI,
    rptr_addr_lo: sdma::SDMA_GFX_RB_RPTR_ADDR_LO,
    rptr_addr_hi: sdma::SDMA_GFX_RB_RPTR_ADDR_HI,
    wptr_poll_lo: sdma::SDMA_GFX_RB_WPTR_POLL_ADDR_LO,
    wptr_poll_hi: sdma::SDMA_GFX_RB_WPTR_POLL_ADDR_HI,
    doorbell: sdma::SDMA_GFX_DOORBELL,
    doorbell_offset: sdma::SDMA_GFX_DOORBELL_OFFSET,
    ib_cntl: sdma::SDMA_GFX_IB_CNTL,
    minor_ptr_update: sdma::SDMA_GFX_MINOR_PTR_UPDATE,
};

const SDMA4_ENGINE: EngineRegs = EngineRegs {
    cntl: sdma::SDMA_CNTL,
    ucode_cntl: sdma::SDMA_F32_CNTL,
    utcl1_cntl: sdma::SDMA_UTCL1_CNTL,
    utcl1_page: None,
    watchdog: None,
};

/// The register layout of the device's SDMA version.
#[derive(Clone, Debug)]
enum Layout {
    /// SDMA ≥ 5: engines `SDMA0..` in the GC block (instance 0).
    InGc { engines: u8, mcu: bool },
    /// SDMA 4.x: one `SDMA_*` block per discovery instance.
    PerInstance { instances: Vec<u8> },
}

/// SDMA state.
#[derive(Debug)]
pub struct Sdma {
    version: IpVersion,
    layout: Layout,
    /// Rings started by this instance.
    queues: Vec<SdmaQueueId>,
}

fn bad(ctx: &Ctx, reason: String) -> Error {
    ctx.err(ErrorKind::BadState { reason })
}

impl Sdma {
    /// Nothing to allocate until a queue is made; the layout follows the SDMA version.
    pub fn init_sw(ctx: &Ctx) -> Result<Self> {
        let version = ctx.version(HwIp::SDMA0)?;
        let layout = if version.major >= 5 {
            let engines = [HwIp::SDMA0, HwIp::SDMA1, HwIp::SDMA2, HwIp::SDMA3]
                .iter()
                .filter(|ip| ctx.discovery.version(**ip).is_some())
                .count() as u8;
            Layout::InGc {
                engines: engines.min(2),
                mcu: version.major >= 7,
            }
        } else {
            Layout::PerInstance {
                instances: ctx.regs.instances(HwIp::SDMA0).into_iter().collect(),
            }
        };
        Ok(Sdma {
            version,
            layout,
            queues: Vec::new(),
        })
    }

    /// The engines (register instance and register set) of this device.
    fn engines(&self) -> Vec<(u8, u8, EngineRegs)> {
        match &self.layout {
            Layout::InGc { engines, mcu } => (0..*engines)
                .filter_map(|e| gc_engine_regs(e, *mcu).map(|r| (e, 0, r)))
                .collect(),
            Layout::PerInstance { instances } => {
                instances.iter().map(|&i| (i, i, SDMA4_ENGINE)).collect()
            }
        }
    }

    /// The engine numbers queues may use.
    pub fn engine_ids(&self) -> Vec<u8> {
        self.engines().into_iter().map(|(e, _, _)| e).collect()
    }

    fn ring(&self, engine: u8) -> Option<(RingRegs, u8)> {
        match &self.layout {
            Layout::InGc { engines, .. } if engine < *engines => gc_ring(engine).map(|r| (r, 0)),
            Layout::PerInstance { instances } if instances.contains(&engine) => {
                Some((SDMA4_RING, engine))
            }
            _ => None,
        }
    }

    /// Per engine: watchdog, UTCL1, un-halt, trap enable; then doorbell routing.
    pub fn init_hw(&mut self, ctx: &Ctx, soc: &Soc) -> Result<()> {
        let v = self.version;
        let mcu = v.major >= 7;
        for (_, inst, r) in self.engines() {
            if let Some(w) = r.watchdog {
                ctx.update(w, inst, &[("QUEUE_HANG_COUNT", QUEUE_HANG_COUNT)])?;
            }
            if v.major >= 6 {
                ctx.update(r.utcl1_cntl, inst, &[("RESP_MODE", 3), ("REDO_DELAY", 9)])?;
            }
            if let Some(page) = r.utcl1_page {
                // Reads no-allocate, writes bypass the L2.
                let mut f = vec![("RD_L2_POLICY", 2), ("WR_L2_POLICY", 3)];
                if !mcu {
                    f.push(("LLC_NOALLOC", 1));
                }
                ctx.update(page, inst, &f)?;
            }
            // Un-halt; from SDMA 6 on also release the (second) thread's reset.
            let run: &[(&str, u64)] = if mcu {
                &[("HALT", 0), ("RESET", 0)]
            } else if v.major >= 6 {
                &[("HALT", 0), ("TH1_RESET", 0)]
            } else {
                &[("HALT", 0)]
            };
            ctx.update(r.ucode_cntl, inst, run)?;
            let mut cntl = vec![("TRAP_ENABLE", 1)];
            if (v.major, v.minor) <= (5, 2) {
                cntl.push(("UTC_L1_ENABLE", 1));
            }
            ctx.update(r.cntl, inst, &cntl)?;
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
            for aid in 0..aids {
                for (k, &(port, awid, offset, awaddr)) in PORTS.iter().enumerate() {
                    let entry = k as u8 + 1 + 4 * aid;
                    let reg = doorbell_entry(entry).ok_or_else(|| {
                        bad(
                            ctx,
                            format!("no DOORBELL0_CTRL_ENTRY_{entry} for AID {aid}"),
                        )
                    })?;
                    let first = AMDGPU_NAVI10_DOORBELL_sDMA_ENGINE0
                        + u32::from(entry - 1) * DOORBELL_STRIDE;
                    let r = ctx.regs.reg(reg)?;
                    let v = r.encode(&[
                        (format!("BIF_DOORBELL{entry}_RANGE_SIZE_ENTRY").as_str(), 20),
                        (
                            format!("BIF_DOORBELL{entry}_RANGE_OFFSET_ENTRY").as_str(),
                            u64::from(first) * 2,
                        ),
                    ])?;
                    r.write(0, v)?;
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
        let (r, inst) = self.ring(desc.engine).ok_or_else(|| {
            bad(
                ctx,
                format!(
                    "SDMA engine {} does not exist (engines: {:?})",
                    desc.engine,
                    self.engine_ids()
                ),
            )
        })?;
        if self.queues.iter().any(|q| q.engine == desc.engine) {
            return Err(bad(
                ctx,
                format!("SDMA engine {}'s ring is already started", desc.engine),
            ));
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
            return Err(bad(ctx, format!("SDMA queue: {w}")));
        }
        let doorbell =
            AMDGPU_NAVI10_DOORBELL_sDMA_ENGINE0 + u32::from(desc.engine) * DOORBELL_STRIDE;
        let pair = |lo: Reg, hi: Reg, v: u64| -> Result<()> {
            ctx.wreg(lo, inst, v as u32)?;
            ctx.wreg(hi, inst, (v >> 32) as u32)
        };
        // A ring left running (by an instance that did not finish) is stopped first: its
        // base and addresses must not change under it.
        ctx.update(r.rb_cntl, inst, &[("RB_ENABLE", 0)])?;
        ctx.update(r.ib_cntl, inst, &[("IB_ENABLE", 0)])?;
        ctx.wreg(r.minor_ptr_update, inst, 1)?;
        pair(r.rb_rptr, r.rb_rptr_hi, 0)?;
        pair(r.rb_wptr, r.rb_wptr_hi, 0)?;
        pair(r.rb_base, r.rb_base_hi, desc.ring >> 8)?;
        pair(r.rptr_addr_lo, r.rptr_addr_hi, desc.rptr_addr)?;
        pair(r.wptr_poll_lo, r.wptr_poll_hi, desc.wptr_addr)?;
        ctx.update(
            r.doorbell_offset,
            inst,
            &[("OFFSET", u64::from(doorbell) * 2)],
        )?;
        ctx.update(r.doorbell, inst, &[("ENABLE", 1)])?;
        ctx.wreg(r.minor_ptr_update, inst, 0)?;
        let rb_size = u64::from((desc.ring_size / 4).trailing_zeros());
        let mut cntl = vec![
            ("RB_VMID", 0),
            ("RPTR_WRITEBACK_ENABLE", 1),
            ("RPTR_WRITEBACK_TIMER", 4),
            ("RB_ENABLE", 1),
            ("RB_PRIV", 1),
            ("RB_SIZE", rb_size),
        ];
        if self.version.major >= 7 {
            cntl.push(("MCU_WPTR_POLL_ENABLE", 1));
        } else if self.version.major >= 5 {
            cntl.push(("F32_WPTR_POLL_ENABLE", 1));
        }
        ctx.regs.reg(r.rb_cntl)?.write_fields(inst, &cntl)?;
        ctx.update(r.ib_cntl, inst, &[("IB_ENABLE", 1)])?;
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
            bad(
                ctx,
                format!(
                    "SDMA engine {}'s ring was not started by this driver",
                    id.engine
                ),
            )
        })?;
        self.queues.remove(pos);
        self.stop(ctx, id.engine)
    }

    /// The rings this instance started.
    pub fn queues(&self) -> Vec<SdmaQueueId> {
        self.queues.clone()
    }

    fn stop(&self, ctx: &Ctx, engine: u8) -> Result<()> {
        let Some((r, inst)) = self.ring(engine) else {
            return Ok(());
        };
        ctx.update(r.rb_cntl, inst, &[("RB_ENABLE", 0)])?;
        ctx.update(r.ib_cntl, inst, &[("IB_ENABLE", 0)])?;
        ctx.update(r.doorbell, inst, &[("ENABLE", 0)])?;
        ctx.update(r.doorbell_offset, inst, &[("OFFSET", 0)])?;
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
            let r = ctx.regs.reg(gc::GRBM_SOFT_RESET)?;
            let names: Vec<String> = started
                .iter()
                .map(|q| format!("SOFT_RESET_SDMA{}", q.engine))
                .collect();
            let fields: Vec<(&str, u64)> = names.iter().map(|n| (n.as_str(), 1)).collect();
            result = result.and(r.write_fields(0, &fields));
            result = result.and(r.write(0, 0));
        }
        result
    }
}

/// `DOORBELL0_CTRL_ENTRY_n` (NBIO 7.9), n = 1..=16.
fn doorbell_entry(n: u8) -> Option<Reg> {
    const ENTRIES: [Reg; 16] = [
        nbio::DOORBELL0_CTRL_ENTRY_1,
        nbio::DOORBELL0_CTRL_ENTRY_2,
        nbio::DOORBELL0_CTRL_ENTRY_3,
        nbio::DOORBELL0_CTRL_ENTRY_4,
        nbio::DOORBELL0_CTRL_ENTRY_5,
        nbio::DOORBELL0_CTRL_ENTRY_6,
        nbio::DOORBELL0_CTRL_ENTRY_7,
        nbio::DOORBELL0_CTRL_ENTRY_8,
        nbio::DOORBELL0_CTRL_ENTRY_9,
        nbio::DOORBELL0_CTRL_ENTRY_10,
        nbio::DOORBELL0_CTRL_ENTRY_11,
        nbio::DOORBELL0_CTRL_ENTRY_12,
        nbio::DOORBELL0_CTRL_ENTRY_13,
        nbio::DOORBELL0_CTRL_ENTRY_14,
        nbio::DOORBELL0_CTRL_ENTRY_15,
        nbio::DOORBELL0_CTRL_ENTRY_16,
    ];
    ENTRIES.get(usize::from(n).checked_sub(1)?).copied()
}
