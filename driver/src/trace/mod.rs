//! Access traces: what a run did to a device, in a compact versioned file (`docs/TRACE.md`).
//!
//! A [`TracingDevice`] wraps any [`PciDevice`] and records config-space accesses, BAR
//! accesses, system-memory maps and resets; the driver adds what only it knows through
//! [`PciDevice::trace`] (phase marks, polls, PSP/SMU mailbox exchanges, the discovery table
//! that names registers). A device that is not wrapped ignores those calls, so tracing off
//! costs one empty virtual call per event and nothing per register access.
//!
//! The file: the magic `AMTRACE\n`, a little-endian `u16` version, the [`Header`] (four
//! strings), then records until the end of the file, each a tag byte and its fields.
//! Integers are LEB128 varints, strings and byte runs a varint length and the bytes.
//! Reading never panics: a truncated or corrupt file is an [`ErrorKind::Trace`] naming the
//! file and the byte offset of the record that cannot be read.

mod record;

use std::io::Write;
use std::path::{Path, PathBuf};

pub use record::TracingDevice;

use crate::discovery::{Discovery, HarvestEntry, IpEntry};
use crate::*;

/// The first bytes of every trace file.
pub const MAGIC: &[u8; 8] = b"AMTRACE\n";
/// The format version this crate writes. It reads this one and every earlier one
/// ([`OLDEST_VERSION`] on): a version adds records, and an older file simply has none of them.
pub const VERSION: u16 = 2;
/// The oldest format version this crate reads.
pub const OLDEST_VERSION: u16 = 1;
/// The first magic bytes of a zstd frame: a trace compressed with `zstd` is read as it is.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// The most a compressed trace may expand to: far above any boot's trace (a few MiB), and
/// a bound on what a corrupt or hostile file can make the reader allocate.
const MAX_DECOMPRESSED: u64 = 1 << 30;
/// Byte reads up to this length are recorded with their bytes; longer ones by a digest.
pub const READ_BYTES_KEPT: usize = 64;

/// What a trace says about the run as a whole.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// Device name as the run named it (`mock:navi31:0`, `0000:03:00.0`).
    pub device: String,
    /// Backend (`mock`, `sysfs`, `vfio`, `remote`).
    pub backend: String,
    /// Mock profile, empty for real hardware.
    pub profile: String,
    /// What recorded it (`am init mock:navi31`, `am serve --trace`).
    pub command: String,
}

/// One entry of the discovery table as a trace keeps it (enough to name registers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceIp {
    /// Hardware id (`soc15_hw_ip.h`).
    pub hw_id: u16,
    /// Instance number.
    pub instance: u8,
    /// Version major, minor, revision.
    pub version: (u8, u8, u8),
    /// Base addresses (dwords), one per segment.
    pub bases: Vec<u64>,
}

