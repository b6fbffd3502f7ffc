//! SOC: NBIO doorbell apertures, XCC doorbell fences, HDP flush, SOC clock gating.

use crate::Result;
use crate::ctx::Ctx;

/// SOC/NBIO state.
#[derive(Debug)]
pub struct Soc {}

impl Soc {
    /// Nothing to allocate.
    pub fn init_sw(_ctx: &Ctx) -> Result<Self> {
        Ok(Soc {})
    }

    /// Doorbell aperture, XCC doorbell fence (NBIO 7.9), interrupt monitor mask.
    pub fn init_hw(&mut self, _ctx: &Ctx) -> Result<()> {
        Ok(())
    }

    /// Make CPU writes through BAR0 visible to the GPU.
    pub fn hdp_flush(&self, _ctx: &Ctx) -> Result<()> {
        Ok(())
    }

    /// SOC clock gating.
    pub fn set_clockgating(&self, _ctx: &Ctx) -> Result<()> {
        Ok(())
    }
}
