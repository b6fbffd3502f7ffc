//! RDNA3, RDNA4 and CDNA3/CDNA4 shader interpreter used by the mock.
//!
//! Load a code object with [`CodeObject::parse`], predecode it once with [`Program::new`], and
//! run a kernel with [`dispatch`] over any [`Memory`] (the mock plugs in its page-table walker),
//! or spread its workgroups over threads with [`dispatch_parallel`] over a [`SharedMemory`].
//! The decoders ([`rdna3::decode`], [`cdna3::decode`]) are checked against LLVM 22; see
//! `docs/EMU.md`.
//!
//! Layout: each ISA family has its own decoder and disassembler ([`rdna3`], [`cdna3`]; RDNA4
//! is a generation of [`rdna3`]'s decoder with [`rdna4`]'s tables). The interpreter's
//! instruction form and semantics are those of gfx11 ([`rdna3`]); CDNA and gfx12 instructions
//! are lowered onto them when the program is predecoded (`cdna3::lower`, `rdna4::lower`), and
//! what only CDNA has (MFMA and AccVGPRs, packed f32, SDWA, GFX9 DPP) runs in `cdna3::exec`,
//! what only gfx12 has in `rdna4::exec`; WMMA of both RDNA generations runs in `wmma`. The dispatcher, wave scheduling, LDS, scratch and
//! memory are shared.

pub mod cdna3;
pub mod code_object;
pub mod float;
pub mod memory;
mod program;
pub mod rdna3;
pub mod rdna4;
mod wave;
mod wmma;

pub use code_object::{CodeObject, Kernel, KernelDescriptor, Segment};
pub use memory::{
    Atomic32, Fault, HostMemory, Memory, SharedHostMemory, SharedMemory, SharedRegion,
};
pub use program::Program;
pub use wave::{
    HwDispatch, Launch, MAX_SCRATCH_PER_LANE, Partition, dispatch, dispatch_hw,
    dispatch_hw_parallel, dispatch_parallel,
};

/// A xorshift64 generator of test inputs: the same sequence from the same seed.
#[cfg(test)]
pub(crate) fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// Instruction-set architectures the emulator knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isa {
    /// RDNA3, gfx1100 (Navi31).
    Gfx1100,
    /// CDNA3, gfx942 (MI300X): wave64, AccVGPRs, 64 KiB of LDS per workgroup.
    Gfx942,
    /// CDNA4, gfx950 (MI350X): gfx942 plus new MFMA shapes and conversions, 160 KiB of LDS.
    Gfx950,
    /// RDNA4, gfx1200 (Navi44): gfx11's semantics with gfx12's encodings and additions.
    Gfx1200,
    /// RDNA4, gfx1201 (Navi48): the same ISA as gfx1200.
    Gfx1201,
}

impl Isa {
    /// Whether this is a CDNA (GFX9-family) target.
    pub fn is_cdna(self) -> bool {
        matches!(self, Isa::Gfx942 | Isa::Gfx950)
    }

    /// Whether this is an RDNA4 (gfx12) target.
    pub fn is_gfx12(self) -> bool {
        matches!(self, Isa::Gfx1200 | Isa::Gfx1201)
    }

    /// LDS bytes a workgroup may allocate.
    pub fn max_lds(self) -> u32 {
        match self {
            Isa::Gfx1100 | Isa::Gfx942 | Isa::Gfx1200 | Isa::Gfx1201 => 64 * 1024,
            Isa::Gfx950 => 160 * 1024,
        }
    }

    /// The LLVM processor name (`-mcpu=`).
    pub fn name(self) -> &'static str {
        match self {
            Isa::Gfx1100 => "gfx1100",
            Isa::Gfx942 => "gfx942",
            Isa::Gfx950 => "gfx950",
            Isa::Gfx1200 => "gfx1200",
            Isa::Gfx1201 => "gfx1201",
        }
    }
}

/// Errors of the emulator. Every error that concerns an instruction names its PC (GPU
/// virtual address) and its disassembly or raw dwords.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The code object could not be used.
    #[error("code object {what}: {reason}")]
    CodeObject {
        /// Path or name of the code object.
        what: String,
        /// What is wrong.
        reason: String,
    },
    /// No kernel of that name.
    #[error("no kernel named {name} (code object has: {available})")]
    NoKernel {
        /// The requested name.
        name: String,
        /// Kernels the code object has.
        available: String,
    },
    /// Execution reached words that are not a valid instruction of the program's ISA.
    #[error("invalid instruction at pc {pc:#x}: {reason}; dwords {dwords:08x?}")]
    InvalidInstruction {
        /// GPU virtual address.
        pc: u64,
        /// Why decoding failed (encoding, opcode).
        reason: String,
        /// The raw dwords at `pc`.
        dwords: Vec<u32>,
    },
    /// A valid instruction the interpreter does not implement.
    #[error("unimplemented instruction at pc {pc:#x}: {text} (dwords {dwords:08x?})")]
    Unimplemented {
        /// GPU virtual address.
        pc: u64,
        /// Disassembly.
        text: String,
        /// Raw dwords.
        dwords: Vec<u32>,
    },
    /// A memory access faulted; the wave stopped.
    #[error("memory fault at pc {pc:#x} ({text}), lane {lane}: {fault}")]
    MemoryFault {
        /// GPU virtual address of the instruction.
        pc: u64,
        /// Disassembly of the instruction.
        text: String,
        /// Lane that faulted first.
        lane: u32,
        /// The failed access.
        fault: Fault,
    },
    /// The program counter left the code (jump outside `.text`, or into the middle of an
    /// instruction).
    #[error("pc {pc:#x} is not the start of an instruction in the code object")]
    BadPc {
        /// The target address.
        pc: u64,
    },
    /// The shader executed `s_trap`, `s_sethalt` or `s_code_end`, or hit the instruction
    /// limit.
    #[error("wave stopped at pc {pc:#x}: {reason}")]
    Stopped {
        /// GPU virtual address.
        pc: u64,
        /// Why.
        reason: String,
    },
    /// The launch does not fit the kernel (sizes, register counts).
    #[error("bad launch of {kernel}: {reason}")]
    BadLaunch {
        /// Kernel name.
        kernel: String,
        /// What is wrong.
        reason: String,
    },
}

/// What a dispatch did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Wave-instructions executed (one per instruction per wave, whatever EXEC is).
    pub instructions: u64,
    /// Waves run.
    pub waves: u64,
    /// Workgroups run.
    pub workgroups: u64,
}