/// One thing that happened, in the order it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// Config-space read of `size` bytes.
    ConfigRead {
        /// Offset in config space.
        offset: u16,
        /// 1, 2 or 4.
        size: u8,
        /// What it read.
        value: u32,
    },
    /// Config-space write.
    ConfigWrite {
        /// Offset in config space.
        offset: u16,
        /// 1, 2 or 4.
        size: u8,
        /// What was written.
        value: u32,
    },
    /// A read of 1, 4 or 8 bytes of a BAR as one access.
    Read {
        /// BAR index.
        bar: u8,
        /// Byte offset in the BAR.
        offset: u64,
        /// 1, 4 or 8 bytes.
        width: u8,
        /// What it read.
        value: u64,
    },
    /// A write of 1, 4 or 8 bytes (a 64-bit write to BAR2 rings a doorbell).
    Write {
        /// BAR index.
        bar: u8,
        /// Byte offset in the BAR.
        offset: u64,
        /// 1, 4 or 8 bytes.
        width: u8,
        /// What was written.
        value: u64,
        /// The value lies in a system-memory page mapped earlier in the run: it is a bus
        /// address, another run writes another one.
        alloc: bool,
    },
    /// A byte read of a BAR (VRAM) of at most [`READ_BYTES_KEPT`] bytes.
    ReadBytes {
        /// BAR index.
        bar: u8,
        /// Byte offset.
        offset: u64,
        /// What it read.
        data: Vec<u8>,
    },
    /// A longer byte read: its length and FNV-1a digest.
    ReadDigest {
        /// BAR index.
        bar: u8,
        /// Byte offset.
        offset: u64,
        /// Bytes read.
        len: u64,
        /// FNV-1a 64 of the bytes.
        digest: u64,
    },
    /// A byte write of a BAR (firmware, page tables, rings in VRAM), with its bytes.
    WriteBytes {
        /// BAR index.
        bar: u8,
        /// Byte offset.
        offset: u64,
        /// What was written.
        data: Vec<u8>,
    },
    /// An access the device refused (an error from the backend).
    Refused {
        /// The access (`read32 BAR5+0x1234`).
        access: String,
        /// The backend's error.
        message: String,
    },
    /// System memory allocated for DMA: its pages' bus addresses are allocation-dependent.
    SysMap {
        /// Number of the allocation in this run (0, 1, …).
        id: u32,
        /// Size in bytes.
        size: u64,
        /// Whether one contiguous run was asked for.
        contiguous: bool,
        /// Bus address of every page.
        pages: Vec<u64>,
    },
    /// Function-level reset.
    Reset,
    /// A BAR resize request.
    ResizeBar {
        /// BAR index.
        bar: u8,
    },
    /// An interrupt wait.
    WaitIrq {
        /// Its limit, in microseconds.
        timeout_us: u64,
        /// Whether an interrupt came.
        fired: bool,
    },
    /// The end of a boot phase: the records since the last mark belong to it.
    Phase {
        /// Phase name (`soc`, `gmc`, `psp`, …).
        name: String,
    },
    /// The driver is about to poll a BAR dword until `value & mask == want`.
    Poll {
        /// BAR index.
        bar: u8,
        /// Byte offset.
        offset: u64,
        /// Bits compared.
        mask: u32,
        /// Wanted value of those bits.
        want: u32,
    },
    /// One PSP or SMU mailbox exchange, as the driver saw it.
    Mailbox {
        /// `psp` or `smu`.
        block: String,
        /// The message or command by name.
        name: String,
        /// Its number.
        message: u32,
        /// Its parameter.
        param: u32,
        /// The answer (status or response).
        response: u32,
    },
    /// The IP discovery table, as the driver read it: what names the registers.
    Discovery {
        /// Every live IP instance.
        ips: Vec<TraceIp>,
    },
    /// Bytes the CPU wrote into system memory: rings, packets, fences a device reads by
    /// DMA, which a replay must write again for the device to see the same commands.
    SysWrite {
        /// The allocation ([`Record::SysMap`]'s number).
        id: u32,
        /// Byte offset in it.
        offset: u64,
        /// What was written.
        data: Vec<u8>,
    },
    /// A CPU read of at most [`READ_BYTES_KEPT`] bytes of system memory (a fence, a
    /// signal, a write pointer the device updates).
    SysRead {
        /// The allocation.
        id: u32,
        /// Byte offset in it.
        offset: u64,
        /// What it read.
        data: Vec<u8>,
    },
    /// A longer read of system memory: its length and FNV-1a digest.
    SysReadDigest {
        /// The allocation.
        id: u32,
        /// Byte offset in it.
        offset: u64,
        /// Bytes read.
        len: u64,
        /// FNV-1a 64 of the bytes.
        digest: u64,
    },
}

