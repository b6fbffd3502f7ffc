//! Integration tests of am-emu, linked as one binary (one module per former test
//! binary: linking the workspace once instead of once per file keeps CI fast).
#![allow(clippy::unwrap_used, missing_docs)]

mod cdna;
mod common;
mod kernels;
mod llvm_ir;
mod mfma;
mod objdump;
mod rdna4;
mod robustness;
mod semantics;
mod vectors;
mod vectors_cdna;
mod wmma;
