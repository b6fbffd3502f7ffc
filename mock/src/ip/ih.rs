//! IH (OSSSYS): the interrupt rings.
//!
//! Ring 0 (`IH_RB_*`) and RING1 (`IH_RB_*_RING1`). A posted entry is a SOC15 8-dword entry
//! written into the ring at the write pointer, in device memory reached the way the
//! ring's `MC_SPACE` says (4: an MC address of MMHUB 0, i.e. the FB aperture or VM context
//! 0; 2: a system bus address); then `IH_RB_WPTR` advances and, on ring 0 with
//! `WPTR_WRITEBACK_ENABLE`, the write pointer is written to `IH_RB_WPTR_ADDR_LO/HI` (an MC
//! address too). A ring that would become full (write pointer one entry behind the read
//! pointer) drops the entry and, with `WPTR_OVERFLOW_ENABLE`, sets `IH_RB_WPTR.RB_OVERFLOW`
//! until a write of `IH_RB_CNTL.WPTR_OVERFLOW_CLEAR`. A disabled ring drops entries.

use super::gmc::{Gmc, Hub};
use super::{Fault, Hw, IpModel, Reg, ResetKind};
use crate::profile::RegIp;
use crate::regs::RegId;
use crate::walker::{Access, PhysTarget};

/// Bytes of one SOC15 IH entry.
pub const ENTRY_SIZE: u64 = 32;

/// One interrupt, as the SOC15 IH writes it (`amdgpu_irq.h` `struct amdgpu_iv_entry`,
/// decoded by `vega10_ih_decode_iv`/`navi10_ih`/`ih_v6_0`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IhEntry {
    /// Client id (`soc15_ih_clientid`/`soc21_ih_clientid`).
    pub client_id: u8,
    /// Source id (`ivsrcid`).
    pub src_id: u8,
    /// Ring id (for CP interrupts: me/pipe/queue).
    pub ring_id: u8,
    /// VMID (4 bits).
    pub vmid: u8,
    /// PASID (16 bits).
    pub pasid: u16,
    /// Node id (AID/XCC on multi-die parts).
    pub node_id: u8,
    /// Timestamp (48 bits); [`Ih::post`] fills it from its counter.
    pub timestamp: u64,
    /// The four context dwords.
    pub src_data: [u32; 4],
}

impl IhEntry {
    /// The eight dwords: dw0 = client id 7:0, source id 15:8, ring id 23:16, vmid 27:24;
    /// dw1/dw2 = timestamp 31:0 / 47:32; dw3 = pasid 15:0, node id 23:16; dw4..7 = context.
    pub fn to_dwords(&self) -> [u32; 8] {
        let [d0, d1, d2, d3] = self.src_data;
        [
            u32::from(self.client_id)
                | u32::from(self.src_id) << 8
                | u32::from(self.ring_id) << 16
                | u32::from(self.vmid & 0xf) << 24,
            self.timestamp as u32,
            ((self.timestamp >> 32) & 0xffff) as u32,
            u32::from(self.pasid) | u32::from(self.node_id) << 16,
            d0,
            d1,
            d2,
            d3,
        ]
    }

    /// Parse the eight dwords of an entry.
    pub fn from_dwords(dw: [u32; 8]) -> Self {
        IhEntry {
            client_id: dw[0] as u8,
            src_id: (dw[0] >> 8) as u8,
            ring_id: (dw[0] >> 16) as u8,
            vmid: ((dw[0] >> 24) & 0xf) as u8,
            pasid: dw[3] as u16,
            node_id: (dw[3] >> 16) as u8,
            timestamp: u64::from(dw[1]) | u64::from(dw[2] & 0xffff) << 32,
            src_data: [dw[4], dw[5], dw[6], dw[7]],
        }
    }
}

/// What became of a posted entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Posted {
    /// Written at this byte offset of the ring.
    Written {
        /// Byte offset of the entry in the ring.
        offset: u64,
    },
    /// The ring was full: dropped (and `RB_OVERFLOW` set if enabled).
    Overflow,
    /// The ring is not enabled: dropped.
    Disabled,
}

/// IH model state.
#[derive(Debug, Default)]
pub struct Ih {
    timestamp: u64,
}

/// Register names of a ring: base, base hi, cntl, rptr, wptr.
fn ring_regs(ring: u8) -> Option<[&'static str; 5]> {
    match ring {
        0 => Some([
            "IH_RB_BASE",
            "IH_RB_BASE_HI",
            "IH_RB_CNTL",
            "IH_RB_RPTR",
            "IH_RB_WPTR",
        ]),
        1 => Some([
            "IH_RB_BASE_RING1",
            "IH_RB_BASE_HI_RING1",
            "IH_RB_CNTL_RING1",
            "IH_RB_RPTR_RING1",
            "IH_RB_WPTR_RING1",
        ]),
        _ => None,
    }
}

fn reg(hw: &Hw<'_>, name: &str) -> Result<RegId, Fault> {
    hw.map
        .find(RegIp::Osssys, name, 0)
        .ok_or_else(|| Fault::new(format!("the profile has no {name}")))
}

fn field(hw: &Hw<'_>, id: RegId, name: &str) -> Result<am_autogen::regs::Field, Fault> {
    let info = hw.map.info(id);
    am_autogen::regs::table(info.table, info.version)
        .and_then(|t| t.by_name(info.name))
        .and_then(|r| r.field(name))
        .ok_or_else(|| Fault::new(format!("{} has no field {name}", info.name)))
}

fn get_field(hw: &Hw<'_>, id: RegId, name: &str) -> Result<u32, Fault> {
    Ok(field(hw, id, name)?.get(hw.regs.get(id)))
}

