//! The runtime's one error type.

/// `what` (a queue's name, which starts with its device's) as a message that names `device`
/// once.
fn named(device: &str, what: &str) -> String {
    if what.starts_with(device) {
        what.to_string()
    } else {
        format!("{device}: {what}")
    }
}

/// What went wrong; every message names the device (and the queue, kernel or buffer).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The driver failed (boot, mapping, queue setup, register access).
    #[error(transparent)]
    Driver(#[from] am_driver::Error),
    /// A wait timed out: the queue did not get to the value. The GPU is taken for hung;
    /// `Device::recover` makes it usable again.
    #[error(
        "{} hung: waited {waited_ms} ms for signal value {awaited} (it holds {current}); the \
         engine's read pointer is at {rptr}, last packet read: {last_packet}",
        named(device, queue)
    )]
    Hang {
        /// Device.
        device: String,
        /// The queue that should have signalled (or the busiest one).
        queue: String,
        /// The value waited for.
        awaited: u64,
        /// The value the signal holds.
        current: u64,
        /// How long the wait lasted.
        waited_ms: u64,
        /// The read pointer the engine wrote back.
        rptr: u64,
        /// The packet at the read pointer, decoded.
        last_packet: String,
    },
    /// The GPU reported a fault (page fault, shader error, bad packet) while work ran.
    #[error("{device}: GPU fault while {during} ({in_flight}): {event}")]
    GpuFault {
        /// Device.
        device: String,
        /// What the runtime was doing.
        during: String,
        /// The kernels of unfinished submissions, by queue (`kernels in flight: …`, or
        /// `no kernel in flight`).
        in_flight: String,
        /// The decoded interrupt.
        event: Box<am_driver::irq::IrqEvent>,
    },
    /// The device's GC version is not a GPU the project models.
    #[error("{device}: {source}")]
    Target {
        /// Device.
        device: String,
        /// Which version it is.
        source: am_isa::Error,
    },
    /// A code object the runtime cannot load, or a kernel it cannot launch.
    #[error("{device}: kernel {kernel}: {reason}")]
    Program {
        /// Device.
        device: String,
        /// Kernel (or code object) name.
        kernel: String,
        /// What is wrong.
        reason: String,
    },
    /// Arguments that do not fit a kernel's signature.
    #[error("{device}: kernel {kernel}, argument {index}: {reason}")]
    Argument {
        /// Device.
        device: String,
        /// Kernel.
        kernel: String,
        /// Argument index.
        index: usize,
        /// What is wrong.
        reason: String,
    },
    /// A size or count past what the device or its packets hold (VRAM, a dispatch packet's
    /// grid), refused before anything is allocated or launched.
    #[error("{device}: {reason}")]
    Limit {
        /// Device.
        device: String,
        /// The number asked for.
        value: u64,
        /// The most the device takes.
        limit: u64,
        /// What was asked and which limit it passes.
        reason: String,
    },
    /// A buffer access outside the buffer, or of the wrong kind.
    #[error("{device}: buffer at {va:#x} ({size} bytes): {reason}")]
    Buffer {
        /// Device.
        device: String,
        /// Its GPU address.
        va: u64,
        /// Its size.
        size: u64,
        /// What is wrong.
        reason: String,
    },
    /// The device was closed, or is not in a state to do this.
    #[error("{device}: {reason}")]
    State {
        /// Device.
        device: String,
        /// What is wrong.
        reason: String,
    },
    /// Writing a trace or another file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

/// Result of the runtime.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Whether this is the driver's refusal to map memory of a device outside this
    /// device's XGMI hive (`NotInOneHive`): the caller takes another path (host memory).
    pub fn is_not_in_one_hive(&self) -> bool {
        matches!(
            self,
            Error::Driver(am_driver::Error {
                kind: am_driver::ErrorKind::NotInOneHive { .. },
                ..
            })
        )
    }
}
