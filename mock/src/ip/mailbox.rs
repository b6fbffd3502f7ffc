//! The PF side of the VF/PF mailbox (`sriov-vf.md`). The registers exist on VF profiles
//! and stay reachable while the PF gates the rest of MMIO; `MAILBOX_CONTROL` takes the
//! single-byte accesses the protocol uses. The protocol itself (INIT_DATA, INIT_ACCESS,
//! REL_INIT_ACCESS, fault injection) is the SR-IOV work's; until then a test grants access
//! with `MockGpu::grant_vf_access`.

use super::{Fault, Hw, IpModel, Reg};

/// Mailbox model state.
#[derive(Debug, Default)]
pub struct Mailbox {}

impl IpModel for Mailbox {
    fn read8(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>, byte: u8) -> Result<u8, Fault> {
        if reg.name() != "BIF_BX_PF0_MAILBOX_CONTROL" {
            return Err(Fault::new(format!("byte-wide read of {}", reg.name())));
        }
        Ok((hw.regs.get(reg.id) >> (8 * u32::from(byte))) as u8)
    }

    fn write8(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>, byte: u8, value: u8) -> Result<(), Fault> {
        if reg.name() != "BIF_BX_PF0_MAILBOX_CONTROL" {
            return Err(Fault::new(format!("byte-wide write of {}", reg.name())));
        }
        let shift = 8 * u32::from(byte);
        let old = hw.regs.get(reg.id) & !(0xff << shift);
        hw.regs.set(reg.id, old | (u32::from(value) << shift));
        Ok(())
    }
}
