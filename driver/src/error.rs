//! The driver's error type: the device an error concerns, and what went wrong.

use std::path::PathBuf;
use std::time::Duration;

use crate::irq::IrqEvent;
use crate::vf::{IdhEvent, IdhRequest};

/// An error of the driver: the device (or file) it concerns and what went wrong. The
/// message names the device first (`mock:navi31:0: timed out after …`), so it still says
/// where it came from when read out of context; match on [`kind`](Self::kind) to tell
/// errors apart.
#[derive(Debug, derive_more::Display)]
#[display("{device}{}{kind}", if device.is_empty() { "" } else { ": " })]
pub struct Error {
    /// The device (BDF, `remote:…`, `mock:navi31:0`), or empty for errors that concern no
    /// device (a device specification or address range that cannot be parsed).
    pub device: String,
    /// What went wrong.
    pub kind: ErrorKind,
}

impl Error {
    /// An error of `kind` on `device`.
    pub fn new(device: impl Into<String>, kind: ErrorKind) -> Self {
        Self {
            device: device.into(),
            kind,
        }
    }
}

impl crate::Ctx {
    /// An error of `kind` on this device.
    pub fn err(&self, kind: ErrorKind) -> Error {
        Error::new(&self.name, kind)
    }
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Self {
        Self::new(String::new(), kind)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.kind)
    }
}

