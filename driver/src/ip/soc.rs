//! SOC: NBIO doorbell apertures, XCC doorbell fences, HDP flush, SOC clock gating.

use super::*;
use crate::regs::nbio::*;

/// SOC/NBIO state.
#[derive(Debug)]
pub struct Soc {
    /// NBIO 7.9/7.9.1 (MI300/MI350): doorbells routed and interrupts set up per AID
    /// (through PCIE INDEX2).
    pub(crate) per_aid: bool,
    /// Byte offset in BAR5 of the HDP flush register (firmware leaves it in
    /// `BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL`).
    hdp_flush_offset: u64,
}

impl Soc {
    /// Nothing to allocate.
    pub fn init_sw(ctx: &Ctx) -> Result<Self> {
        let v = ctx.version(HwIp::NBIO)?;
        Ok(Soc {
            per_aid: (v.major, v.minor) == (7, 9) && v.rev <= 1,
            hdp_flush_offset: u64::from(ctx.rreg(BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL, 0)?),
        })
    }

    /// Doorbell aperture, XCC doorbell fence (NBIO 7.9), interrupt monitor mask.
    pub fn init_hw(&mut self, ctx: &Ctx) -> Result<()> {
        if self.per_aid {
            // Fence the doorbells of harvested XCCs (only the eight slots of AID 0..3 exist).
            let live = ctx
                .xccs()
                .into_iter()
                .filter(|&x| x < 8)
                .fold(0u32, |m, x| m | 1 << x);
            ctx.wreg(XCC_DOORBELL_FENCE, 0, 0xff & !live)?;
            let slave = ctx.encode(XCC_DOORBELL_FENCE, |f| f.shub_slv_mode(1))?;
            let fence = ctx.regs.reg(XCC_DOORBELL_FENCE)?.addr(0)?;
            for aid in 1..ctx.discovery.aid_count() as u8 {
                ctx.regs.wreg_pcie(fence, aid, slave)?;
            }
            ctx.wreg(BIFC_GFX_INT_MONITOR_MASK, 0, 0x7ff)?;
            ctx.wreg(BIFC_DOORBELL_ACCESS_EN_PF, 0, 0xfffff)?;
        } else {
            ctx.update(RCC_DEV0_EPF2_STRAP2, 0, |f| {
                f.strap_no_soft_reset_dev0_f2(0)
            })?;
        }
        ctx.wreg(RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN, 0, 1)
    }

    /// Make CPU writes through BAR0 visible to the GPU: a write of 0 to the register whose
    /// byte offset `BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL` holds (the remapped MMIO page).
    pub fn hdp_flush(&self, ctx: &Ctx) -> Result<()> {
        ctx.regs.wreg(self.hdp_flush_offset / 4, 0)
    }

    /// Route a range of doorbells to an engine through S2A port `port`
    /// (`[GDC_S2A0_]S2A_DOORBELL_ENTRY_<port>_CTRL`, on NBIO 7.9 written on AID `aid` through PCIE
    /// INDEX2): `awid` is the engine's AXI write id, `awaddr_31_28` bits 31:28 of the address
    /// the doorbell write is forwarded to, `(offset, size)` the range in doorbell units.
    pub fn doorbell_enable(
        &self,
        ctx: &Ctx,
        (port, aid): (u8, u8),
        awid: u32,
        awaddr_31_28: u32,
        (offset, size): (u32, u32),
    ) -> Result<()> {
        // The entries are an array of one layout: entry n is n dwords after entry 0, and its
        // fields sit where entry 0's do (`S2A_DOORBELL_PORT<n>_*`). NBIF 6.3.1 names them
        // `GDC_S2A0_S2A_DOORBELL_ENTRY_<n>_CTRL` (Linux's `nbif_v6_3_1_sdma_doorbell_range`).
        let entry0 = ctx.regs.first(alt::S2A_DOORBELL_ENTRY_0_CTRL)?;
        let addr = ctx.regs.reg(entry0)?.addr(0)? + u64::from(port);
        let value = ctx.encode(entry0, |f| {
            f.s2a_doorbell_port0_enable(1)
                .s2a_doorbell_port0_awid(awid)
                .s2a_doorbell_port0_range_size(size)
                .s2a_doorbell_port0_awaddr_31_28_value(awaddr_31_28)
                .s2a_doorbell_port0_range_offset(offset)
        })?;
        if self.per_aid {
            ctx.regs.wreg_pcie(addr, aid, value)
        } else {
            ctx.regs.wreg(addr, value)
        }
    }

    /// SOC clock gating: HDP memory power control on HDP ≥ 5.2.1.
    pub fn set_clockgating(&self, ctx: &Ctx) -> Result<()> {
        if ctx.version(HwIp::HDP)? >= IpVersion::new(5, 2, 1) {
            ctx.update(hdp::HDP_MEM_POWER_CTRL, 0, |f| {
                f.atomic_mem_power_ctrl_en(1).atomic_mem_power_ds_en(1)
            })?;
        }
        Ok(())
    }
}
