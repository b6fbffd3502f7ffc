//! RDNA3 (then CDNA) shader interpreter used by the mock.

pub mod rdna3;
