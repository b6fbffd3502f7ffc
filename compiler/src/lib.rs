//! `am-compiler`: a kernel IR, its lowering to LLVM IR for AMD GPUs (`amdgcn-amd-amdhsa`:
//! gfx1100, gfx942, gfx950) and the host CPU, code generation with LLVM 22 in-process, HSA code
//! objects linked without a linker, a CPU backend that runs the same IR, and a cache.
//!
//! ```text
//! Kernel (ir, builder, text) ──verify──► lower (LLVM IR text) ──codegen (LLVM C API)──►
//!   GPU: relocatable ELF ──link──► HSA code object (ET_DYN, NAME.kd, metadata note)
//!   CPU: host object ──cpu::CpuProgram (ORC JIT)──► launch over a grid
//! ```
//! See `docs/COMPILER.md`.

pub mod builder;
pub mod cache;
pub mod codegen;
pub mod cpu;
pub mod float;
pub mod ir;
pub mod link;
pub mod lower;
pub mod metadata;
pub mod shapes;
pub mod text;
pub mod tune;
pub mod verify;

use std::path::PathBuf;

pub use builder::KernelBuilder;
pub use cache::{Cache, Compiled, Compiler};
pub use cpu::CpuProgram;
pub use ir::{
    AtomicOp, BinOp, CmpOp, DType, Dim, Inst, Kernel, Op, Param, Scalar, Space, Type, UnOp, Value,
};
pub use metadata::KernelMetadata;

/// What the compiler produces code for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// RDNA3 (Navi31), wave32.
    Gfx1100,
    /// CDNA3 (MI300X), wave64.
    Gfx942,
    /// CDNA4 (MI350X), wave64.
    Gfx950,
    /// RDNA4 (Navi44), wave32.
    Gfx1200,
    /// RDNA4 (Navi48), wave32: the same ISA as gfx1200.
    Gfx1201,
    /// The host CPU (the `cpu` device and the reference for tests).
    Cpu,
}

impl Target {
    /// Every target.
    pub const ALL: [Target; 6] = [
        Target::Gfx1100,
        Target::Gfx942,
        Target::Gfx950,
        Target::Gfx1200,
        Target::Gfx1201,
        Target::Cpu,
    ];

    /// The name used on the command line and in cache keys.
    pub fn name(self) -> &'static str {
        match self {
            Target::Gfx1100 => "gfx1100",
            Target::Gfx942 => "gfx942",
            Target::Gfx950 => "gfx950",
            Target::Gfx1200 => "gfx1200",
            Target::Gfx1201 => "gfx1201",
            Target::Cpu => "cpu",
        }
    }

    /// Whether this is an AMD GPU.
    pub fn is_gpu(self) -> bool {
        self != Target::Cpu
    }

    /// Lanes per wave (the RDNA parts run wave32, the CDNA parts wave64; 1 on the CPU).
    pub fn wave_size(self) -> u32 {
        match self {
            Target::Gfx1100 | Target::Gfx1200 | Target::Gfx1201 => 32,
            Target::Gfx942 | Target::Gfx950 => 64,
            Target::Cpu => 1,
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Target {
    type Err = Error;
    fn from_str(s: &str) -> Result<Target, Error> {
        Target::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| Error::UnknownTarget(s.to_string()))
    }
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
    #[error("unknown target `{0}` (known: gfx1100, gfx942, gfx950, gfx1200, gfx1201, cpu)")]
    UnknownTarget(String),
    /// Timing a kernel on a runtime device failed (loading, launching or waiting).
    #[error("kernel {kernel} on a device: {reason}")]
    Device {
        /// Kernel name.
        kernel: String,
        /// The runtime's error.
        reason: String,
    },
}
