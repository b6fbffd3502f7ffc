//! IP discovery: what the GPU is made of, read from the table the firmware leaves at the top
//! of VRAM.
//!
//! The table sits at `vram_size - 64 KiB` and is 10 KiB long (`discovery.h`): a
//! `binary_header` with a list of sub-tables, the IP discovery table proper (`"IPDS"`: dies,
//! each a list of `ip_v4` entries with the hardware id, instance, version and register base
//! addresses of one IP block), the harvest table (instances fused off) and `gc_info` (shader
//! engine and CU counts). VRAM size comes from `RCC_CONFIG_MEMSIZE`, a register at a fixed
//! address, since no IP base is known yet.
//!
//! Every read is bounds-checked against the table; a malformed table is an
//! [`crate::ErrorKind::MalformedDiscovery`] naming the structure and its offset, never a panic.

use std::collections::BTreeSet;
use std::fmt::Display;
use std::sync::Arc;

use zerocopy::FromBytes;

use crate::*;

/// `mmRCC_CONFIG_MEMSIZE`: VRAM size in MiB, a dword index in BAR5 valid before discovery.
pub const RCC_CONFIG_MEMSIZE: u64 = 0xde3;
/// `mmMM_INDEX`: VRAM byte address (bit 31 selects VRAM) for the `MM_DATA` window.
pub const MM_INDEX: u64 = 0x0;
/// `mmMM_DATA`: the dword of VRAM `MM_INDEX`/`MM_INDEX_HI` point at.
pub const MM_DATA: u64 = 0x1;
/// `mmMM_INDEX_HI`: VRAM address bits 31 and up.
pub const MM_INDEX_HI: u64 = 0x6;

/// Distance of the discovery table from the top of VRAM (`DISCOVERY_TMR_OFFSET`).
pub const DISCOVERY_TMR_OFFSET: u64 = 64 << 10;
/// Size of the discovery table (`DISCOVERY_TMR_SIZE`).
pub const DISCOVERY_TMR_SIZE: usize = 10 << 10;

/// The discovery structures of `discovery.h`, packed, little-endian.
use am_autogen::discovery as layout;

/// Bytes of an IP entry before its base addresses: `ip`, `ip_v3` and `ip_v4` all have an
/// 8-byte head, the last byte holding `sub_revision` (low nibble) and `variant` (high nibble).
pub const IP_ENTRY_HEAD: usize = size_of::<layout::ip_v4>();
const _: () = assert!(IP_ENTRY_HEAD == 8);

/// An IP block version as discovery reports it (`major.minor.rev`); the same type the
/// generated register tables are keyed by.
pub use am_autogen::regs::IpVersion;

/// One `ip_v4` entry: one instance of one IP block on one die.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpEntry {
    /// Index of the die whose list holds the entry.
    pub die: u16,
    /// Hardware id (`soc15_hw_ip.h`, e.g. `GC_HWID` = 11).
    pub hw_id: u16,
    /// Instance number.
    pub instance: u8,
    /// Version.
    pub version: IpVersion,
    /// `variant` nibble of the entry.
    pub variant: u8,
    /// `sub_revision` nibble of the entry.
    pub sub_revision: u8,
    /// Register base addresses (dword addresses), one per segment (`base_idx`).
    pub bases: Vec<u64>,
}

/// One harvest-table entry: an instance of an IP block that is fused off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct HarvestEntry {
    /// Hardware id.
    pub hw_id: u16,
    /// Instance number.
    pub instance: u8,
}

/// The graphics configuration of `gc_info` (v1.x or v2.x).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct GcInfo {
    /// Table version (major, minor).
    pub version: (u16, u16),
    /// Shader engines (per XCC on multi-XCC parts).
    pub num_se: u32,
    /// Shader arrays (SH/SA) per shader engine.
    pub num_sh_per_se: u32,
    /// Compute units per shader array (v1: two per WGP).
    pub num_cu_per_sh: u32,
    /// Wave size (32 or 64).
    pub wave_size: u32,
    /// Maximum waves per SIMD.
    pub max_waves_per_simd: u32,
    /// LDS size per CU, as the table gives it (KiB).
    pub lds_size: u32,
}

impl GcInfo {
    /// CUs of one XCC: SE × SH per SE × CU per SH.
    pub fn cus_per_xcc(&self) -> u64 {
        u64::from(self.num_se) * u64::from(self.num_sh_per_se) * u64::from(self.num_cu_per_sh)
    }
}

