//! PSP (MP0): bootloader, ring, firmware loads, spatial partition.

use am_firmware::{FirmwareSet, SosVariant};

use crate::Result;
use crate::ctx::Ctx;

/// PSP state: the load plan and what was loaded.
#[derive(Debug)]
pub struct Psp {
    loaded: Vec<(String, usize)>,
}

impl Psp {
    /// Plan the loads and allocate the buffers (1 MiB bootloader buffer, ring, command and
    /// fence buffers, TMR).
    pub fn init_sw(_ctx: &Ctx, _fw: Option<&FirmwareSet>, _sos: SosVariant) -> Result<Self> {
        Ok(Psp { loaded: vec![] })
    }

    /// Whether the sOS runs (`C2PMSG_81 != 0`).
    pub fn is_sos_alive(&self, _ctx: &Ctx) -> Result<bool> {
        Ok(false)
    }

    /// Bootloader, ring, TOC/TMR, every IP firmware, RLC autoload or REG_LIST.
    pub fn init_hw(&mut self, _ctx: &Ctx) -> Result<()> {
        Ok(())
    }

    /// `SRIOV_SPATIAL_PART` with `mode` (1 = SPX).
    pub fn spatial_partition(&mut self, _ctx: &Ctx, _mode: u32) -> Result<()> {
        Ok(())
    }

    /// What was loaded, in order: `(step name, bytes)`.
    pub fn loaded(&self) -> &[(String, usize)] {
        &self.loaded
    }
}
