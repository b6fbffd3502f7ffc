//! The AM driver: a userspace driver for AMD GPUs, brought up from the PCI BARs.
