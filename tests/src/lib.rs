//! Shared helpers of the workspace's end-to-end tests: a booted mock device with buffers
//! and queues ([`rig`]), runtime devices with the emulator's test kernels ([`runtime`]), and hand-built PM4 ([`pm4`]) and SDMA ([`sdma`]) packets, written
//! from the packet layouts of `nvd.h`/`soc15d.h` and the SDMA packet headers independently
//! of the mock's decoders.
#![allow(clippy::unwrap_used)]

pub mod kernels;
pub mod pm4;
pub mod rig;
pub mod runtime;
pub mod sdma;
