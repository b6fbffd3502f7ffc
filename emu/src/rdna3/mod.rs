//! RDNA3 (gfx1100) front-end: the decoder of gfx11 and gfx12 words into the interpreter's
//! [`Inst`] and the disassembler. gfx11's opcode numbering is the form's own
//! ([`opcodes`], re-exported from the interpreter core), so gfx11 code needs no lowering.

pub mod decode;
pub(crate) mod print;

/// gfx1100's opcode tables: the numbering of the interpreter's instruction form.
pub use crate::interp::opcodes;
pub use decode::{Dpp, Encoding, Inst, decode};
pub use print::operand;
