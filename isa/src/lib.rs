//! `am-isa`: the facts about AMD GPU shader targets that every other crate shares.
//!
//! - [`GfxTarget`]: the GPUs the project models, found from the GC IP version that IP
//!   discovery reports, named and parsed as LLVM names them (`gfx1100`), with their family,
//!   wave sizes, LDS and register limits and matrix instructions. A new GPU is one arm of it.
//! - [`code_object`]: AMDGPU HSA code objects — the 64-byte kernel descriptor and its bits,
//!   reading a code object (code, kernels, loadable segments, dynamic relocations, the
//!   metadata note) and writing one from LLVM's relocatable object ([`code_object::link`]).
//! - [`sync::lock`]: the one poison-ignoring mutex lock, and [`bits`], the one bit-field
//!   extractor (instruction words, packets); they live here because this is the lowest crate
//!   all their users share.
//!
//! It depends on no other crate of the workspace, so the compiler, the runtime, the emulator,
//! the mock and the tools can all use it.
#![deny(missing_docs)]

pub mod code_object;
pub mod sync;
mod target;

pub use code_object::{CodeObject, Kernel, KernelDescriptor, KernelMetadata, Segment};
pub use target::{Family, GfxTarget, Matrix};

/// Bits `lo .. lo + width` of `v` (`width` 1 to 32): the one field extractor of the
/// workspace.
#[inline]
pub const fn bits(v: u32, lo: u32, width: u32) -> u32 {
    (v >> lo) & (((1u64 << width) - 1) as u32)
}

/// Errors of `am-isa`. Each names the target name, GC version or code object concerned.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A target name that is not one of [`GfxTarget::ALL`].
    #[error("unknown target `{0}` (known: {known})", known = GfxTarget::names())]
    UnknownTarget(String),
    /// A GC IP version with no target the project models.
    #[error("GC {major}.{minor}.{rev} is not a GPU this project knows (known: {known})", known = GfxTarget::gc_versions_text())]
    UnknownGc {
        /// Major version.
        major: u8,
        /// Minor version.
        minor: u8,
        /// Revision.
        rev: u8,
    },
    /// A code object (or LLVM's relocatable object) that cannot be read or linked.
    #[error("code object {what}: {reason}")]
    CodeObject {
        /// The path or kernel name the caller gave.
        what: String,
        /// What is wrong.
        reason: String,
    },
    /// The code object has no kernel of that name.
    #[error("no kernel named {name} (code object has: {available})")]
    NoKernel {
        /// The requested name.
        name: String,
        /// The kernels it has.
        available: String,
    },
}
