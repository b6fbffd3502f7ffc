//! CDNA3 and CDNA4 (gfx942, gfx950): decoder, disassembler, and the lowering of their
//! instructions onto the interpreter's semantics (shared with RDNA3), plus what only CDNA has
//! (MFMA with AccVGPRs, packed f32 math, SDWA, GFX9 DPP).

pub mod decode;
pub mod opcodes;
mod print;

pub use decode::{Encoding, Extra, Inst, Target, decode};
pub use print::operand;
