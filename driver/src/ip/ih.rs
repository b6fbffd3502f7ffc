//! IH: the two interrupt rings, their write-pointer write-back, and reading entries.
//!
//! Read and write pointers are byte offsets into the ring (as Linux treats them); a SOC15
//! entry is 8 dwords. The read pointer lives in `IH_RB_RPTR` only, so a later driver
//! instance (warm boot) continues where the last one stopped.

use super::*;

use crate::regs::osssys::*;

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

/// IH state: the rings.
#[derive(Debug)]
pub struct Ih {
    /// The two rings (VRAM physical addresses).
    rings: [u64; 2],
    /// Where ring 0's write pointer is written back (ring 1's is not).
    wptr_wb: u64,
    /// How many times ring 0 overflowed (entries were lost) since open.
    pub overflows: u64,
}

impl Ih {
    /// Allocate the rings and ring 0's write-back slot (boot pool).
    pub fn init_sw(ctx: &Ctx) -> Result<Self> {
        let boot = |size| ctx.palloc(size, 4096, Pool::Boot);
        Ok(Ih {
            rings: [boot(RING_SIZE)?, boot(RING_SIZE)?],
            wptr_wb: boot(4096)?,
            overflows: 0,
        })
    }

    /// Program and enable the rings (ring `n`'s registers are the `n`th of each `alt`).
    pub fn init_hw(&mut self, ctx: &Ctx) -> Result<()> {
        for (n, &ring) in self.rings.iter().enumerate() {
            ctx.wreg64(
                alt::IH_RB_BASE[n],
                alt::IH_RB_BASE_HI[n],
                0,
                ctx.mc.mc(ring) >> 8,
            )?;
            ctx.write(alt::IH_RB_CNTL[n], 0, |f| {
                let f = f
                    .mc_space(4)
                    .wptr_overflow_clear(1)
                    .rb_size((RING_SIZE / 4).trailing_zeros())
                    .mc_snoop(1)
                    .mc_ro(0)
                    .mc_vmid(0);
                match n {
                    0 => f.wptr_overflow_enable(1).rptr_rearm(1),
                    _ => f.rb_full_drain_enable(1),
                }
            })?;
            if n == 0 {
                ctx.wreg64(
                    IH_RB_WPTR_ADDR_LO,
                    IH_RB_WPTR_ADDR_HI,
                    0,
                    ctx.mc.mc(self.wptr_wb),
                )?;
            }
            ctx.wreg(alt::IH_RB_WPTR[n], 0, 0)?;
            ctx.wreg(alt::IH_RB_RPTR[n], 0, 0)?;
            ctx.write(alt::IH_DOORBELL_RPTR[n], 0, |f| f.enable(0))?;
        }
        // OSSSYS 4.4.x (MI300, MI350) has no storm/flood control to set up.
        let v = ctx.version(HwIp::OSSSYS)?;
        if (v.major, v.minor) != (4, 4) {
            ctx.update(IH_STORM_CLIENT_LIST_CNTL, 0, |f| {
                f.client18_is_storm_client(1)
            })?;
            ctx.update(IH_INT_FLOOD_CNTL, 0, |f| f.flood_cntl_enable(1))?;
            ctx.update(IH_MSI_STORM_CTRL, 0, |f| f.delay(3))?;
        }
        ctx.update(alt::IH_RB_CNTL[0], 0, |f| f.rb_enable(1).enable_intr(1))?;
        ctx.update(alt::IH_RB_CNTL[1], 0, |f| f.rb_enable(1))?;
        Ok(())
    }

    /// Every entry of ring 0 written since the last drain, in order; the read pointer then
    /// catches up and an overflow is cleared (and counted: entries were lost).
    pub fn drain(&mut self, ctx: &Ctx) -> Result<Vec<IhEntry>> {
        let wptr = ctx.rreg(IH_RB_WPTR, 0)?;
        let mask = ctx.regs.encode(IH_RB_WPTR, |f| f.offset(0))?.mask;
        let w = u64::from(wptr & mask) % RING_SIZE;
        let mut r = u64::from(ctx.rreg(IH_RB_RPTR, 0)? & mask) % RING_SIZE;
        let mut out = vec![];
        while r != w {
            // The entry is little-endian dwords, as the host's.
            let mut dw = [0u32; 8];
            ctx.vram.read(self.rings[0] + r, dw.as_mut_bytes())?;
            out.push(IhEntry::from_dwords(dw));
            r = (r + ENTRY_SIZE) % RING_SIZE;
        }
        ctx.wreg(IH_RB_RPTR, 0, w as u32)?;
        if ctx.regs.get(IH_RB_WPTR, wptr, |f| f.rb_overflow(0))? != 0 {
            self.overflows += 1;
            tracing::warn!("{}: IH ring 0 overflowed: interrupts were lost", ctx.name);
            ctx.update(IH_RB_CNTL, 0, |f| f.wptr_overflow_clear(1))?;
        }
        Ok(out)
    }
}
