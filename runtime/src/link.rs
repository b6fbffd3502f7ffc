//! How two devices reach each other's memory: the transport a copy between them takes,
//! chosen per pair ([`Device::link_to`]).
//!
//! Inside an XGMI hive the destination's SDMA engine reads the source's VRAM through a
//! peer mapping ([`Device::map_peer`]); between any other two devices the bytes go through
//! host memory (read from one device, written to the other, 4 MiB at a time). PCIe
//! peer-to-peer access through another device's BAR is not used: the mock does not model a
//! peer's BAR reached over the host bridge, so nothing here could be tested.

use std::sync::Arc;

use am_driver::hive::{PeerVram, check_one_hive};

use crate::{Device, Error, MemKind, Result};

/// The path a copy between two devices takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Link {
    /// The same device: a copy on its own copy queue.
    Local,
    /// XGMI: both are members of one hive; the destination's SDMA engine reads the source's
    /// VRAM through a peer mapping.
    Xgmi,
    /// Host memory: the source's memory is read by the CPU (BAR0, or its copy queue where
    /// BAR0 is small) and written to the destination.
    Host,
}

impl Link {
    /// A short name for reports (`local`, `xgmi`, `host`).
    pub fn name(self) -> &'static str {
        match self {
            Link::Local => "local",
            Link::Xgmi => "xgmi",
            Link::Host => "host",
        }
    }

    /// What this link moves on real hardware, in GB/s per direction, for comparing the
    /// mock's figures with a plan on paper: one XGMI link of an MI300X (AMD's data sheet:
    /// 128 GB/s bidirectional per link, seven links to the other seven members of a hive of
    /// eight), and PCIe 5.0 x16 (32 GT/s × 16 lanes with 128b/130b coding) for host
    /// staging, which crosses it twice. `None` for a local copy.
    pub fn paper_gbps(self) -> Option<f64> {
        match self {
            Link::Local => None,
            Link::Xgmi => Some(64.0),
            Link::Host => Some(63.0),
        }
    }
}

impl std::fmt::Display for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Device {
    /// Whether the two devices' layouts put them in one XGMI hive (the same device counts):
    /// the registers only, without [`Device::link_to`]'s probe through a peer mapping, so
    /// two hives of the same shape are not told apart here (a mapping between them is
    /// refused later, when it is made).
    pub fn hive_layout_with(&self, other: &Device) -> Result<bool> {
        if Arc::ptr_eq(&self.0, &other.0) {
            return Ok(true);
        }
        let mine = self.with_driver(|d| Ok(d.ctx().mc))?;
        let theirs = other.with_driver(|d| Ok(d.ctx().mc))?;
        let peer = PeerVram {
            device: other.name().to_string(),
            layout: theirs,
            paddrs: vec![],
        };
        Ok(check_one_hive(self.name(), &mine, &peer).is_ok())
    }

    /// The transport [`Device::copy_between`] takes from `other` to this device. Two
    /// devices whose layouts put them in one hive are asked once through a peer mapping of
    /// a small probe of `other`'s VRAM (the check that tells two hives of the same shape
    /// apart, [`Device::map_peer`]); a refusal there means host memory.
    pub fn link_to(&self, other: &Device) -> Result<Link> {
        if Arc::ptr_eq(&self.0, &other.0) {
            return Ok(Link::Local);
        }
        if !self.hive_layout_with(other)? {
            return Ok(Link::Host);
        }
        let probe = other.alloc(4096, MemKind::Vram)?;
        match self.map_peer(&probe) {
            Ok(_) => Ok(Link::Xgmi),
            Err(Error::Driver(am_driver::Error {
                kind: am_driver::ErrorKind::NotInOneHive { .. },
                ..
            })) => Ok(Link::Host),
            Err(e) => Err(e),
        }
    }
}
