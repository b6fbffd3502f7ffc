//! Framing of the remote PCI protocol: fixed-size little-endian headers, encoded and decoded
//! by pure functions.
//!
//! A request is a 33-byte header (`<BIIQQQ`: command, device index, BAR or handle, three
//! arguments) followed by a payload for PROBE and the two writes. A response is a 17-byte header
//! (`<BQQ`: status, two values) followed by data for PROBE, the reads and MAP_SYSMEM, or by a
//! UTF-8 message when the status is not zero. MMIO_WRITE and SYSMEM_WRITE have no response.

use std::fmt;
use std::time::Duration;

/// TCP port `am serve` listens on unless told otherwise (the one tinygrad's `REMOTE=` assumes).
pub const DEFAULT_PORT: u16 = 6667;

/// Size of an encoded [`RequestHeader`].
pub const REQUEST_HEADER_LEN: usize = 33;
/// Size of an encoded [`ResponseHeader`].
pub const RESPONSE_HEADER_LEN: usize = 17;

/// Device ids tinygrad's AMD backend probes for (mask 0xffff), plus the MI350X VF (0x75b0).
pub const AMD_PROBE_DEVICE_IDS: [u16; 9] = [
    0x74a1, 0x744c, 0x7480, 0x7550, 0x7551, 0x7590, 0x75a0, 0x75a8, 0x75b0,
];

/// The commands, numbered as on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Command {
    /// List the devices matching a vendor, a base class and (mask, id) pairs.
    Probe = 0,
    /// Bus address and size of a BAR (and map it on the server).
    MapBar = 1,
    /// Allocate system memory and pass its fd (Unix-socket variant; not served over TCP).
    MapSysmemFd = 2,
    /// Read 1, 2 or 4 bytes of config space.
    CfgRead = 3,
    /// Write 1, 2 or 4 bytes of config space.
    CfgWrite = 4,
    /// Function-level reset.
    Reset = 5,
    /// Read bytes of a BAR.
    MmioRead = 6,
    /// Write bytes to a BAR (no response).
    MmioWrite = 7,
    /// Allocate DMA-able system memory; answers a handle and the bus address of every page.
    MapSysmem = 8,
    /// Read bytes of a system-memory allocation.
    SysmemRead = 9,
    /// Write bytes to a system-memory allocation (no response).
    SysmemWrite = 10,
    /// Resize a BAR to its largest size.
    ResizeBar = 11,
    /// Liveness check.
    Ping = 12,
    /// Read system memory the device reaches, by bus address (`arg0` = bus address, `arg1` =
    /// size): an `am serve` extension, numbered apart from tinygrad's commands, that lets
    /// `am ring` read rings another client wrote. Answered like SYSMEM_READ.
    DmaRead = 0x80,
    /// Access through index/data registers as one transaction (an `am serve` extension our
    /// client uses when PROBE says the server has it): `bar` = BAR, `arg0` = number of
    /// steps, `arg1` = payload length; the payload is [`encode_index_steps`]. The server runs
    /// the steps under the device's window lock and puts the index registers back after;
    /// `val0` answers the last read.
    Indexed = 0x81,
    /// Who owns the device (an `am serve` extension): `arg0` = 0 asks, 1 claims. Answers
    /// `val0` = text length, `val1` = [`OwnerState`] number, then the owner described.
    Owner = 0x82,
    /// A query to the device's SMU, run by the server between its owner's messages (an `am
    /// serve` extension, for `am smi` beside the owner): `arg0` = message id, `arg1` =
    /// param, `arg2` = how long to wait in milliseconds. Answers `val0` = the response
    /// (`C2PMSG_90`), `val1` = the result (`C2PMSG_82`).
    Smu = 0x83,
}

