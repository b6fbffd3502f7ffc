//! Kernel IR, lowering to LLVM IR for `amdgcn-amd-amdhsa`, and code objects.
//!
//! Not built yet: this crate only reserves its place in the dependency chain.
