//! The register map: every register the profile's IP versions define, placed at its BAR5
//! dword address (instance segment base + offset), and the values behind them.
//!
//! The map is built once per device from the generated register tables and shared
//! read-only; values live in [`RegValues`], owned by the device state under its lock.

use std::collections::HashMap;

use crate::profile::{IpInstance, IpVersion, Profile, RegIp};
use crate::tables;

/// Which model answers for a register.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Block {
    /// NBIO/BIF and HDP: SOC-level registers.
    Nbio,
    /// GC and MM hubs: VM contexts, apertures, invalidation engines.
    Gmc,
    /// Interrupt handler (OSSSYS).
    Ih,
    /// PSP (MP0).
    Psp,
    /// SMU (MP1).
    Smu,
    /// Graphics/compute: RLC, CP, HQDs, everything else of GC.
    Gfx,
    /// SDMA engines.
    Sdma,
    /// VF/PF mailbox (NBIO BIF mailbox registers).
    Mailbox,
}

impl Block {
    /// Lower-case name used in messages.
    pub fn name(self) -> &'static str {
        match self {
            Block::Nbio => "nbio",
            Block::Gmc => "gmc",
            Block::Ih => "ih",
            Block::Psp => "psp",
            Block::Smu => "smu",
            Block::Gfx => "gfx",
            Block::Sdma => "sdma",
            Block::Mailbox => "mailbox",
        }
    }
}

/// What the map knows about one register.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegInfo {
    /// Register name without the `reg`/`mm` prefix (`SCRATCH_REG7`).
    pub name: &'static str,
    /// IP whose table defines it.
    pub table: RegIp,
    /// Version of that table.
    pub version: IpVersion,
    /// Discovery hardware id of the IP instance whose segment holds it.
    pub hw_id: u16,
    /// Instance number (XCC, AID, SDMA engine).
    pub instance: u8,
    /// BAR5 dword address.
    pub addr: u64,
    /// Reset value (`*_default.h` where Linux ships one, else 0).
    pub default: u32,
    /// Model that answers for it.
    pub block: Block,
}

/// Index of a register in the map.
pub type RegId = usize;

/// A second name for a register dword.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Alias {
    /// The register first placed at the dword.
    pub reg: RegId,
    /// The other name.
    pub name: &'static str,
    /// Table of the other name.
    pub table: RegIp,
    /// Instance of the other name.
    pub instance: u8,
}

/// Registers of one device, by address and by name.
#[derive(Debug, Default)]
pub struct RegisterMap {
    infos: Vec<RegInfo>,
    by_addr: HashMap<u64, RegId>,
    by_name: HashMap<(RegIp, u8), HashMap<&'static str, RegId>>,
    /// Further names of a dword that already has a register: (register, other name, table
    /// and instance the other name comes from).
    aliases: Vec<Alias>,
    /// Segments of every instance: (start, hw_id, instance, segment index).
    segments: Vec<(u64, u16, u8, usize)>,
}

/// Registers at fixed BAR5 dwords that the driver reads before it knows any IP base
/// (`boot-sequence.md`, `sriov-vf.md`). They are NBIO registers; the map also places them
/// from the NBIO table, these entries make sure they exist even for a header that lacks them.
pub const FIXED: &[(u64, &str, Block)] = &[
    (0x0000, "BIF_BX_PF0_MM_INDEX", Block::Nbio),
    (0x0001, "BIF_BX_PF0_MM_DATA", Block::Nbio),
    (0x0006, "BIF_BX_PF0_MM_INDEX_HI", Block::Nbio),
    (0x0de3, "RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE", Block::Nbio),
    (0x0de5, "RCC_DEV0_EPF0_RCC_IOV_FUNC_IDENTIFIER", Block::Nbio),
];

