//! Registers by name, for the IP versions discovery found.
//!
//! Glossary:
//! - *offset*: a register's dword offset inside one base segment (`regFOO` in `*_offset.h`);
//! - *base index* (segment): which of the IP instance's base addresses the offset is added to
//!   (`regFOO_BASE_IDX`);
//! - *address*: `base[instance][base_idx] + offset`, a dword index into BAR5 — or, past the
//!   end of BAR5, into the indirect RSMU window (only the low 32 bits of a 64-bit discovery
//!   base count: the high bits are ASIC-specific, as Linux treats them);
//! - *field*: a bit range of a register (`FOO__BAR_MASK`/`__SHIFT` in `*_sh_mask.h`).
//!
//! The generated tables give, per IP version, each register's offset, base index and
//! fields; [`Regs`] picks the table for each discovered IP version ([`select_table`]: that
//! version's own table or its declared alias, else the newest table of the same major
//! version that is not newer than the hardware, as the reference driver does) and resolves
//! one address per (register, instance). Registers are named by the
//! generated constants ([`gc::SCRATCH_REG7`](crate::regs::gc::SCRATCH_REG7)), so a typo does
//! not compile; a register the discovered version lacks is an [`crate::ErrorKind::NoSuchRegister`]
//! naming register and version.
//!
//! Registers of `autogen/typed-regs.txt` carry a field type: [`Regs::encode`] and the
//! [`Ctx`](crate::ctx::Ctx) helpers take a closure over [`Fields`] with one setter per field,
//! resolved for the discovered version at run time (a field that version lacks is an
//! [`crate::ErrorKind::Field`] naming register, field and version).
//!
//! ```
//! let _ = am_driver::regs::gc::SCRATCH_REG7;
//! fn set(f: am_driver::regs::Fields<am_driver::regs::fields::GRBM_CNTL>) {
//!     let _ = f.read_timeout(0xff);
//! }
//! ```
//! ```compile_fail
//! // A misspelt register is a compile error, not a run-time surprise.
//! let _ = am_driver::regs::gc::SCRATCH_REG77;
//! ```
//! ```compile_fail
//! // So is a misspelt field.
//! fn set(f: am_driver::regs::Fields<am_driver::regs::fields::GRBM_CNTL>) {
//!     let _ = f.read_timeout_(0xff);
//! }
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use am_autogen::regs::{self as generated, RegIp};
use am_isa::sync::lock;

use crate::*;

/// A register's entry in one version's table (offset, base index, fields, reset value).
pub use am_autogen::regs::Register as RegDef;
pub use am_autogen::regs::{
    Encoded, Field, Fields, Reg, RegTable, alt, fields, gc, hdp, mmhub, mp, nbio, osssys, sdma,
    smuio,
};

/// One block's tables at its discovered version, and the bases of its live instances.
struct Block {
    ip: HwIp,
    version: IpVersion,
    table: Option<&'static RegTable>,
    /// Base addresses of each live instance.
    bases: BTreeMap<u8, Vec<u64>>,
}

impl Block {
    fn label(&self) -> String {
        format!("{} {}", hwip::name(self.ip), self.version)
    }
}

/// The blocks whose registers have generated tables, and which table family describes
/// each. MP0 and MP1 share the `mp` tables, each at its own version.
const BLOCKS: &[(HwIp, RegIp)] = &[
    (HwIp::GC, RegIp::Gc),
    (HwIp::MMHUB, RegIp::Mmhub),
    (HwIp::OSSSYS, RegIp::Osssys),
    (HwIp::NBIO, RegIp::Nbio),
    (HwIp::MP0, RegIp::Mp),
    (HwIp::MP1, RegIp::Mp),
    (HwIp::HDP, RegIp::Hdp),
    (HwIp::SMUIO, RegIp::Smuio),
    (HwIp::SDMA0, RegIp::Sdma),
];

/// The block whose instance bases a register of table family `family` is relative to: the
/// family's block, and for the shared `mp` tables MP1 for `MP1_*` registers, MP0 for the rest.
fn block_of(family: RegIp, name: &str) -> HwIp {
    match family {
        RegIp::Mp if name.starts_with("MP1") => HwIp::MP1,
        f => BLOCKS.iter().find(|b| b.1 == f).map_or(HwIp::GC, |b| b.0),
    }
}

/// The table for a discovered version: the generated one of that exact version (or its
/// declared alias), else the newest of the same major version that is not newer than the
/// hardware, as the reference driver's `import_module` does.
pub fn select_table(ip: RegIp, version: IpVersion) -> Option<&'static RegTable> {
    generated::table(ip, version).or_else(|| {
        let older = ip.tables().iter().copied();
        older
            .filter(|t| t.version().major == version.major && t.version() <= version)
            .max_by_key(|t| t.version())
    })
}

