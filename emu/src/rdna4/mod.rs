//! RDNA4 (gfx1200, gfx1201) front-end, as a delta of RDNA3: the generated gfx12 opcode tables
//! and the lowering of gfx12 instructions onto the interpreter's gfx11 form (what only gfx12
//! has becomes an operation the core runs in `interp::exec_gfx12`). Decoding and printing are
//! [`crate::rdna3`]'s with [`crate::rdna3::decode::Gen::Gfx12`]; gfx1200 and gfx1201 share one
//! ISA (LLVM 22 gives both the same tables and encodings).

mod lower;
pub mod opcodes;

pub(crate) use lower::lower;
