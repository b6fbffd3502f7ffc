//! The VF/PF mailbox registers (`sriov-vf.md`), 0xE56..0xE5E.
//!
//! On a VF profile they are the PF's side of the mailbox, [`VfPf`]: they stay reachable while
//! the PF gates the rest of MMIO, the PF answers INIT_DATA, INIT_ACCESS and REL_INIT_ACCESS,
//! and its grant is what opens MMIO and VRAM to the VF. On a PF profile the registers of the
//! same names are the PF's view of its VFs' mailboxes, which nothing uses: they hold values.

use super::{Fault, Hw, IpModel, Reg, ResetKind};
use crate::profile::Profile;
use crate::vf_pf::VfPf;

/// Mailbox model state.
#[derive(Debug, Default)]
pub struct Mailbox {
    /// The PF side, on VF profiles.
    pub pf: Option<VfPf>,
}

impl Mailbox {
    /// The mailbox of a profile.
    pub fn new(profile: &Profile) -> Self {
        Self {
            pf: profile.is_vf.then(VfPf::new),
        }
    }

    /// Whether the PF has granted the VF init access.
    pub fn access_granted(&self) -> bool {
        self.pf.as_ref().is_some_and(VfPf::access_granted)
    }
}

impl IpModel for Mailbox {
    fn read(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>) -> Result<u32, Fault> {
        match &mut self.pf {
            Some(pf) => pf.read32(reg.info.addr * 4).map_err(Fault),
            None => Ok(hw.regs.get(reg.id)),
        }
    }

    fn write(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>, value: u32) -> Result<(), Fault> {
        match &mut self.pf {
            Some(pf) => pf.write32(reg.info.addr * 4, value).map_err(Fault),
            None => {
                hw.regs.set(reg.id, value);
                Ok(())
            }
        }
    }

    fn read8(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>, byte: u8) -> Result<u8, Fault> {
        match &mut self.pf {
            Some(pf) => pf.read8(reg.info.addr * 4 + u64::from(byte)).map_err(Fault),
            None => Ok((hw.regs.get(reg.id) >> (8 * u32::from(byte))) as u8),
        }
    }

    fn write8(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>, byte: u8, value: u8) -> Result<(), Fault> {
        match &mut self.pf {
            Some(pf) => pf
                .write8(reg.info.addr * 4 + u64::from(byte), value)
                .map_err(Fault),
            None => {
                let shift = 8 * u32::from(byte);
                let old = hw.regs.get(reg.id) & !(0xff << shift);
                hw.regs.set(reg.id, old | (u32::from(value) << shift));
                Ok(())
            }
        }
    }

    /// A function reset of the VF: the PF revokes its access and forgets the conversation;
    /// injected faults stay armed.
    fn reset(&mut self, kind: ResetKind) {
        let _ = kind;
        if let Some(pf) = &mut self.pf {
            let faults = pf.faults;
            *pf = VfPf::new();
            pf.faults = faults;
        }
    }
}