/// What the driver tells a trace beyond the accesses a wrapper sees.
#[derive(Clone, Copy, Debug)]
pub enum TraceEvent<'a> {
    /// A boot phase ended.
    Phase(&'a str),
    /// A poll of a BAR dword starts.
    Poll {
        /// BAR index.
        bar: u8,
        /// Byte offset.
        offset: u64,
        /// Bits compared.
        mask: u32,
        /// Wanted value.
        want: u32,
    },
    /// A mailbox exchange finished.
    Mailbox {
        /// `psp` or `smu`.
        block: &'static str,
        /// The message or command (formatted only when a trace listens).
        name: std::fmt::Arguments<'a>,
        /// Its number.
        message: u32,
        /// Its parameter.
        param: u32,
        /// The answer.
        response: u32,
    },
    /// Discovery was read.
    Discovery(&'a Discovery),
}

impl Record {
    /// The record for a driver event.
    pub fn from_event(event: TraceEvent<'_>) -> Self {
        match event {
            TraceEvent::Phase(name) => Record::Phase { name: name.into() },
            TraceEvent::Poll {
                bar,
                offset,
                mask,
                want,
            } => Record::Poll {
                bar,
                offset,
                mask,
                want,
            },
            TraceEvent::Mailbox {
                block,
                name,
                message,
                param,
                response,
            } => Record::Mailbox {
                block: block.into(),
                name: name.to_string(),
                message,
                param,
                response,
            },
            TraceEvent::Discovery(d) => Record::Discovery {
                ips: discovery_ips(d),
            },
        }
    }
}

/// The live (not harvested) entries of a discovery table.
fn discovery_ips(d: &Discovery) -> Vec<TraceIp> {
    let fused = &d.table.harvest;
    d.table
        .ips
        .iter()
        .filter(|e| {
            !fused.contains(&HarvestEntry {
                hw_id: e.hw_id,
                instance: e.instance,
            })
        })
        .map(|e| TraceIp {
            hw_id: e.hw_id,
            instance: e.instance,
            version: (e.version.major, e.version.minor, e.version.rev),
            bases: e.bases.clone(),
        })
        .collect()
}

/// A discovery as far as a trace knows it (the IP entries; no VRAM, no `gc_info`), for
/// naming registers with [`crate::regs::address_names`].
pub fn discovery_of(device: &str, ips: &[TraceIp]) -> Discovery {
    use crate::discovery::DiscoveryTable;
    Discovery {
        device: device.into(),
        vram_size: 0,
        large_bar: false,
        table: DiscoveryTable {
            checksum_valid: true,
            base_addr_64_bit: false,
            num_dies: 1,
            ips: ips
                .iter()
                .map(|ip| IpEntry {
                    die: 0,
                    hw_id: ip.hw_id,
                    instance: ip.instance,
                    version: IpVersion {
                        major: ip.version.0,
                        minor: ip.version.1,
                        rev: ip.version.2,
                    },
                    variant: 0,
                    sub_revision: 0,
                    bases: ip.bases.clone(),
                })
                .collect(),
            harvest: vec![],
            gc_info: None,
        },
    }
}

/// FNV-1a 64 of a byte run (what a [`Record::ReadDigest`] keeps).
pub fn digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

// Record tags. New kinds take new numbers; a reader refuses a tag it does not know.
const T_CONFIG_READ: u8 = 1;
const T_CONFIG_WRITE: u8 = 2;
const T_READ: u8 = 3;
const T_WRITE: u8 = 4;
const T_READ_BYTES: u8 = 5;
const T_READ_DIGEST: u8 = 6;
const T_WRITE_BYTES: u8 = 7;
const T_REFUSED: u8 = 8;
const T_SYSMAP: u8 = 9;
const T_RESET: u8 = 10;
const T_RESIZE_BAR: u8 = 11;
const T_WAIT_IRQ: u8 = 12;
const T_PHASE: u8 = 13;
const T_POLL: u8 = 14;
const T_MAILBOX: u8 = 15;
const T_DISCOVERY: u8 = 16;
// Version 2.
const T_SYS_WRITE: u8 = 17;
const T_SYS_READ: u8 = 18;
const T_SYS_READ_DIGEST: u8 = 19;
/// The last tag of version 1: a version-1 file holding a later one is corrupt.
const LAST_V1_TAG: u8 = T_DISCOVERY;

fn put(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// The encoded header: magic, version, four strings.
pub fn encode_header(h: &Header) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&VERSION.to_le_bytes());
    for s in [&h.device, &h.backend, &h.profile, &h.command] {
        put_bytes(&mut out, s.as_bytes());
    }
    out
}