/// The registers of a device: tables resolved for its IP versions, addresses for each
/// instance, and access through BAR5 (direct or indirect).
pub struct Regs {
    device: String,
    mmio: Arc<dyn Bar>,
    blocks: BTreeMap<HwIp, Block>,
    /// Index/data pairs (RSMU, PCIE INDEX2) must not interleave.
    indirect: Mutex<()>,
}

impl Regs {
    /// Resolve the register tables for every IP block discovery lists. Blocks without a
    /// generated table are kept (their registers are errors naming the version).
    pub fn new(dev: &dyn PciDevice, discovery: &Discovery) -> Result<Self> {
        Self::with_mmio(dev.name(), dev.bar(5)?, discovery)
    }

    /// [`Regs::new`] over a given BAR5 mapping (the driver hands in a counting wrapper).
    pub fn with_mmio(device: &str, mmio: Arc<dyn Bar>, discovery: &Discovery) -> Result<Self> {
        let blocks = BLOCKS.iter().filter_map(|&(ip, family)| {
            let version = discovery.version(ip)?;
            let instances = discovery.instances(ip).into_iter();
            let bases = instances.filter_map(|i| Some((i, discovery.entry(ip, i)?.bases.clone())));
            let table = select_table(family, version);
            let source = table.map_or("no", |t| t.source());
            tracing::debug!(
                "{device}: {} {version} uses {source} register table",
                hwip::name(ip)
            );
            Some((
                ip,
                Block {
                    ip,
                    version,
                    table,
                    bases: bases.collect(),
                },
            ))
        });
        Ok(Self {
            device: device.into(),
            mmio,
            blocks: blocks.collect(),
            indirect: Mutex::default(),
        })
    }

    fn err(&self, kind: ErrorKind) -> Error {
        Error::new(&self.device, kind)
    }

    /// Discovered version of a block.
    pub fn version(&self, ip: HwIp) -> Option<IpVersion> {
        self.blocks.get(&ip).map(|b| b.version)
    }

    /// Live instances of a block.
    pub fn instances(&self, ip: HwIp) -> BTreeSet<u8> {
        let block = self.blocks.get(&ip);
        block
            .map(|b| b.bases.keys().copied().collect())
            .unwrap_or_default()
    }

    /// Whether the device's version of the block has this register.
    pub fn has<F>(&self, name: Reg<F>) -> bool {
        self.reg(name).is_ok()
    }

