//! What the operator's tools (`am smi`, `am reg`, `am vm`, `am ring`) share: a device
//! opened to be looked at — discovery, registers and VRAM, never a driver instance — the
//! process holding it, the VF's init access, and memory reads by GPU physical address.
//!
//! Nothing here brings a device up or writes its state. A local device another process
//! holds (its lock file in `/tmp`, or `$AM_LOCK_DIR`) is not opened at all: the tools say
//! who holds it instead.

use std::sync::Arc;

use am_driver::discovery::Discovery;
use am_driver::pci::lock::{self, Holder};
use am_driver::pci::sysfs::{SysfsOptions, SysfsPci};
use am_driver::pci::{DeviceSpec, ids::known_gpu};
use am_driver::regs::Regs;
use am_driver::vf::{MailboxTimings, VfLease, VfMailbox};
use am_driver::{McLayout, PciDevice, Vram, read_mc_layout};
use anyhow::{Context, bail};

use crate::device::open_device;

/// The holder of a local device's lock, if another process has it. Specs that are not a
/// PCI address (mock, remote) have no lock file here.
pub fn holder(spec: &str) -> Option<Holder> {
    let DeviceSpec::Pci(bdf) = DeviceSpec::parse(spec).ok()? else {
        return None;
    };
    let h = lock::holder_in(&lock::lock_dir(), &bdf.to_string()).ok()??;
    (h.pid != Some(std::process::id())).then_some(h)
}

/// A device opened for inspection.
pub struct Target {
    /// The PCI function.
    pub pci: Arc<dyn PciDevice>,
    /// PCI device id.
    pub device_id: u16,
    /// Whether it is an SR-IOV VF.
    pub is_vf: bool,
    /// The init access this inspection asked of the PF (given back on drop); `None` on a
    /// PF, or on a VF whose registers another instance already un-gated.
    lease: Option<VfLease>,
    /// Discovery.
    pub discovery: Discovery,
    /// Registers by name.
    pub regs: Regs,
    /// Where VRAM sits in MC space, and the hive.
    pub mc: McLayout,
}

impl Drop for Target {
    fn drop(&mut self) {
        if let Some(mut l) = self.lease.take() {
            l.release();
        }
    }
}

impl Target {
    /// Open `spec` for inspection. A local device another process holds is refused with
    /// the holder named; a VF whose registers are gated asks its PF for init access first.
    pub fn open(spec: &str) -> anyhow::Result<Target> {
        if let Some(h) = holder(spec) {
            bail!(
                "{spec}: held by {h}; only read-only paths are safe beside it, and this one \
                 needs the device"
            );
        }
        Self::inspect(spec, open_device(spec)?)
    }

    /// Open the local device `spec` beside `holder`, the process holding its lock, to read
    /// what reads give: no lock is taken and every write is refused naming the holder, so a
    /// small BAR's discovery (read through the holder's `MM_INDEX` window) is refused too.
    pub fn open_beside(spec: &str, holder: &Holder) -> anyhow::Result<Target> {
        let DeviceSpec::Pci(bdf) = DeviceSpec::parse(spec)? else {
            bail!("{spec}: only a local PCI device has a holder to open it beside");
        };
        let pci = SysfsPci::open_beside(bdf, SysfsOptions::default(), holder)?;
        Self::inspect(spec, Arc::new(pci))
    }

    fn inspect(spec: &str, pci: Arc<dyn PciDevice>) -> anyhow::Result<Target> {
        let device_id = pci.device_id()?;
        let is_vf = am_driver::vf::is_vf(&*pci.bar(5)?)?;
        // The PF gates a VF's MMIO until it grants init access; when another instance holds
        // that lease the registers already answer, and asking (then releasing) would take
        // the lease from under it.
        let lease = if is_vf && vf_gated(&*pci)? {
            let mb = VfMailbox::new(pci.name(), pci.bar(5)?, MailboxTimings::default());
            mb.request_init_data()
                .with_context(|| format!("{spec}: init data not granted by the PF"))?;
            Some(
                mb.request_init_access()
                    .with_context(|| format!("{spec}: init access not granted by the PF"))?,
            )
        } else {
            None
        };
        let discovery = Discovery::read(&*pci)?;
        let regs = Regs::new(&*pci, &discovery)?;
        let mc = read_mc_layout(&regs)?;
        Ok(Target {
            pci,
            device_id,
            is_vf,
            lease,
            discovery,
            regs,
            mc,
        })
    }

    /// The device's name (its canonical spec).
    pub fn name(&self) -> &str {
        self.pci.name()
    }

    /// Product name from the PCI device id.
    pub fn product(&self) -> &'static str {
        known_gpu(self.device_id).map_or("unknown AMD GPU", |g| g.name)
    }

    /// Read VRAM at a physical address: BAR0 where it reaches, the `MM_INDEX` window beyond.
    pub fn vram_read(&self, paddr: u64, buf: &mut [u8]) -> anyhow::Result<()> {
        let (bar0, bar5) = (self.pci.bar(0)?, self.pci.bar(5)?);
        Vram::new(self.name(), bar0, bar5, self.discovery.vram_size).read(paddr, buf)?;
        Ok(())
    }

    /// Read one little-endian 64-bit word of VRAM.
    pub fn vram_u64(&self, paddr: u64) -> anyhow::Result<u64> {
        let mut b = [0u8; 8];
        self.vram_read(paddr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Read memory a page-table entry points at: VRAM (entry address less the XGMI offset)
    /// or system memory by bus address.
    pub fn phys_read(&self, phys: Phys, buf: &mut [u8]) -> anyhow::Result<()> {
        match phys {
            Phys::Vram(p) => self.vram_read(p, buf),
            Phys::System(bus) => self
                .pci
                .dma_read(bus, buf)
                .with_context(|| format!("{}: system memory at bus address {bus:#x}", self.name())),
        }
    }

    /// The VRAM physical address of an MC address (`MC = FB base + XGMI offset + paddr`).
    pub fn mc_to_paddr(&self, mc: u64) -> Option<u64> {
        mc.checked_sub(self.mc.fb_base + self.mc.xgmi_paddr_base)
    }
}

/// A physical address as a page-table entry gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phys {
    /// VRAM physical address (the XGMI offset removed).
    Vram(u64),
    /// System-memory bus address.
    System(u64),
}

/// Whether a VF's registers are gated (`RCC_CONFIG_MEMSIZE`, BAR5 dword 0xde3, reads all
/// ones until the PF grants init access).
fn vf_gated(pci: &dyn PciDevice) -> anyhow::Result<bool> {
    Ok(pci.bar(5)?.read32(0xde3 * 4)? == u32::MAX)
}

/// Parse a number written in decimal or `0x` hex (underscores allowed).
pub fn parse_u64(s: &str) -> anyhow::Result<u64> {
    let t = s.trim().replace('_', "");
    let r = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => t.parse::<u64>(),
    };
    r.with_context(|| format!("{s:?} is not a number (decimal or 0x hex)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_parse_in_decimal_and_hex() {
        assert_eq!(parse_u64("42").unwrap(), 42);
        assert_eq!(parse_u64("0x2000_0000_0000").unwrap(), 0x2000_0000_0000);
        assert!(parse_u64("0xzz").is_err());
    }
}
