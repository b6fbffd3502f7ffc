//! PCI devices: the one trait every backend implements, and the device specification.
//!
//! Backends: `sysfs` and `vfio` for real hardware on this machine, `remote` for a device
//! exported by `am serve` on another one, and — in its own crate — the mock.

pub mod remote;

use std::sync::Arc;
use std::time::Duration;

use crate::{Error, ErrorKind, Result};

pub mod caps;
#[cfg(test)]
mod fake_sysfs;
pub mod ids;
pub mod lock;
pub mod mapping;
pub mod spec;
pub mod sysfs;
pub mod vfio;

pub use spec::{Bdf, DeviceSpec, open_pci, open_spec, register_mock};

/// PCI vendor id of AMD/ATI.
pub const AMD_VENDOR_ID: u16 = 0x1002;

/// Config-space offset of the command register.
pub const PCI_COMMAND: u16 = 0x04;
/// Command register: memory space enable.
pub const PCI_COMMAND_MEMORY: u16 = 1 << 1;
/// Command register: bus master enable (gates the device's DMA).
pub const PCI_COMMAND_MASTER: u16 = 1 << 2;

/// Size of one page of system memory as the GPU sees it; `SysMem::bus_addrs` has one entry
/// per page of this size.
pub const SYSMEM_PAGE_SIZE: usize = 4096;

/// Where a BAR sits on the bus and how large it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BarInfo {
    /// BAR index (0..=5).
    pub index: u8,
    /// Bus address of the BAR.
    pub bus_addr: u64,
    /// Size in bytes.
    pub size: u64,
}

/// Another device's BAR as this device's DMA reaches it (PCIe peer-to-peer,
/// [`PciDevice::peer_bar`]): the address page-table entries hold (with `SYSTEM` set) for the
/// BAR's first byte. Holding it keeps what the backend set up for the path (an IOMMU
/// mapping under VFIO); dropping it takes that down, so the entries must be gone first.
pub struct PeerBar {
    /// The device whose BAR it is.
    pub peer: String,
    /// Which BAR.
    pub index: u8,
    /// The DMA address of the BAR's first byte, as this device emits it.
    pub dma_addr: u64,
    /// Bytes of the BAR reachable from `dma_addr`.
    pub size: u64,
    /// What keeps the path up (dropped with it).
    pub keep: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl std::fmt::Debug for PeerBar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerBar")
            .field("peer", &self.peer)
            .field("index", &self.index)
            .field("dma_addr", &format_args!("{:#x}", self.dma_addr))
            .field("size", &format_args!("{:#x}", self.size))
            .finish_non_exhaustive()
    }
}

/// One step of an access through index/data registers (`MM_INDEX`/`MM_DATA`, the RSMU and
/// PCIE INDEX2 pairs), at byte offsets of the BAR; see [`Bar::indexed`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexStep {
    /// Write an index register: aim the window. A server sharing the device with other
    /// clients puts the register back afterwards, so that nobody else's window moves.
    Aim {
        /// Byte offset of the index register.
        offset: u64,
        /// What to write.
        value: u32,
    },
    /// Read the data register the window shows.
    Read {
        /// Byte offset of the data register.
        offset: u64,
    },
    /// Write the data register.
    Write {
        /// Byte offset of the data register.
        offset: u64,
        /// What to write.
        value: u32,
    },
}

/// Who may write a device that several clients share (a served device; see
/// [`PciDevice::ownership`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// Nobody yet: the first client that writes becomes the owner.
    Nobody,
    /// This client.
    Mine,
    /// Another client, as the server describes it (`127.0.0.1:PORT since 10:31:02 UTC`).
    Other(String),
}

/// What an emulated device's shaders executed from one piece of code
/// ([`PciDevice::executed_code`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecutedCode {
    /// Dispatches that started there (a dispatch spread over several XCCs counts once per
    /// XCC).
    pub dispatches: u64,
    /// Wave-instructions they executed.
    pub wave_instructions: u64,
}

/// What the SMU answered a message: `C2PMSG_90` (1 is `PPSMC_Result_OK`) and `C2PMSG_82`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmuAnswer {
    /// The response code.
    pub response: u32,
    /// The message's result.
    pub value: u32,
}