/// The parsed discovery table, independent of where it was read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscoveryTable {
    /// Whether `binary_checksum` matches the byte sum of the binary (a warning only: the
    /// reference driver does not check it).
    pub checksum_valid: bool,
    /// Whether `ip_v4` entries carry 64-bit base addresses.
    pub base_addr_64_bit: bool,
    /// Number of dies.
    pub num_dies: u16,
    /// Every IP entry of every die, in table order.
    pub ips: Vec<IpEntry>,
    /// Harvested instances (empty when there is no harvest table).
    pub harvest: Vec<HarvestEntry>,
    /// The GC configuration, when the table has one.
    pub gc_info: Option<GcInfo>,
}

/// Bounds-checked reads of packed structures from the raw table.
struct Reader<'a> {
    device: &'a str,
    bytes: &'a [u8],
}

impl Reader<'_> {
    fn malformed(&self, what: impl Display, offset: usize, reason: String) -> Error {
        Error::new(
            self.device,
            ErrorKind::MalformedDiscovery {
                what: what.to_string(),
                offset: offset as u64,
                reason,
            },
        )
    }

    /// Read a `T` at `offset`; a structure running past the table is an error naming it.
    fn get<T: FromBytes>(&self, offset: usize, what: impl Display) -> Result<T> {
        let read = self
            .bytes
            .get(offset..)
            .and_then(|b| T::read_from_prefix(b).ok());
        read.map(|(t, _)| t).ok_or_else(|| {
            let (len, size) = (size_of::<T>(), self.bytes.len());
            let reason = format!("{len} bytes do not fit in the {size}-byte table");
            self.malformed(what, offset, reason)
        })
    }

    /// Read a header at `offset` whose signature (or table id) must be `expected`: every
    /// header of `discovery.h` starts with it, as a dword. The error names the field (`what`;
    /// the structure is its part before the first `.` or space) and shows what the table
    /// holds.
    fn header<T: FromBytes>(&self, offset: usize, what: &'static str, expected: u32) -> Result<T> {
        let structure = what.split(['.', ' ']).next().unwrap_or(what);
        let found: u32 = self.get(offset, structure)?;
        if found == expected {
            return self.get(offset, structure);
        }
        let head: Vec<_> = self
            .bytes
            .iter()
            .take(16)
            .map(|b| format!("{b:02x}"))
            .collect();
        let kind = ErrorKind::DiscoverySignature {
            what,
            offset: offset as u64,
            found,
            expected,
            head: head.join(" "),
            hint: signature_hint(self.bytes),
        };
        Err(Error::new(self.device, kind))
    }
}

/// Explain what a table full of one byte value means.
fn signature_hint(bytes: &[u8]) -> &'static str {
    match bytes.first() {
        Some(&b) if bytes.iter().any(|&x| x != b) => "",
        Some(0xff) => {
            "; it reads all 0xFF: VRAM is gated (a VF without init access, a device in reset, or BAR0 not enabled)"
        }
        Some(0) => "; it reads all zeros: the firmware has not written a discovery table",
        _ => "",
    }
}

impl DiscoveryTable {
    /// Parse a discovery table (the 10 KiB read from `vram_size - 64 KiB`). `device` names
    /// the device in errors.
    pub fn parse(device: &str, bytes: &[u8]) -> Result<Self> {
        let r = Reader { device, bytes };
        let bhdr = r.header::<layout::binary_header>(
            0,
            "binary_header.binary_signature",
            layout::BINARY_SIGNATURE,
        )?;
        let table_list = bhdr.table_list;
        let table_offset = |table: u32| usize::from(table_list[table as usize].offset);

        let ip_off = table_offset(layout::IP_DISCOVERY);
        let ihdr = r.header::<layout::ip_discovery_header>(
            ip_off,
            "ip_discovery_header.signature",
            layout::DISCOVERY_TABLE_SIGNATURE,
        )?;
        // The 64-bit flag shares its byte with the padding of versions 1-3 (`discovery.h`).
        let flags: layout::ip_discovery_header__bindgen_ty_1__bindgen_ty_1 = r.get(
            ip_off + std::mem::offset_of!(layout::ip_discovery_header, __bindgen_anon_1),
            "ip_discovery_header flags",
        )?;
        let base_addr_64_bit = { ihdr.version } >= 4 && flags.base_addr_64_bit() != 0;
        let width = if base_addr_64_bit { 8 } else { 4 };
        let (num_dies, die_info) = (ihdr.num_dies, ihdr.die_info);
        let dies = die_info.get(..usize::from(num_dies)).ok_or_else(|| {
            let reason = format!("num_dies is {num_dies}, at most {} fit", die_info.len());
            r.malformed("ip_discovery_header", ip_off, reason)
        })?;

        let mut ips = Vec::new();
        for (die, info) in (0..).zip(dies) {
            let mut off = usize::from(info.die_offset);
            let dhdr: layout::die_header = r.get(off, format_args!("die_header of die {die}"))?;
            off += size_of::<layout::die_header>();
            for n in 0..dhdr.num_ips {
                let ip: layout::ip_v4 = r.get(off, format_args!("ip_v4 entry {n} of die {die}"))?;
                off += IP_ENTRY_HEAD;
                let mut bases = vec![];
                for i in 0..ip.num_base_address {
                    let what = format_args!("base address {i} of ip_v4 entry {n} of die {die}");
                    bases.push(if base_addr_64_bit {
                        r.get(off, what)?
                    } else {
                        r.get::<u32>(off, what)?.into()
                    });
                    off += width;
                }
                ips.push(IpEntry {
                    die,
                    hw_id: ip.hw_id,
                    instance: ip.instance_number,
                    version: IpVersion::new(ip.major, ip.minor, ip.revision),
                    variant: ip.variant(),
                    sub_revision: ip.sub_revision(),
                    bases,
                });
            }
        }

        Ok(Self {
            checksum_valid: binary_checksum_valid(&bhdr, bytes),
            base_addr_64_bit,
            num_dies,
            ips,
            harvest: parse_harvest(&r, table_offset(layout::HARVEST_INFO))?,
            gc_info: parse_gc_info(&r, table_offset(layout::GC))?,
        })
    }
}

