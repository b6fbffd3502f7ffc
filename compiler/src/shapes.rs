//! Kernel shapes that matter on these GPUs (filled in below).
