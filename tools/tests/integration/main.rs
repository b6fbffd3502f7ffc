//! Integration tests of the `am` command, linked as one binary (one module per former test
//! binary: linking the workspace once instead of once per file keeps CI fast).
#![allow(clippy::unwrap_used, missing_docs)]

mod bench_allreduce_cli;
mod bench_emu_cli;
mod bench_kernels_cli;
mod bench_runtime_cli;
mod boot_cli;
mod common;
mod compile_cli;
mod demo_cli;
mod demo_gpt_cli;
mod doctor_cli;
mod fw_cli;
mod hive_reset_cli;
mod info_cli;
mod ops_cli;
mod ring_cli;
mod run_cli;
mod serve_cli;
mod trace_cli;
