//! IH: the two interrupt rings, their write-pointer write-back, and reading entries.
//!
//! Read and write pointers are byte offsets into the ring (as Linux treats them); a SOC15
//! entry is 8 dwords. The read pointer lives in `IH_RB_RPTR` only, so a later driver
//! instance (warm boot) continues where the last one stopped.

use am_autogen::regs::osssys;

use crate::Result;
use crate::ctx::Ctx;
use crate::hwip::HwIp;
use crate::mm::Pool;

/// Ring size in bytes.
pub const RING_SIZE: u64 = 256 << 10;
/// One entry in bytes.
pub const ENTRY_SIZE: u64 = 32;

/// One SOC15 interrupt entry (8 dwords).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IhEntry {
    /// Client id (`SOC15_IH_CLIENTID_*` / `SOC21_IH_CLIENTID_*`).
    pub client: u8,
    /// Source id (`*__SRCID__*`).
    pub source: u8,
    /// Ring id.
    pub ring: u8,
    /// VMID.
    pub vmid: u8,
    /// PASID.
    pub pasid: u16,
    /// Node (XCC/AID) id.
    pub node: u8,
    /// Source data (context) dwords.
    pub data: [u32; 4],
}

impl IhEntry {
    /// Decode the 8 dwords of a SOC15 entry.
    pub fn from_dwords(dw: [u32; 8]) -> Self {
        IhEntry {
            client: dw[0] as u8,
            source: (dw[0] >> 8) as u8,
            ring: (dw[0] >> 16) as u8,
            vmid: ((dw[0] >> 24) & 0xf) as u8,
            pasid: dw[3] as u16,
            node: (dw[3] >> 16) as u8,
            data: [dw[4], dw[5], dw[6], dw[7]],
        }
    }
}

struct Ring {
    base: u64,
    wptr_wb: u64,
    suffix: &'static str,
}

/// IH state: the rings.
pub struct Ih {
    rings: [Ring; 2],
    /// How many times ring 0 overflowed (entries were lost) since open.
    pub overflows: u64,
}

impl std::fmt::Debug for Ih {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ih")
            .field("ring0", &format_args!("{:#x}", self.rings[0].base))
            .field("ring1", &format_args!("{:#x}", self.rings[1].base))
            .field("overflows", &self.overflows)
            .finish()
    }
}

impl Ih {
    /// Allocate the rings and write-back slots (boot pool).
    pub fn init_sw(ctx: &Ctx) -> Result<Self> {
        let ring = |suffix| -> Result<Ring> {
            Ok(Ring {
                base: ctx.palloc(RING_SIZE, 4096, Pool::Boot)?,
                wptr_wb: ctx.palloc(4096, 4096, Pool::Boot)?,
                suffix,
            })
        };
        Ok(Ih {
            rings: [ring("")?, ring("_RING1")?],
            overflows: 0,
        })
    }

    fn reg<'a>(ctx: &'a Ctx, name: &str, suffix: &str) -> Result<crate::regs::Register<'a>> {
        ctx.regs
            .named(am_autogen::regs::RegIp::Osssys, &format!("{name}{suffix}"))
    }

    /// Program and enable the rings.
    pub fn init_hw(&mut self, ctx: &Ctx) -> Result<()> {
        let rb_size = u64::from((RING_SIZE / 4).trailing_zeros());
        for (n, ring) in self.rings.iter().enumerate() {
            let sfx = ring.suffix;
            let base = ctx.mc.mc(ring.base) >> 8;
            Self::reg(ctx, "IH_RB_BASE", sfx)?.write(0, base as u32)?;
            Self::reg(ctx, &format!("IH_RB_BASE_HI{sfx}"), "")?.write(0, (base >> 32) as u32)?;
            let mut f = vec![
                ("MC_SPACE", 4),
                ("WPTR_OVERFLOW_CLEAR", 1),
                ("RB_SIZE", rb_size),
                ("MC_SNOOP", 1),
                ("MC_RO", 0),
                ("MC_VMID", 0),
            ];
            if n == 0 {
                f.extend([("WPTR_OVERFLOW_ENABLE", 1), ("RPTR_REARM", 1)]);
            } else {
                f.push(("RB_FULL_DRAIN_ENABLE", 1));
            }
            Self::reg(ctx, "IH_RB_CNTL", sfx)?.write_fields(0, &f)?;
            if n == 0 {
                let wb = ctx.mc.mc(ring.wptr_wb);
                ctx.wreg(osssys::IH_RB_WPTR_ADDR_LO, 0, wb as u32)?;
                ctx.wreg(osssys::IH_RB_WPTR_ADDR_HI, 0, (wb >> 32) as u32)?;
            }
            Self::reg(ctx, "IH_RB_WPTR", sfx)?.write(0, 0)?;
            Self::reg(ctx, "IH_RB_RPTR", sfx)?.write(0, 0)?;
            Self::reg(ctx, "IH_DOORBELL_RPTR", sfx)?.write_fields(0, &[("ENABLE", 0)])?;
        }
        // OSSSYS 4.4.x (MI300, MI350) has no storm/flood control to set up.
        let v = ctx.version(HwIp::OSSSYS)?;
        if (v.major, v.minor) != (4, 4) {
            ctx.update(
                osssys::IH_STORM_CLIENT_LIST_CNTL,
                0,
                &[("CLIENT18_IS_STORM_CLIENT", 1)],
            )?;
            ctx.update(osssys::IH_INT_FLOOD_CNTL, 0, &[("FLOOD_CNTL_ENABLE", 1)])?;
            ctx.update(osssys::IH_MSI_STORM_CTRL, 0, &[("DELAY", 3)])?;
        }
        for (n, ring) in self.rings.iter().enumerate() {
            let mut f = vec![("RB_ENABLE", 1)];
            if n == 0 {
                f.push(("ENABLE_INTR", 1));
            }
            Self::reg(ctx, "IH_RB_CNTL", ring.suffix)?.update(0, &f)?;
        }
        Ok(())
    }

    /// Every entry of ring 0 written since the last drain, in order; the read pointer then
    /// catches up and an overflow is cleared (and counted: entries were lost).
    pub fn drain(&mut self, ctx: &Ctx) -> Result<Vec<IhEntry>> {
        let wptr_reg = ctx.regs.reg(osssys::IH_RB_WPTR)?;
        let wptr = wptr_reg.read(0)?;
        let mask = wptr_reg.fields_mask(&["OFFSET"])?;
        let w = u64::from(wptr & mask) % RING_SIZE;
        let mut r = u64::from(ctx.rreg(osssys::IH_RB_RPTR, 0)? & mask) % RING_SIZE;
        let mut out = vec![];
        let ring = self.rings[0].base;
        while r != w {
            let mut b = [0u8; ENTRY_SIZE as usize];
            ctx.vram.read(ring + r, &mut b)?;
            let mut dw = [0u32; 8];
            for (d, c) in dw.iter_mut().zip(b.chunks_exact(4)) {
                *d = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
            out.push(IhEntry::from_dwords(dw));
            r = (r + ENTRY_SIZE) % RING_SIZE;
        }
        ctx.wreg(osssys::IH_RB_RPTR, 0, w as u32)?;
        if wptr_reg.field(wptr, "RB_OVERFLOW")? != 0 {
            self.overflows += 1;
            tracing::warn!("{}: IH ring 0 overflowed: interrupts were lost", ctx.name);
            ctx.update(osssys::IH_RB_CNTL, 0, &[("WPTR_OVERFLOW_CLEAR", 1)])?;
        }
        Ok(out)
    }
}
