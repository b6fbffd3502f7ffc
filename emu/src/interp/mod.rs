//! The ISA-independent interpreter core: the instruction form every front-end produces
//! ([`inst`], numbered as gfx11 in [`opcodes`]), wave state and dispatch ([`wave`]), memory
//! ([`memory`]), float conversions ([`float`]) and the execution of the form: the shared
//! semantics and run loop ([`exec`]), the hot forms ([`fast`]), the operations of the extended
//! encodings that only CDNA ([`exec_cdna`]) or gfx12 ([`exec_gfx12`]) code lowers to, and
//! WMMA ([`wmma`]).
//!
//! Nothing here imports a family front-end (`rdna3`, `rdna4`, `cdna3`): the core runs a
//! [`crate::Program`], which `program.rs` predecodes through them, and its errors print
//! instructions through [`crate::Program`] too.
//!
//! The hot loops are multiversioned (baseline x86-64 and AVX2+FMA, chosen at run time) except
//! in this crate's unit-test build, which compiles the baseline alone: the same source, and a
//! third less of the test build's compile time; every other build runs the selected version.

pub(crate) mod exec;
pub(crate) mod exec_cdna;
pub(crate) mod exec_gfx12;
pub(crate) mod fast;
pub mod float;
pub(crate) mod inst;
pub mod memory;
pub(crate) mod names;
pub mod opcodes;
pub(crate) mod wave;
pub(crate) mod wmma;
