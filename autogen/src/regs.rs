//! Registers by name for every IP version the target ASICs need.
//!
//! Two ways in:
//! - typed names: `regs::gc::CP_HQD_ACTIVE` is a [`Reg`], one constant per register name
//!   over all versions of the IP, so a typo fails to compile. [`RegTable::get`] resolves it
//!   for one version in O(1), or gives `None` where that version lacks the register.
//! - runtime names: [`RegTable::by_name`] (binary search) and [`RegTable::iter`].
//!
//! A [`Register`] gives its dword offset within its base (`_BASE_IDX` selects which of the
//! IP instance's discovery base addresses), its fields by name and, where the headers have a
//! `*_default.h`, its reset value.
//!
//! Table encoding (written by the generator): per IP one sorted pool of register names and
//! one of field names; per version sorted registers as parallel arrays (name id, offset,
//! base index, first field), and fields packed as `name << 10 | (width - 1) << 5 | shift`,
//! with the rare mask that is not one run of bits in `odd_masks`.

use core::fmt;

/// A register name that the resolved IP version does not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegError {
    /// The version's headers lack the register (or it belongs to another IP).
    #[error("register {reg} does not exist on {ip} {version}")]
    Missing {
        /// The register asked for.
        reg: Reg,
        /// The IP of the table it was resolved in.
        ip: RegIp,
        /// The version of that table.
        version: IpVersion,
    },
    /// No table is generated for this IP version.
    #[error("no register table for {ip} {version}")]
    NoTable {
        /// The IP asked for.
        ip: RegIp,
        /// The version asked for.
        version: IpVersion,
    },
}

/// Field types of the typed registers, and `alt`: registers sharing a field type.
pub use crate::generated::regs_fields as fields;
pub use crate::generated::regs_fields::alt;
pub use crate::generated::regs_gc as gc;
pub use crate::generated::regs_hdp as hdp;
pub use crate::generated::regs_mmhub as mmhub;
pub use crate::generated::regs_mp as mp;
pub use crate::generated::regs_nbio as nbio;
pub use crate::generated::regs_osssys as osssys;
pub use crate::generated::regs_sdma as sdma;
pub use crate::generated::regs_smuio as smuio;

/// An IP block that has register tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RegIp {
    /// Graphics and compute (on GC 11 and 12 also SDMA).
    Gc,
    /// Memory hub (non-GFX clients' VM).
    Mmhub,
    /// OSS system: interrupt handler (IH).
    Osssys,
    /// North bridge I/O (BIF, doorbells, HDP flush, mailboxes).
    Nbio,
    /// MP0 (PSP) and MP1 (SMU) mailboxes; both share one table.
    Mp,
    /// Host data path.
    Hdp,
    /// SMU I/O (straps, ROM, GPIO).
    Smuio,
    /// SDMA as a separate IP (SDMA 4.4.2 of MI300).
    Sdma,
}

impl RegIp {
    /// Every IP with tables.
    pub const ALL: [RegIp; 8] = [
        RegIp::Gc,
        RegIp::Mmhub,
        RegIp::Osssys,
        RegIp::Nbio,
        RegIp::Mp,
        RegIp::Hdp,
        RegIp::Smuio,
        RegIp::Sdma,
    ];

    /// The IP's name as Linux writes it in its header directories.
    pub const fn name(self) -> &'static str {
        match self {
            RegIp::Gc => "GC",
            RegIp::Mmhub => "MMHUB",
            RegIp::Osssys => "OSSSYS",
            RegIp::Nbio => "NBIO",
            RegIp::Mp => "MP",
            RegIp::Hdp => "HDP",
            RegIp::Smuio => "SMUIO",
            RegIp::Sdma => "SDMA",
        }
    }

    /// This IP's tables, in version order.
    pub fn tables(self) -> &'static [&'static RegTable] {
        match self {
            RegIp::Gc => gc::data::TABLES,
            RegIp::Mmhub => mmhub::data::TABLES,
            RegIp::Osssys => osssys::data::TABLES,
            RegIp::Nbio => nbio::data::TABLES,
            RegIp::Mp => mp::data::TABLES,
            RegIp::Hdp => hdp::data::TABLES,
            RegIp::Smuio => smuio::data::TABLES,
            RegIp::Sdma => sdma::data::TABLES,
        }
    }

    fn name_pool(self) -> (&'static str, &'static [u32]) {
        match self {
            RegIp::Gc => (gc::data::NAMES, gc::data::NAME_OFFS),
            RegIp::Mmhub => (mmhub::data::NAMES, mmhub::data::NAME_OFFS),
            RegIp::Osssys => (osssys::data::NAMES, osssys::data::NAME_OFFS),
            RegIp::Nbio => (nbio::data::NAMES, nbio::data::NAME_OFFS),
            RegIp::Mp => (mp::data::NAMES, mp::data::NAME_OFFS),
            RegIp::Hdp => (hdp::data::NAMES, hdp::data::NAME_OFFS),
            RegIp::Smuio => (smuio::data::NAMES, smuio::data::NAME_OFFS),
            RegIp::Sdma => (sdma::data::NAMES, sdma::data::NAME_OFFS),
        }
    }
}

