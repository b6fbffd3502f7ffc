//! NBIO (BIF, RCC) and HDP: the SOC-level registers.
//!
//! Modelled:
//! - the MM_INDEX/MM_INDEX_HI/MM_DATA window onto VRAM, the VRAM size in
//!   `RCC_CONFIG_MEMSIZE` and the VF bit of `RCC_IOV_FUNC_IDENTIFIER`;
//! - the RSMU window (`BIF_BX_PF0_RSMU_INDEX` = byte address, `…_DATA`) onto registers past
//!   BAR5, and PCIE INDEX2 (`BIF_BX0_PCIE_INDEX2`/`_HI`, `…_DATA2`) onto the registers of
//!   every AID (`addr | aid << 32 | 1 << 34`; without bit 34, AID 0). Registers reached
//!   this way are plain storage (no model behaviour), each AID other than 0 with its own
//!   copy starting at the reset default; an address where the map has no register is a
//!   fault. The legacy `BIF_BX0_PCIE_INDEX/DATA` pair is refused.
//! - HDP flush: at power-on `BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL` holds the byte address of
//!   `BIF_BX_PF0_HDP_MEM_COHERENCY_FLUSH_CNTL` (as the `*_default.h` of older NBIOs show);
//!   a write there is a flush (the CPU's path). Engines flush through
//!   `BIF_BX_PF0_GPU_HDP_FLUSH_REQ`: a write there flushes and the same bits read back from
//!   `…_GPU_HDP_FLUSH_DONE` (the CP's and SDMA's write-then-wait packets poll it). A flush
//!   makes every CPU write through BAR0 so far visible to the GPU ([`crate::vram::Vram`]).

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
    /// Registers of AIDs 1..3 written through PCIE INDEX2: (aid, dword) → value.
    aid_regs: HashMap<(u8, u64), u32>,
    /// HDP flushes so far.
    hdp_flushes: u64,
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
            aid_regs: HashMap::new(),
            hdp_flushes: 0,
        }
    }

    /// What firmware leaves in NBIO at power-on: the HDP flush remap register points at the
    /// BIF's HDP flush register.
    pub fn power_on(hw: &mut Hw<'_>) {
        if let Some(id) = hw
            .map
            .find(RegIp::Nbio, "BIF_BX_PF0_HDP_MEM_COHERENCY_FLUSH_CNTL", 0)
        {
            let byte = hw.map.info(id).addr * 4;
            hw.set(
                RegIp::Nbio,
                "BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL",
                0,
                byte as u32,
            );
        }
    }

    /// HDP flushes so far (CPU and engine requests).
    pub fn hdp_flushes(&self) -> u64 {
        self.hdp_flushes
    }

    /// A register of AID `aid` at `dword` (PCIE INDEX2): AID 0 is this register file.
    fn aid_reg(
        &mut self,
        hw: &mut Hw<'_>,
        aid: u8,
        dword: u64,
        write: Option<u32>,
    ) -> Result<u32, Fault> {
        let id = hw.map.at(dword).ok_or_else(|| {
            Fault::new(format!(
                "indirect access to dword {dword:#x} of AID {aid}: no register there"
            ))
        })?;
        if aid == 0 {
            return Ok(match write {
                Some(v) => {
                    hw.regs.set(id, v);
                    v
                }
                None => hw.regs.get(id),
            });
        }
        if aid >= hw.profile.num_aid.max(1) {
            return Err(Fault::new(format!(
                "PCIE INDEX2 names AID {aid}; the device has {}",
                hw.profile.num_aid
            )));
        }
        let default = hw.map.info(id).default;
        let slot = self.aid_regs.entry((aid, dword)).or_insert(default);
        if let Some(v) = write {
            *slot = v;
        }
        Ok(*slot)
    }

    /// The (aid, dword) PCIE INDEX2 selects.
    fn index2_target(&self) -> Result<(u8, u64), Fault> {
        let full = u64::from(self.pcie_index2_hi) << 32 | u64::from(self.pcie_index2);
        if full % 4 != 0 {
            return Err(Fault::new(format!(
                "PCIE INDEX2 {full:#x} is not dword-aligned"
            )));
        }
        let aid = if full & (1 << 34) != 0 {
            ((full >> 32) & 3) as u8
        } else if full >> 32 != 0 {
            return Err(Fault::new(format!(
                "PCIE INDEX2 {full:#x}: high bits set without the AID-select bit 34"
            )));
        } else {
            0
        };
        Ok((aid, (full & 0xffff_ffff) / 4))
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

/// RAS status bits of `BIF_BX0_BIF_DOORBELL_INT_CNTL` and the bits that clear them.
pub const RAS_BITS: [(&str, &str); 2] = [
    (
        "RAS_ATHUB_ERR_EVENT_INTERRUPT_STATUS",
        "RAS_ATHUB_ERR_EVENT_INTERRUPT_CLEAR",
    ),
    ("RAS_CNTLR_INTERRUPT_STATUS", "RAS_CNTLR_INTERRUPT_CLEAR"),
];

fn nbio_field(reg: Reg<'_>, name: &str) -> Option<am_autogen::regs::Field> {
    am_autogen::regs::table(reg.info.table, reg.info.version)?
        .by_name(reg.info.name)?
        .field(name)
}

/// Data registers of the indirect windows that are not modelled.
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
            "BIF_BX_PF0_RSMU_INDEX" => self.rsmu_index,
            "BIF_BX_PF0_RSMU_DATA" => self.aid_reg(hw, 0, u64::from(self.rsmu_index / 4), None)?,
            "BIF_BX0_PCIE_INDEX2" => self.pcie_index2,
            "BIF_BX0_PCIE_INDEX2_HI" => self.pcie_index2_hi,
            "BIF_BX0_PCIE_DATA2" => {
                let (aid, dword) = self.index2_target()?;
                self.aid_reg(hw, aid, dword, None)?
            }
            "RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE" => self.vram_mib,
            "RCC_DEV0_EPF0_RCC_IOV_FUNC_IDENTIFIER" => u32::from(self.is_vf),
            _ => hw.regs.get(reg.id),
        })
    }

    fn write(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>, value: u32) -> Result<(), Fault> {
        refuse_smn_window(hw, reg)?;
        match reg.name() {
            "BIF_BX_PF0_MM_INDEX" => self.mm_index = value,
            "BIF_BX_PF0_MM_INDEX_HI" => self.mm_index_hi = value,
            "BIF_BX_PF0_MM_DATA" => hw
                .vram
                .write32(self.mm_address(hw)?, value)
                .map_err(|full| Fault::new(full.to_string()))?,
            "BIF_BX_PF0_RSMU_INDEX" => self.rsmu_index = value,
            "BIF_BX_PF0_RSMU_DATA" => {
                self.aid_reg(hw, 0, u64::from(self.rsmu_index / 4), Some(value))?;
            }
            "BIF_BX0_PCIE_INDEX2" => self.pcie_index2 = value,
            "BIF_BX0_PCIE_INDEX2_HI" => self.pcie_index2_hi = value,
            "BIF_BX0_PCIE_DATA2" => {
                let (aid, dword) = self.index2_target()?;
                self.aid_reg(hw, aid, dword, Some(value))?;
            }
            "BIF_BX0_BIF_DOORBELL_INT_CNTL" => {
                // Status bits are the hardware's; a write of a CLEAR bit clears its status and
                // does not stay set.
                let old = hw.regs.get(reg.id);
                let mut v = value;
                for (status, clear) in RAS_BITS {
                    let (Some(st), Some(cl)) = (nbio_field(reg, status), nbio_field(reg, clear))
                    else {
                        continue;
                    };
                    let keep = if cl.get(value) != 0 { 0 } else { st.get(old) };
                    v = cl.set(st.set(v, keep), 0);
                }
                hw.regs.set(reg.id, v);
            }
            // The flush register has several names (PF and VF views of one dword).
            _ if hw
                .map
                .find(RegIp::Nbio, "BIF_BX_PF0_HDP_MEM_COHERENCY_FLUSH_CNTL", 0)
                == Some(reg.id) =>
            {
                self.hdp_flushes += 1;
                hw.vram.hdp_flush();
                hw.regs.set(reg.id, value);
            }
            name if name.ends_with("GPU_HDP_FLUSH_REQ") => {
                // The flush completes at once: DONE reports the requested bits.
                self.hdp_flushes += 1;
                hw.vram.hdp_flush();
                hw.regs.set(reg.id, value);
                let done = format!("{}DONE", &name[..name.len() - "REQ".len()]);
                hw.set(RegIp::Nbio, &done, reg.info.instance, value);
            }
            // Straps the hardware sets: the write does not land (no source says it is
            // refused, and no proven driver writes them).
            "RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE" | "RCC_DEV0_EPF0_RCC_IOV_FUNC_IDENTIFIER" => {
                hw.warn(format!("{} is read-only: the write is dropped", reg.name()));
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
        self.aid_regs.clear();
    }
}
