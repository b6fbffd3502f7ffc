//! Integration tests of am-compiler, linked as one binary (one module per former test
//! binary: linking the workspace once instead of once per file keeps CI fast).
#![allow(clippy::unwrap_used, missing_docs)]

mod common;
mod cpu;
mod features;
mod ir;
mod mma;
mod rdna4;
mod shapes;
