//! The tensor layer's errors: each names the operation, the shapes or dtypes, and the device.

use std::path::PathBuf;

use crate::DType;

/// What can go wrong in the tensor layer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Two shapes that do not broadcast against each other.
    #[error("{op}: shapes {a:?} and {b:?} do not broadcast")]
    Broadcast {
        /// The operation.
        op: &'static str,
        /// Left operand's shape.
        a: Vec<usize>,
        /// Right operand's shape.
        b: Vec<usize>,
    },
    /// An operation that does not fit a tensor's shape (axes, sizes, ranges).
    #[error("{op} of a tensor of shape {shape:?}: {reason}")]
    Shape {
        /// The operation.
        op: &'static str,
        /// The tensor's shape.
        shape: Vec<usize>,
        /// What does not fit.
        reason: String,
    },
    /// An operation that does not fit a tensor's dtype.
    #[error("{op} of a {dtype} tensor: {reason}")]
    DType {
        /// The operation.
        op: &'static str,
        /// The tensor's dtype.
        dtype: DType,
        /// What does not fit.
        reason: String,
    },
    /// Operands on different devices.
    #[error("{op}: operands on different devices ({a} and {b}); move one with `to`")]
    DeviceMismatch {
        /// The operation.
        op: &'static str,
        /// One device.
        a: String,
        /// The other.
        b: String,
    },
    /// Host data that does not match the shape asked for.
    #[error("{op}: {len} values given for shape {shape:?} ({numel} elements)")]
    Data {
        /// The operation.
        op: &'static str,
        /// Values given.
        len: usize,
        /// Shape asked for.
        shape: Vec<usize>,
        /// Elements of that shape.
        numel: usize,
    },
    /// The runtime failed (allocation, launch, hang, fault).
    #[error("{}", runtime_message(device, source))]
    Runtime {
        /// Device name.
        device: String,
        /// The runtime's error.
        #[source]
        source: Box<am_runtime::Error>,
    },
    /// A kernel failed to compile, load or run on the CPU.
    #[error("device {device}: kernel {kernel}: {source}")]
    Compile {
        /// Device name.
        device: String,
        /// Kernel name.
        kernel: String,
        /// The compiler's error.
        #[source]
        source: Box<am_compiler::Error>,
    },
    /// An environment variable with a value it cannot have.
    #[error("{var}={value}: {reason}")]
    Env {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it may be.
        reason: String,
    },
    /// A device that cannot be opened or used this way.
    #[error("device {device}: {reason}")]
    Device {
        /// Device name or spec.
        device: String,
        /// What is wrong.
        reason: String,
    },
    /// Gradients that cannot be computed.
    #[error("backward: {0}")]
    Autograd(String),
    /// A captured step used in a way it cannot replay.
    #[error("captured step: {0}")]
    Capture(String),
    /// A safetensors file that cannot be read or does not match.
    #[error("{path}: {reason}")]
    Safetensors {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A file that cannot be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Results of the tensor layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The runtime's error as a message that names `device` once: runtime messages mostly begin
/// with the device's name already.
fn runtime_message(device: &str, source: &am_runtime::Error) -> String {
    let message = source.to_string();
    if message.starts_with(device) {
        message
    } else {
        format!("device {device}: {message}")
    }
}
