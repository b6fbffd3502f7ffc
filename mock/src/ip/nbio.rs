//! NBIO (BIF, RCC) and HDP: the SOC-level registers.
//!
//! Modelled now: the MM_INDEX/MM_INDEX_HI/MM_DATA window onto VRAM, the VRAM size in
//! `RCC_CONFIG_MEMSIZE` and the VF bit of `RCC_IOV_FUNC_IDENTIFIER`, and two indirect windows
//! onto SMN space as register storage:
//! - RSMU (`BIF_BX_PF0_RSMU_INDEX` = byte address, `…_RSMU_DATA`): only registers of the
//!   profile whose address lies past BAR5;
//! - PCIE INDEX2 (`BIF_BX0_PCIE_INDEX2` = byte address bits 31:0, `…_INDEX2_HI` = bits
//!   39:32; bit 34 set selects the AID in bits 33:32): a register past BAR5 of AID 0, or any
//!   register of the profile on another AID (each AID has its own copy; the map holds AID 0's).
//!   An AID 0 register inside BAR5 is refused: the driver reaches it directly.
//!
//! Values are stored (registers past BAR5 start at their reset value); no behaviour is
//! attached to them. `BIF_BX0_PCIE_DATA` (the non-2 window) is refused: nothing uses it.

use std::collections::HashMap;

use super::{Fault, Hw, IpModel, Reg};
use crate::profile::{Profile, RegIp};

/// `MM_INDEX` bit 31: the index addresses memory, not registers.
const MM_INDEX_MEMORY: u32 = 1 << 31;

/// NBIO model state.
#[derive(Debug)]
pub struct Nbio {
    mm_index: u32,
    mm_index_hi: u32,
    vram_mib: u32,
    is_vf: bool,
    rsmu_index: u32,
    pcie_index2: u32,
    pcie_index2_hi: u32,
    /// Registers reached through the SMN windows: (AID, dword address) → value.
    smn: HashMap<(u8, u64), u32>,
}

impl Nbio {
    /// NBIO of a profile.
    pub fn new(profile: &Profile) -> Self {
        Self {
            mm_index: 0,
            mm_index_hi: 0,
            vram_mib: u32::try_from(profile.vram_size >> 20).unwrap_or(u32::MAX),
            is_vf: profile.is_vf,
            rsmu_index: 0,
            pcie_index2: 0,
            pcie_index2_hi: 0,
            smn: HashMap::new(),
        }
    }

    /// A register reached through an SMN window: its value on `aid`, if the driver wrote it
    /// (else `None`; the reset value applies). For tests.
    pub fn smn_value(&self, aid: u8, dword: u64) -> Option<u32> {
        self.smn.get(&(aid, dword)).copied()
    }

    /// The (AID, dword) an RSMU data access reaches, with the register's reset value.
    fn rsmu_target(&self, hw: &Hw<'_>) -> Result<((u8, u64), u32), Fault> {
        let dword = u64::from(self.rsmu_index) / 4;
        match hw.map.far_at(dword) {
            Some(info) if self.rsmu_index.is_multiple_of(4) => Ok(((0, dword), info.default)),
            _ => Err(Fault::new(format!(
                "BIF_BX_PF0_RSMU_DATA with RSMU index {:#x}: no register of this profile past BAR5 at that byte address",
                self.rsmu_index
            ))),
        }
    }

