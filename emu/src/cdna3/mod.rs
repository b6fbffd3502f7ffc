//! CDNA3 and CDNA4 (gfx942, gfx950) front-end: decoder, disassembler, and the lowering of their
//! instructions onto the interpreter's form (shared with RDNA3); what only CDNA has (MFMA with
//! AccVGPRs, packed f32 math, SDWA, GFX9 DPP) becomes operations the core runs in
//! `interp::exec_cdna`.

pub mod decode;
mod lower;
pub mod opcodes;
mod print;

pub use decode::{Encoding, Extra, Inst, Target, decode};
pub(crate) use lower::lower;
pub use print::operand;

/// The CDNA decoder tables of an ISA (`None` for RDNA).
pub fn target(isa: crate::Isa) -> Option<Target> {
    match isa.family() {
        am_isa::Family::Cdna3 => Some(Target::Gfx942),
        am_isa::Family::Cdna4 => Some(Target::Gfx950),
        am_isa::Family::Rdna3 | am_isa::Family::Rdna4 => None,
    }
}
