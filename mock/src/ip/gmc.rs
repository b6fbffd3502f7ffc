//! GMC: the GC and MM hubs (VM contexts, system aperture, FB location, invalidation
//! engines). Registers hold their values; the behaviour of `mock-device.md` item 5
//! (non-zero FB base, TLB snapshot at invalidation, ENG17 ACK per vmid) is the bring-up's.

use super::IpModel;

/// GMC model state.
#[derive(Debug, Default)]
pub struct Gmc {}

impl IpModel for Gmc {}