/// Append one encoded record to `out`.
pub fn encode_record(out: &mut Vec<u8>, r: &Record) {
    match r {
        Record::ConfigRead {
            offset,
            size,
            value,
        }
        | Record::ConfigWrite {
            offset,
            size,
            value,
        } => {
            let tag = if matches!(r, Record::ConfigRead { .. }) {
                T_CONFIG_READ
            } else {
                T_CONFIG_WRITE
            };
            out.push(tag);
            put(out, u64::from(*offset));
            out.push(*size);
            put(out, u64::from(*value));
        }
        Record::Read {
            bar,
            offset,
            width,
            value,
        } => {
            out.extend_from_slice(&[T_READ, *bar, *width]);
            put(out, *offset);
            put(out, *value);
        }
        Record::Write {
            bar,
            offset,
            width,
            value,
            alloc,
        } => {
            out.extend_from_slice(&[T_WRITE, *bar, *width, u8::from(*alloc)]);
            put(out, *offset);
            put(out, *value);
        }
        Record::ReadBytes { bar, offset, data } | Record::WriteBytes { bar, offset, data } => {
            let tag = if matches!(r, Record::ReadBytes { .. }) {
                T_READ_BYTES
            } else {
                T_WRITE_BYTES
            };
            out.extend_from_slice(&[tag, *bar]);
            put(out, *offset);
            put_bytes(out, data);
        }
        Record::ReadDigest {
            bar,
            offset,
            len,
            digest,
        } => {
            out.extend_from_slice(&[T_READ_DIGEST, *bar]);
            put(out, *offset);
            put(out, *len);
            out.extend_from_slice(&digest.to_le_bytes());
        }
        Record::Refused { access, message } => {
            out.push(T_REFUSED);
            put_bytes(out, access.as_bytes());
            put_bytes(out, message.as_bytes());
        }
        Record::SysMap {
            id,
            size,
            contiguous,
            pages,
        } => {
            out.extend_from_slice(&[T_SYSMAP, u8::from(*contiguous)]);
            put(out, u64::from(*id));
            put(out, *size);
            // Pages as runs of consecutive 4 KiB pages: (first, count).
            let mut runs: Vec<(u64, u64)> = vec![];
            for &p in pages {
                match runs.last_mut() {
                    Some((first, n)) if first.wrapping_add(*n * 4096) == p => *n += 1,
                    _ => runs.push((p, 1)),
                }
            }
            put(out, runs.len() as u64);
            for (first, n) in runs {
                put(out, first);
                put(out, n);
            }
        }
        Record::Reset => out.push(T_RESET),
        Record::ResizeBar { bar } => out.extend_from_slice(&[T_RESIZE_BAR, *bar]),
        Record::WaitIrq { timeout_us, fired } => {
            out.extend_from_slice(&[T_WAIT_IRQ, u8::from(*fired)]);
            put(out, *timeout_us);
        }
        Record::Phase { name } => {
            out.push(T_PHASE);
            put_bytes(out, name.as_bytes());
        }
        Record::Poll {
            bar,
            offset,
            mask,
            want,
        } => {
            out.extend_from_slice(&[T_POLL, *bar]);
            put(out, *offset);
            put(out, u64::from(*mask));
            put(out, u64::from(*want));
        }
        Record::Mailbox {
            block,
            name,
            message,
            param,
            response,
        } => {
            out.push(T_MAILBOX);
            put_bytes(out, block.as_bytes());
            put_bytes(out, name.as_bytes());
            for v in [message, param, response] {
                put(out, u64::from(*v));
            }
        }
        Record::Discovery { ips } => {
            out.push(T_DISCOVERY);
            put(out, ips.len() as u64);
            for ip in ips {
                put(out, u64::from(ip.hw_id));
                out.extend_from_slice(&[ip.instance, ip.version.0, ip.version.1, ip.version.2]);
                put(out, ip.bases.len() as u64);
                for &b in &ip.bases {
                    put(out, b);
                }
            }
        }
        Record::SysWrite { id, offset, data } | Record::SysRead { id, offset, data } => {
            out.push(if matches!(r, Record::SysWrite { .. }) {
                T_SYS_WRITE
            } else {
                T_SYS_READ
            });
            put(out, u64::from(*id));
            put(out, *offset);
            put_bytes(out, data);
        }
        Record::SysReadDigest {
            id,
            offset,
            len,
            digest,
        } => {
            out.push(T_SYS_READ_DIGEST);
            put(out, u64::from(*id));
            put(out, *offset);
            put(out, *len);
            out.extend_from_slice(&digest.to_le_bytes());
        }
    }
}

/// Writes a trace: the header at once, then records as they come (buffered).
pub struct TraceWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
}

impl<W: Write> TraceWriter<W> {
    /// Start a trace on `out` with its header.
    pub fn new(mut out: W, header: &Header) -> std::io::Result<Self> {
        out.write_all(&encode_header(header))?;
        Ok(TraceWriter {
            out,
            buf: Vec::with_capacity(1 << 16),
        })
    }

    /// Append a record (written out once the buffer fills, or on [`flush`](Self::flush)).
    pub fn record(&mut self, r: &Record) -> std::io::Result<()> {
        encode_record(&mut self.buf, r);
        if self.buf.len() >= 1 << 16 {
            self.flush()?;
        }
        Ok(())
    }

    /// Write out what is buffered.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        self.out.flush()
    }

    /// Flush and hand back the sink.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.flush()?;
        Ok(self.out)
    }
}

/// A whole trace, read back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// Its header.
    pub header: Header,
    /// Its records, in order.
    pub records: Vec<Record>,
}

