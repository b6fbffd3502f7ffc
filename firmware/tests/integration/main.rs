//! Integration tests of am-firmware, linked as one binary (one module per former test
//! binary: linking the workspace once instead of once per file keeps CI fast).
#![allow(clippy::unwrap_used, missing_docs)]

mod common;
mod debian;
mod malformed;
mod names;
mod synth;