/// VF mailbox registers (`mxgpu_nv.h`), present on VF profiles.
pub const MAILBOX: &[(u64, &str)] = &[
    (0x0e56, "BIF_BX_PF0_MAILBOX_MSGBUF_TRN_DW0"),
    (0x0e57, "BIF_BX_PF0_MAILBOX_MSGBUF_TRN_DW1"),
    (0x0e58, "BIF_BX_PF0_MAILBOX_MSGBUF_TRN_DW2"),
    (0x0e59, "BIF_BX_PF0_MAILBOX_MSGBUF_TRN_DW3"),
    (0x0e5a, "BIF_BX_PF0_MAILBOX_MSGBUF_RCV_DW0"),
    (0x0e5b, "BIF_BX_PF0_MAILBOX_MSGBUF_RCV_DW1"),
    (0x0e5c, "BIF_BX_PF0_MAILBOX_MSGBUF_RCV_DW2"),
    (0x0e5d, "BIF_BX_PF0_MAILBOX_MSGBUF_RCV_DW3"),
    (0x0e5e, "BIF_BX_PF0_MAILBOX_CONTROL"),
];

/// Which model owns a register of a given header.
fn block_of(table: RegIp, name: &str) -> Block {
    match table {
        RegIp::Mp if name.starts_with("MP1") => Block::Smu,
        RegIp::Mp => Block::Psp,
        RegIp::Mmhub => Block::Gmc,
        RegIp::Osssys => Block::Ih,
        RegIp::Sdma => Block::Sdma,
        RegIp::Hdp | RegIp::Smuio => Block::Nbio,
        RegIp::Nbio if name.contains("MAILBOX") => Block::Mailbox,
        RegIp::Nbio => Block::Nbio,
        RegIp::Gc if name.starts_with("SDMA") => Block::Sdma,
        // The GC hub: GCVM_/GCMC_ on GC 10+, VM_/MC_VM_ on GC 9.
        RegIp::Gc
            if ["GCVM_", "GCMC_", "VM_", "MC_VM_"]
                .iter()
                .any(|p| name.starts_with(p)) =>
        {
            Block::Gmc
        }
        RegIp::Gc => Block::Gfx,
    }
}

impl RegisterMap {
    /// The map of `profile`: every register of every instance that lands inside BAR5.
    pub fn build(profile: &Profile) -> Self {
        let mut map = RegisterMap::default();
        let nbio = profile
            .ips
            .iter()
            .find(|i| i.hw_id == am_autogen::hwid::NBIF_HWID);
        for &(addr, name, block) in FIXED {
            map.insert(fixed_info(nbio, name, addr, block));
        }
        if profile.is_vf {
            for &(addr, name) in MAILBOX {
                map.insert(fixed_info(nbio, name, addr, Block::Mailbox));
            }
        }
        // Segments for messages: an instance that shares another's aperture (SDMA in GC,
        // MP1 in MP0) is named only where no instance with a table claims the base.
        let mut owners: Vec<&IpInstance> = profile.ips.iter().collect();
        owners.sort_by_key(|i| i.regs.is_none());
        for inst in owners {
            for (seg, &base) in inst.bases.iter().enumerate() {
                if !map.segments.iter().any(|s| s.0 == base) {
                    map.segments.push((base, inst.hw_id, inst.instance, seg));
                }
            }
        }
        for inst in &profile.ips {
            let Some(t) = inst.regs else { continue };
            // The shared MP table: `MP1_*` registers sit at MP1's bases (as the driver places
            // them), the rest at MP0's. Up to MP 13 both lists are equal; MP 14 moved the
            // MP1 mailbox to segment 1, which MP1's own list places.
            let mp1 = (t.ip == RegIp::Mp)
                .then(|| {
                    profile
                        .instances(am_autogen::hwid::MP1_HWID)
                        .find(|i| i.instance == inst.instance)
                })
                .flatten();
            for r in tables::registers(t.ip, t.version) {
                let (owner, bases) = match mp1 {
                    Some(m) if r.name.starts_with("MP1") => (m, &m.bases),
                    _ => (inst, &inst.bases),
                };
                let Some(&base) = bases.get(usize::from(r.base_idx)) else {
                    continue;
                };
                let addr = base + u64::from(r.offset);
                // Past BAR5 a register is still reachable through the RSMU window (a 32-bit
                // byte index).
                if addr * 4 > u64::from(u32::MAX) {
                    continue;
                }
                map.insert(RegInfo {
                    name: r.name,
                    table: t.ip,
                    version: t.version,
                    hw_id: owner.hw_id,
                    instance: inst.instance,
                    addr,
                    default: r.default,
                    block: block_of(t.ip, r.name),
                });
            }
        }
        map.segments.sort_unstable();
        map
    }

