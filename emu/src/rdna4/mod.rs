//! RDNA4 (gfx1200, gfx1201): the generated opcode tables of gfx12. Decoding and printing are
//! [`crate::rdna3`]'s with [`crate::rdna3::decode::Gen::Gfx12`]; gfx1200 and gfx1201 share
//! one ISA (LLVM 22 gives both the same tables and encodings).

pub mod opcodes;