/// Write `data` at MC (or bus) address `addr` as the IH does.
fn ih_write(
    hw: &mut Hw<'_>,
    gmc: &Gmc,
    mc_space: u32,
    addr: u64,
    data: &[u8],
) -> Result<(), Fault> {
    let target = match mc_space {
        4 => gmc.resolve_mc(hw, Hub::mm(0), addr, Access::Write)?,
        2 => PhysTarget::System(addr),
        other => {
            return Err(Fault::new(format!(
                "IH_RB_CNTL.MC_SPACE {other}: the IH writes MC (4) or bus (2) addresses"
            )));
        }
    };
    match target {
        PhysTarget::Vram(off) => hw
            .vram
            .write(off, data)
            .map_err(|full| Fault::new(full.to_string())),
        PhysTarget::Peer { region, .. } => Err(Fault::new(format!(
            "IH ring address {addr:#x} is in the VRAM of hive region {region}: the IH writes \
             this device's memory or system memory only (not modelled)"
        ))),
        PhysTarget::System(bus) => {
            if !hw.config.bus_master() {
                return Err(Fault::new(format!(
                    "IH write to bus address {bus:#x} while bus mastering is off"
                )));
            }
            hw.sysmem
                .write(bus, data)
                .map_err(|e| Fault::new(format!("IH write to bus address {bus:#x}: {e}")))
        }
    }
}

impl Ih {
    /// Post `entry` to ring `ring` (0 or 1).
    pub fn post(
        &mut self,
        hw: &mut Hw<'_>,
        gmc: &Gmc,
        ring: u8,
        mut entry: IhEntry,
    ) -> Result<Posted, Fault> {
        let [base, base_hi, cntl, rptr, wptr] =
            ring_regs(ring).ok_or_else(|| Fault::new(format!("no IH ring {ring}")))?;
        let (cntl, rptr, wptr) = (reg(hw, cntl)?, reg(hw, rptr)?, reg(hw, wptr)?);
        if get_field(hw, cntl, "RB_ENABLE")? == 0 {
            return Ok(Posted::Disabled);
        }
        let size = 4u64 << get_field(hw, cntl, "RB_SIZE")?;
        let offset = field(hw, wptr, "OFFSET")?;
        let w = u64::from(hw.regs.get(wptr) & offset.mask) % size;
        let r = u64::from(hw.regs.get(rptr) & offset.mask) % size;
        if (w + ENTRY_SIZE) % size == r {
            if get_field(hw, cntl, "WPTR_OVERFLOW_ENABLE")? != 0 {
                let of = field(hw, wptr, "RB_OVERFLOW")?;
                hw.regs.set(wptr, of.set(hw.regs.get(wptr), 1));
            }
            return Ok(Posted::Overflow);
        }
        let base_lo = u64::from(hw.regs.get(reg(hw, base)?));
        let base_hi = u64::from(hw.regs.get(reg(hw, base_hi)?) & 0xff);
        let ring_addr = (base_hi << 32 | base_lo) << 8;
        self.timestamp += 1;
        entry.timestamp = self.timestamp;
        let bytes: Vec<u8> = entry
            .to_dwords()
            .iter()
            .flat_map(|d| d.to_le_bytes())
            .collect();
        let mc_space = get_field(hw, cntl, "MC_SPACE")?;
        ih_write(hw, gmc, mc_space, ring_addr + w, &bytes)?;
        let new_w = (w + ENTRY_SIZE) % size;
        let value = (hw.regs.get(wptr) & !offset.mask) | new_w as u32;
        hw.regs.set(wptr, value);
        if ring == 0 && get_field(hw, cntl, "WPTR_WRITEBACK_ENABLE")? != 0 {
            let lo = u64::from(hw.regs.get(reg(hw, "IH_RB_WPTR_ADDR_LO")?));
            let hi = u64::from(hw.regs.get(reg(hw, "IH_RB_WPTR_ADDR_HI")?) & 0xffff);
            ih_write(hw, gmc, mc_space, hi << 32 | lo, &value.to_le_bytes())?;
        }
        Ok(Posted::Written { offset: w })
    }
}

impl IpModel for Ih {
    fn write(&mut self, hw: &mut Hw<'_>, reg: Reg<'_>, value: u32) -> Result<(), Fault> {
        let wptr_name = match reg.name() {
            "IH_RB_CNTL" => "IH_RB_WPTR",
            "IH_RB_CNTL_RING1" => "IH_RB_WPTR_RING1",
            _ => {
                hw.regs.set(reg.id, value);
                return Ok(());
            }
        };
        // WPTR_OVERFLOW_CLEAR is a trigger: it clears RB_OVERFLOW and does not stay set.
        let clear = field(hw, reg.id, "WPTR_OVERFLOW_CLEAR")?;
        if clear.get(value) != 0 {
            let wptr = self::reg(hw, wptr_name)?;
            let of = field(hw, wptr, "RB_OVERFLOW")?;
            hw.regs.set(wptr, of.set(hw.regs.get(wptr), 0));
        }
        hw.regs.set(reg.id, clear.set(value, 0));
        Ok(())
    }

    fn reset(&mut self, _kind: ResetKind) {
        self.timestamp = 0;
    }
}

impl crate::MockGpu {
    /// Test hook: the IH receives `entry` from a client (an SQ interrupt, a RAS event, …)
    /// and posts it to ring `ring`. A failure to write the ring is recorded as a violation.
    pub fn post_interrupt(&self, ring: u8, entry: IhEntry) -> Result<Posted, Fault> {
        let r = self.with_models(|m, hw| {
            let super::Models { gmc, ih, .. } = m;
            ih.post(hw, gmc, ring, entry)
        });
        if let Err(f) = &r {
            self.record_engine_fault("IH", f);
        }
        r
    }
}