    /// Look a register up in the table of the block's discovered version.
    pub fn reg<F>(&self, name: Reg<F>) -> Result<Register<'_>> {
        self.lookup(block_of(name.ip(), name.name()), name.name(), |t| {
            t.get(name)
        })
    }

    /// The first of `alts` the device has (registers renamed between versions); when it has
    /// none, the error of the first.
    pub fn first<F>(&self, alts: impl IntoIterator<Item = Reg<F>>) -> Result<Reg<F>> {
        let mut missing = None;
        for r in alts {
            match self.reg(r) {
                Ok(_) => return Ok(r),
                Err(e) => _ = missing.get_or_insert(e),
            }
        }
        Err(missing.unwrap_or_else(|| {
            self.err(ErrorKind::NoSuchRegister {
                register: "(none listed)".into(),
                ip: String::new(),
            })
        }))
    }

    /// The value of the fields `set` names (every other bit 0) and the bits they cover.
    pub fn encode<F>(
        &self,
        reg: Reg<F>,
        set: impl FnOnce(Fields<F>) -> Fields<F>,
    ) -> Result<Encoded> {
        let r = self.reg(reg)?;
        set(Fields::new(r.def))
            .finish()
            .map_err(|e| self.err(e.into()))
    }

    /// The field `pick` names (the value it sets there does not matter) of `value`, a value
    /// of `reg`.
    pub fn get<F>(
        &self,
        reg: Reg<F>,
        value: u32,
        pick: impl FnOnce(Fields<F>) -> Fields<F>,
    ) -> Result<u32> {
        let mask = self.encode(reg, pick)?.mask;
        Ok((value & mask)
            .checked_shr(mask.trailing_zeros())
            .unwrap_or(0))
    }

    /// Look a register up by its name in the table family `family` (for names built at run
    /// time, such as a hub's `GCVM_…`/`MMVM_…` or an engine's `SDMA0_…`/`SDMA1_…`).
    pub fn named(&self, family: RegIp, name: &str) -> Result<Register<'_>> {
        self.lookup(block_of(family, name), name, |t| t.by_name(name))
    }

    /// The register `find` picks from the table of block `ip`, or an error naming what is
    /// missing: the block, its table, or the register in it.
    fn lookup(
        &self,
        ip: HwIp,
        name: &str,
        find: impl FnOnce(&'static RegTable) -> Option<RegDef>,
    ) -> Result<Register<'_>> {
        let block = self.blocks.get(&ip).ok_or_else(|| {
            self.err(ErrorKind::NoIpInstance {
                ip: hwip::name(ip).into(),
                instance: 0,
                present: " (discovery does not list the block)".into(),
            })
        })?;
        let table = block
            .table
            .ok_or_else(|| self.err(ErrorKind::NoRegisterTable { ip: block.label() }))?;
        let def = find(table).ok_or_else(|| {
            self.err(ErrorKind::NoSuchRegister {
                register: name.into(),
                ip: block.label(),
            })
        })?;
        Ok(Register {
            regs: self,
            block,
            def,
        })
    }

    /// Read the register at a dword address: directly in BAR5, else through the RSMU
    /// index/data pair.
    pub fn rreg(&self, addr: u64) -> Result<u32> {
        self.access(addr, None)
    }

    /// Write the register at a dword address (direct or through RSMU).
    pub fn wreg(&self, addr: u64, value: u32) -> Result<()> {
        self.access(addr, Some(value)).map(drop)
    }

    fn access(&self, addr: u64, write: Option<u32>) -> Result<u32> {
        if addr < self.mmio.len() / 4 {
            return access32(&*self.mmio, addr * 4, write);
        }
        let index = u32::try_from(addr * 4).map_err(|_| {
            self.err(ErrorKind::RegisterOutOfReach {
                register: format!("{addr:#x}"),
                addr,
                reason: "past BAR5 and past the 32-bit RSMU index".into(),
            })
        })?;
        let steps = [
            IndexStep::Aim {
                offset: self.direct(nbio::BIF_BX_PF0_RSMU_INDEX)?,
                value: index,
            },
            data_step(self.direct(nbio::BIF_BX_PF0_RSMU_DATA)?, write),
        ];
        let _guard = lock(&self.indirect);
        self.mmio.indexed(&steps).map(|read| write.unwrap_or(read))
    }

    /// The BAR5 byte offset of an index/data register (instance 0), which must itself be
    /// inside BAR5: it is the way past it.
    fn direct<F>(&self, reg: Reg<F>) -> Result<u64> {
        let (addr, len) = (self.reg(reg)?.addr(0)?, self.mmio.len());
        if addr >= len / 4 {
            return Err(self.err(ErrorKind::RegisterOutOfReach {
                register: reg.name().into(),
                addr,
                reason: format!("an index/data register must be inside BAR5 ({len:#x} bytes)"),
            }));
        }
        Ok(addr * 4)
    }

    /// The PCIE INDEX2 address of a register on an AID: `reg * 4`, plus on AIDs other than
    /// 0 the AID in bits 32–33 and bit 34 set (NBIO 7.9).
    pub fn pcie_index2_addr(addr: u64, aid: u8) -> u64 {
        match aid {
            0 => addr * 4,
            _ => (addr * 4) | (u64::from(aid & 3) << 32) | (1 << 34),
        }
    }

    /// Access a register of an AID through PCIE INDEX2/DATA2 (dword address `addr`).
    fn pcie_index2(&self, addr: u64, aid: u8, write: Option<u32>) -> Result<u32> {
        let full = Self::pcie_index2_addr(addr, aid);
        let mut steps = vec![IndexStep::Aim {
            offset: self.direct(nbio::BIF_BX0_PCIE_INDEX2)?,
            value: lo32(full),
        }];
        // Only AIDs other than 0 need the high index; then it is cleared again after the
        // access: it stays latched, and a later plain access must go to AID 0.
        let hi = match hi32(full) {
            0 => None,
            _ => Some(self.direct(nbio::BIF_BX0_PCIE_INDEX2_HI)?),
        };
        if let Some(offset) = hi {
            steps.push(IndexStep::Aim {
                offset,
                value: hi32(full) & 0xff,
            });
        }
        steps.push(data_step(self.direct(nbio::BIF_BX0_PCIE_DATA2)?, write));
        if let Some(offset) = hi {
            steps.push(IndexStep::Aim { offset, value: 0 });
        }
        let _guard = lock(&self.indirect);
        self.mmio.indexed(&steps).map(|read| write.unwrap_or(read))
    }

    /// Read a register of an AID through PCIE INDEX2/DATA2 (dword address `addr`).
    pub fn rreg_pcie(&self, addr: u64, aid: u8) -> Result<u32> {
        self.pcie_index2(addr, aid, None)
    }

    /// Write a register of an AID through PCIE INDEX2/DATA2 (dword address `addr`).
    pub fn wreg_pcie(&self, addr: u64, aid: u8, value: u32) -> Result<()> {
        self.pcie_index2(addr, aid, Some(value)).map(drop)
    }
}