    /// The (AID, dword) a PCIE DATA2 access reaches, with the register's reset value.
    fn pcie_target(&self, hw: &Hw<'_>) -> Result<((u8, u64), u32), Fault> {
        let full = u64::from(self.pcie_index2_hi) << 32 | u64::from(self.pcie_index2);
        let aid = if full & (1 << 34) != 0 {
            ((full >> 32) & 3) as u8
        } else {
            0
        };
        let byte = full & 0xffff_ffff;
        let dword = byte / 4;
        if !byte.is_multiple_of(4) {
            return Err(Fault::new(format!(
                "BIF_BX0_PCIE_DATA2 with PCIE INDEX2 {full:#x}: unaligned register address"
            )));
        }
        if let Some(info) = hw.map.far_at(dword) {
            return Ok(((aid, dword), info.default));
        }
        match hw.map.at(dword) {
            Some(id) if aid != 0 => Ok(((aid, dword), hw.map.info(id).default)),
            Some(id) => Err(Fault::new(format!(
                "BIF_BX0_PCIE_DATA2: PCIE INDEX2 to {} of AID 0, which is inside BAR5: access it directly",
                hw.map.info(id).name
            ))),
            None => Err(Fault::new(format!(
                "BIF_BX0_PCIE_DATA2 with PCIE INDEX2 {full:#x}: no register of this profile at dword {dword:#x}"
            ))),
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
        if !addr.is_multiple_of(4) || !hw.vram.contains(addr, 4) {
            return Err(Fault::new(format!(
                "MM_DATA VRAM address {addr:#x} is unaligned or beyond VRAM ({:#x} bytes)",
                hw.vram.size()
            )));
        }
        Ok(addr)
    }
}

/// Data registers of the indirect SMN windows.
const SMN_DATA: &[&str] = &["BIF_BX0_PCIE_DATA"];

fn refuse_smn_window(hw: &Hw<'_>, reg: Reg<'_>) -> Result<(), Fault> {
    let hit = SMN_DATA
        .iter()
        .find(|n| hw.map.find(RegIp::Nbio, n, 0) == Some(reg.id));
    match hit {
        Some(n) => Err(Fault::new(format!(
            "indirect SMN access through {n} is not modelled yet"
        ))),
        None => Ok(()),
    }
}

impl IpModel for Nbio {
    fn read(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>) -> Result<u32, Fault> {
        refuse_smn_window(hw, reg)?;
        Ok(match reg.name() {
            "BIF_BX_PF0_MM_INDEX" => self.mm_index,
            "BIF_BX_PF0_MM_INDEX_HI" => self.mm_index_hi,
            "BIF_BX_PF0_MM_DATA" => hw.vram.read32(self.mm_address(hw)?),
            "RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE" => self.vram_mib,
            "RCC_DEV0_EPF0_RCC_IOV_FUNC_IDENTIFIER" => u32::from(self.is_vf),
            "BIF_BX_PF0_RSMU_INDEX" => self.rsmu_index,
            "BIF_BX0_PCIE_INDEX2" => self.pcie_index2,
            "BIF_BX0_PCIE_INDEX2_HI" => self.pcie_index2_hi,
            "BIF_BX_PF0_RSMU_DATA" => {
                let (key, default) = self.rsmu_target(hw)?;
                self.smn.get(&key).copied().unwrap_or(default)
            }
            "BIF_BX0_PCIE_DATA2" => {
                let (key, default) = self.pcie_target(hw)?;
                self.smn.get(&key).copied().unwrap_or(default)
            }
            _ => hw.regs.get(reg.id),
        })
    }

    fn write(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>, value: u32) -> Result<(), Fault> {
        refuse_smn_window(hw, reg)?;
        match reg.name() {
            "BIF_BX_PF0_MM_INDEX" => self.mm_index = value,
            "BIF_BX_PF0_MM_INDEX_HI" => self.mm_index_hi = value,
            "BIF_BX_PF0_MM_DATA" => hw.vram.write32(self.mm_address(hw)?, value),
            "BIF_BX_PF0_RSMU_INDEX" => self.rsmu_index = value,
            "BIF_BX0_PCIE_INDEX2" => self.pcie_index2 = value,
            "BIF_BX0_PCIE_INDEX2_HI" => self.pcie_index2_hi = value & 0xff,
            "BIF_BX_PF0_RSMU_DATA" => {
                let (key, _) = self.rsmu_target(hw)?;
                self.smn.insert(key, value);
            }
            "BIF_BX0_PCIE_DATA2" => {
                let (key, _) = self.pcie_target(hw)?;
                self.smn.insert(key, value);
            }
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
        self.rsmu_index = 0;
        self.pcie_index2 = 0;
        self.pcie_index2_hi = 0;
        self.smn.clear();
    }
}
