//! SDMA: engines and copy queues.

use crate::Result;
use crate::ctx::Ctx;
use crate::ip::soc::Soc;

/// SDMA state.
#[derive(Debug)]
pub struct Sdma {}

impl Sdma {
    /// Nothing to allocate until a queue is made.
    pub fn init_sw(_ctx: &Ctx) -> Result<Self> {
        Ok(Sdma {})
    }

    /// Un-halt every engine, doorbell routing.
    pub fn init_hw(&mut self, _ctx: &Ctx, _soc: &Soc) -> Result<()> {
        Ok(())
    }

    /// Stop every queue this instance started.
    pub fn fini_hw(&mut self, _ctx: &Ctx) -> Result<()> {
        Ok(())
    }
}