impl Trace {
    /// Read a trace file.
    pub fn read(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|source| {
            Error::from(ErrorKind::Io {
                op: "read",
                path: path.into(),
                source,
            })
        })?;
        Self::parse(path, &bytes)
    }

    /// Parse the bytes of a trace, plain or compressed with zstd; `path` names it in
    /// errors (offsets in a compressed file's errors are offsets in the expanded trace).
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Self> {
        if bytes.starts_with(&ZSTD_MAGIC) {
            let plain = am_firmware::locate::decompress_zstd(bytes, MAX_DECOMPRESSED).map_err(
                |reason| {
                    Error::from(ErrorKind::Trace {
                        path: path.into(),
                        offset: 0,
                        reason: format!("compressed with zstd, and it does not expand: {reason}"),
                    })
                },
            )?;
            return Self::parse_plain(path, &plain);
        }
        Self::parse_plain(path, bytes)
    }

    fn parse_plain(path: &Path, bytes: &[u8]) -> Result<Self> {
        let mut c = Cursor {
            path,
            bytes,
            pos: 0,
            start: 0,
            version: VERSION,
        };
        if bytes.get(..MAGIC.len()) != Some(MAGIC.as_slice()) {
            return Err(c.bad("not an am access trace (no AMTRACE magic)"));
        }
        c.pos = MAGIC.len();
        let version = u16::from_le_bytes([c.byte()?, c.byte()?]);
        if !(OLDEST_VERSION..=VERSION).contains(&version) {
            return Err(c.bad(format!(
                "format version {version}; this am reads versions {OLDEST_VERSION} to {VERSION}"
            )));
        }
        c.version = version;
        let header = Header {
            device: c.string()?,
            backend: c.string()?,
            profile: c.string()?,
            command: c.string()?,
        };
        let mut records = vec![];
        while c.pos < bytes.len() {
            c.start = c.pos;
            records.push(c.record()?);
        }
        Ok(Trace { header, records })
    }
}

struct Cursor<'a> {
    path: &'a Path,
    bytes: &'a [u8],
    pos: usize,
    /// Where the record being read starts (errors name it).
    start: usize,
    /// The file's format version (which tags it may hold).
    version: u16,
}

