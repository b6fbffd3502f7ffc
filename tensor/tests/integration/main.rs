//! Integration tests of am-tensor, linked as one binary (one module per former test
//! binary: linking the workspace once instead of once per file keeps CI fast).
#![allow(clippy::unwrap_used, missing_docs)]

mod autograd;
mod beam;
mod cat;
mod common;
mod conv;
mod data_parallel;
mod errors;
mod fusion;
mod jit;
mod mma;
mod nn;
mod nn_train;
mod ops;
mod opt;
mod pcie;
mod seq;
mod shard;
