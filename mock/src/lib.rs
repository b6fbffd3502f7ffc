//! A strict mock of an AMD GPU on the PCI bus.
pub mod vf_pf;