impl Cursor<'_> {
    fn bad(&self, reason: impl Into<String>) -> Error {
        Error::from(ErrorKind::Trace {
            path: PathBuf::from(self.path),
            offset: self.start as u64,
            reason: reason.into(),
        })
    }

    fn byte(&mut self) -> Result<u8> {
        let b = *self.bytes.get(self.pos).ok_or_else(|| {
            self.bad(format!(
                "truncated: the file ends at byte {:#x} inside a record",
                self.bytes.len()
            ))
        })?;
        self.pos += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.bad("a number runs past 64 bits"))
    }

    fn narrow<T: TryFrom<u64>>(&mut self, what: &str) -> Result<T> {
        let v = self.varint()?;
        T::try_from(v).map_err(|_| self.bad(format!("{what} {v:#x} is out of range")))
    }

    fn bytes(&mut self) -> Result<Vec<u8>> {
        let len = self.varint()?;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| self.pos.checked_add(l))
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| {
                self.bad(format!(
                    "truncated: a run of {len} bytes goes past the end of the file"
                ))
            })?;
        let b = self.bytes.get(self.pos..end).unwrap_or_default().to_vec();
        self.pos = end;
        Ok(b)
    }

    fn string(&mut self) -> Result<String> {
        String::from_utf8(self.bytes()?).map_err(|_| self.bad("a string is not UTF-8"))
    }

    fn bool(&mut self) -> Result<bool> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(self.bad(format!("flag byte {b:#x} is neither 0 nor 1"))),
        }
    }

    fn width(&mut self) -> Result<u8> {
        match self.byte()? {
            w @ (1 | 4 | 8) => Ok(w),
            w => Err(self.bad(format!("access width {w} is not 1, 4 or 8"))),
        }
    }

    fn record(&mut self) -> Result<Record> {
        let tag = self.byte()?;
        if self.version == 1 && tag > LAST_V1_TAG {
            return Err(self.bad(format!(
                "record tag {tag} in a version 1 file (version 2 added it)"
            )));
        }
        Ok(match tag {
            T_CONFIG_READ | T_CONFIG_WRITE => {
                let offset = self.narrow("config offset")?;
                let size = self.byte()?;
                let value = self.narrow("config value")?;
                if tag == T_CONFIG_READ {
                    Record::ConfigRead {
                        offset,
                        size,
                        value,
                    }
                } else {
                    Record::ConfigWrite {
                        offset,
                        size,
                        value,
                    }
                }
            }
            T_READ => Record::Read {
                bar: self.byte()?,
                width: self.width()?,
                offset: self.varint()?,
                value: self.varint()?,
            },
            T_WRITE => Record::Write {
                bar: self.byte()?,
                width: self.width()?,
                alloc: self.bool()?,
                offset: self.varint()?,
                value: self.varint()?,
            },
            T_READ_BYTES | T_WRITE_BYTES => {
                let (bar, offset, data) = (self.byte()?, self.varint()?, self.bytes()?);
                if tag == T_READ_BYTES {
                    Record::ReadBytes { bar, offset, data }
                } else {
                    Record::WriteBytes { bar, offset, data }
                }
            }
            T_READ_DIGEST => {
                let (bar, offset, len) = (self.byte()?, self.varint()?, self.varint()?);
                let mut d = [0u8; 8];
                for b in &mut d {
                    *b = self.byte()?;
                }
                Record::ReadDigest {
                    bar,
                    offset,
                    len,
                    digest: u64::from_le_bytes(d),
                }
            }
            T_REFUSED => Record::Refused {
                access: self.string()?,
                message: self.string()?,
            },
            T_SYSMAP => {
                let contiguous = self.bool()?;
                let id = self.narrow("allocation number")?;
                let size = self.varint()?;
                let runs = self.varint()?;
                let mut pages = vec![];
                for _ in 0..runs {
                    let (first, n) = (self.varint()?, self.varint()?);
                    // A page count beyond the allocation's size is corrupt, not a reason
                    // to allocate without bound.
                    if n > size.div_ceil(4096) || pages.len() as u64 + n > size.div_ceil(4096) {
                        return Err(self.bad(format!(
                            "a map of {size:#x} bytes lists more than its {} pages",
                            size.div_ceil(4096)
                        )));
                    }
                    pages.extend((0..n).map(|i| first.wrapping_add(i * 4096)));
                }
                Record::SysMap {
                    id,
                    size,
                    contiguous,
                    pages,
                }
            }
            T_RESET => Record::Reset,
            T_RESIZE_BAR => Record::ResizeBar { bar: self.byte()? },
            T_WAIT_IRQ => Record::WaitIrq {
                fired: self.bool()?,
                timeout_us: self.varint()?,
            },
            T_PHASE => Record::Phase {
                name: self.string()?,
            },
            T_POLL => Record::Poll {
                bar: self.byte()?,
                offset: self.varint()?,
                mask: self.narrow("poll mask")?,
                want: self.narrow("poll value")?,
            },
            T_MAILBOX => Record::Mailbox {
                block: self.string()?,
                name: self.string()?,
                message: self.narrow("mailbox message")?,
                param: self.narrow("mailbox parameter")?,
                response: self.narrow("mailbox response")?,
            },
            T_DISCOVERY => {
                let n = self.varint()?;
                let mut ips = vec![];
                for _ in 0..n {
                    let hw_id = self.narrow("hardware id")?;
                    let instance = self.byte()?;
                    let version = (self.byte()?, self.byte()?, self.byte()?);
                    let count = self.varint()?;
                    let mut bases = vec![];
                    for _ in 0..count {
                        bases.push(self.varint()?);
                    }
                    ips.push(TraceIp {
                        hw_id,
                        instance,
                        version,
                        bases,
                    });
                }
                Record::Discovery { ips }
            }
            T_SYS_WRITE | T_SYS_READ => {
                let id = self.narrow("allocation number")?;
                let (offset, data) = (self.varint()?, self.bytes()?);
                if tag == T_SYS_WRITE {
                    Record::SysWrite { id, offset, data }
                } else {
                    Record::SysRead { id, offset, data }
                }
            }
            T_SYS_READ_DIGEST => {
                let id = self.narrow("allocation number")?;
                let (offset, len) = (self.varint()?, self.varint()?);
                let mut d = [0u8; 8];
                for b in &mut d {
                    *b = self.byte()?;
                }
                Record::SysReadDigest {
                    id,
                    offset,
                    len,
                    digest: u64::from_le_bytes(d),
                }
            }
            t => return Err(self.bad(format!("unknown record tag {t}"))),
        })
    }
}

#[cfg(test)]
mod tests;
