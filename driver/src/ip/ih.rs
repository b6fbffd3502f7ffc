//! IH: the interrupt rings and their write-pointer write-back.

use crate::Result;
use crate::ctx::Ctx;

/// One SOC15 interrupt entry (8 dwords).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IhEntry {
    /// Client id.
    pub client: u8,
    /// Source id.
    pub source: u8,
    /// Ring id.
    pub ring: u8,
    /// VMID.
    pub vmid: u8,
    /// PASID.
    pub pasid: u16,
    /// Node (XCC/AID) id.
    pub node: u8,
    /// Source data dwords.
    pub data: [u32; 4],
}

/// IH state: the rings.
#[derive(Debug)]
pub struct Ih {}

impl Ih {
    /// Allocate the rings and write-back slots.
    pub fn init_sw(_ctx: &Ctx) -> Result<Self> {
        Ok(Ih {})
    }

    /// Program and enable the rings.
    pub fn init_hw(&mut self, _ctx: &Ctx) -> Result<()> {
        Ok(())
    }

    /// Every entry written since the last drain, in order.
    pub fn drain(&mut self, _ctx: &Ctx) -> Result<Vec<IhEntry>> {
        Ok(vec![])
    }
}