impl Command {
    /// Every command, in wire order.
    pub const ALL: [Command; 17] = [
        Command::Probe,
        Command::MapBar,
        Command::MapSysmemFd,
        Command::CfgRead,
        Command::CfgWrite,
        Command::Reset,
        Command::MmioRead,
        Command::MmioWrite,
        Command::MapSysmem,
        Command::SysmemRead,
        Command::SysmemWrite,
        Command::ResizeBar,
        Command::Ping,
        Command::DmaRead,
        Command::Indexed,
        Command::Owner,
        Command::Smu,
    ];

    /// The command with this wire number, if there is one.
    pub fn from_wire(cmd: u8) -> Option<Command> {
        Command::ALL.into_iter().find(|&c| c as u8 == cmd)
    }

    /// The name tinygrad gives the command (`MMIO_READ`, …).
    pub fn name(self) -> &'static str {
        match self {
            Command::Probe => "PROBE",
            Command::MapBar => "MAP_BAR",
            Command::MapSysmemFd => "MAP_SYSMEM_FD",
            Command::CfgRead => "CFG_READ",
            Command::CfgWrite => "CFG_WRITE",
            Command::Reset => "RESET",
            Command::MmioRead => "MMIO_READ",
            Command::MmioWrite => "MMIO_WRITE",
            Command::MapSysmem => "MAP_SYSMEM",
            Command::SysmemRead => "SYSMEM_READ",
            Command::SysmemWrite => "SYSMEM_WRITE",
            Command::ResizeBar => "RESIZE_BAR",
            Command::Ping => "PING",
            Command::DmaRead => "DMA_READ",
            Command::Indexed => "INDEXED",
            Command::Owner => "OWNER",
            Command::Smu => "SMU",
        }
    }

    /// Whether the server answers this command. The writes are pipelined: the client does
    /// not wait, and the server closes the connection when one fails.
    pub fn has_response(self) -> bool {
        !matches!(self, Command::MmioWrite | Command::SysmemWrite)
    }

    /// Whether the command changes the device or lets it write the host (MAP_SYSMEM hands
    /// it memory to DMA into): on a server shared by several clients, only the device's owner
    /// may send it. An INDEXED request writes when one of its steps does.
    pub fn writes(self) -> bool {
        matches!(
            self,
            Command::CfgWrite
                | Command::Reset
                | Command::MmioWrite
                | Command::MapSysmem
                | Command::MapSysmemFd
                | Command::SysmemWrite
                | Command::ResizeBar
        )
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A request header as it travels: `cmd` stays a raw byte so that a server can decode and
/// report a command it does not know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestHeader {
    /// Wire number of the [`Command`].
    pub cmd: u8,
    /// Device index on the server (the `N` of `remote:HOST:PORT:N`).
    pub dev_id: u32,
    /// BAR index, or the handle of a system-memory allocation.
    pub bar: u32,
    /// First argument (offset, size, base class …).
    pub arg0: u64,
    /// Second argument.
    pub arg1: u64,
    /// Third argument.
    pub arg2: u64,
}

impl RequestHeader {
    /// A request for `cmd`.
    pub fn new(cmd: Command, dev_id: u32, bar: u32, args: [u64; 3]) -> RequestHeader {
        RequestHeader {
            cmd: cmd as u8,
            dev_id,
            bar,
            arg0: args[0],
            arg1: args[1],
            arg2: args[2],
        }
    }

    /// The command, if `cmd` names one.
    pub fn command(&self) -> Option<Command> {
        Command::from_wire(self.cmd)
    }

    /// The 33 bytes on the wire.
    pub fn encode(&self) -> [u8; REQUEST_HEADER_LEN] {
        let mut b = [0u8; REQUEST_HEADER_LEN];
        b[0] = self.cmd;
        b[1..5].copy_from_slice(&self.dev_id.to_le_bytes());
        b[5..9].copy_from_slice(&self.bar.to_le_bytes());
        b[9..17].copy_from_slice(&self.arg0.to_le_bytes());
        b[17..25].copy_from_slice(&self.arg1.to_le_bytes());
        b[25..33].copy_from_slice(&self.arg2.to_le_bytes());
        b
    }

