//! RDNA3, RDNA4 and CDNA3/CDNA4 shader interpreter used by the mock.
//!
//! Load a code object with [`CodeObject::parse`] (from `am-isa`), predecode it once with [`Program::new`], and
//! run a kernel with [`dispatch`] over any [`Memory`] (the mock plugs in its page-table walker),
//! or spread its workgroups over threads with [`dispatch_parallel`] over a [`SharedMemory`].
//! The decoders ([`rdna3::decode`], [`cdna3::decode`]) are checked against LLVM 22; see
//! `docs/EMU.md`.
//!
//! Layout: `interp/` is the ISA-independent interpreter core: the instruction form (gfx11's
//! encodings and opcode numbering, plus two encodings for the operations only CDNA or gfx12
//! has), wave state and dispatch, memory, and the execution of the form, those extended
//! operations and WMMA included. One folder per family front-end decodes, prints and lowers
//! onto that form: [`rdna3`] (the gfx11 and gfx12 decoder and printer; gfx11 needs no
//! lowering), [`rdna4`] (gfx12's tables and lowering), [`cdna3`] (gfx942/gfx950 decoder,
//! printer, tables and lowering). The core imports no front-end; `program.rs` is the one
//! place that knows them all: it predecodes a code object with the front-end of its ISA.

pub mod cdna3;
mod interp;
mod program;
pub mod rdna3;
pub mod rdna4;
pub mod stats;

pub use interp::{float, memory};

/// Code objects are read by `am-isa`; the emulator loads what it finds there.
pub use am_isa::code_object;
pub use am_isa::code_object::{CodeObject, Kernel, KernelDescriptor, Segment};
pub use interp::wave::{
    HwDispatch, Launch, MAX_SCRATCH_PER_LANE, Partition, dispatch, dispatch_counted, dispatch_hw,
    dispatch_hw_counted, dispatch_hw_parallel, dispatch_parallel,
};
pub use memory::{
    Atomic32, Fault, HostMemory, Memory, SharedHostMemory, SharedMemory, SharedRegion,
};
pub use program::Program;
pub use stats::{Class, Histogram};

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

/// The emulator's name for a shader target: the ISA a [`Program`] is decoded and run as.
/// RDNA3 targets run as gfx1100, RDNA4 ones as gfx12, CDNA3/CDNA4 as gfx942/gfx950.
pub use am_isa::GfxTarget as Isa;

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
    /// A code object could not be read, or has no kernel of the name asked for.
    #[error(transparent)]
    Isa(#[from] am_isa::Error),
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