/// A BAR of a device other clients share, as the server sharing it uses it for itself:
/// every [`Bar::indexed`] access puts the index registers back ([`Bar::shared_indexed`]),
/// so that a client aiming the window with plain writes finds it where it left it.
pub struct SharedBar(pub Arc<dyn Bar>);

impl Bar for SharedBar {
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn read32(&self, offset: u64) -> Result<u32> {
        self.0.read32(offset)
    }
    fn write32(&self, offset: u64, value: u32) -> Result<()> {
        self.0.write32(offset, value)
    }
    fn read_bytes(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.0.read_bytes(offset, buf)
    }
    fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.0.write_bytes(offset, data)
    }
    fn indexed(&self, steps: &[IndexStep]) -> Result<u32> {
        self.0.shared_indexed(steps)
    }
    fn shared_indexed(&self, steps: &[IndexStep]) -> Result<u32> {
        self.0.shared_indexed(steps)
    }
}

/// A mapped BAR: bounds-checked access at byte offsets.
///
/// Registers are 32-bit (`read32`/`write32` at dword-aligned offsets), doorbells 64-bit,
/// VRAM is a byte window. Every access outside the BAR is an [`crate::ErrorKind::OutOfRange`].
/// An implementation provides the byte copies; the sized accesses default to one copy each,
/// and a backend whose hardware needs a single access of that width overrides them.
pub trait Bar: Send + Sync {
    /// Size of the BAR in bytes.
    fn len(&self) -> u64;
    /// Whether the BAR has no bytes at all.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Read a 32-bit value.
    fn read32(&self, offset: u64) -> Result<u32> {
        let mut b = [0u8; 4];
        self.read_bytes(offset, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    /// Write a 32-bit value.
    fn write32(&self, offset: u64, value: u32) -> Result<()> {
        self.write_bytes(offset, &value.to_le_bytes())
    }
    /// Read a 64-bit value (doorbells, 64-bit VRAM words).
    fn read64(&self, offset: u64) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read_bytes(offset, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    /// Write a 64-bit value as one access (doorbells).
    fn write64(&self, offset: u64, value: u64) -> Result<()> {
        self.write_bytes(offset, &value.to_le_bytes())
    }
    /// Read one byte (byte-wide registers such as the VF mailbox control).
    fn read8(&self, offset: u64) -> Result<u8> {
        let mut b = [0u8; 1];
        self.read_bytes(offset, &mut b)?;
        Ok(b[0])
    }
    /// Write one byte as a single byte-wide access.
    fn write8(&self, offset: u64, value: u8) -> Result<()> {
        self.write_bytes(offset, &[value])
    }
    /// The BAR's mapping in this process's address space, where it is one (a `mmap` of a
    /// real device's BAR): what an IOMMU mapping of it for another device's DMA is made of
    /// ([`PciDevice::peer_bar`] under VFIO). `None` for a BAR reached otherwise.
    fn host_ptr(&self) -> Option<*mut u8> {
        None
    }
    /// Copy bytes out of the BAR.
    fn read_bytes(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// Copy bytes into the BAR.
    fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<()>;
    /// One access through index/data registers, kept whole: the dword accesses of `steps`
    /// in order; answers the value of the last [`IndexStep::Read`] (0 without one). Here
    /// they are plain accesses (a driver keeps its own window to itself); a backend whose
    /// device other clients share does them as one transaction they cannot split.
    fn indexed(&self, steps: &[IndexStep]) -> Result<u32> {
        plain_index_steps(self, steps)
    }
    /// [`Bar::indexed`] for one of several clients sharing the device (what a server runs
    /// for an INDEXED request): afterwards the index registers the steps aimed are as they
    /// were (also after a failed step), so a client aiming the window with plain writes
    /// finds it where it left it. The caller keeps other accesses out meanwhile. A backend
    /// that is itself a client of a shared device (a relayed remote device) sends the whole
    /// as one request, for its server to do the same.
    fn shared_indexed(&self, steps: &[IndexStep]) -> Result<u32> {
        restoring_index_steps(self, steps)
    }
}

/// The steps of [`Bar::indexed`] as plain dword accesses, one after the other; the value of
/// the last read.
pub fn plain_index_steps<B: Bar + ?Sized>(bar: &B, steps: &[IndexStep]) -> Result<u32> {
    let mut value = 0;
    for step in steps {
        match *step {
            IndexStep::Aim { offset, value: v } | IndexStep::Write { offset, value: v } => {
                bar.write32(offset, v)?
            }
            IndexStep::Read { offset } => value = bar.read32(offset)?,
        }
    }
    Ok(value)
}

/// [`plain_index_steps`], with every index register the steps aim read first and put back
/// afterwards (in reverse order), also after a failed step.
pub fn restoring_index_steps<B: Bar + ?Sized>(bar: &B, steps: &[IndexStep]) -> Result<u32> {
    let mut saved: Vec<(u64, u32)> = Vec::new();
    for step in steps {
        if let IndexStep::Aim { offset, .. } = *step
            && !saved.iter().any(|&(o, _)| o == offset)
        {
            saved.push((offset, bar.read32(offset)?));
        }
    }
    let result = plain_index_steps(bar, steps);
    let restored = saved
        .iter()
        .rev()
        .try_for_each(|&(at, v)| bar.write32(at, v));
    let value = result?;
    restored.map(|()| value)
}

/// DMA-able system memory: the CPU reaches it through this object, the GPU through the bus
/// address of each 4 KiB page.
pub trait SysMem: Send + Sync {
    /// Size in bytes (a multiple of [`SYSMEM_PAGE_SIZE`]).
    fn len(&self) -> usize;
    /// Whether the region has no bytes at all.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Bus address of every 4 KiB page, in order.
    fn bus_addrs(&self) -> &[u64];
    /// Copy bytes out of the region.
    fn read_bytes(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// Copy bytes into the region.
    fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<()>;
    /// Read a little-endian 32-bit value.
    fn read32(&self, offset: u64) -> Result<u32> {
        let mut b = [0u8; 4];
        self.read_bytes(offset, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    /// Write a little-endian 32-bit value.
    fn write32(&self, offset: u64, value: u32) -> Result<()> {
        self.write_bytes(offset, &value.to_le_bytes())
    }
    /// Read a little-endian 64-bit value.
    fn read64(&self, offset: u64) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read_bytes(offset, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    /// Write a little-endian 64-bit value.
    fn write64(&self, offset: u64, value: u64) -> Result<()> {
        self.write_bytes(offset, &value.to_le_bytes())
    }
}

/// A PCI function the driver can bring up: config space, BARs, DMA memory, reset.
///
/// Implemented by the sysfs, VFIO and remote backends here and by the mock device in
/// `am-mock`.
pub trait PciDevice: Send + Sync {
    /// The device's name as the user gave it (`0000:03:00.0`, `mock:navi31:0`,
    /// `remote:127.0.0.1:6667:0`); every error message starts with it.
    fn name(&self) -> &str;
    /// Which backend this is (`sysfs`, `vfio`, `remote`, `mock`).
    fn backend(&self) -> &'static str;
    /// Read `size` (1, 2 or 4) bytes of config space.
    fn config_read(&self, offset: u16, size: u8) -> Result<u32>;
    /// Write `size` (1, 2 or 4) bytes of config space.
    fn config_write(&self, offset: u16, size: u8, value: u32) -> Result<()>;
    /// Bus address and size of a BAR.
    fn bar_info(&self, index: u8) -> Result<BarInfo>;
    /// Map a BAR (the same mapping is returned on every call).
    fn bar(&self, index: u8) -> Result<Arc<dyn Bar>>;
    /// Resize a BAR to the largest size the device supports. Must be called before the BAR
    /// is mapped. Backends that cannot resize leave the BAR as it is.
    fn resize_bar(&self, index: u8) -> Result<()>;
    /// Allocate DMA-able system memory of `size` bytes (rounded up to 4 KiB); `contiguous`
    /// asks for one physically contiguous run.
    fn alloc_sysmem(&self, size: usize, contiguous: bool) -> Result<Arc<dyn SysMem>>;
    /// Function-level reset of the device.
    fn reset(&self) -> Result<()>;
    /// Wait for an interrupt for at most `timeout`; `Ok(false)` on timeout.
    fn wait_irq(&self, timeout: Duration) -> Result<bool> {
        let _ = timeout;
        Err(Error::new(
            self.name().to_string(),
            ErrorKind::Unsupported {
                op: "interrupt wait",
                backend: self.backend(),
            },
        ))
    }

    /// Read system memory the device reaches by DMA, at a bus address, without the device
    /// taking part (`am ring` reads rings and indirect buffers another process wrote).
    /// Backends answer only for memory they can see: the mock its whole DMA arena, a remote
    /// server the allocations it made; the local backends cannot read another process's
    /// memory, and refuse.
    fn dma_read(&self, bus: u64, buf: &mut [u8]) -> Result<()> {
        let _ = (bus, buf);
        Err(Error::new(
            self.name().to_string(),
            ErrorKind::Unsupported {
                op: "system-memory read by bus address",
                backend: self.backend(),
            },
        ))
    }

    /// BAR `bar` of `peer` as this device's DMA reaches it, for PCIe peer-to-peer access
    /// (this device's engines read and write the peer's VRAM through its BAR0): the address
    /// to put in page-table entries, and whatever keeps the path up. Refused where the
    /// backend cannot make or vouch for the path — by default, and for remote devices (on
    /// another host there is no common bus).
    fn peer_bar(&self, peer: &dyn PciDevice, bar: u8) -> Result<PeerBar> {
        let _ = (peer, bar);
        Err(Error::new(
            self.name().to_string(),
            ErrorKind::Unsupported {
                op: "PCIe peer-to-peer access",
                backend: self.backend(),
            },
        ))
    }

    /// What a model's shaders executed from the code at GPU address `entry` (a kernel's
    /// first instruction, as `COMPUTE_PGM_LO/HI` give it): dispatches and wave-instructions,
    /// summed since the device was made. Only a device whose shaders run in an emulator
    /// knows this — the mock, for a deterministic measure of a kernel's cost
    /// (`am_tensor`'s kernel search times candidates by it); hardware and the other
    /// backends answer `None` (hardware's counterpart, the SQ performance counters, is not
    /// programmed by this driver), and callers fall back to timestamps.
    fn executed_code(&self, entry: u64) -> Result<Option<ExecutedCode>> {
        let _ = entry;
        Ok(None)
    }

    /// Who may write the device, for backends whose device other clients share (a served
    /// device: the first connection that writes owns it until it closes, the others read).
    /// `None` where the question does not arise: a local device is locked by its opener.
    fn ownership(&self) -> Result<Option<Ownership>> {
        Ok(None)
    }

    /// Send a query to the SMU of a device another client may own, as one transaction of
    /// the server sharing it (a served device: `am serve` runs it between the owner's
    /// messages, see [`crate::ip::smu::SharedMailbox`]). `Ok(None)` where there is no such
    /// server, or it does not offer this: the caller writes the mailbox itself.
    fn smu_query(&self, message: u32, param: u32, timeout: Duration) -> Result<Option<SmuAnswer>> {
        let _ = (message, param, timeout);
        Ok(None)
    }

    /// Something the driver tells an access trace ([`crate::trace`]): a phase mark, a poll,
    /// a mailbox exchange, the discovery table. Only a tracing device listens; for every
    /// other backend this is an empty call, which is all tracing costs when it is off.
    fn trace(&self, event: crate::trace::TraceEvent<'_>) {
        let _ = event;
    }

    /// PCI vendor id.
    fn vendor_id(&self) -> Result<u16> {
        Ok(self.config_read(0x00, 2)? as u16)
    }
    /// PCI device id.
    fn device_id(&self) -> Result<u16> {
        Ok(self.config_read(0x02, 2)? as u16)
    }
    /// Turn bus mastering (the device's DMA) on or off.
    fn set_bus_master(&self, enable: bool) -> Result<()> {
        let cmd = self.config_read(PCI_COMMAND, 2)? as u16;
        let cmd = if enable {
            cmd | PCI_COMMAND_MASTER | PCI_COMMAND_MEMORY
        } else {
            cmd & !PCI_COMMAND_MASTER
        };
        self.config_write(PCI_COMMAND, 2, u32::from(cmd))
    }
}
