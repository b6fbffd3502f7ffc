//! AMD hardware tables generated from the Linux 6.12 `amdgpu` headers.
//!
//! Everything under `generated/` is written by `scripts/autogen` and never edited by hand.
