//! Instruction semantics (filled in below).
pub(crate) fn step() {}
