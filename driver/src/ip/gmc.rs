//! GMC: the MM and GC hubs (apertures, VM context 0), TLB flushes, fault status.

use crate::Result;
use crate::ctx::Ctx;
use crate::ip::soc::Soc;

/// A GPU memory hub.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hub {
    /// MMHUB instance (one per AID on MI300).
    Mm(u8),
    /// GC hub of an XCC.
    Gc(u8),
}

/// A page fault as the L2 protection-fault registers report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmFault {
    /// The hub that faulted.
    pub hub: Hub,
    /// Faulting virtual address.
    pub va: u64,
    /// Raw `L2_PROTECTION_FAULT_STATUS`.
    pub status: u32,
    /// Its fields by name (`VMID`, `RW`, `PERMISSION_FAULTS`, `CID`, …).
    pub fields: Vec<(&'static str, u32)>,
}

/// GMC state: the pages the hubs point at.
#[derive(Debug)]
pub struct Gmc {}

impl Gmc {
    /// Allocate the dummy and default pages.
    pub fn init_sw(_ctx: &Ctx) -> Result<Self> {
        Ok(Gmc {})
    }

    /// Program every MM hub instance.
    pub fn init_hw(&mut self, _ctx: &Ctx, _soc: &Soc) -> Result<()> {
        Ok(())
    }

    /// Program the GC hub of every XCC (called by GFX).
    pub fn init_gc_hubs(&self, _ctx: &Ctx) -> Result<()> {
        Ok(())
    }

    /// HDP flush, then invalidate `vmid` on every instance of every hub.
    pub fn flush_tlb(&self, _ctx: &Ctx, _soc: &Soc, _vmid: u8) -> Result<()> {
        Ok(())
    }

    /// Read (and clear) the protection-fault status of a hub.
    pub fn take_fault(&self, _ctx: &Ctx, _hub: Hub) -> Result<Option<VmFault>> {
        Ok(None)
    }
}
