//! The driver's error type.

use std::path::PathBuf;

/// Everything that can go wrong in the driver. Each variant names the device (or file) it
/// concerns, so a message read out of context still says where it came from.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system call on a file failed.
    #[error("{device}: {op} {path}: {source}")]
    Io {
        /// Device the file belongs to.
        device: String,
        /// What was being done (`open`, `mmap`, `read`, …).
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// An access outside a BAR, a system-memory region or config space.
    #[error(
        "{device}: {what} access of {size} bytes at offset {offset:#x} is outside its {len:#x}-byte range"
    )]
    OutOfRange {
        /// Device.
        device: String,
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
    #[error("{device}: BAR{bar} is not available: {reason}")]
    NoBar {
        /// Device.
        device: String,
        /// BAR index.
        bar: u8,
        /// Why.
        reason: String,
    },
    /// The backend does not offer this operation.
    #[error("{device}: {op} is not supported by the {backend} backend")]
    Unsupported {
        /// Device.
        device: String,
        /// The operation.
        op: &'static str,
        /// The backend (`sysfs`, `vfio`, `remote`, `mock`).
        backend: &'static str,
    },
    /// Another process holds the device.
    #[error("{device}: device is in use: lock {path} is held{}", holder.map(|p| format!(" by pid {p}")).unwrap_or_default())]
    Locked {
        /// Device.
        device: String,
        /// The lock file.
        path: PathBuf,
        /// The process holding the lock, when it can be told.
        holder: Option<u32>,
    },
    /// A device specification that cannot be parsed.
    #[error("bad device {spec:?}: {reason}")]
    BadDeviceSpec {
        /// What the user gave.
        spec: String,
        /// Why it is not understood.
        reason: String,
    },
    /// The backend reported a failure that is not an I/O error on a file (a remote server's
    /// error message, a violation of the mock's hardware contract, …).
    #[error("{device}: {message}")]
    Backend {
        /// Device.
        device: String,
        /// The backend's message.
        message: String,
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
}

/// The driver's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
