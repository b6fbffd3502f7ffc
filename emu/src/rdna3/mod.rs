//! RDNA3 (gfx1100): decoder, disassembler and instruction semantics.

pub mod decode;
pub(crate) mod exec;
pub(crate) mod fast;
pub mod opcodes;
pub(crate) mod print;

pub use decode::{Dpp, Encoding, Inst, decode};
pub(crate) use exec::run;
pub use print::operand;
