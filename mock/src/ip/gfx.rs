//! GFX: RLC, CP/MEC, HQDs and the rest of GC. Registers hold their values (scratch
//! registers among them, which is what warm boot relies on); RLC autoload, the MEC and HQDs
//! banked by `GRBM_GFX_CNTL` (`mock-device.md` item 9) are the bring-up's.

use super::IpModel;

/// GFX model state.
#[derive(Debug, Default)]
pub struct Gfx {}

impl IpModel for Gfx {}
