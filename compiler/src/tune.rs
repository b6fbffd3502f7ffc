//! Tuning seam (filled in below).