    /// Decode 33 bytes; every byte pattern is a header (validity is the server's business).
    pub fn decode(b: &[u8; REQUEST_HEADER_LEN]) -> RequestHeader {
        RequestHeader {
            cmd: b[0],
            dev_id: le_u32(b, 1),
            bar: le_u32(b, 5),
            arg0: le_u64(b, 9),
            arg1: le_u64(b, 17),
            arg2: le_u64(b, 25),
        }
    }
}

/// Describes a request the way error messages quote it (`MMIO_READ BAR5 offset 0x10 size 4`).
impl fmt::Display for RequestHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(cmd) = self.command() else {
            return write!(f, "unknown command {}", self.cmd);
        };
        let (a0, a1, a2) = (self.arg0, self.arg1, self.arg2);
        match cmd {
            Command::Probe => write!(f, "PROBE vendor {a2:#x} class {a0:#x}"),
            Command::MapBar | Command::ResizeBar => write!(f, "{cmd} BAR{}", self.bar),
            Command::CfgRead => write!(f, "CFG_READ offset {a0:#x} size {a1}"),
            Command::CfgWrite => write!(f, "CFG_WRITE offset {a0:#x} size {a1} value {a2:#x}"),
            Command::MmioRead | Command::MmioWrite => {
                write!(f, "{cmd} BAR{} offset {a0:#x} size {a1:#x}", self.bar)
            }
            Command::MapSysmem | Command::MapSysmemFd => {
                write!(f, "{cmd} size {a0:#x} contiguous {}", a1 != 0)
            }
            Command::SysmemRead | Command::SysmemWrite => {
                write!(f, "{cmd} handle {} offset {a0:#x} size {a1:#x}", self.bar)
            }
            Command::Reset | Command::Ping => write!(f, "{cmd}"),
            Command::DmaRead => write!(f, "DMA_READ bus address {a0:#x} size {a1:#x}"),
            Command::Indexed => write!(f, "INDEXED BAR{} {a0} steps", self.bar),
            Command::Owner if a0 == OWNER_CLAIM => write!(f, "OWNER claim"),
            Command::Owner => write!(f, "OWNER ask"),
            Command::Smu => write!(f, "SMU message {a0:#x} param {a1:#x}"),
        }
    }
}

/// A response header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseHeader {
    /// 0 on success; otherwise `val0` bytes of UTF-8 message follow.
    pub status: u8,
    /// First value (data length, bus address, register value …).
    pub val0: u64,
    /// Second value (count, BAR size, handle …).
    pub val1: u64,
}

impl ResponseHeader {
    /// A success carrying two values.
    pub fn ok(val0: u64, val1: u64) -> ResponseHeader {
        ResponseHeader {
            status: 0,
            val0,
            val1,
        }
    }

    /// An error header announcing a message of `message_len` bytes.
    pub fn error(message_len: usize) -> ResponseHeader {
        ResponseHeader {
            status: 1,
            val0: message_len as u64,
            val1: 0,
        }
    }

    /// The 17 bytes on the wire.
    pub fn encode(&self) -> [u8; RESPONSE_HEADER_LEN] {
        let mut b = [0u8; RESPONSE_HEADER_LEN];
        b[0] = self.status;
        b[1..9].copy_from_slice(&self.val0.to_le_bytes());
        b[9..17].copy_from_slice(&self.val1.to_le_bytes());
        b
    }

    /// Decode 17 bytes.
    pub fn decode(b: &[u8; RESPONSE_HEADER_LEN]) -> ResponseHeader {
        ResponseHeader {
            status: b[0],
            val0: le_u64(b, 1),
            val1: le_u64(b, 9),
        }
    }
}