impl fmt::Display for RegIp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An IP version as the discovery table gives it (major.minor.revision).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IpVersion {
    /// Major version.
    pub major: u8,
    /// Minor version.
    pub minor: u8,
    /// Revision.
    pub rev: u8,
}

impl IpVersion {
    /// `IpVersion::new(11, 0, 0)` is GC 11.0.0.
    pub const fn new(major: u8, minor: u8, rev: u8) -> Self {
        IpVersion { major, minor, rev }
    }

    /// The form firmware file and header names use: `11_0_0`.
    pub fn file_tag(self) -> String {
        format!("{}_{}_{}", self.major, self.minor, self.rev)
    }
}

impl fmt::Display for IpVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.rev)
    }
}

/// Versions that use another version's tables unchanged: (IP, version, served by).
///
/// MP 13.0.14 (MI350X) has no headers in Linux 6.12 and keeps the MP 13.0.6 mailbox
/// registers (Linux drives both with `smu_v13_0_6` and `psp_v13_0`).
pub const ALIASES: &[(RegIp, IpVersion, IpVersion)] = &[(
    RegIp::Mp,
    IpVersion::new(13, 0, 14),
    IpVersion::new(13, 0, 6),
)];

/// Like [`table`], with an error naming the IP version when none is generated.
pub fn require_table(ip: RegIp, version: IpVersion) -> Result<&'static RegTable, RegError> {
    table(ip, version).ok_or(RegError::NoTable { ip, version })
}

/// The table of one IP version (following [`ALIASES`]), or `None` if none is generated.
pub fn table(ip: RegIp, version: IpVersion) -> Option<&'static RegTable> {
    let version = ALIASES
        .iter()
        .find(|(i, v, _)| *i == ip && *v == version)
        .map_or(version, |(_, _, to)| *to);
    ip.tables().iter().copied().find(|t| t.version == version)
}

/// Every generated table.
pub fn tables() -> impl Iterator<Item = &'static RegTable> {
    RegIp::ALL
        .into_iter()
        .flat_map(|ip| ip.tables().iter().copied())
}

/// A register name of one IP, valid for any version of it; resolve it with a [`RegTable`].
///
/// `F` is the register's field type for the registers of `autogen/typed-regs.txt`
/// ([`fields`]): [`Fields<F>`] has a setter per field. Other registers are `Reg<()>`.
pub struct Reg<F = ()>(
    pub(crate) RegIp,
    pub(crate) u16,
    core::marker::PhantomData<fn() -> F>,
);

impl<F> Reg<F> {
    pub(crate) const fn new(ip: RegIp, id: u16) -> Self {
        Reg(ip, id, core::marker::PhantomData)
    }

    /// The IP the register belongs to.
    pub const fn ip(self) -> RegIp {
        self.0
    }

    /// The register's name (without Linux's `reg` prefix).
    pub fn name(self) -> &'static str {
        let (names, offs) = self.0.name_pool();
        pool_str(names, offs, usize::from(self.1))
    }

    /// The same register without its field type.
    pub const fn untyped(self) -> Reg {
        Reg::new(self.0, self.1)
    }
}

impl<F> Clone for Reg<F> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<F> Copy for Reg<F> {}
impl<F, G> PartialEq<Reg<G>> for Reg<F> {
    fn eq(&self, o: &Reg<G>) -> bool {
        (self.0, self.1) == (o.0, o.1)
    }
}
impl<F> Eq for Reg<F> {}
impl<F> PartialOrd for Reg<F> {
    fn partial_cmp(&self, o: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<F> Ord for Reg<F> {
    fn cmp(&self, o: &Self) -> core::cmp::Ordering {
        (self.0, self.1).cmp(&(o.0, o.1))
    }
}
impl<F> core::hash::Hash for Reg<F> {
    fn hash<H: core::hash::Hasher>(&self, h: &mut H) {
        (self.0, self.1).hash(h)
    }
}

impl<F> fmt::Debug for Reg<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}::{}", self.0, self.name())
    }
}

impl<F> fmt::Display for Reg<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn pool_str(pool: &'static str, offs: &'static [u32], i: usize) -> &'static str {
    match (offs.get(i), offs.get(i + 1)) {
        (Some(&a), Some(&b)) => pool.get(a as usize..b as usize).unwrap_or(""),
        _ => "",
    }
}

