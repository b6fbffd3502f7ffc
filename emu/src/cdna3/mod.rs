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

/// The CDNA target of an ISA (`None` for RDNA3).
pub fn target(isa: crate::Isa) -> Option<Target> {
    match isa {
        crate::Isa::Gfx1100 | crate::Isa::Gfx1200 | crate::Isa::Gfx1201 => None,
        crate::Isa::Gfx942 => Some(Target::Gfx942),
        crate::Isa::Gfx950 => Some(Target::Gfx950),
    }
}