/// The `bar` of a PROBE that asks which `am serve` extensions the server has. tinygrad's
/// client sends 0 there and tinygrad's server ignores the field, so only our client sees
/// the changed answer: `val1` = [`encode_extensions`] instead of the device count.
pub const EXTENSIONS_PROBE: u32 = 0x616d_7831;
/// Extension: the INDEXED command.
pub const EXT_INDEXED: u32 = 1;
/// Extension: one owner per device and the OWNER command.
pub const EXT_OWNER: u32 = 1 << 1;
/// Extension: the SMU command (queries beside the owner).
pub const EXT_SMU: u32 = 1 << 2;
/// The top half of a PROBE answer's `val1` that says the lower half lists extensions (a
/// server without them answers a device count there, far below 2^32).
const EXTENSIONS_TAG: u64 = 0x414d_0000;

/// `val1` of a PROBE answer listing extensions.
pub fn encode_extensions(extensions: u32) -> u64 {
    (EXTENSIONS_TAG << 32) | u64::from(extensions)
}

/// The extensions a PROBE answer's `val1` lists: none unless it carries the tag.
pub fn decode_extensions(val1: u64) -> u32 {
    if val1 >> 32 == EXTENSIONS_TAG {
        val1 as u32
    } else {
        0
    }
}

/// `arg0` of an OWNER request that claims the device.
pub const OWNER_CLAIM: u64 = 1;

/// Who owns a device, as `val1` of an OWNER answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum OwnerState {
    /// Nobody: the first connection that writes becomes the owner.
    Nobody = 0,
    /// The asking connection.
    This = 1,
    /// Another connection (described by the answer's text).
    Other = 2,
}

impl OwnerState {
    /// The state with this wire number.
    pub fn from_wire(v: u64) -> Option<OwnerState> {
        [OwnerState::Nobody, OwnerState::This, OwnerState::Other]
            .into_iter()
            .find(|&s| s as u64 == v)
    }
}

/// Most steps of one INDEXED request (the longest the driver sends is four).
pub const MAX_INDEX_STEPS: usize = 16;
/// Bytes of one encoded INDEXED step: kind, offset, value, each a little-endian u32.
pub const INDEX_STEP_LEN: usize = 12;

/// One step of an INDEXED request, with a dword offset into the BAR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireStep {
    /// Write an index register; the server puts its old value back after the steps.
    Aim {
        /// Byte offset in the BAR.
        offset: u32,
        /// What to write.
        value: u32,
    },
    /// Read a data register.
    Read {
        /// Byte offset in the BAR.
        offset: u32,
    },
    /// Write a data register.
    Write {
        /// Byte offset in the BAR.
        offset: u32,
        /// What to write.
        value: u32,
    },
}

impl WireStep {
    /// The BAR offset the step accesses.
    pub fn offset(self) -> u32 {
        match self {
            WireStep::Aim { offset, .. }
            | WireStep::Read { offset }
            | WireStep::Write { offset, .. } => offset,
        }
    }
}

/// The payload of an INDEXED request.
pub fn encode_index_steps(steps: &[WireStep]) -> Vec<u8> {
    steps
        .iter()
        .flat_map(|s| {
            let (kind, offset, value) = match *s {
                WireStep::Aim { offset, value } => (0u32, offset, value),
                WireStep::Read { offset } => (1, offset, 0),
                WireStep::Write { offset, value } => (2, offset, value),
            };
            [kind, offset, value].into_iter().flat_map(u32::to_le_bytes)
        })
        .collect()
}

/// Decode an INDEXED payload; `None` unless it is whole steps of a known kind.
pub fn decode_index_steps(payload: &[u8]) -> Option<Vec<WireStep>> {
    if !payload.len().is_multiple_of(INDEX_STEP_LEN) {
        return None;
    }
    payload
        .chunks_exact(INDEX_STEP_LEN)
        .map(|c| {
            let (offset, value) = (le_u32(c, 4), le_u32(c, 8));
            match le_u32(c, 0) {
                0 => Some(WireStep::Aim { offset, value }),
                1 => Some(WireStep::Read { offset }),
                2 => Some(WireStep::Write { offset, value }),
                _ => None,
            }
        })
        .collect()
}