/// The registers of one IP version. Built by the generator; see the module docs.
pub struct RegTable {
    pub(crate) ip: RegIp,
    pub(crate) version: IpVersion,
    pub(crate) source: &'static str,
    pub(crate) names: &'static str,
    pub(crate) name_offs: &'static [u32],
    pub(crate) field_names: &'static str,
    pub(crate) field_name_offs: &'static [u32],
    pub(crate) ids: &'static [u16],
    pub(crate) offsets: &'static [u32],
    pub(crate) base_idx: &'static [u8],
    pub(crate) field_starts: &'static [u32],
    pub(crate) fields: &'static [u32],
    pub(crate) by_id: &'static [u16],
    pub(crate) odd_masks: &'static [(u32, u32)],
    pub(crate) defaults: &'static [(u32, u32)],
}

impl fmt::Debug for RegTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RegTable({} {}, {} registers)",
            self.ip,
            self.version,
            self.len()
        )
    }
}

impl RegTable {
    /// The IP of this table.
    pub fn ip(&self) -> RegIp {
        self.ip
    }

    /// The IP version of this table.
    pub fn version(&self) -> IpVersion {
        self.version
    }

    /// The Linux header set it was generated from, e.g. `gc_11_0_0`.
    pub fn source(&self) -> &'static str {
        self.source
    }

    /// Number of registers.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the table has no registers.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Resolves a typed register name in O(1); `None` if this version lacks it or `reg`
    /// belongs to another IP.
    pub fn get<F>(&'static self, reg: Reg<F>) -> Option<Register> {
        if reg.0 != self.ip {
            return None;
        }
        let idx = *self.by_id.get(usize::from(reg.1))?;
        (idx != u16::MAX).then_some(Register { table: self, idx })
    }

    /// Like [`get`](Self::get), with an error naming the register and IP version.
    pub fn resolve<F>(&'static self, reg: Reg<F>) -> Result<Register, RegError> {
        self.get(reg).ok_or(RegError::Missing {
            reg: reg.untyped(),
            ip: self.ip,
            version: self.version,
        })
    }

    /// Looks a register up by its name (without the `reg` prefix).
    pub fn by_name(&'static self, name: &str) -> Option<Register> {
        let i = self
            .ids
            .binary_search_by(|&id| pool_str(self.names, self.name_offs, usize::from(id)).cmp(name))
            .ok()?;
        Some(Register {
            table: self,
            idx: u16::try_from(i).ok()?,
        })
    }

    /// Every register, sorted by name.
    pub fn iter(&'static self) -> impl ExactSizeIterator<Item = Register> {
        // The generator guarantees fewer than u16::MAX registers per table.
        (0..self.ids.len() as u16).map(move |idx| Register { table: self, idx })
    }
}

/// A register of one IP version.
#[derive(Clone, Copy)]
pub struct Register {
    table: &'static RegTable,
    idx: u16,
}

impl Register {
    fn i(&self) -> usize {
        usize::from(self.idx)
    }

    /// The table (IP version) this register was resolved in.
    pub fn table(&self) -> &'static RegTable {
        self.table
    }

    /// The version-independent name of this register.
    pub fn reg(&self) -> Reg {
        Reg::new(
            self.table.ip,
            self.table.ids.get(self.i()).copied().unwrap_or(u16::MAX),
        )
    }

    /// The register's name (without the `reg` prefix).
    pub fn name(&self) -> &'static str {
        self.reg().name()
    }

    /// Dword offset from the base address its [`base_idx`](Self::base_idx) selects.
    pub fn offset(&self) -> u32 {
        self.table.offsets.get(self.i()).copied().unwrap_or(0)
    }

    /// Which of the IP instance's base addresses (from discovery) the offset is relative to.
    pub fn base_idx(&self) -> u8 {
        self.table.base_idx.get(self.i()).copied().unwrap_or(0)
    }

    /// The reset value, where the headers have a `*_default.h` for this version.
    pub fn reset_default(&self) -> Option<u32> {
        let i = self.idx as u32;
        self.table
            .defaults
            .binary_search_by_key(&i, |&(r, _)| r)
            .ok()
            .and_then(|k| self.table.defaults.get(k))
            .map(|&(_, v)| v)
    }

    fn field_range(&self) -> core::ops::Range<usize> {
        let s = &self.table.field_starts;
        let a = s.get(self.i()).copied().unwrap_or(0) as usize;
        let b = s.get(self.i() + 1).copied().unwrap_or(0) as usize;
        a..b.max(a)
    }

    fn field_at(&self, k: usize) -> Field {
        let t = self.table;
        let packed = t.fields.get(k).copied().unwrap_or(0);
        let shift = (packed & 0x1f) as u8;
        let width = ((packed >> 5) & 0x1f) + 1;
        let name = pool_str(t.field_names, t.field_name_offs, (packed >> 10) as usize);
        let run = if width == 32 {
            u32::MAX
        } else {
            (1u32 << width) - 1
        };
        let mask = match t.odd_masks.iter().find(|&&(i, _)| i as usize == k) {
            Some(&(_, m)) => m,
            None => run << shift,
        };
        Field { name, shift, mask }
    }

    /// The register's fields, in bit order.
    pub fn fields(&self) -> impl ExactSizeIterator<Item = Field> + '_ {
        self.field_range().map(move |k| self.field_at(k))
    }

    /// A field by name.
    pub fn field(&self, name: &str) -> Option<Field> {
        self.fields().find(|f| f.name == name)
    }
}