/// `binary_checksum` is the 16-bit byte sum of the bytes after the checksum field, up to
/// `binary_size`. A size that ends inside the header covers no table (Linux's
/// `amdgpu_discovery_init` then sums a wrapped-around length and refuses the binary): not
/// valid, even with a zero checksum.
fn binary_checksum_valid(bhdr: &layout::binary_header, bytes: &[u8]) -> bool {
    let start = std::mem::offset_of!(layout::binary_header, binary_checksum) + 2;
    let data = bytes.get(start..usize::from(bhdr.binary_size));
    data.filter(|d| !d.is_empty()).is_some_and(|d| {
        d.iter().fold(0u16, |sum, &b| sum.wrapping_add(b.into())) == bhdr.binary_checksum
    })
}

/// The harvest table: a header, then 32 `{hw_id, instance}` entries ending at the first
/// zero hardware id.
fn parse_harvest(r: &Reader<'_>, off: usize) -> Result<Vec<HarvestEntry>> {
    if off == 0 {
        return Ok(Vec::new());
    }
    let table = r.header::<layout::harvest_table>(
        off,
        "harvest_table.signature (\"HARV\")",
        layout::HARVEST_TABLE_SIGNATURE,
    )?;
    let list = table.list;
    Ok(list
        .iter()
        .take_while(|e| e.hw_id != 0)
        .map(|e| HarvestEntry {
            hw_id: e.hw_id,
            instance: e.number_instance,
        })
        .collect())
}

/// `gc_info` v1.x (counts in WGPs per SA) or v2.x (CUs per SH).
fn parse_gc_info(r: &Reader<'_>, off: usize) -> Result<Option<GcInfo>> {
    if off == 0 {
        return Ok(None);
    }
    let hdr = r.header::<layout::gpu_info_header>(
        off,
        "gc_info header.table_id (\"GC\")",
        layout::GC_TABLE_ID,
    )?;
    let version = (hdr.version_major, hdr.version_minor);
    // The two versions share the fields the driver reads, but not their places.
    macro_rules! gc_info {
        ($t:ident, $sh_per_se:ident, |$g:ident| $cu_per_sh:expr) => {{
            let $g: layout::$t = r.get(off, stringify!($t))?;
            GcInfo {
                version,
                num_se: $g.gc_num_se,
                num_sh_per_se: $g.$sh_per_se,
                num_cu_per_sh: $cu_per_sh,
                wave_size: $g.gc_wave_size,
                max_waves_per_simd: $g.gc_max_waves_per_simd,
                lds_size: $g.gc_lds_size,
            }
        }};
    }
    Ok(Some(match version.0 {
        // A WGP is two CUs.
        1 => gc_info!(gc_info_v1_0, gc_num_sa_per_se, |g| (g.gc_num_wgp0_per_sa)
            .saturating_add(g.gc_num_wgp1_per_sa)
            .saturating_mul(2)),
        2 => gc_info!(gc_info_v2_0, gc_num_sh_per_se, |g| g.gc_num_cu_per_sh),
        _ => {
            let reason = format!("version {}.{} is neither 1.x nor 2.x", version.0, version.1);
            return Err(r.malformed("gc_info header", off, reason));
        }
    }))
}