/// An error response: header and message, ready to send.
pub fn encode_error(message: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(RESPONSE_HEADER_LEN + message.len());
    out.extend_from_slice(&ResponseHeader::error(message.len()).encode());
    out.extend_from_slice(message.as_bytes());
    out
}

/// How a refusal from a full server says when to come back (`… try again in 12.3 s`), which
/// our client reads with [`retry_after`].
pub fn retry_text(wait: Duration) -> String {
    format!("{RETRY_WORDS}{:.1} s", wait.as_secs_f64())
}

/// The words before the seconds of [`retry_text`].
const RETRY_WORDS: &str = "try again in ";

/// The wait a refusal names ([`retry_text`]), if it names one that is a duration.
pub fn retry_after(message: &str) -> Option<Duration> {
    let at = message.rfind(RETRY_WORDS)? + RETRY_WORDS.len();
    let secs: f64 = message[at..].split(' ').next()?.parse().ok()?;
    Duration::try_from_secs_f64(secs).ok()
}

/// PROBE payload: (mask, id) pairs of little-endian u32.
pub fn encode_probe_filter(pairs: &[(u32, u32)]) -> Vec<u8> {
    pairs
        .iter()
        .flat_map(|&(mask, id)| mask.to_le_bytes().into_iter().chain(id.to_le_bytes()))
        .collect()
}

/// Decode a PROBE payload; `None` unless it is a whole number of 8-byte pairs.
pub fn decode_probe_filter(payload: &[u8]) -> Option<Vec<(u32, u32)>> {
    if !payload.len().is_multiple_of(8) {
        return None;
    }
    Some(
        payload
            .chunks_exact(8)
            .map(|c| (le_u32(c, 0), le_u32(c, 4)))
            .collect(),
    )
}

/// Whether a device id passes a PROBE filter: `(id & mask) == want` for some pair. An empty
/// filter matches nothing, as in tinygrad.
pub fn probe_filter_matches(pairs: &[(u32, u32)], device_id: u16) -> bool {
    pairs
        .iter()
        .any(|&(mask, want)| u32::from(device_id) & mask == want)
}

/// One entry of a PROBE answer: `"<name>:<index>"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeEntry {
    /// What the server calls the device (a BDF, or a spec such as `mock:navi31:0`).
    pub name: String,
    /// The index to send as `dev_id`.
    pub index: u32,
}

