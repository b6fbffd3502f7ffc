//! PCI configuration space of the mock function.
//!
//! Type-0 header, a standard capability list (power management, PCI Express, MSI, MSI-X)
//! and, in extended space, the Resizable BAR capability for BAR0. Read-only fields ignore
//! writes as hardware does; BAR registers keep only their address bits, so the usual
//! "write all-ones, read back the size mask" probe works.

use crate::profile::Profile;
use am_driver::pci::{PCI_COMMAND, PCI_COMMAND_MASTER, PCI_COMMAND_MEMORY};

/// Size of config space (PCIe extended).
pub const CONFIG_SIZE: usize = 4096;

/// Capability pointers of the standard list.
pub const CAP_PM: usize = 0x50;
/// PCI Express capability.
pub const CAP_PCIE: usize = 0x64;
/// MSI capability.
pub const CAP_MSI: usize = 0xa0;
/// MSI-X capability.
pub const CAP_MSIX: usize = 0xc0;
/// Resizable BAR extended capability.
pub const ECAP_REBAR: usize = 0x200;
/// PCIe extended capability id of Resizable BAR.
pub const PCI_EXT_CAP_ID_REBAR: u16 = 0x15;

const BAR_MEM64_PREF: u32 = 0b1100;
const BAR_MEM64: u32 = 0b0100;
const COMMAND_WRITABLE: u16 =
    0x0001 | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER | 0x0040 | 0x0100 | 0x0400;

/// Encoded Resizable BAR size: 0 = 1 MiB, 1 = 2 MiB, …
fn rebar_code(size: u64) -> u32 {
    (size.max(1 << 20).trailing_zeros() - 20).min(31)
}

/// Config space plus the BAR sizes it decodes.
#[derive(Clone, Debug)]
pub struct ConfigSpace {
    bytes: Vec<u8>,
    bar_sizes: [u64; 6],
    bar0_max: u64,
    bar0_min: u64,
}

impl ConfigSpace {
    /// Config space of a fresh function of `profile`, device `index`, whose BAR0 sits at bus
    /// address `bar0` (the window the process's bus gave it, `crate::bus`: distinct for every
    /// live device, so one device's DMA into another's BAR0 reaches that one alone).
    pub fn new(profile: &Profile, index: u32, bar0: u64) -> Self {
        let mut c = Self {
            bytes: vec![0u8; CONFIG_SIZE],
            bar_sizes: [
                profile.bar0_size,
                0,
                profile.bar2_size,
                0,
                0,
                profile.bar5_size,
            ],
            bar0_max: profile.bar0_max,
            bar0_min: profile.bar0_size.min(256 << 20),
        };
        c.put16(0x00, am_driver::pci::AMD_VENDOR_ID);
        c.put16(0x02, profile.device_id);
        // Memory decoding on (firmware enumerated the device), bus mastering off until a
        // driver turns it on.
        c.put16(PCI_COMMAND as usize, PCI_COMMAND_MEMORY);
        c.put16(0x06, 0x0010); // capability list present
        c.bytes[0x08] = profile.revision;
        c.bytes[0x09] = profile.class[2];
        c.bytes[0x0a] = profile.class[1];
        c.bytes[0x0b] = profile.class[0];
        c.bytes[0x0e] = if profile.is_vf { 0x00 } else { 0x80 };
        c.set_bar_addr(0, bar0);
        c.set_bar_addr(2, crate::bus::bar2_for(bar0));
        c.set_bar_addr(
            5,
            0xf000_0000u64.saturating_sub(u64::from(index) * 0x0100_0000),
        );
        c.put16(0x2c, am_driver::pci::AMD_VENDOR_ID);
        c.put16(0x2e, profile.subsystem_id);
        c.bytes[0x34] = CAP_PM as u8;
        c.bytes[0x3d] = 1; // INTA

        c.bytes[CAP_PM] = 0x01;
        c.bytes[CAP_PM + 1] = CAP_PCIE as u8;
        c.put16(CAP_PM + 2, 0x0003);
        c.bytes[CAP_PCIE] = 0x10;
        c.bytes[CAP_PCIE + 1] = CAP_MSI as u8;
        c.put16(CAP_PCIE + 2, 0x0002); // version 2, endpoint
        c.bytes[CAP_MSI] = 0x05;
        c.bytes[CAP_MSI + 1] = CAP_MSIX as u8;
        c.put16(CAP_MSI + 2, 0x0080); // 64-bit capable
        c.bytes[CAP_MSIX] = 0x11;
        c.bytes[CAP_MSIX + 1] = 0x00;

        if !profile.is_vf {
            // Extended capability header: id, version 1, next = 0.
            c.put32(0x100, 0x000B | (1 << 16) | ((ECAP_REBAR as u32) << 20)); // vendor-specific
            c.put32(ECAP_REBAR, u32::from(PCI_EXT_CAP_ID_REBAR) | (1 << 16));
            let mut supported = 0u32;
            let mut s = c.bar0_min;
            while s <= c.bar0_max {
                supported |= 1 << (rebar_code(s) + 4);
                s <<= 1;
            }
            c.put32(ECAP_REBAR + 4, supported);
            c.sync_rebar_control();
        }
        c
    }

    fn put16(&mut self, off: usize, v: u16) {
        self.bytes[off..off + 2].copy_from_slice(&v.to_le_bytes());
    }

    fn put32(&mut self, off: usize, v: u32) {
        self.bytes[off..off + 4].copy_from_slice(&v.to_le_bytes());
    }

