//! PSP (MP0): bootloader, sOS, ring and command decoding (`mock-device.md` item 3) come
//! with the bring-up. Already enforced: on a VF the PSP belongs to the PF, and any access
//! to its registers is a violation.

use super::{Fault, Hw, IpModel, Reg};
use crate::profile::Profile;

/// PSP model state.
#[derive(Debug)]
pub struct Psp {
    pf_owned: bool,
}

impl Psp {
    /// PSP of a profile.
    pub fn new(profile: &Profile) -> Self {
        Self {
            pf_owned: profile.is_vf,
        }
    }

    fn check(&self, reg: Reg<'_>) -> Result<(), Fault> {
        if self.pf_owned {
            return Err(Fault::new(format!(
                "{}: the PSP belongs to the PF; a VF must not touch it",
                reg.name()
            )));
        }
        Ok(())
    }
}

impl IpModel for Psp {
    fn read(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>) -> Result<u32, Fault> {
        self.check(reg)?;
        Ok(hw.regs.get(reg.id))
    }

    fn write(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>, value: u32) -> Result<(), Fault> {
        self.check(reg)?;
        hw.regs.set(reg.id, value);
        Ok(())
    }
}
