//! HCQ runtime: signals, compute and copy queues, programs and graphs.
//!
//! Not built yet: this crate only reserves its place in the dependency chain
//! (`tensor → compiler → runtime → driver`).