    fn get32(&self, off: usize) -> u32 {
        u32::from_le_bytes([
            self.bytes[off],
            self.bytes[off + 1],
            self.bytes[off + 2],
            self.bytes[off + 3],
        ])
    }

    fn sync_rebar_control(&mut self) {
        // BAR index 0, one resizable BAR, current size.
        let ctrl = (1 << 5) | (rebar_code(self.bar_sizes[0]) << 8);
        self.put32(ECAP_REBAR + 8, ctrl);
    }

    fn set_bar_addr(&mut self, bar: usize, addr: u64) {
        let off = 0x10 + bar * 4;
        let size = self.bar_sizes[bar];
        if bar == 5 {
            self.put32(off, (addr as u32) & !((size as u32).wrapping_sub(1)));
        } else {
            let flags = if bar == 0 {
                BAR_MEM64_PREF
            } else {
                BAR_MEM64 | 0b1000
            };
            let a = addr & !(size - 1);
            self.put32(off, (a as u32) | flags);
            self.put32(off + 4, (a >> 32) as u32);
        }
    }

    /// Size of a BAR in bytes (0 for BARs that are the upper half of a 64-bit BAR or absent).
    pub fn bar_size(&self, bar: u8) -> u64 {
        self.bar_sizes.get(usize::from(bar)).copied().unwrap_or(0)
    }

    /// Bus address a BAR is programmed to.
    pub fn bar_addr(&self, bar: u8) -> u64 {
        let off = 0x10 + usize::from(bar) * 4;
        match bar {
            0 | 2 => (u64::from(self.get32(off)) & !0xf) | (u64::from(self.get32(off + 4)) << 32),
            5 => u64::from(self.get32(off) & !0xf),
            _ => 0,
        }
    }

    /// Grow BAR0 to the largest size the Resizable BAR capability offers; returns whether
    /// the size changed.
    pub fn resize_bar0_to_max(&mut self) -> bool {
        if self.bar_sizes[0] == self.bar0_max {
            return false;
        }
        let addr = self.bar_addr(0);
        self.bar_sizes[0] = self.bar0_max;
        self.set_bar_addr(0, addr);
        self.sync_rebar_control();
        true
    }

    /// Command register.
    pub fn command(&self) -> u16 {
        u16::from_le_bytes([self.bytes[4], self.bytes[5]])
    }

    /// Whether the function may master the bus (DMA).
    pub fn bus_master(&self) -> bool {
        self.command() & PCI_COMMAND_MASTER != 0
    }

    /// Whether memory decoding is on (BARs answer).
    pub fn memory_enabled(&self) -> bool {
        self.command() & PCI_COMMAND_MEMORY != 0
    }

    /// Read `size` (1, 2, 4) bytes; `None` if the access is malformed.
    pub fn read(&self, offset: u16, size: u8) -> Option<u32> {
        let off = usize::from(offset);
        if !matches!(size, 1 | 2 | 4)
            || off % usize::from(size) != 0
            || off + usize::from(size) > CONFIG_SIZE
        {
            return None;
        }
        let mut b = [0u8; 4];
        b[..usize::from(size)].copy_from_slice(&self.bytes[off..off + usize::from(size)]);
        Some(u32::from_le_bytes(b))
    }

    /// Write `size` bytes; only the fields hardware lets software write change. `None` if the
    /// access is malformed.
    pub fn write(&mut self, offset: u16, size: u8, value: u32) -> Option<()> {
        let off = usize::from(offset);
        if !matches!(size, 1 | 2 | 4)
            || off % usize::from(size) != 0
            || off + usize::from(size) > CONFIG_SIZE
        {
            return None;
        }
        for i in 0..usize::from(size) {
            self.write_byte(off + i, (value >> (8 * i)) as u8);
        }
        Some(())
    }

    fn write_byte(&mut self, off: usize, byte: u8) {
        match off {
            0x04 | 0x05 => {
                let mut cmd = self.command().to_le_bytes();
                cmd[off - 4] = byte;
                let cmd = u16::from_le_bytes(cmd) & COMMAND_WRITABLE;
                self.put16(0x04, cmd);
            }
            0x10..=0x27 => {
                let bar = (off - 0x10) / 4;
                let mut raw = self.bytes[0x10..0x28].to_vec();
                raw[off - 0x10] = byte;
                let lo = |i: usize| {
                    u32::from_le_bytes([raw[i * 4], raw[i * 4 + 1], raw[i * 4 + 2], raw[i * 4 + 3]])
                };
                let (base, size) = match bar {
                    0 | 1 => (0, self.bar_sizes[0]),
                    2 | 3 => (2, self.bar_sizes[2]),
                    5 => (5, self.bar_sizes[5]),
                    _ => return,
                };
                if size == 0 {
                    return;
                }
                let addr = if base == 5 {
                    u64::from(lo(5) & !0xf)
                } else {
                    u64::from(lo(base) & !0xf) | (u64::from(lo(base + 1)) << 32)
                };
                self.set_bar_addr(base, addr);
            }
            0x3c => self.bytes[off] = byte,
            _ if (CAP_MSI + 2..CAP_MSI + 0x18).contains(&off) => self.bytes[off] = byte,
            _ if (CAP_PM + 4..CAP_PM + 6).contains(&off) => self.bytes[off] = byte,
            _ if (CAP_PCIE + 8..CAP_PCIE + 0x0c).contains(&off) => self.bytes[off] = byte,
            _ => {}
        }
    }
}
