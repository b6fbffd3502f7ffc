//! Integration tests of am-autogen, linked as one binary (one module per former test
//! binary: linking the workspace once instead of once per file keeps CI fast).
#![allow(clippy::unwrap_used, missing_docs)]

mod packets;
mod regs;
mod structs;
