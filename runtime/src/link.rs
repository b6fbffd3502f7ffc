//! How two devices reach each other's memory: the transport a copy between them takes,
//! chosen per pair ([`Device::link_to`]).
//!
//! Inside an XGMI hive the destination's SDMA engine reads the source's VRAM through a
//! peer mapping ([`Device::map_peer`]). Outside one, where the platform lets the two talk
//! over PCIe and the source shows all its VRAM through BAR0 (large BAR), the destination's
//! SDMA reads the source's VRAM through that BAR: system-page entries at the BAR's bus
//! address as the destination's DMA reaches it ([`am_driver::PciDevice::peer_bar`]) — what
//! Linux's `amdgpu_device_is_peer_accessible` allows and KFD maps (`kfd_mem_attach`).
//! Between any other two devices the bytes go through host memory (read from one device,
//! written to the other, 4 MiB at a time); [`Device::link_with_reason`] says why.

use std::sync::{Arc, Weak};

use am_driver::hive::{PeerVram, check_one_hive};
use am_driver::mm::VirtMapping;
use am_driver::pci::PeerBar;
use am_isa::sync::lock;

use crate::device::Inner;
use crate::{Device, Error, MemKind, Result};

/// Turns PCIe peer-to-peer off when `0` (as amdgpu's `pcie_p2p=0` module parameter does):
/// copies between devices outside a hive then go through host memory.
pub const PCIE_P2P_ENV: &str = "AM_PCIE_P2P";

/// The path a copy between two devices takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Link {
    /// The same device: a copy on its own copy queue.
    Local,
    /// XGMI: both are members of one hive; the destination's SDMA engine reads the source's
    /// VRAM through a peer mapping.
    Xgmi,
    /// PCIe peer-to-peer: the destination's SDMA engine reads the source's VRAM through the
    /// source's BAR0 (system-page entries at its bus address). `generation` is the PCIe
    /// generation of the slower of the two parts (Navi 31: 4; Navi 48/44, MI300X/MI350X: 5).
    PciePeer {
        /// PCIe generation (4 or 5) of the slower device of the pair.
        generation: u8,
    },
    /// Host memory: the source's memory is read by the CPU (BAR0, or its copy queue where
    /// BAR0 is small) and written to the destination.
    Host,
}

