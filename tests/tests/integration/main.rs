//! Integration tests of the workspace (driver, mock, runtime and compiler together), linked as one binary (one module per former test
//! binary: linking the workspace once instead of once per file keeps CI fast).
#![allow(clippy::unwrap_used, missing_docs)]

mod boot;
mod discovery_regs;
mod doc_links;
mod engines_async;
mod engines_cp;
mod engines_dispatch;
mod engines_remote;
mod engines_sdma;
mod fault_matrix;
mod fuzz;
mod gfx_sdma;
mod hive;
mod psp_smu;
mod runtime;
mod runtime_compiler;
mod runtime_hive;
mod runtime_pcie;
mod vf_boot;
mod vf_mailbox;
