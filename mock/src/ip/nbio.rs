//! NBIO (BIF, RCC) and HDP: the SOC-level registers.
//!
//! Modelled now: the MM_INDEX/MM_INDEX_HI/MM_DATA window onto VRAM, the VRAM size in
//! `RCC_CONFIG_MEMSIZE` and the VF bit of `RCC_IOV_FUNC_IDENTIFIER`. Doorbell apertures,
//! HDP flush, PCIE INDEX2 per AID and RSMU come with the bring-up models.

use super::{Fault, Hw, IpModel, Reg};
use crate::profile::Profile;

/// `MM_INDEX` bit 31: the index addresses memory, not registers.
const MM_INDEX_MEMORY: u32 = 1 << 31;

/// NBIO model state.
#[derive(Debug)]
pub struct Nbio {
    mm_index: u32,
    mm_index_hi: u32,
    vram_mib: u32,
    is_vf: bool,
}

impl Nbio {
    /// NBIO of a profile.
    pub fn new(profile: &Profile) -> Self {
        Self {
            mm_index: 0,
            mm_index_hi: 0,
            vram_mib: u32::try_from(profile.vram_size >> 20).unwrap_or(u32::MAX),
            is_vf: profile.is_vf,
        }
    }

    /// VRAM byte address selected by MM_INDEX/MM_INDEX_HI.
    fn mm_address(&self, hw: &Hw<'_>) -> Result<u64, Fault> {
        if self.mm_index & MM_INDEX_MEMORY == 0 {
            return Err(Fault::new(format!(
                "MM_DATA accessed with MM_INDEX {:#x}: bit 31 (memory select) is clear; indirect register access goes through RSMU/PCIE INDEX2",
                self.mm_index
            )));
        }
        let addr =
            (u64::from(self.mm_index_hi) << 31) | u64::from(self.mm_index & !MM_INDEX_MEMORY);
        if addr % 4 != 0 || !hw.vram.contains(addr, 4) {
            return Err(Fault::new(format!(
                "MM_DATA VRAM address {addr:#x} is unaligned or beyond VRAM ({:#x} bytes)",
                hw.vram.size()
            )));
        }
        Ok(addr)
    }
}

impl IpModel for Nbio {
    fn read(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>) -> Result<u32, Fault> {
        Ok(match reg.name() {
            "BIF_BX_PF0_MM_INDEX" => self.mm_index,
            "BIF_BX_PF0_MM_INDEX_HI" => self.mm_index_hi,
            "BIF_BX_PF0_MM_DATA" => hw.vram.read32(self.mm_address(hw)?),
            "RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE" => self.vram_mib,
            "RCC_DEV0_EPF0_RCC_IOV_FUNC_IDENTIFIER" => u32::from(self.is_vf),
            _ => hw.regs.get(reg.id),
        })
    }

    fn write(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>, value: u32) -> Result<(), Fault> {
        match reg.name() {
            "BIF_BX_PF0_MM_INDEX" => self.mm_index = value,
            "BIF_BX_PF0_MM_INDEX_HI" => self.mm_index_hi = value,
            "BIF_BX_PF0_MM_DATA" => hw.vram.write32(self.mm_address(hw)?, value),
            "RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE" | "RCC_DEV0_EPF0_RCC_IOV_FUNC_IDENTIFIER" => {
                return Err(Fault::new(format!("{} is read-only", reg.name())));
            }
            _ => hw.regs.set(reg.id, value),
        }
        Ok(())
    }

    fn reset(&mut self, _kind: super::ResetKind) {
        self.mm_index = 0;
        self.mm_index_hi = 0;
    }
}