impl fmt::Debug for Register {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} @ {:#x} (base {})",
            self.table.ip,
            self.table.version,
            self.name(),
            self.offset(),
            self.base_idx()
        )
    }
}

/// A field of a register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// Field name as in `REG__FIELD__SHIFT`.
    pub name: &'static str,
    /// Bit position of the field's lowest bit.
    pub shift: u8,
    /// Mask of the field within the register (already shifted).
    pub mask: u32,
}

impl Field {
    /// The field's value within a register value.
    pub const fn get(&self, reg: u32) -> u32 {
        (reg & self.mask) >> self.shift
    }

    /// `reg` with this field set to `val` (bits of `val` beyond the field are dropped).
    pub const fn set(&self, reg: u32, val: u32) -> u32 {
        (reg & !self.mask) | ((val << self.shift) & self.mask)
    }
}

/// The fields of one register value being built: `F`'s setters (generated, one per field
/// name) look the field up in the resolved register's version, so a field the version lacks,
/// or a value wider than its field, is a [`FieldError`] when the value is taken.
#[must_use]
pub struct Fields<F> {
    reg: Register,
    value: u32,
    mask: u32,
    err: Option<FieldError>,
    _f: core::marker::PhantomData<fn() -> F>,
}

/// A register value with named fields set: the value and the bits those fields cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Encoded {
    /// The fields' values in place, every other bit 0.
    pub value: u32,
    /// The bits of the fields named.
    pub mask: u32,
}

/// A typed field the resolved IP version cannot take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    /// The version's register has no such field.
    #[error("register {reg} has no field {field} on {ip} {version}")]
    Missing {
        /// The register.
        reg: Reg,
        /// The field asked for.
        field: &'static str,
        /// IP of the table.
        ip: RegIp,
        /// Version of the table.
        version: IpVersion,
    },
    /// The value is wider than the field.
    #[error("{value:#x} does not fit the {width}-bit field {field} of {reg} on {ip} {version}")]
    Overflow {
        /// The register.
        reg: Reg,
        /// The field.
        field: &'static str,
        /// The value asked for.
        value: u32,
        /// The field's width in bits.
        width: u32,
        /// IP of the table.
        ip: RegIp,
        /// Version of the table.
        version: IpVersion,
    },
}

impl<F> Fields<F> {
    /// No field set yet, for register `reg` (the caller resolved it from a `Reg<F>`).
    pub fn new(reg: Register) -> Self {
        Fields {
            reg,
            value: 0,
            mask: 0,
            err: None,
            _f: core::marker::PhantomData,
        }
    }

    /// Set field `name` to `v` (the generated setters call this).
    pub fn set(mut self, name: &'static str, v: u32) -> Self {
        if self.err.is_some() {
            return self;
        }
        let t = self.reg.table;
        match self.reg.field(name) {
            // A value fits when it survives a trip through the field (masks need not be one
            // run of bits).
            Some(f) if f.get(f.set(0, v)) == v => {
                self.value = f.set(self.value, v);
                self.mask |= f.mask;
            }
            Some(f) => {
                self.err = Some(FieldError::Overflow {
                    reg: self.reg.reg(),
                    field: f.name,
                    value: v,
                    width: f.mask.count_ones(),
                    ip: t.ip,
                    version: t.version,
                })
            }
            None => {
                self.err = Some(FieldError::Missing {
                    reg: self.reg.reg(),
                    field: name,
                    ip: t.ip,
                    version: t.version,
                })
            }
        }
        self
    }

    /// The value built, or the first field that failed.
    pub fn finish(self) -> Result<Encoded, FieldError> {
        match self.err {
            Some(e) => Err(e),
            None => Ok(Encoded {
                value: self.value,
                mask: self.mask,
            }),
        }
    }
}
