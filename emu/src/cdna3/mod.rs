//! CDNA3 and CDNA4 (gfx942, gfx950): decoder, disassembler, and the lowering of their
//! instructions onto the interpreter's semantics (shared with RDNA3), plus what only CDNA has
//! (MFMA with AccVGPRs, packed f32 math, SDWA, GFX9 DPP).

pub mod decode;
pub(crate) mod exec;
mod lower;
pub mod opcodes;
mod print;

pub use decode::{Encoding, Extra, Inst, Target, decode};
pub(crate) use lower::{gfx11, lower};
pub use print::operand;

/// The CDNA decoder tables of an ISA (`None` for RDNA).
pub fn target(isa: crate::Isa) -> Option<Target> {
    match isa.family() {
        am_isa::Family::Cdna3 => Some(Target::Gfx942),
        am_isa::Family::Cdna4 => Some(Target::Gfx950),
        am_isa::Family::Rdna3 | am_isa::Family::Rdna4 => None,
    }
}
