//! Lazy tensor layer.
//!
//! Not built yet: this crate only reserves its place in the dependency chain.
