//! GFX: RLC autoload wait, GC hubs, MEC, golden registers, apertures, compute queues.

use am_firmware::FirmwareSet;

use crate::Result;
use crate::ctx::Ctx;
use crate::ip::gmc::Gmc;
use crate::ip::soc::Soc;

/// GFX state.
#[derive(Debug)]
pub struct Gfx {}

impl Gfx {
    /// Take what GFX needs from the firmware (MEC RS64 start address).
    pub fn init_sw(_ctx: &Ctx, _fw: Option<&FirmwareSet>) -> Result<Self> {
        Ok(Gfx {})
    }

    /// Full init (or, on a warm boot, only a MEC reset).
    pub fn init_hw(&mut self, _ctx: &Ctx, _gmc: &Gmc, _soc: &Soc, _warm: bool) -> Result<()> {
        Ok(())
    }

    /// Dequeue every queue this instance started and halt the MEC.
    pub fn fini_hw(&mut self, _ctx: &Ctx) -> Result<()> {
        Ok(())
    }

    /// Dequeue every HQD, soft reset the CP, reconfigure and re-enable the MEC.
    pub fn reset_mec(&mut self, _ctx: &Ctx, _gmc: &Gmc) -> Result<()> {
        Ok(())
    }

    /// GFX clock gating.
    pub fn set_clockgating(&self, _ctx: &Ctx) -> Result<()> {
        Ok(())
    }
}
