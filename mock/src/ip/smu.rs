//! SMU (MP1): message tables, answers and mode1 reset (`mock-device.md` item 4) come
//! with the bring-up. Already enforced: on a VF the SMU belongs to the PF, and any access
//! to its registers is a violation.

use super::{Fault, Hw, IpModel, Reg};
use crate::profile::Profile;

/// SMU model state.
#[derive(Debug)]
pub struct Smu {
    pf_owned: bool,
}

impl Smu {
    /// SMU of a profile.
    pub fn new(profile: &Profile) -> Self {
        Self {
            pf_owned: profile.is_vf,
        }
    }

    fn check(&self, reg: Reg<'_>) -> Result<(), Fault> {
        if self.pf_owned {
            return Err(Fault::new(format!(
                "{}: the SMU belongs to the PF; a VF must not touch it",
                reg.name()
            )));
        }
        Ok(())
    }
}

impl IpModel for Smu {
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