/// The data step of an index/data access: read, or write `write`.
fn data_step(offset: u64, write: Option<u32>) -> IndexStep {
    match write {
        Some(value) => IndexStep::Write { offset, value },
        None => IndexStep::Read { offset },
    }
}

/// A register as a trace shows it: name, block and version, instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegName {
    /// Register name (`GRBM_STATUS`).
    pub name: &'static str,
    /// Block and version (`GC 11.0.0`).
    pub ip: String,
    /// Block name alone (`GC`), what traces are aligned by.
    pub block: &'static str,
    /// Instance of the block.
    pub instance: u8,
}

/// Every register of the blocks with generated tables, by dword address, for the IP
/// versions and bases `discovery` lists (what `am trace` names BAR5 offsets with). Where
/// several names share an address (a PF's and its VFs' views of one register, aliases across
/// table families), the shortest is kept — the PF's plain name — and among equals the first
/// block in the driver's order.
pub fn address_names(discovery: &Discovery) -> BTreeMap<u64, RegName> {
    let mut names = BTreeMap::new();
    for &(ip, family) in BLOCKS {
        let Some(version) = discovery.version(ip) else {
            continue;
        };
        let Some(table) = select_table(family, version) else {
            continue;
        };
        for instance in discovery.instances(ip) {
            let Some(entry) = discovery.entry(ip, instance) else {
                continue;
            };
            for def in table.iter() {
                // The shared MP tables: MP1 bases only for MP1 registers, MP0 for the rest.
                if block_of(family, def.name()) != ip {
                    continue;
                }
                let Some(base) = entry.bases.get(usize::from(def.base_idx())) else {
                    continue;
                };
                let addr = (base & 0xffff_ffff) + u64::from(def.offset());
                let name = RegName {
                    name: def.name(),
                    ip: format!("{} {version}", hwip::name(ip)),
                    block: hwip::name(ip),
                    instance,
                };
                match names.entry(addr) {
                    std::collections::btree_map::Entry::Vacant(v) => _ = v.insert(name),
                    std::collections::btree_map::Entry::Occupied(mut o) => {
                        if name.name.len() < o.get().name.len() {
                            o.insert(name);
                        }
                    }
                }
            }
        }
    }
    names
}

/// One register of one block, resolved for the device's IP version.
#[derive(Clone, Copy)]
pub struct Register<'a> {
    regs: &'a Regs,
    block: &'a Block,
    def: RegDef,
}

impl Register<'_> {
    /// The register's name (without the `reg`/`mm` prefix).
    pub fn name(&self) -> &'static str {
        self.def.name()
    }

    /// Its table entry: offset, base index, fields, reset value.
    pub fn def(&self) -> RegDef {
        self.def
    }

    /// Block and version, as in error messages (`GC 11.0.0`).
    pub fn ip_label(&self) -> String {
        self.block.label()
    }

    /// Dword address of the register on one instance of its block.
    pub fn addr(&self, instance: u8) -> Result<u64> {
        let bases = &self.block.bases;
        let segments = bases.get(&instance).ok_or_else(|| {
            let live: Vec<_> = bases.keys().map(u8::to_string).collect();
            self.regs.err(ErrorKind::NoIpInstance {
                ip: self.ip_label(),
                instance,
                present: format!(" (live instances: {})", live.join(", ")),
            })
        })?;
        let base_idx = self.def.base_idx();
        let base = segments.get(usize::from(base_idx)).ok_or_else(|| {
            self.regs.err(ErrorKind::NoBaseAddress {
                register: self.name().into(),
                ip: self.ip_label(),
                instance,
                base_idx,
                count: segments.len(),
            })
        })?;
        // Bits above 32 of a 64-bit discovery base are ASIC-specific (AID routing); Linux
        // keeps the low half as the MMIO base, and so do we.
        Ok((base & 0xffff_ffff) + u64::from(self.def.offset()))
    }

    /// Read the register of one instance.
    pub fn read(&self, instance: u8) -> Result<u32> {
        self.regs.rreg(self.addr(instance)?)
    }

    /// Write the register of one instance.
    pub fn write(&self, instance: u8, value: u32) -> Result<()> {
        self.regs.wreg(self.addr(instance)?, value)
    }

    /// Every field of a value, in bit order.
    pub fn decode(&self, value: u32) -> Vec<(&'static str, u32)> {
        self.def.fields().map(|f| (f.name, f.get(value))).collect()
    }
}
