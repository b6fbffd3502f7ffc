//! Integration tests of am-mock, linked as one binary (one module per former test
//! binary: linking the workspace once instead of once per file keeps CI fast).
#![allow(clippy::unwrap_used, missing_docs)]

mod bounded;
mod bus;
mod discovery;
mod foreign_env;
mod gfx;
mod gmc;
mod hive;
mod ih;
mod navi4x;
mod pci;
mod psp;
mod regs;
mod sdma;
mod smu;
mod vf;