    fn insert(&mut self, info: RegInfo) {
        let names = self.by_name.entry((info.table, info.instance)).or_default();
        if let Some(&first) = self.by_addr.get(&info.addr) {
            // Same dword under another name: the PF/VF views of BIF registers, RSMU vs
            // MM_INDEX, a fixed entry met again in its header. One register, several names.
            if self.infos[first].name != info.name || self.infos[first].instance != info.instance {
                self.aliases.push(Alias {
                    reg: first,
                    name: info.name,
                    table: info.table,
                    instance: info.instance,
                });
            }
            names.entry(info.name).or_insert(first);
            return;
        }
        let id = self.infos.len();
        self.by_addr.insert(info.addr, id);
        names.entry(info.name).or_insert(id);
        self.infos.push(info);
    }

    /// The register at a BAR5 dword address.
    pub fn at(&self, addr: u64) -> Option<RegId> {
        self.by_addr.get(&addr).copied()
    }

    /// A register by table, name and instance (the same name can exist in two tables: GC 9's
    /// own hub has `VM_CONTEXT0_CNTL` like MMHUB 1.8).
    pub fn find(&self, ip: RegIp, name: &str, instance: u8) -> Option<RegId> {
        self.by_name.get(&(ip, instance))?.get(name).copied()
    }

    /// Everything known about a register.
    pub fn info(&self, id: RegId) -> &RegInfo {
        &self.infos[id]
    }

    /// Number of distinct register dwords.
    pub fn len(&self) -> usize {
        self.infos.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.infos.is_empty()
    }

    /// Other names of registers that share a dword with an earlier one.
    pub fn aliases(&self) -> &[Alias] {
        &self.aliases
    }

    /// The IP segment an unmapped address falls into (the nearest segment base at or below
    /// it): (hw_id, instance, segment, offset within the segment). For messages.
    pub fn segment_of(&self, addr: u64) -> Option<(u16, u8, usize, u64)> {
        let i = self.segments.partition_point(|s| s.0 <= addr);
        let &(base, hw, inst, seg) = self.segments.get(i.checked_sub(1)?)?;
        Some((hw, inst, seg, addr - base))
    }

    /// Register values at reset.
    pub fn defaults(&self) -> RegValues {
        RegValues {
            vals: self.infos.iter().map(|i| i.default).collect(),
        }
    }
}

fn fixed_info(nbio: Option<&IpInstance>, name: &'static str, addr: u64, block: Block) -> RegInfo {
    RegInfo {
        name,
        table: RegIp::Nbio,
        version: nbio.map_or(IpVersion::new(0, 0, 0), |n| n.version),
        hw_id: am_autogen::hwid::NBIF_HWID,
        instance: 0,
        addr,
        default: 0,
        block,
    }
}

/// Current register values, indexed by [`RegId`].
#[derive(Clone, Debug)]
pub struct RegValues {
    vals: Vec<u32>,
}

impl RegValues {
    /// Value of a register.
    pub fn get(&self, id: RegId) -> u32 {
        self.vals.get(id).copied().unwrap_or(0)
    }

    /// Set a register.
    pub fn set(&mut self, id: RegId, value: u32) {
        if let Some(v) = self.vals.get_mut(id) {
            *v = value;
        }
    }
}
