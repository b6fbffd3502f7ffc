//! `am-compiler`: a kernel IR, its lowering to LLVM IR for AMD GPUs (`amdgcn-amd-amdhsa`, every
//! [`GfxTarget`]) and the host CPU, code generation with LLVM 22 in-process, HSA code objects
//! linked without a linker (`am_isa::code_object::link`), a CPU backend that runs the same IR,
//! and a cache.
//!
//! ```text
//! Kernel (ir, builder, text) ──verify──► lower (LLVM IR text) ──codegen (LLVM C API)──►
//!   GPU: relocatable ELF ──am_isa link──► HSA code object (ET_DYN, NAME.kd, metadata note)
//!   CPU: host object ──cpu::CpuProgram (ORC JIT)──► launch over a grid
//! ```
//! See `docs/COMPILER.md`.

pub mod builder;
pub mod cache;
pub mod codegen;
pub mod cpu;
pub mod float;
pub mod ir;
pub mod lower;
pub mod shapes;
pub mod text;
pub mod tune;
pub mod verify;

use std::path::PathBuf;

pub use am_isa::code_object::{KernelMetadata, read_metadata};
pub use builder::KernelBuilder;
pub use cache::{Cache, Compiled, Compiler};
pub use cpu::{CpuProgram, host_threads, host_vector_bytes};
pub use ir::{
    AtomicOp, BinOp, CmpOp, DType, Dim, Inst, Kernel, Op, Param, Scalar, Space, Type, UnOp, Value,
};

pub use am_isa::GfxTarget;

/// What the compiler produces code for: an AMD GPU or the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// An AMD GPU (`amdgcn-amd-amdhsa`, the processor named by the target).
    Gpu(GfxTarget),
    /// The host CPU (the `cpu` device and the reference for tests).
    Cpu,
}

impl Target {
    /// The name used on the command line and in cache keys: the GPU's (`gfx1100`) or `cpu`.
    pub fn name(self) -> &'static str {
        match self {
            Target::Gpu(g) => g.name(),
            Target::Cpu => "cpu",
        }
    }

    /// The GPU, if this is one.
    pub fn gpu(self) -> Option<GfxTarget> {
        match self {
            Target::Gpu(g) => Some(g),
            Target::Cpu => None,
        }
    }

    /// Whether this is an AMD GPU.
    pub fn is_gpu(self) -> bool {
        self != Target::Cpu
    }

    /// Lanes per wave the code is generated for (the GPU's native wave size; 1 on the CPU).
    pub fn wave_size(self) -> u32 {
        match self {
            Target::Gpu(g) => g.wave_size(),
            Target::Cpu => 1,
        }
    }
}

impl From<GfxTarget> for Target {
    fn from(g: GfxTarget) -> Target {
        Target::Gpu(g)
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Target {
    type Err = Error;
    /// `cpu`, or a GPU name ([`GfxTarget`]'s parse).
    fn from_str(s: &str) -> Result<Target, Error> {
        if s == "cpu" {
            return Ok(Target::Cpu);
        }
        s.parse()
            .map(Target::Gpu)
            .map_err(|_| Error::UnknownTarget(s.to_string()))
    }
}

fn gpu_names() -> String {
    let names: Vec<&str> = GfxTarget::ALL.iter().map(|t| t.name()).collect();
    names.join(", ")
}

/// Errors of the compiler. Each names the kernel, instruction, file or target concerned.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A kernel breaks a rule of the IR.
    #[error("kernel {kernel}: `{inst}`: {reason}")]
    Verify {
        /// Kernel name.
        kernel: String,
        /// The offending instruction in text form.
        inst: String,
        /// The rule broken.
        reason: String,
    },
    /// The text form could not be parsed.
    #[error("{file}:{line}:{col}: {reason}")]
    Parse {
        /// Source name.
        file: String,
        /// Line (from 1).
        line: usize,
        /// Column (from 1).
        col: usize,
        /// What was wrong.
        reason: String,
    },
    /// LLVM rejected the module or failed to generate code.
    #[error("kernel {kernel} for {target}: LLVM: {message}")]
    Llvm {
        /// Kernel name.
        kernel: String,
        /// Target.
        target: Target,
        /// LLVM's message.
        message: String,
    },
    /// An object or code object could not be linked or read.
    #[error("kernel {kernel}: code object: {reason}")]
    CodeObject {
        /// Kernel (or file) name.
        kernel: String,
        /// What is wrong.
        reason: String,
    },
    /// A CPU launch does not fit the program.
    #[error("kernel {kernel} on the cpu: {reason}")]
    Launch {
        /// Kernel name.
        kernel: String,
        /// What is wrong.
        reason: String,
    },
    /// The cache directory could not be used.
    #[error("compile cache {path}: {source}")]
    Cache {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A target name that is not known.
    #[error("unknown target `{0}` (known: {known}, cpu)", known = gpu_names())]
    UnknownTarget(String),
    /// LLVM's object could not be linked, or a code object could not be read.
    #[error(transparent)]
    Isa(#[from] am_isa::Error),
    /// Timing a kernel on a runtime device failed (loading, launching or waiting).
    #[error("kernel {kernel} on a device: {reason}")]
    Device {
        /// Kernel name.
        kernel: String,
        /// The runtime's error.
        reason: String,
    },
}