/// What went wrong, without the device (which [`Error`] carries).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An operating-system call on a file failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done (`open`, `mmap`, `read`, …).
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// An access outside a BAR, a system-memory region or config space.
    #[error(
        "{what} access of {size} bytes at offset {offset:#x} is outside its {len:#x}-byte range"
    )]
    OutOfRange {
        /// The region (`BAR5`, `config space`, `system memory`, …).
        what: String,
        /// Offset of the access.
        offset: u64,
        /// Size of the access in bytes.
        size: u64,
        /// Length of the region.
        len: u64,
    },
    /// A BAR the device does not have or that cannot be mapped.
    #[error("BAR{bar} is not available: {reason}")]
    NoBar {
        /// BAR index.
        bar: u8,
        /// Why.
        reason: String,
    },
    /// The backend does not offer this operation.
    #[error("{op} is not supported by the {backend} backend")]
    Unsupported {
        /// The operation.
        op: &'static str,
        /// The backend (`sysfs`, `vfio`, `remote`, `mock`).
        backend: &'static str,
    },
    /// Another process holds the device.
    #[error("device is in use: lock {path} is held{}", holder.map(|p| format!(" by pid {p}")).unwrap_or_default())]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// The process holding the lock, when it can be told.
        holder: Option<u32>,
    },
    /// A write to a device opened beside the process that holds it (to read what can be
    /// read without disturbing it).
    #[error(
        "{op} is refused: the device is held by {holder}, and this process opened it beside the holder to read only"
    )]
    HeldBeside {
        /// What was refused (`config write`, `BAR5 write at 0x100`, …).
        op: String,
        /// The holder, described (`pid 4242 (am run …), lock file /tmp/am_….lock`).
        holder: String,
    },
    /// A device specification that cannot be parsed.
    #[error("bad device {spec:?}: {reason}")]
    BadDeviceSpec {
        /// What the user gave.
        spec: String,
        /// Why it is not understood.
        reason: String,
    },
    /// The IP discovery table does not carry the signatures the hardware writes.
    #[error(
        "discovery signatures mismatch: {what} at table offset {offset:#x} is {found:#010x}, expected {expected:#010x} (table starts {head}){hint}"
    )]
    DiscoverySignature {
        /// Which signature (`binary_header.binary_signature`, `ip_discovery_header.signature`, …).
        what: &'static str,
        /// Byte offset of the signature inside the discovery table.
        offset: u64,
        /// What was read.
        found: u32,
        /// What the hardware writes.
        expected: u32,
        /// The first bytes of the table, in hex, so the message says what was seen.
        head: String,
        /// An explanation of a recognisable pattern (all 0xFF: VRAM gated), or empty.
        hint: &'static str,
    },
    /// `RCC_CONFIG_MEMSIZE` does not give a usable VRAM size.
    #[error("RCC_CONFIG_MEMSIZE (BAR5 dword 0xde3) reads {value:#x}: {reason}")]
    BadVramSize {
        /// The value read (MiB).
        value: u32,
        /// What that means.
        reason: &'static str,
    },
    /// The IP discovery table is inconsistent: a count, offset or version that cannot be right.
    #[error("malformed discovery table: {what} at table offset {offset:#x}: {reason}")]
    MalformedDiscovery {
        /// The structure being read (`die_header of die 2`, `ip_v4 entry 5 of die 0`, …).
        what: String,
        /// Byte offset of that structure inside the table.
        offset: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// An IP block the driver needs is not listed by discovery (or all its instances are
    /// harvested).
    #[error("{ip} instance {instance} is not present{present}")]
    NoIpInstance {
        /// The IP block with its version when known (`GC 11.0.0`, `NBIO`).
        ip: String,
        /// The instance asked for.
        instance: u8,
        /// The instances that are present, as text (` (present: 0, 1)`), or empty.
        present: String,
    },
    /// No generated register table exists for an IP version this device has.
    #[error("no generated register table for {ip}")]
    NoRegisterTable {
        /// IP block and version (`GC 13.0.0`).
        ip: String,
    },
    /// A register this ASIC's IP version does not have.
    #[error("register {register} does not exist on {ip}")]
    NoSuchRegister {
        /// Register name as in the Linux headers, without the `reg`/`mm` prefix.
        register: String,
        /// IP block and version (`GC 9.4.3`).
        ip: String,
    },
    /// A field this version's register lacks, or a value wider than the field (names
    /// register, field and IP version).
    #[error(transparent)]
    Field(#[from] am_autogen::regs::FieldError),
    /// A register whose base-address segment discovery did not provide for this instance.
    #[error(
        "register {register} on {ip} instance {instance} uses base segment {base_idx}, but discovery lists {count} base addresses"
    )]
    NoBaseAddress {
        /// Register name.
        register: String,
        /// IP block and version.
        ip: String,
        /// Instance.
        instance: u8,
        /// The register's base index (segment).
        base_idx: u8,
        /// How many base addresses this instance has.
        count: usize,
    },
    /// A register address that neither BAR5 nor the indirect window can reach.
    #[error("register {register} at dword {addr:#x} is out of reach: {reason}")]
    RegisterOutOfReach {
        /// Register name (or the raw address when unnamed).
        register: String,
        /// Dword address.
        addr: u64,
        /// Why.
        reason: String,
    },
    /// An access whose offset is not aligned as the hardware requires (dword registers,
    /// 64-bit doorbells).
    #[error("{what} access at offset {offset:#x} is not {align}-byte aligned")]
    Misaligned {
        /// The region (`BAR5`, …).
        what: String,
        /// Offset of the access.
        offset: u64,
        /// Required alignment in bytes.
        align: u64,
    },
    /// A file (sysfs attribute, `/proc/self/pagemap`, …) holds something that cannot be
    /// understood.
    #[error("cannot parse {path}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong with its contents.
        reason: String,
    },
    /// An access trace (see `docs/TRACE.md`) that cannot be read: the file, the byte offset
    /// of the header or record that is wrong, and why.
    #[error("access trace {path} at byte {offset:#x}: {reason}")]
    Trace {
        /// The trace file.
        path: PathBuf,
        /// Byte offset of the header or record that cannot be read.
        offset: u64,
        /// What is wrong there.
        reason: String,
    },
    /// `/proc/self/pagemap` hides physical addresses from this process.
    #[error(
        "{path} reports page frame 0 for mapped memory: physical addresses need root (CAP_SYS_ADMIN)"
    )]
    NoPhysAddr {
        /// The pagemap file.
        path: PathBuf,
    },
    /// A VFIO operation failed.
    #[error("VFIO {op} ({path}): {source}")]
    Vfio {
        /// What was being done.
        op: &'static str,
        /// The sysfs or `/dev/vfio` path involved.
        path: PathBuf,
        /// The underlying error.
        source: vfio_ioctls::VfioError,
    },
    /// The backend reported a failure that is not an I/O error on a file (a remote server's
    /// error message, a violation of the mock's hardware contract, …).
    #[error("{message}")]
    Backend {
        /// The backend's message.
        message: String,
    },
    /// No PCI function at the address.
    #[error("no PCI device at this address ({path} does not exist)")]
    NoDevice {
        /// Where sysfs would have it.
        path: PathBuf,
    },
    /// An address range of `am serve --allow` that is not `ADDR[/PREFIX]`.
    #[error("bad address range {text:?}: {reason} (expected ADDR or ADDR/PREFIX, e.g. 10.0.0.0/8)")]
    BadCidr {
        /// What was given.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A remote PCI server did not answer a request in time.
    #[error(
        "no answer to {request} within {timeout:?}: the server accepted the connection but stopped responding"
    )]
    RemoteTimeout {
        /// The request that got no answer (`CFG_READ offset 0x0 size 2`).
        request: String,
        /// How long the client waited.
        timeout: Duration,
    },
    /// A remote PCI server closed the connection.
    #[error(
        "the server closed the connection during {request}: a server closes a connection after a failed pipelined write (MMIO_WRITE and SYSMEM_WRITE get no answer), a malformed request or a timeout; its log says which"
    )]
    RemoteClosed {
        /// The request that found the connection closed.
        request: String,
    },
    /// A remote PCI server answered a request with an error.
    #[error("the server refused {request}: {message}")]
    RemoteRefused {
        /// The refused request.
        request: String,
        /// The server's message.
        message: String,
    },
    /// The connection to a remote PCI server failed, or the server broke the protocol.
    #[error("{request}: {reason}")]
    Remote {
        /// The request (or `connect`).
        request: String,
        /// What went wrong.
        reason: String,
    },
    /// A memory pool or address space has no free block that fits the request.
    #[error(
        "{pool}: out of memory allocating {size:#x} bytes aligned to {align:#x} ({free:#x} bytes free, largest block {largest:#x})"
    )]
    OutOfMemory {
        /// The pool, with its device (`0000:03:00.0 boot pool`).
        pool: String,
        /// Requested size.
        size: u64,
        /// Requested alignment.
        align: u64,
        /// Free bytes left in the pool.
        free: u64,
        /// Largest free block.
        largest: u64,
    },
    /// An allocation or free request that makes no sense (bad free, zero size, …).
    #[error("{pool}: {reason}")]
    BadAllocation {
        /// The pool.
        pool: String,
        /// What was wrong.
        reason: String,
    },
    /// A GPU virtual mapping that cannot be made or undone as asked.
    #[error("GPU VA {va:#x}+{size:#x}: {reason}")]
    Mapping {
        /// Virtual address of the request.
        va: u64,
        /// Size of the request.
        size: u64,
        /// What was wrong.
        reason: String,
    },
    /// `TRN_MSG_ACK` of the VF mailbox stayed set after `TRN_MSG_VALID` was cleared, so no
    /// new request could be sent.
    #[error(
        "VF mailbox acknowledgement did not clear within {timeout:?} (TRN_MSG_ACK still set before request {request}); the mailbox is wedged"
    )]
    VfMailboxAckNotCleared {
        /// The request that was about to be sent.
        request: IdhRequest,
        /// How long the driver waited.
        timeout: Duration,
    },
    /// The PF did not set `TRN_MSG_ACK` for a VF mailbox request.
    #[error("VF mailbox request {request} was not acknowledged within {timeout:?}")]
    VfMailboxNotAcknowledged {
        /// The request.
        request: IdhRequest,
        /// How long the driver waited.
        timeout: Duration,
    },
    /// The PF acknowledged a VF mailbox request but never posted the expected event.
    #[error(
        "VF mailbox request {request} did not receive event {event} in {tries} tries of {timeout:?} (last RCV_DW0 {last:#x})"
    )]
    VfMailboxNoEvent {
        /// The request.
        request: IdhRequest,
        /// The event waited for.
        event: IdhEvent,
        /// How many times the request was sent.
        tries: u32,
        /// The event wait of each try.
        timeout: Duration,
        /// The last value read from `RCV_DW0`.
        last: u32,
    },
    /// A wait for the hardware or its firmware ran out of time.
    #[error("timed out after {waited:?} waiting for {what}")]
    Timeout {
        /// What the driver waited for (and the register it polled).
        what: String,
        /// How long it waited.
        waited: Duration,
        /// The last value it read.
        last: u32,
    },
    /// A PSP command came back with a non-zero status.
    #[error("PSP command {command} failed with status {status:#x}")]
    PspCommand {
        /// The command (`LOAD_IP_FW(GFX_FW_TYPE_CP_MEC)`, `SETUP_TMR`, …).
        command: String,
        /// `resp.status` of the command buffer.
        status: u32,
    },
    /// An SMU message was answered with something other than OK.
    #[error("SMU message {message} (param {param:#x}) failed with response {response:#x}")]
    SmuMessage {
        /// The message name.
        message: String,
        /// Its parameter.
        param: u32,
        /// `C2PMSG_90` (1 is OK).
        response: u32,
    },
    /// Firmware for the device could not be found or parsed.
    #[error("firmware: {source}")]
    Firmware {
        /// What went wrong.
        source: am_firmware::FirmwareError,
    },
    /// Firmware of another driver runs on a member of an XGMI hive: only a reset of the whole
    /// hive can bring it back.
    #[error(
        "malformed state: the device is a member of an XGMI hive ({regions} devices) and runs firmware left by another driver; reset the whole hive with `am hive-reset` first"
    )]
    HiveMalformed {
        /// Devices in the hive.
        regions: u32,
    },
    /// Another device's VRAM cannot be mapped: the two are not members of one XGMI hive.
    #[error("cannot map VRAM of {peer}: {reason}")]
    NotInOneHive {
        /// The device whose VRAM it is.
        peer: String,
        /// What their layouts say.
        reason: String,
    },
    /// Another device's BAR cannot be reached by this device's DMA over PCIe (peer-to-peer):
    /// what stops it (the backend, the platform, the peer's BAR, the DMA mask).
    #[error("cannot reach {peer} over PCIe: {reason}")]
    NoPeerAccess {
        /// The device whose BAR it is.
        peer: String,
        /// Why not.
        reason: String,
    },
    /// The GPU reported a fault (shader error, page fault, RAS event); the device is in its
    /// error state until [`recover`](crate::AmDevice::recover).
    #[error("GPU fault: {0}")]
    GpuFault(IrqEvent),
    /// An operation only the PF may do (it owns the SMU and the init-access lease).
    #[error("a VF cannot {what}: its PF owns the SMU")]
    PfOnly {
        /// The operation (`reset the GPU`, `be opened to inspect`).
        what: &'static str,
    },
    /// An environment variable whose value cannot be used.
    #[error("{var}={value:?} {reason}")]
    BadEnv {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it (`is not a whole number of watts`).
        reason: &'static str,
    },
    /// The device state does not allow the operation (free-form: the reasons are many and
    /// nothing matches on them).
    #[error("{reason}")]
    BadState {
        /// Why the operation cannot be done now.
        reason: String,
    },
}

/// The driver's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_device_first_and_nothing_when_there_is_none() {
        let what = "reset the GPU";
        let e = Error::new("mock:navi31:0", ErrorKind::PfOnly { what });
        assert_eq!(
            e.to_string(),
            "mock:navi31:0: a VF cannot reset the GPU: its PF owns the SMU"
        );
        let e = Error::from(ErrorKind::BadCidr {
            text: "10.0.0.0/33".into(),
            reason: "the prefix is longer than the address".into(),
        });
        assert!(e.to_string().starts_with("bad address range"), "{e}");
    }

    #[test]
    fn the_source_is_the_kinds_source() {
        let io = std::io::Error::other("gone");
        let e = Error::new(
            "0000:03:00.0",
            ErrorKind::Io {
                op: "open",
                path: "/sys/bus/pci/devices/0000:03:00.0/resource0".into(),
                source: io,
            },
        );
        let source = std::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("gone"));
    }
}
