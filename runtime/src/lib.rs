//! HCQ runtime: the layer that runs work on a GPU the driver has booted — with no kernel
//! driver and no ROCm.
//!
//! - [`Device`]: opened from a device spec, booted by `am-driver`, with a compute queue (PM4
//!   on single-XCC parts, AQL across every XCC of MI300X/MI350X) and a copy (SDMA) queue; more
//!   queues on request.
//! - [`Buffer`]: VRAM or system memory at a GPU virtual address; views; CPU access (BAR0,
//!   or staged through SDMA where BAR0 is small).
//! - [`Signal`]: a 64-bit value and a GPU timestamp in memory; waits end in a hang report
//!   naming the queue and the packet its engine stopped at.
//! - [`ComputeCommands`] and [`CopyCommands`]: work encoded on the CPU, submitted to a
//!   [`Queue`] any number of times; each submission gives a [`Fence`].
//! - [`Program`]: an AMDGPU code object's kernel, uploaded, with its argument layout.
//! - [`Graph`]: work across queues recorded once and replayed with patched values.
//! - [`Link`]: the transport between two devices (XGMI in a hive, else host memory).
//! - [`trace`]: per-launch GPU timestamps and Chrome trace export.

mod commands;
mod device;
pub mod encode;
mod error;
mod graph;
mod link;
mod memory;
mod program;
mod queue;
mod signal;
pub mod trace;

pub use am_driver::ExecutedCode;
pub use am_isa::GfxTarget;
pub use am_isa::code_object::ArgMetadata;
pub use commands::{ComputeCommands, CopyCommands};
pub use device::{Device, DeviceInfo};
pub use error::{Error, Result};
pub use graph::{ExecNode, Graph, GraphExec, ValueNode};
pub use link::Link;
pub use memory::{Buffer, MemKind};
pub use program::{Arg, Program, kcp};
pub use queue::{DEFAULT_TIMEOUT, Fence, Queue, QueueKind};
pub use signal::Signal;
