//! `am-tensor`: lazy tensors that run on the host CPU or on any `am` device (the mock
//! included) through the same code.
//!
//! - [`Tensor`]: creation, elementwise math with broadcasting, comparisons and `where`,
//!   reductions, views (reshape, permute, expand, pad, shrink, flip, cat), matmul,
//!   activations, softmax and cross-entropy, gather and one-hot; [`Tensor::to`] and
//!   [`Tensor::to_vec`].
//! - Sequence models: layer and RMS norms, embeddings, `tril`/`triu`, `cumsum`, attention,
//!   `multinomial`, `dropout`, and [`Rng`], random numbers a captured step draws anew on
//!   every replay.
//! - The scheduler turns the graph below what is realized into few kernels of the
//!   compiler's IR (elementwise chains and views fused, reductions fused with their inputs
//!   and outputs, memory of dead intermediates reused); `AM_DEBUG=2` logs each kernel with
//!   its shape and time. The kernel optimiser's choices come from per-target heuristics;
//!   `AM_BEAM=N` searches around them on the device and caches the winner on disk
//!   ([`Device::set_beam`]).
//! - Autograd for every operation ([`Tensor::backward`]).
//! - [`nn`]: `Linear`, `Sgd`, `Adam`, safetensors.
//! - [`Jit`]: a training step captured on its second run and replayed (a runtime graph on
//!   GPUs) with new inputs, without scheduling or compiling.
//! - [`Sharded`]: one tensor over several devices (pieces along an axis, or replicas),
//!   per-device operations and the collectives (`shard`).
//! - [`tune::DeviceTimer`]: the compiler's kernel timer on a runtime device.
//!
//! See `docs/TENSOR.md`.

mod autograd;
mod beam;
mod codegen;
mod conv;
mod device;
mod dtype;
mod error;
mod jit;
pub mod nn;
mod node;
mod opt;
mod schedule;
mod seq;
pub mod shard;
mod symbolic;
mod tensor;
pub mod tune;

pub use codegen::rand_reference;
pub use conv::ConvOptions;
pub use device::Device;
pub use dtype::{DType, Element};
pub use error::{Error, Result};
pub use jit::Jit;
pub use node::no_grad;
pub use seq::{Rng, rand_at_reference};
pub use shard::Sharded;
pub use tensor::{Operand, Tensor};