impl Link {
    /// A short name for reports (`local`, `xgmi`, `pcie`, `host`).
    pub fn name(self) -> &'static str {
        match self {
            Link::Local => "local",
            Link::Xgmi => "xgmi",
            Link::PciePeer { .. } => "pcie",
            Link::Host => "host",
        }
    }

    /// What this link moves on real hardware, in GB/s per direction, for comparing the
    /// mock's figures with a plan on paper: one XGMI link of an MI300X (AMD's data sheet:
    /// 128 GB/s bidirectional per link, seven links to the other seven members of a hive of
    /// eight), PCIe x16 for a peer-to-peer copy (4.0: 16 GT/s × 16 lanes with 128b/130b
    /// coding ≈ 31.5 GB/s, Navi 31's link; 5.0: ≈ 63 GB/s, MI300X's), and PCIe 5.0 x16 for
    /// host staging, which crosses it twice. `None` for a local copy.
    pub fn paper_gbps(self) -> Option<f64> {
        match self {
            Link::Local => None,
            Link::Xgmi => Some(64.0),
            Link::PciePeer { generation: 4 } => Some(31.5),
            Link::PciePeer { .. } => Some(63.0),
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
    /// apart, [`Device::map_peer`]); a refusal there means host memory. Two devices outside
    /// one hive take PCIe peer-to-peer where [`Device::link_with_reason`]'s checks pass.
    pub fn link_to(&self, other: &Device) -> Result<Link> {
        self.link_with_reason(other).map(|(link, _)| link)
    }

    /// [`Device::link_to`], and in words why the pair takes that link (for host memory:
    /// what stops the peer paths — not in one hive, and the PCIe check that failed).
    pub fn link_with_reason(&self, other: &Device) -> Result<(Link, String)> {
        if Arc::ptr_eq(&self.0, &other.0) {
            return Ok((Link::Local, "the same device".into()));
        }
        if self.hive_layout_with(other)? {
            let probe = other.alloc(4096, MemKind::Vram)?;
            return match self.map_peer(&probe) {
                Ok(_) => Ok((Link::Xgmi, "members of one XGMI hive".into())),
                Err(Error::Driver(am_driver::Error {
                    kind: am_driver::ErrorKind::NotInOneHive { reason, .. },
                    ..
                })) => Ok((Link::Host, reason)),
                Err(e) => Err(e),
            };
        }
        Ok(match self.pcie_route(other)? {
            Ok(bar) => (
                Link::PciePeer {
                    generation: self.pcie_gen().min(other.pcie_gen()),
                },
                format!(
                    "PCIe peer-to-peer: {} reads {}'s VRAM through its BAR0 at {:#x}",
                    self.0.name, other.0.name, bar.dma_addr
                ),
            ),
            Err(reason) => (Link::Host, format!("not in one XGMI hive, and {reason}")),
        })
    }

    /// The PCIe generation of this part's link, from its GC version (the products: Navi 31
    /// is PCIe 4.0 x16; Navi 48/44 and MI300X/MI350X are PCIe 5.0 x16).
    fn pcie_gen(&self) -> u8 {
        if self.0.info.gc_major == 11 { 4 } else { 5 }
    }

    /// The PCIe peer path from this device to `owner`'s VRAM (asked once per pair and kept):
    /// `owner`'s BAR0 as this device's DMA reaches it, or why there is none — the checks of
    /// Linux's `amdgpu_device_is_peer_accessible`: peer-to-peer not turned off
    /// ([`PCIE_P2P_ENV`], its `pcie_p2p` parameter), `owner` large BAR (its BAR0 shows all
    /// its VRAM: amdgpu and tinygrad refuse a small-BAR peer), the backend's path to the
    /// BAR (the platform's word, `pci_p2pdma_distance`; remote devices have none), and the
    /// BAR inside this device's DMA mask.
    pub(crate) fn pcie_route(
        &self,
        owner: &Device,
    ) -> Result<std::result::Result<Arc<PeerBar>, String>> {
        let mut routes = lock(&self.0.pcie);
        routes.retain(|r| r.owner.strong_count() > 0);
        if let Some(r) = routes
            .iter()
            .find(|r| std::ptr::eq(r.owner.as_ptr(), Arc::as_ptr(&owner.0)))
        {
            return Ok(r.route.clone());
        }
        let route = self.find_pcie_route(owner)?;
        routes.push(PcieRoute {
            owner: Arc::downgrade(&owner.0),
            route: route.clone(),
        });
        Ok(route)
    }

    fn find_pcie_route(&self, owner: &Device) -> Result<std::result::Result<Arc<PeerBar>, String>> {
        if std::env::var(PCIE_P2P_ENV).is_ok_and(|v| v.trim() == "0") {
            return Ok(Err(format!("{PCIE_P2P_ENV}=0 turns PCIe peer-to-peer off")));
        }
        let theirs = &owner.0;
        if !theirs.info.large_bar {
            let bar = theirs.pci.bar_info(0)?.size;
            return Ok(Err(format!(
                "{} is small BAR (its BAR0 shows {} MiB of its {} MiB of VRAM): peers reach \
                 VRAM only through a BAR that shows all of it",
                theirs.name,
                bar >> 20,
                theirs.info.vram_bytes >> 20
            )));
        }
        let bar = match self.0.pci.peer_bar(&*theirs.pci, 0) {
            Ok(bar) => bar,
            Err(e) => return Ok(Err(format!("no PCIe peer path: {e}"))),
        };
        let bits = self.0.with_driver(|d| Ok(d.dma_bits()))?;
        let end = bar.dma_addr.checked_add(bar.size);
        if end.is_none_or(|e| e > 1u64 << bits) {
            return Ok(Err(format!(
                "{}'s BAR0 at {:#x}+{:#x} is beyond {}'s {bits}-bit DMA mask",
                theirs.name, bar.dma_addr, bar.size, self.0.name
            )));
        }
        Ok(Ok(Arc::new(bar)))
    }

    /// Map `owner`'s VRAM `pv` into this device: over XGMI where their layouts put them in
    /// one hive, else over PCIe through `owner`'s BAR0 where [`Device::pcie_route`] finds a
    /// path; whether it went over XGMI. Refused with `NotInOneHive` naming both reasons.
    pub(crate) fn map_peer_vram(
        &self,
        owner: &Device,
        pv: &PeerVram,
    ) -> Result<(VirtMapping, bool)> {
        let hive_reason = match self.0.with_driver(|d| d.map_peer(pv)) {
            Ok(m) => return Ok((m, true)),
            Err(Error::Driver(am_driver::Error {
                kind: am_driver::ErrorKind::NotInOneHive { reason, .. },
                ..
            })) => reason,
            Err(e) => return Err(e),
        };
        match self.pcie_route(owner)? {
            Ok(bar) => {
                let m = self.0.with_driver(|d| d.map_peer_bar(pv, &bar))?;
                owner.0.add_bar_writer(&self.0);
                Ok((m, false))
            }
            Err(pcie) => Err(Error::Driver(am_driver::Error::new(
                &self.0.name,
                am_driver::ErrorKind::NotInOneHive {
                    peer: owner.0.name.clone(),
                    reason: format!("{hive_reason}; and {pcie}"),
                },
            ))),
        }
    }
}

/// One device's PCIe peer path to another ([`Device::pcie_route`]).
pub(crate) struct PcieRoute {
    owner: Weak<Inner>,
    route: std::result::Result<Arc<PeerBar>, String>,
}
