//! SOC: NBIO doorbell apertures, XCC doorbell fences, HDP flush, SOC clock gating.

use crate::ctx::Ctx;
use crate::hwip::HwIp;
use am_autogen::regs::RegIp;

use crate::regs::{hdp, nbio};
use crate::{IpVersion, Result};

/// NBIO 7.9/7.9.1 (MI300/MI350): doorbell and interrupt setup per AID through PCIE INDEX2.
fn is_nbio_7_9(v: IpVersion) -> bool {
    (v.major, v.minor) == (7, 9) && v.rev <= 1
}

/// Where an S2A doorbell port sends a range of doorbells.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DoorbellRoute {
    /// The engine's AXI write id.
    pub awid: u32,
    /// Bits 31:28 of the address the doorbell write is forwarded to.
    pub awaddr_31_28: u32,
    /// First doorbell of the range (doorbell units).
    pub offset: u32,
    /// Number of doorbells in the range.
    pub size: u32,
}

/// SOC/NBIO state.
#[derive(Debug)]
pub struct Soc {
    nbio: IpVersion,
    /// Byte offset in BAR5 of the HDP flush register (firmware leaves it in
    /// `BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL`).
    hdp_flush_offset: u64,
}

impl Soc {
    /// Nothing to allocate.
    pub fn init_sw(ctx: &Ctx) -> Result<Self> {
        Ok(Soc {
            nbio: ctx.version(HwIp::NBIO)?,
            hdp_flush_offset: u64::from(ctx.rreg(nbio::BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL, 0)?),
        })
    }

    /// Whether the NBIO routes doorbells per AID (NBIO 7.9).
    pub fn per_aid_doorbells(&self) -> bool {
        is_nbio_7_9(self.nbio)
    }

    /// Doorbell aperture, XCC doorbell fence (NBIO 7.9), interrupt monitor mask.
    pub fn init_hw(&mut self, ctx: &Ctx) -> Result<()> {
        let regs = &ctx.regs;
        if is_nbio_7_9(self.nbio) {
            // Fence the doorbells of harvested XCCs (only the eight slots of AID 0..3 exist).
            let live = ctx
                .xccs()
                .iter()
                .filter(|&&x| x < 8)
                .fold(0u32, |m, &x| m | 1 << x);
            let fence = regs.reg(nbio::XCC_DOORBELL_FENCE)?;
            fence.write(0, 0xff & !live)?;
            let slave = fence.encode(&[("SHUB_SLV_MODE", 1)])?;
            for aid in 1..ctx.discovery.aid_count().max(1) as u8 {
                regs.wreg_pcie(fence.addr(0)?, aid, slave)?;
            }
            regs.reg(nbio::BIFC_GFX_INT_MONITOR_MASK)?.write(0, 0x7ff)?;
            regs.reg(nbio::BIFC_DOORBELL_ACCESS_EN_PF)?
                .write(0, 0xfffff)?;
        } else {
            regs.reg(nbio::RCC_DEV0_EPF2_STRAP2)?
                .update(0, &[("STRAP_NO_SOFT_RESET_DEV0_F2", 0)])?;
        }
        regs.reg(nbio::RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN)?
            .write(0, 1)?;
        Ok(())
    }

    /// Make CPU writes through BAR0 visible to the GPU: a write of 0 to the register whose
    /// byte offset `BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL` holds (the remapped MMIO page).
    pub fn hdp_flush(&self, ctx: &Ctx) -> Result<()> {
        ctx.regs.wreg(self.hdp_flush_offset / 4, 0)
    }

    /// Route a range of doorbells to an engine through S2A port `port`
    /// (`S2A_DOORBELL_ENTRY_<port>_CTRL`, on NBIO 7.9 written on AID `aid` through PCIE
    /// INDEX2): `offset`/`size` in doorbell units, `awid` the engine's id.
    pub fn doorbell_enable(
        &self,
        ctx: &Ctx,
        port: u8,
        route: DoorbellRoute,
        aid: u8,
    ) -> Result<()> {
        let DoorbellRoute {
            awid,
            awaddr_31_28,
            offset,
            size,
        } = route;
        let name = if ctx.gc_major() >= 12 {
            format!("GDC_S2A0_S2A_DOORBELL_ENTRY_{port}_CTRL")
        } else {
            format!("S2A_DOORBELL_ENTRY_{port}_CTRL")
        };
        let reg = ctx.regs.named(RegIp::Nbio, &name)?;
        let f = |n: &str| format!("S2A_DOORBELL_PORT{port}_{n}");
        let value = reg.encode(&[
            (&f("ENABLE"), 1),
            (&f("AWID"), u64::from(awid)),
            (&f("RANGE_SIZE"), u64::from(size)),
            (&f("AWADDR_31_28_VALUE"), u64::from(awaddr_31_28)),
            (&f("RANGE_OFFSET"), u64::from(offset)),
        ])?;
        if self.per_aid_doorbells() {
            ctx.regs.wreg_pcie(reg.addr(0)?, aid, value)
        } else {
            reg.write(0, value)
        }
    }

    /// SOC clock gating: HDP memory power control on HDP ≥ 5.2.1.
    pub fn set_clockgating(&self, ctx: &Ctx) -> Result<()> {
        let v = ctx.version(HwIp::HDP)?;
        if (v.major, v.minor, v.rev) >= (5, 2, 1) {
            ctx.update(
                hdp::HDP_MEM_POWER_CTRL,
                0,
                &[
                    ("ATOMIC_MEM_POWER_CTRL_EN", 1),
                    ("ATOMIC_MEM_POWER_DS_EN", 1),
                ],
            )?;
        }
        Ok(())
    }
}