/// Everything discovery tells about a device: VRAM, how to reach it, and its IP blocks.
#[derive(Clone, Debug)]
pub struct Discovery {
    /// Device name, for errors.
    pub device: String,
    /// VRAM size in bytes (`RCC_CONFIG_MEMSIZE` MiB).
    pub vram_size: u64,
    /// Whether BAR0 covers all of VRAM; otherwise VRAM is reached through `MM_INDEX/MM_DATA`
    /// (and, later, through the GPU's own copies).
    pub large_bar: bool,
    /// The parsed table.
    pub table: DiscoveryTable,
}

impl Discovery {
    /// Read VRAM size and the discovery table from a device, without initialising it.
    ///
    /// BAR0 is used as mapped; the caller resizes it first if it wants a large BAR.
    pub fn read(dev: &dyn PciDevice) -> Result<Self> {
        Self::read_through(dev.name(), dev.bar(5)?, || dev.bar(0))
    }

    /// [`Discovery::read`] through a given BAR5 (a server sharing the device hands in one
    /// that puts the `MM_INDEX` window back after each access) and BAR0, mapped only once
    /// the VRAM size is known to be readable.
    pub fn read_through(
        device: &str,
        mmio: Arc<dyn Bar>,
        bar0: impl FnOnce() -> Result<Arc<dyn Bar>>,
    ) -> Result<Self> {
        let device = device.to_string();
        let value = mmio.read32(RCC_CONFIG_MEMSIZE * 4)?;
        let reason = match value {
            0 => "no VRAM size",
            u32::MAX => {
                "registers are gated (a VF without init access, a device in reset, or BAR5 not enabled)"
            }
            _ => "",
        };
        if !reason.is_empty() {
            return Err(Error::new(device, ErrorKind::BadVramSize { value, reason }));
        }
        let (vram_size, bar0) = (u64::from(value) << 20, bar0()?);
        let large_bar = bar0.len() >= vram_size;
        let mut bytes = vec![0u8; DISCOVERY_TMR_SIZE];
        Vram::new(&device, bar0, mmio, vram_size)
            .read(vram_size - DISCOVERY_TMR_OFFSET, &mut bytes)?;
        let table = DiscoveryTable::parse(&device, &bytes)?;
        if !table.checksum_valid {
            tracing::warn!("{device}: discovery binary checksum does not match");
        }
        Ok(Self {
            device,
            vram_size,
            large_bar,
            table,
        })
    }

    /// Entries for one IP block (all its hardware ids), in table order.
    fn entries(&self, ip: HwIp) -> impl Iterator<Item = &IpEntry> {
        let hw_id = ip.hw_id();
        self.table
            .ips
            .iter()
            .filter(move |e| Some(e.hw_id) == hw_id)
    }

    /// Live (listed and not harvested) instances of an IP block, ascending.
    pub fn instances(&self, ip: HwIp) -> BTreeSet<u8> {
        let fused = &self.table.harvest;
        self.entries(ip)
            .filter(|e| {
                !fused.contains(&HarvestEntry {
                    hw_id: e.hw_id,
                    instance: e.instance,
                })
            })
            .map(|e| e.instance)
            .collect()
    }

    /// The entry of one instance (the last one listed wins, as in Linux).
    pub fn entry(&self, ip: HwIp, instance: u8) -> Option<&IpEntry> {
        self.entries(ip).filter(|e| e.instance == instance).last()
    }

    /// Version of an IP block: that of its lowest live instance.
    pub fn version(&self, ip: HwIp) -> Option<IpVersion> {
        Some(self.entry(ip, *self.instances(ip).first()?)?.version)
    }

    /// Version of an IP block, or an error naming it.
    pub fn require_version(&self, ip: HwIp) -> Result<IpVersion> {
        self.version(ip).ok_or_else(|| {
            Error::new(
                &self.device,
                ErrorKind::NoIpInstance {
                    ip: hwip::name(ip).into(),
                    instance: 0,
                    present: String::new(),
                },
            )
        })
    }

    /// Graphics compute dies (live GC instances).
    pub fn xcc_count(&self) -> usize {
        self.instances(HwIp::GC).len()
    }

    /// Active interposer dies: one MMHUB per AID on multi-die parts, one otherwise.
    pub fn aid_count(&self) -> usize {
        self.instances(HwIp::MMHUB).len().max(1)
    }

    /// Total CUs: per-XCC count from `gc_info` times live XCCs.
    pub fn cu_count(&self) -> Option<u64> {
        Some(self.table.gc_info?.cus_per_xcc() * self.xcc_count().max(1) as u64)
    }

    /// VRAM the firmware reserves at the top (discovery table, TMR): 384 MiB on GC 9.4/9.5,
    /// else 64 MiB.
    pub fn reserved_vram_size(&self) -> u64 {
        match self.version(HwIp::GC) {
            Some(v) if v.major == 9 && (v.minor == 4 || v.minor == 5) => 384 << 20,
            _ => 64 << 20,
        }
    }
}