/// PROBE answer data: the entries joined by `"\n"`.
pub fn encode_probe_names(entries: &[ProbeEntry]) -> String {
    entries
        .iter()
        .map(|e| format!("{}:{}", e.name, e.index))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Parse PROBE answer data; the index is what follows the last `:` of each line.
pub fn decode_probe_names(data: &str) -> Option<Vec<ProbeEntry>> {
    if data.is_empty() {
        return Some(Vec::new());
    }
    data.split('\n')
        .map(|line| {
            let (name, index) = line.rsplit_once(':')?;
            Some(ProbeEntry {
                name: name.to_string(),
                index: index.parse().ok()?,
            })
        })
        .collect()
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_header_has_the_packed_biiqqq_layout() {
        let h = RequestHeader {
            cmd: 6,
            dev_id: 0x0403_0201,
            bar: 0x0807_0605,
            arg0: 0x1011_1213_1415_1617,
            arg1: 0x2021_2223_2425_2627,
            arg2: 0x3031_3233_3435_3637,
        };
        let b = h.encode();
        assert_eq!(b.len(), 33);
        assert_eq!(b[0], 6);
        assert_eq!(&b[1..5], &[0x01, 0x02, 0x03, 0x04]);
        assert_eq!(&b[5..9], &[0x05, 0x06, 0x07, 0x08]);
        assert_eq!(&b[9..17], &[0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11, 0x10]);
        assert_eq!(
            &b[17..25],
            &[0x27, 0x26, 0x25, 0x24, 0x23, 0x22, 0x21, 0x20]
        );
        assert_eq!(
            &b[25..33],
            &[0x37, 0x36, 0x35, 0x34, 0x33, 0x32, 0x31, 0x30]
        );
        assert_eq!(RequestHeader::decode(&b), h);
    }

    #[test]
    fn response_header_has_the_packed_bqq_layout() {
        let h = ResponseHeader {
            status: 1,
            val0: 0x0102_0304_0506_0708,
            val1: 0xffff_0000_0000_0001,
        };
        let b = h.encode();
        assert_eq!(
            b,
            [
                1, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x01, 0, 0, 0, 0, 0, 0xff, 0xff
            ]
        );
        assert_eq!(ResponseHeader::decode(&b), h);
    }

    #[test]
    fn headers_round_trip_for_many_values() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..1000 {
            // xorshift64: deterministic coverage of all bit positions.
            let mut next = || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            let req = RequestHeader {
                cmd: next() as u8,
                dev_id: next() as u32,
                bar: next() as u32,
                arg0: next(),
                arg1: next(),
                arg2: next(),
            };
            assert_eq!(RequestHeader::decode(&req.encode()), req);
            let resp = ResponseHeader {
                status: next() as u8,
                val0: next(),
                val1: next(),
            };
            assert_eq!(ResponseHeader::decode(&resp.encode()), resp);
        }
    }

    #[test]
    fn commands_are_numbered_as_tinygrad_numbers_them() {
        let names: Vec<&str> = (0..13u8)
            .map(|n| Command::from_wire(n).unwrap().name())
            .collect();
        assert_eq!(
            names,
            [
                "PROBE",
                "MAP_BAR",
                "MAP_SYSMEM_FD",
                "CFG_READ",
                "CFG_WRITE",
                "RESET",
                "MMIO_READ",
                "MMIO_WRITE",
                "MAP_SYSMEM",
                "SYSMEM_READ",
                "SYSMEM_WRITE",
                "RESIZE_BAR",
                "PING"
            ]
        );
        for c in Command::ALL {
            assert_eq!(Command::from_wire(c as u8), Some(c));
        }
        assert_eq!(Command::from_wire(13), None);
        assert_eq!(Command::from_wire(0x80), Some(Command::DmaRead));
        assert_eq!(Command::from_wire(0x81), Some(Command::Indexed));
        assert_eq!(Command::from_wire(0x82), Some(Command::Owner));
        assert_eq!(Command::from_wire(0x83), Some(Command::Smu));
        assert_eq!(Command::from_wire(255), None);
        let silent: Vec<Command> = Command::ALL
            .into_iter()
            .filter(|c| !c.has_response())
            .collect();
        assert_eq!(silent, [Command::MmioWrite, Command::SysmemWrite]);
    }

    #[test]
    fn a_refusal_names_its_retry_time_as_the_client_reads_it() {
        let full = format!(
            "… gives its place to a newcomer: {}",
            retry_text(Duration::from_millis(12_340))
        );
        assert!(full.ends_with("try again in 12.3 s"), "{full}");
        assert_eq!(retry_after(&full), Some(Duration::from_millis(12_300)));
        assert_eq!(retry_after("try again when one of them has closed"), None);
        assert_eq!(retry_after("try again in -1.0 s"), None);
        assert_eq!(retry_after("try again in 1e300 s"), None);
        assert_eq!(retry_after("try again in NaN s"), None);
        assert_eq!(retry_after("no place"), None);
    }

    #[test]
    fn extensions_are_read_only_from_a_tagged_probe_answer() {
        let v = encode_extensions(EXT_INDEXED | EXT_OWNER);
        assert_eq!(decode_extensions(v), EXT_INDEXED | EXT_OWNER);
        // A server without extensions answers its device count in val1.
        assert_eq!(decode_extensions(3), 0);
        assert_eq!(decode_extensions(0), 0);
    }

    #[test]
    fn index_steps_round_trip_and_unknown_kinds_are_refused() {
        let steps = [
            WireStep::Aim {
                offset: 0x18,
                value: 1,
            },
            WireStep::Aim {
                offset: 0,
                value: 0x8000_1000,
            },
            WireStep::Read { offset: 4 },
            WireStep::Write {
                offset: 4,
                value: 0xdead_beef,
            },
        ];
        let p = encode_index_steps(&steps);
        assert_eq!(p.len(), 4 * INDEX_STEP_LEN);
        assert_eq!(&p[..12], &[0, 0, 0, 0, 0x18, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(decode_index_steps(&p).unwrap(), steps);
        assert_eq!(decode_index_steps(&p[..11]), None);
        let mut bad = p.clone();
        bad[0] = 3;
        assert_eq!(decode_index_steps(&bad), None);
    }

    #[test]
    fn error_response_carries_its_message_length() {
        let e = encode_error("bad BAR7");
        assert_eq!(e.len(), 17 + 8);
        let h = ResponseHeader::decode(e[..17].try_into().unwrap());
        assert_eq!(h.status, 1);
        assert_eq!(h.val0, 8);
        assert_eq!(&e[17..], b"bad BAR7");
    }

    #[test]
    fn probe_filter_is_pairs_of_little_endian_u32() {
        let p = encode_probe_filter(&[(0xffff, 0x744c), (0xff00, 0x7500)]);
        assert_eq!(
            p,
            [
                0xff, 0xff, 0, 0, 0x4c, 0x74, 0, 0, 0x00, 0xff, 0, 0, 0x00, 0x75, 0, 0
            ]
        );
        assert_eq!(
            decode_probe_filter(&p).unwrap(),
            [(0xffff, 0x744c), (0xff00, 0x7500)]
        );
        assert_eq!(decode_probe_filter(&p[..7]), None);
        assert_eq!(decode_probe_filter(&[]), Some(vec![]));
    }

    #[test]
    fn probe_filter_masks_the_device_id() {
        let f = [(0xff00, 0x7500)];
        assert!(probe_filter_matches(&f, 0x75b0));
        assert!(!probe_filter_matches(&f, 0x744c));
        assert!(!probe_filter_matches(&[], 0x744c));
    }

    #[test]
    fn probe_names_join_with_newlines_and_split_on_the_last_colon() {
        let entries = vec![
            ProbeEntry {
                name: "0000:03:00.0".into(),
                index: 0,
            },
            ProbeEntry {
                name: "mock:navi31:0".into(),
                index: 12,
            },
        ];
        let s = encode_probe_names(&entries);
        assert_eq!(s, "0000:03:00.0:0\nmock:navi31:0:12");
        assert_eq!(decode_probe_names(&s).unwrap(), entries);
        assert_eq!(decode_probe_names("").unwrap(), vec![]);
        assert_eq!(decode_probe_names("no-index"), None);
        assert_eq!(decode_probe_names("x:notanumber"), None);
    }

    #[test]
    fn requests_describe_themselves_for_error_messages() {
        let r = RequestHeader::new(Command::MmioRead, 0, 5, [0x10, 4, 0]);
        assert_eq!(r.to_string(), "MMIO_READ BAR5 offset 0x10 size 0x4");
        let r = RequestHeader::new(Command::SysmemWrite, 0, 3, [0x1000, 0x20, 0]);
        assert_eq!(
            r.to_string(),
            "SYSMEM_WRITE handle 3 offset 0x1000 size 0x20"
        );
        let mut r = RequestHeader::new(Command::Ping, 0, 0, [0; 3]);
        r.cmd = 200;
        assert_eq!(r.to_string(), "unknown command 200");
    }
}
