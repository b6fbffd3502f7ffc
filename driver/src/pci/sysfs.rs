//! The sysfs backend: a GPU on this machine driven through `/sys/bus/pci/devices/BDF/`.
//!
//! Opening a device takes its lock, unbinds the kernel driver (`driver/unbind`), removes the
//! other functions of the slot that are not GPUs (the HDMI audio function shares the GPU's
//! reset and power), and enables the device (`enable`). BARs are the `resourceN` files
//! mapped with memmap2; config space is the `config` file; a Resizable BAR grows through
//! `resourceN_resize`; `reset` is the function-level reset file.
//!
//! System memory for DMA is anonymous memory, populated and locked (or 2 MiB hugetlb pages
//! for contiguous runs), whose physical addresses come from `/proc/self/pagemap`. Bus address
//! = physical address holds only without IOMMU translation (IOMMU off or passthrough); use
//! the VFIO backend otherwise. Reading PFNs from pagemap needs root (CAP_SYS_ADMIN).
//!
//! The sysfs root and the pagemap path are parameters ([`SysfsOptions`]) so that tests run
//! this very code against a fake tree.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::lock::{DeviceLock, Holder};
use super::spec::Bdf;
use super::{Bar, BarInfo, IndexStep, PciDevice, SYSMEM_PAGE_SIZE, SysMem};
use crate::pci::mapping::{DmaMemory, MmioRegion};
use crate::{Error, ErrorKind, Result};

/// The default sysfs root.
pub const SYSFS_ROOT: &str = "/sys";

/// `IORESOURCE_IO`: an I/O-port BAR (not mappable).
pub const IORESOURCE_IO: u64 = 0x100;
/// `IORESOURCE_MEM`: a memory BAR.
pub const IORESOURCE_MEM: u64 = 0x200;
/// `IORESOURCE_PREFETCH`: a prefetchable memory BAR.
pub const IORESOURCE_PREFETCH: u64 = 0x2000;
/// `IORESOURCE_MEM_64`: a 64-bit memory BAR.
pub const IORESOURCE_MEM_64: u64 = 0x0010_0000;

/// Size of a hugetlb page used for contiguous system memory.
pub const HUGEPAGE_SIZE: usize = 2 << 20;

/// One line of a sysfs `resource` file: `start end flags`, all hexadecimal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resource {
    /// First bus address.
    pub start: u64,
    /// Last bus address (inclusive).
    pub end: u64,
    /// `IORESOURCE_*` flags.
    pub flags: u64,
}

impl Resource {
    /// Size in bytes; 0 for an unused resource.
    pub fn size(&self) -> u64 {
        if self.end == 0 && self.start == 0 || self.end < self.start {
            0
        } else {
            self.end - self.start + 1
        }
    }

    /// Whether this is a memory BAR (mappable through `resourceN`).
    pub fn is_mem(&self) -> bool {
        self.flags & IORESOURCE_MEM != 0
    }
}

fn hex_u64(text: &str) -> Option<u64> {
    let t = text.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    u64::from_str_radix(t, 16).ok()
}

/// Parse a sysfs `resource` file: one `start end flags` line per resource (BARs 0–5, the
/// expansion ROM, then bridge windows).
pub fn parse_resource(text: &str) -> std::result::Result<Vec<Resource>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, line)| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [start, end, flags] = fields.as_slice() else {
                return Err(format!("line {}: expected 3 fields, got {line:?}", n + 1));
            };
            let num = |f: &str| {
                hex_u64(f).ok_or_else(|| format!("line {}: {f:?} is not hexadecimal", n + 1))
            };
            Ok(Resource {
                start: num(start)?,
                end: num(end)?,
                flags: num(flags)?,
            })
        })
        .collect()
}

/// Bit 63 of a pagemap entry: the page is present in RAM.
pub const PAGEMAP_PRESENT: u64 = 1 << 63;
/// Bits 0–54 of a pagemap entry: the page frame number.
pub const PAGEMAP_PFN_MASK: u64 = (1 << 55) - 1;

/// What one `/proc/self/pagemap` entry says about a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PagemapEntry {
    /// Not in RAM (never touched, or swapped out).
    NotPresent,
    /// In RAM, but the kernel hides the frame number (the reader lacks CAP_SYS_ADMIN).
    Hidden,
    /// In RAM at this page frame number.
    Pfn(u64),
}

/// Decode one pagemap entry.
pub fn parse_pagemap_entry(entry: u64) -> PagemapEntry {
    if entry & PAGEMAP_PRESENT == 0 {
        PagemapEntry::NotPresent
    } else if entry & PAGEMAP_PFN_MASK == 0 {
        PagemapEntry::Hidden
    } else {
        PagemapEntry::Pfn(entry & PAGEMAP_PFN_MASK)
    }
}

/// Physical address of each 4 KiB page of `len` bytes at virtual address `vaddr`, read from
/// a pagemap file.
pub fn physical_addrs(device: &str, pagemap: &Path, vaddr: usize, len: usize) -> Result<Vec<u64>> {
    let page = SYSMEM_PAGE_SIZE;
    let io = |op: &'static str, source: std::io::Error| {
        Error::new(
            device.to_string(),
            ErrorKind::Io {
                op,
                path: pagemap.to_path_buf(),
                source,
            },
        )
    };
    if !vaddr.is_multiple_of(page) || !len.is_multiple_of(page) {
        return Err(Error::new(
            device.to_string(),
            ErrorKind::Parse {
                path: pagemap.to_path_buf(),
                reason: format!("range {vaddr:#x}+{len:#x} is not page aligned"),
            },
        ));
    }
    let file = File::open(pagemap).map_err(|e| io("open", e))?;
    let npages = len / page;
    let mut raw = vec![0u8; npages * 8];
    file.read_exact_at(&mut raw, (vaddr / page) as u64 * 8)
        .map_err(|e| io("read", e))?;
    raw.chunks_exact(8)
        .enumerate()
        .map(|(i, b)| {
            let mut e = [0u8; 8];
            e.copy_from_slice(b);
            match parse_pagemap_entry(u64::from_le_bytes(e)) {
                PagemapEntry::Pfn(pfn) => Ok(pfn * page as u64),
                PagemapEntry::Hidden => Err(Error::new(
                    device.to_string(),
                    ErrorKind::NoPhysAddr {
                        path: pagemap.to_path_buf(),
                    },
                )),
                PagemapEntry::NotPresent => Err(Error::new(
                    device.to_string(),
                    ErrorKind::Parse {
                        path: pagemap.to_path_buf(),
                        reason: format!("page at {:#x} is not present in RAM", vaddr + i * page),
                    },
                )),
            }
        })
        .collect()
}

/// Whether `addrs` are consecutive 4 KiB pages.
pub fn is_contiguous(addrs: &[u64]) -> bool {
    addrs
        .windows(2)
        .all(|w| w[0].checked_add(SYSMEM_PAGE_SIZE as u64) == Some(w[1]))
}

/// Allocate locked system memory for `device` and look up the bus address of every page in
/// `pagemap`. `contiguous` beyond one page uses 2 MiB hugetlb pages (reserve some in
/// `/proc/sys/vm/nr_hugepages`).
pub fn alloc_pinned(
    device: &str,
    pagemap: &Path,
    size: usize,
    contiguous: bool,
) -> Result<(MmioRegion, Vec<u64>)> {
    let too_big = || {
        Error::new(
            device.to_string(),
            ErrorKind::OutOfRange {
                what: "system memory allocation".to_string(),
                offset: 0,
                size: size as u64,
                len: isize::MAX as u64,
            },
        )
    };
    let hugepage = contiguous && size > SYSMEM_PAGE_SIZE;
    let unit = if hugepage {
        HUGEPAGE_SIZE
    } else {
        SYSMEM_PAGE_SIZE
    };
    let len = size
        .max(1)
        .checked_next_multiple_of(unit)
        .ok_or_else(too_big)?;
    if hugepage && len > HUGEPAGE_SIZE {
        return Err(Error::new(
            device.to_string(),
            ErrorKind::Backend {
                message: format!(
                    "a physically contiguous allocation is at most one 2 MiB hugepage, not {size:#x} bytes"
                ),
            },
        ));
    }
    let region = MmioRegion::anonymous(device, "system memory", len, hugepage)?;
    let addrs = physical_addrs(device, pagemap, region.as_ptr() as usize, len)?;
    if contiguous && !is_contiguous(&addrs) {
        return Err(Error::new(
            device.to_string(),
            ErrorKind::Backend {
                message: format!("{pagemap:?} shows the hugepage is not physically contiguous"),
            },
        ));
    }
    Ok((region, addrs))
}

/// Where the sysfs backend finds the kernel's files.
#[derive(Clone, Debug)]
pub struct SysfsOptions {
    /// The sysfs mount (`/sys`).
    pub root: PathBuf,
    /// The pagemap of this process (`/proc/self/pagemap`).
    pub pagemap: PathBuf,
    /// Directory of the device lock files (`/tmp`).
    pub lock_dir: PathBuf,
}

impl Default for SysfsOptions {
    fn default() -> Self {
        Self {
            root: SYSFS_ROOT.into(),
            pagemap: "/proc/self/pagemap".into(),
            lock_dir: super::lock::lock_dir(),
        }
    }
}

/// The sysfs directory of a PCI function.
pub fn device_dir(root: &Path, bdf: &Bdf) -> PathBuf {
    root.join("bus/pci/devices").join(bdf.to_string())
}

/// The refusal of a PCIe peer path from `device` to `peer`.
pub(crate) fn no_peer_access(device: &str, peer: &dyn PciDevice, reason: String) -> Error {
    Error::new(
        device,
        ErrorKind::NoPeerAccess {
            peer: peer.name().to_string(),
            reason,
        },
    )
}

/// The PCI root (`pci0000:00`) a device's sysfs directory resolves under.
fn pci_root(dir: &Path) -> Option<String> {
    let real = std::fs::canonicalize(dir).ok()?;
    real.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .find(|c| c.starts_with("pci") && c.contains(':'))
}

/// `peer`'s BAR `bar` at its bus address, as `device` (sysfs directory `dir`) reaches it
/// with no IOMMU translating: only when both sit under one PCI root, where peer-to-peer
/// traffic stays below the host bridge; refused otherwise, naming both roots.
pub(crate) fn peer_bar_at_bus_address(
    device: &str,
    root: &Path,
    dir: &Path,
    peer: &dyn PciDevice,
    bar: u8,
) -> Result<crate::pci::PeerBar> {
    let peer_bdf = Bdf::parse(peer.name())?;
    let mine = pci_root(dir);
    let theirs = pci_root(&device_dir(root, &peer_bdf));
    match (mine, theirs) {
        (Some(a), Some(b)) if a == b => {
            let info = peer.bar_info(bar)?;
            Ok(crate::pci::PeerBar {
                peer: peer.name().to_string(),
                index: bar,
                dma_addr: info.bus_addr,
                size: info.size,
                keep: None,
            })
        }
        (a, b) => Err(no_peer_access(
            device,
            peer,
            format!(
                "the two sit under different PCI roots ({} and {}): peer-to-peer across host \
                 bridges is allowed only on platforms Linux lists (pci_p2pdma_distance)",
                a.as_deref().unwrap_or("unknown"),
                b.as_deref().unwrap_or("unknown")
            ),
        )),
    }
}

fn io_err(device: &str, op: &'static str, path: &Path, source: std::io::Error) -> Error {
    Error::new(
        device.to_string(),
        ErrorKind::Io {
            op,
            path: path.to_path_buf(),
            source,
        },
    )
}

fn read_attr(device: &str, path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| io_err(device, "read", path, e))
}

fn write_attr(device: &str, path: &Path, value: &str) -> Result<()> {
    std::fs::write(path, value).map_err(|e| io_err(device, "write", path, e))
}

fn read_hex_attr(device: &str, path: &Path) -> Result<u64> {
    let text = read_attr(device, path)?;
    hex_u64(&text).ok_or_else(|| {
        Error::new(
            device.to_string(),
            ErrorKind::Parse {
                path: path.to_path_buf(),
                reason: format!("{:?} is not hexadecimal", text.trim()),
            },
        )
    })
}

fn read_resources(device: &str, dir: &Path) -> Result<Vec<Resource>> {
    let path = dir.join("resource");
    parse_resource(&read_attr(device, &path)?)
        .map_err(|reason| Error::new(device.to_string(), ErrorKind::Parse { path, reason }))
}

/// The last path component of a symlink's target (`driver` → `amdgpu`, `iommu_group` → `12`).
pub fn link_name(path: &Path) -> Option<String> {
    let target = std::fs::read_link(path).ok()?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}

/// Why a BAR `driver` claimed cannot be mapped beside `holder`. A driver claims a BAR's
/// region when it maps it (vfio-pci does when its user first maps or reads the BAR), and a
/// kernel with strict I/O memory checks (`CONFIG_IO_STRICT_DEVMEM`, or `iomem=strict`)
/// refuses to map a claimed region through its sysfs `resourceN` file, with `EINVAL`.
fn claimed_bar_reason(driver: &str, holder: &str) -> String {
    format!(
        "{driver} claimed it for {holder}, and this kernel refuses to map a claimed region a \
         second time (CONFIG_IO_STRICT_DEVMEM); booting with iomem=relaxed allows reading \
         beside a VFIO job"
    )
}

/// Unbind the kernel driver of a function, if one is bound.
pub fn unbind_driver(root: &Path, bdf: &Bdf) -> Result<Option<String>> {
    let dir = device_dir(root, bdf);
    let Some(driver) = link_name(&dir.join("driver")) else {
        return Ok(None);
    };
    tracing::info!("{bdf}: unbinding driver {driver}");
    write_attr(
        &bdf.to_string(),
        &dir.join("driver/unbind"),
        &bdf.to_string(),
    )?;
    Ok(Some(driver))
}

/// Base class (top byte of the 24-bit class code) of a function, from its `class` file.
fn base_class(device: &str, dir: &Path) -> Result<u8> {
    Ok((read_hex_attr(device, &dir.join("class"))? >> 16) as u8)
}

/// PCI base class of display controllers.
pub const PCI_BASE_CLASS_DISPLAY: u8 = 0x03;
/// PCI base class of processing accelerators (compute-only parts may use it).
pub const PCI_BASE_CLASS_ACCELERATOR: u8 = 0x12;

/// Remove (hot-unplug in software) the other functions of `bdf`'s slot that are not GPUs,
/// such as the HDMI audio function. Returns the removed functions.
pub fn remove_siblings(root: &Path, bdf: &Bdf) -> Result<Vec<Bdf>> {
    let mut removed = Vec::new();
    for function in (0..8).filter(|f| *f != bdf.function) {
        let sibling = bdf.with_function(function);
        let dir = device_dir(root, &sibling);
        if !dir.exists() {
            continue;
        }
        let class = base_class(&bdf.to_string(), &dir)?;
        if class == PCI_BASE_CLASS_DISPLAY || class == PCI_BASE_CLASS_ACCELERATOR {
            continue;
        }
        tracing::info!("{bdf}: removing sibling function {sibling}");
        write_attr(&bdf.to_string(), &dir.join("remove"), "1")?;
        removed.push(sibling);
    }
    Ok(removed)
}

/// An AMD GPU found on the PCI bus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciGpu {
    /// Its address.
    pub bdf: Bdf,
    /// PCI vendor id (0x1002).
    pub vendor_id: u16,
    /// PCI device id.
    pub device_id: u16,
    /// 24-bit class code.
    pub class: u32,
    /// The bound kernel driver (`amdgpu`, `vfio-pci`), if any.
    pub driver: Option<String>,
    /// IOMMU group, if the IOMMU is on.
    pub iommu_group: Option<u32>,
    /// Whether it is an SR-IOV virtual function (it has a `physfn` link).
    pub is_vf: bool,
    /// Size of BAR0 (the VRAM window) in bytes.
    pub bar0_size: u64,
}

/// All AMD GPUs (vendor 0x1002, display or accelerator class) under `root`, by address.
/// A machine without any is an empty list, not an error.
pub fn scan(root: &Path) -> Result<Vec<PciGpu>> {
    let devices = root.join("bus/pci/devices");
    let entries = match std::fs::read_dir(&devices) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err("pci", "list", &devices, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_err("pci", "list", &devices, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(bdf) = Bdf::parse(&name) else { continue };
        let dir = entry.path();
        let vendor = read_hex_attr(&name, &dir.join("vendor"))?;
        if vendor != u64::from(super::AMD_VENDOR_ID) {
            continue;
        }
        let class = read_hex_attr(&name, &dir.join("class"))? as u32;
        let base = (class >> 16) as u8;
        if base != PCI_BASE_CLASS_DISPLAY && base != PCI_BASE_CLASS_ACCELERATOR {
            continue;
        }
        let device_id = read_hex_attr(&name, &dir.join("device"))? as u16;
        let bar0_size = read_resources(&name, &dir)?
            .first()
            .map_or(0, Resource::size);
        out.push(PciGpu {
            bdf,
            vendor_id: vendor as u16,
            device_id,
            class,
            driver: link_name(&dir.join("driver")),
            iommu_group: link_name(&dir.join("iommu_group")).and_then(|g| g.parse().ok()),
            is_vf: dir.join("physfn").exists(),
            bar0_size,
        });
    }
    out.sort_by_key(|g| g.bdf);
    Ok(out)
}

/// Read `size` (1, 2 or 4) bytes of config space at `offset` from an open `config` file.
pub(crate) fn config_read_file(
    device: &str,
    file: &File,
    path: &Path,
    offset: u16,
    size: u8,
) -> Result<u32> {
    let len = check_config_access(device, file, path, offset, size)?;
    let mut b = [0u8; 4];
    file.read_exact_at(&mut b[..len], u64::from(offset))
        .map_err(|e| io_err(device, "read", path, e))?;
    Ok(u32::from_le_bytes(b))
}

/// Write `size` (1, 2 or 4) bytes of config space at `offset` to an open `config` file.
pub(crate) fn config_write_file(
    device: &str,
    file: &File,
    path: &Path,
    offset: u16,
    size: u8,
    value: u32,
) -> Result<()> {
    let len = check_config_access(device, file, path, offset, size)?;
    file.write_all_at(&value.to_le_bytes()[..len], u64::from(offset))
        .map_err(|e| io_err(device, "write", path, e))
}

fn check_config_access(
    device: &str,
    file: &File,
    path: &Path,
    offset: u16,
    size: u8,
) -> Result<usize> {
    // sysfs `config` is 256 or 4096 bytes; a non-root reader sees the same size but reads
    // only the first 64 bytes, which the read itself then reports.
    let len = file
        .metadata()
        .map_err(|e| io_err(device, "stat", path, e))?
        .len()
        .clamp(256, 4096);
    let out_of_range = Error::new(
        device.to_string(),
        ErrorKind::OutOfRange {
            what: "config space".to_string(),
            offset: offset.into(),
            size: size.into(),
            len,
        },
    );
    if !matches!(size, 1 | 2 | 4) {
        return Err(out_of_range);
    }
    if u64::from(offset) + u64::from(size) > len {
        return Err(out_of_range);
    }
    if !offset.is_multiple_of(u16::from(size)) {
        return Err(Error::new(
            device.to_string(),
            ErrorKind::Misaligned {
                what: "config space".to_string(),
                offset: offset.into(),
                align: size.into(),
            },
        ));
    }
    Ok(size.into())
}

/// A GPU driven through sysfs.
pub struct SysfsPci {
    name: String,
    dir: PathBuf,
    opts: SysfsOptions,
    config: File,
    resources: Mutex<Vec<Resource>>,
    bars: Mutex<[Option<Arc<dyn Bar>>; 6]>,
    /// The device lock; `None` when opened beside its holder ([`SysfsPci::open_beside`]).
    _lock: Option<DeviceLock>,
    /// The process holding the device, when opened beside it: every write is refused.
    beside: Option<String>,
}

impl SysfsPci {
    /// Open the GPU at `bdf` with the real sysfs, pagemap and lock directory.
    pub fn open(bdf: Bdf) -> Result<Self> {
        Self::open_with(bdf, SysfsOptions::default())
    }

    /// Open the GPU at `bdf`: lock it, unbind its driver, remove non-GPU sibling functions,
    /// enable it.
    pub fn open_with(bdf: Bdf, opts: SysfsOptions) -> Result<Self> {
        let name = bdf.to_string();
        let dir = device_dir(&opts.root, &bdf);
        if !dir.exists() {
            return Err(Error::new(name, ErrorKind::NoDevice { path: dir }));
        }
        let lock = DeviceLock::acquire_in(&opts.lock_dir, &name)?;
        unbind_driver(&opts.root, &bdf)?;
        remove_siblings(&opts.root, &bdf)?;
        write_attr(&name, &dir.join("enable"), "1")?;
        let config_path = dir.join("config");
        let config = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&config_path)
            .map_err(|e| io_err(&name, "open", &config_path, e))?;
        let resources = read_resources(&name, &dir)?;
        Ok(Self {
            name,
            dir,
            opts,
            config,
            resources: Mutex::new(resources),
            bars: Mutex::new(Default::default()),
            _lock: Some(lock),
            beside: None,
        })
    }

    /// Open the GPU at `bdf` beside `holder`, the process that holds its lock (a running
    /// job), to read what can be read without disturbing it: no lock, no unbinding, no
    /// enabling; config space opened for reading; every write refused naming the holder,
    /// including aiming an index/data window (the holder's own accesses go through it).
    pub fn open_beside(bdf: Bdf, opts: SysfsOptions, holder: &Holder) -> Result<Self> {
        let name = bdf.to_string();
        let dir = device_dir(&opts.root, &bdf);
        if !dir.exists() {
            return Err(Error::new(name, ErrorKind::NoDevice { path: dir }));
        }
        let config_path = dir.join("config");
        let config =
            File::open(&config_path).map_err(|e| io_err(&name, "open", &config_path, e))?;
        let resources = read_resources(&name, &dir)?;
        Ok(Self {
            name,
            dir,
            opts,
            config,
            resources: Mutex::new(resources),
            bars: Mutex::new(Default::default()),
            _lock: None,
            beside: Some(holder.to_string()),
        })
    }

    /// Refuse `op` when opened beside the device's holder.
    fn check_writable(&self, op: impl FnOnce() -> String) -> Result<()> {
        match &self.beside {
            None => Ok(()),
            Some(holder) => Err(Error::new(
                &self.name,
                ErrorKind::HeldBeside {
                    op: op(),
                    holder: holder.clone(),
                },
            )),
        }
    }

    /// A BAR that cannot be mapped beside its holder because the holder's kernel driver
    /// claimed it (`vfio-pci` for a VFIO job): say that, and what allows it, rather than the
    /// kernel's "Invalid argument". Other errors stay as they are.
    fn explain_beside_map(&self, index: u8, e: Error) -> Error {
        let refused = matches!(
            &e.kind,
            ErrorKind::Io { op: "mmap", source, .. } if source.raw_os_error() == Some(libc::EINVAL)
        );
        let driver = link_name(&self.dir.join("driver"));
        match (&self.beside, refused, driver) {
            (Some(holder), true, Some(driver)) => {
                self.no_bar(index, claimed_bar_reason(&driver, holder))
            }
            _ => e,
        }
    }

    /// The device's sysfs directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn no_bar(&self, bar: u8, reason: impl Into<String>) -> Error {
        Error::new(
            &self.name,
            ErrorKind::NoBar {
                bar,
                reason: reason.into(),
            },
        )
    }

    fn resource(&self, index: u8) -> Result<Resource> {
        if index > 5 {
            return Err(self.no_bar(index, "a PCI function has BARs 0 to 5"));
        }
        let resources = self.resources.lock().map_err(|_| self.poisoned())?;
        let r = resources
            .get(usize::from(index))
            .copied()
            .ok_or_else(|| self.no_bar(index, "the resource file has no line for it"))?;
        if r.size() == 0 {
            return Err(self.no_bar(index, "it is not implemented (size 0)"));
        }
        Ok(r)
    }

    fn poisoned(&self) -> Error {
        Error::new(
            &self.name,
            ErrorKind::Backend {
                message: "a thread panicked while holding the BAR table".to_string(),
            },
        )
    }
}

impl PciDevice for SysfsPci {
    fn name(&self) -> &str {
        &self.name
    }

    fn backend(&self) -> &'static str {
        "sysfs"
    }

    fn config_read(&self, offset: u16, size: u8) -> Result<u32> {
        config_read_file(
            &self.name,
            &self.config,
            &self.dir.join("config"),
            offset,
            size,
        )
    }

    fn config_write(&self, offset: u16, size: u8, value: u32) -> Result<()> {
        self.check_writable(|| format!("a config write at {offset:#x}"))?;
        config_write_file(
            &self.name,
            &self.config,
            &self.dir.join("config"),
            offset,
            size,
            value,
        )
    }

    fn bar_info(&self, index: u8) -> Result<BarInfo> {
        let r = self.resource(index)?;
        Ok(BarInfo {
            index,
            bus_addr: r.start,
            size: r.size(),
        })
    }

    /// Without an IOMMU translating (what this backend's system memory assumes: its pages'
    /// bus addresses are physical), a peer's BAR is reached at its bus address. Both
    /// devices must sit under one PCI root: P2P across host bridges is what Linux allows
    /// only on listed platforms (`pci_p2pdma_distance`), which this backend does not judge.
    fn peer_bar(&self, peer: &dyn PciDevice, bar: u8) -> Result<crate::pci::PeerBar> {
        if peer.backend() != "sysfs" {
            return Err(no_peer_access(
                &self.name,
                peer,
                format!(
                    "it is a {} device; this sysfs device reaches only other sysfs devices",
                    peer.backend()
                ),
            ));
        }
        peer_bar_at_bus_address(&self.name, &self.opts.root, &self.dir, peer, bar)
    }

    fn bar(&self, index: u8) -> Result<Arc<dyn Bar>> {
        let r = self.resource(index)?;
        if !r.is_mem() {
            return Err(self.no_bar(index, "it is an I/O-port BAR, which cannot be mapped"));
        }
        let mut bars = self.bars.lock().map_err(|_| self.poisoned())?;
        let slot = &mut bars[usize::from(index)];
        if let Some(bar) = slot {
            return Ok(bar.clone());
        }
        let region = self
            .map_bar(index, r)
            .map_err(|e| self.explain_beside_map(index, e))?;
        let bar: Arc<dyn Bar> = match &self.beside {
            None => region,
            Some(holder) => Arc::new(BesideBar {
                device: self.name.clone(),
                index,
                holder: holder.clone(),
                inner: region,
            }),
        };
        *slot = Some(bar.clone());
        Ok(bar)
    }

    fn resize_bar(&self, index: u8) -> Result<()> {
        self.check_writable(|| format!("resizing BAR{index}"))?;
        self.resize_bar_now(index)
    }

    fn alloc_sysmem(&self, size: usize, contiguous: bool) -> Result<Arc<dyn SysMem>> {
        // Memory for the device to DMA into is for a driver, which the holder is.
        self.check_writable(|| "allocating system memory for DMA".to_string())?;
        let (region, addrs) = alloc_pinned(&self.name, &self.opts.pagemap, size, contiguous)?;
        Ok(Arc::new(DmaMemory::new(region, addrs)))
    }

    fn reset(&self) -> Result<()> {
        self.check_writable(|| "a reset".to_string())?;
        write_attr(&self.name, &self.dir.join("reset"), "1")
    }
}

impl SysfsPci {
    fn map_bar(&self, index: u8, r: Resource) -> Result<Arc<MmioRegion>> {
        let len = usize::try_from(r.size())
            .map_err(|_| self.no_bar(index, "it is larger than the address space"))?;
        let path = self.dir.join(format!("resource{index}"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| io_err(&self.name, "open", &path, e))?;
        Ok(Arc::new(MmioRegion::map_file(
            &self.name,
            &format!("BAR{index}"),
            &file,
            &path,
            0,
            len,
        )?))
    }

    fn resize_bar_now(&self, index: u8) -> Result<()> {
        let path = self.dir.join(format!("resource{index}_resize"));
        if !path.exists() {
            tracing::debug!(
                "{}: BAR{index} is not resizable ({path:?} missing)",
                self.name
            );
            return Ok(());
        }
        if self.bars.lock().map_err(|_| self.poisoned())?[usize::from(index).min(5)].is_some() {
            return Err(self.no_bar(index, "it is mapped already; resize it before mapping"));
        }
        let sizes = read_hex_attr(&self.name, &path)?;
        let Some(largest) = super::caps::largest_rebar_size(sizes) else {
            return Ok(());
        };
        let target = (1u64 << 20) << largest;
        if self.resource(index)?.size() >= target {
            return Ok(());
        }
        tracing::info!("{}: resizing BAR{index} to {} MiB", self.name, target >> 20);
        write_attr(&self.name, &path, &largest.to_string())?;
        *self.resources.lock().map_err(|_| self.poisoned())? =
            read_resources(&self.name, &self.dir)?;
        Ok(())
    }
}

/// A BAR of a device opened beside its holder: reads pass, writes are refused naming the
/// holder, and so is aiming an index/data window (it is the holder's).
struct BesideBar {
    device: String,
    index: u8,
    holder: String,
    inner: Arc<MmioRegion>,
}

impl BesideBar {
    fn refuse<T>(&self, op: String) -> Result<T> {
        Err(Error::new(
            &self.device,
            ErrorKind::HeldBeside {
                op,
                holder: self.holder.clone(),
            },
        ))
    }
}

impl Bar for BesideBar {
    fn len(&self) -> u64 {
        Bar::len(&*self.inner)
    }
    fn read32(&self, offset: u64) -> Result<u32> {
        self.inner.read32(offset)
    }
    fn read64(&self, offset: u64) -> Result<u64> {
        self.inner.read64(offset)
    }
    fn read8(&self, offset: u64) -> Result<u8> {
        self.inner.read8(offset)
    }
    fn read_bytes(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read_bytes(offset, buf)
    }
    fn write32(&self, offset: u64, _: u32) -> Result<()> {
        self.refuse(format!("a BAR{} write at {offset:#x}", self.index))
    }
    fn write64(&self, offset: u64, _: u64) -> Result<()> {
        self.refuse(format!("a BAR{} write at {offset:#x}", self.index))
    }
    fn write8(&self, offset: u64, _: u8) -> Result<()> {
        self.refuse(format!("a BAR{} write at {offset:#x}", self.index))
    }
    fn write_bytes(&self, offset: u64, _: &[u8]) -> Result<()> {
        self.refuse(format!("a BAR{} write at {offset:#x}", self.index))
    }
    fn indexed(&self, steps: &[IndexStep]) -> Result<u32> {
        match steps.first() {
            Some(IndexStep::Aim { offset, .. }) => self.refuse(format!(
                "aiming the BAR{} index register at {offset:#x} (the window is the holder's)",
                self.index
            )),
            _ => super::plain_index_steps(self, steps),
        }
    }
    fn shared_indexed(&self, steps: &[IndexStep]) -> Result<u32> {
        self.indexed(steps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pci::fake_sysfs::{FakeSysfs, navi31_bars};
    use crate::pci::lock;

    const GPU: &str = "0000:03:00.0";

    fn gpu() -> Bdf {
        Bdf::parse(GPU).unwrap()
    }

    fn opts(fs: &FakeSysfs) -> SysfsOptions {
        SysfsOptions {
            root: fs.root().to_path_buf(),
            pagemap: fs.root().join("pagemap"),
            lock_dir: fs.root().to_path_buf(),
        }
    }

    fn navi31(fs: &FakeSysfs) {
        fs.add_device(GPU, 0x1002, 0x744c, 0x030000, &navi31_bars());
    }

    /// A navi31 at `bdf` whose BAR0 starts at `bar0`, placed under PCI root `root` as Linux
    /// lays it out: the device's directory under `devices/ROOT/…`, `bus/pci/devices/BDF` a
    /// symlink to it.
    fn navi31_under(fs: &FakeSysfs, bdf: &str, bar0: u64, root: &str) {
        let mut bars = navi31_bars();
        bars[0].start = bar0;
        fs.add_device(bdf, 0x1002, 0x744c, 0x030000, &bars);
        let real = fs.root().join("devices").join(root).join(bdf);
        std::fs::create_dir_all(real.parent().unwrap()).unwrap();
        std::fs::rename(fs.device_dir(bdf), &real).unwrap();
        std::os::unix::fs::symlink(&real, fs.device_dir(bdf)).unwrap();
    }

    #[test]
    fn a_peer_bar_is_its_bus_address_under_one_pci_root_and_refused_across_roots() {
        let fs = FakeSysfs::new();
        navi31_under(&fs, GPU, 0x60_0000_0000, "pci0000:00");
        navi31_under(&fs, "0000:04:00.0", 0x70_0000_0000, "pci0000:00");
        navi31_under(&fs, "0000:43:00.0", 0x80_0000_0000, "pci0000:40");
        let open = |bdf: &str| SysfsPci::open_with(Bdf::parse(bdf).unwrap(), opts(&fs)).unwrap();
        let (a, b, c) = (open(GPU), open("0000:04:00.0"), open("0000:43:00.0"));
        let bar = a.peer_bar(&b, 0).unwrap();
        assert_eq!(
            (bar.peer.as_str(), bar.dma_addr, bar.size),
            ("0000:04:00.0", 0x70_0000_0000, 256 << 20)
        );
        let e = a.peer_bar(&c, 0).unwrap_err().to_string();
        assert!(
            e.contains("0000:43:00.0") && e.contains("pci0000:00") && e.contains("pci0000:40"),
            "{e}"
        );
    }

    #[test]
    fn parses_resource_lines() {
        let text = "0x0000006000000000 0x000000600fffffff 0x000000000014220c\n\
                    0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
                    0x000000000000e000 0x000000000000e0ff 0x0000000000040101\n";
        let r = parse_resource(text).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].start, 0x60_0000_0000);
        assert_eq!(r[0].size(), 256 << 20);
        assert!(r[0].is_mem() && r[0].flags & IORESOURCE_MEM_64 != 0);
        assert_eq!(r[1].size(), 0);
        assert!(!r[2].is_mem() && r[2].flags & IORESOURCE_IO != 0);
        assert_eq!(r[2].size(), 0x100);
    }

    #[test]
    fn malformed_resource_lines_are_errors_with_line_numbers() {
        assert!(parse_resource("0x0 0x1\n").unwrap_err().contains("line 1"));
        assert!(
            parse_resource("0x0 0x0 0x0\n0x0 zz 0x0\n")
                .unwrap_err()
                .contains("line 2")
        );
        assert_eq!(parse_resource("").unwrap(), vec![]);
    }

    #[test]
    fn decodes_pagemap_entries() {
        assert_eq!(parse_pagemap_entry(0), PagemapEntry::NotPresent);
        assert_eq!(parse_pagemap_entry(PAGEMAP_PRESENT), PagemapEntry::Hidden);
        // Soft-dirty (bit 55) and exclusive (bit 56) are not part of the PFN.
        assert_eq!(
            parse_pagemap_entry(PAGEMAP_PRESENT | (3 << 55) | 0x12345),
            PagemapEntry::Pfn(0x12345)
        );
        assert_eq!(parse_pagemap_entry(0x12345), PagemapEntry::NotPresent);
    }

    #[test]
    fn contiguity_check() {
        assert!(is_contiguous(&[0x1000, 0x2000, 0x3000]));
        assert!(is_contiguous(&[0x1000]));
        assert!(!is_contiguous(&[0x1000, 0x3000]));
        assert!(!is_contiguous(&[u64::MAX - 0xfff, 0]));
    }

    /// Write pagemap entries for the pages at `vaddr` into a sparse fake pagemap file.
    fn fake_pagemap(path: &Path, vaddr: usize, entries: &[u64]) {
        let f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(path)
            .unwrap();
        let bytes: Vec<u8> = entries.iter().flat_map(|e| e.to_le_bytes()).collect();
        f.write_all_at(&bytes, (vaddr / 4096) as u64 * 8).unwrap();
    }

    #[test]
    fn physical_addresses_come_from_the_pagemap_at_the_right_offset() {
        let fs = FakeSysfs::new();
        let pagemap = fs.root().join("pagemap");
        let vaddr = 0x7f12_3456_7000usize;
        fake_pagemap(
            &pagemap,
            vaddr,
            &[PAGEMAP_PRESENT | 0x100, PAGEMAP_PRESENT | 0x2ff],
        );
        assert_eq!(
            physical_addrs("t", &pagemap, vaddr, 8192).unwrap(),
            vec![0x10_0000, 0x2f_f000]
        );
    }

    #[test]
    fn hidden_pfns_say_root_is_needed() {
        let fs = FakeSysfs::new();
        let pagemap = fs.root().join("pagemap");
        fake_pagemap(&pagemap, 0x1000, &[PAGEMAP_PRESENT]);
        let err = physical_addrs(GPU, &pagemap, 0x1000, 4096).unwrap_err();
        assert!(matches!(
            err,
            Error {
                kind: ErrorKind::NoPhysAddr { .. },
                ..
            }
        ));
        let msg = err.to_string();
        assert!(msg.contains("CAP_SYS_ADMIN") && msg.contains(GPU), "{msg}");
    }

    #[test]
    fn scan_lists_amd_gpus_only_with_driver_and_group() {
        let fs = FakeSysfs::new();
        navi31(&fs);
        fs.bind(GPU, "amdgpu");
        fs.set_iommu_group(GPU, 14);
        fs.add_device("0000:03:00.1", 0x1002, 0xab30, 0x040300, &[]); // HDMI audio
        fs.add_device("0000:00:02.0", 0x8086, 0x0d57, 0x030000, &[]); // Intel graphics
        fs.add_device("0000:c1:00.0", 0x1002, 0x74a1, 0x120000, &navi31_bars()); // accelerator
        std::fs::create_dir_all(fs.device_dir("0000:c1:00.0").join("physfn")).unwrap();
        let gpus = scan(fs.root()).unwrap();
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[0].bdf, gpu());
        assert_eq!(gpus[0].device_id, 0x744c);
        assert_eq!(gpus[0].driver.as_deref(), Some("amdgpu"));
        assert_eq!(gpus[0].iommu_group, Some(14));
        assert_eq!(gpus[0].bar0_size, 256 << 20);
        assert!(!gpus[0].is_vf);
        assert_eq!(gpus[1].bdf.to_string(), "0000:c1:00.0");
        assert_eq!(
            (
                gpus[1].driver.as_deref(),
                gpus[1].iommu_group,
                gpus[1].is_vf
            ),
            (None, None, true)
        );
    }

    #[test]
    fn scan_of_a_machine_without_pci_is_empty() {
        let dir = crate::testutil::TempDir::new();
        assert_eq!(scan(dir.path()).unwrap(), vec![]);
        let fs = FakeSysfs::new();
        assert_eq!(scan(fs.root()).unwrap(), vec![]);
    }

    #[test]
    fn open_unbinds_removes_audio_and_enables() {
        let fs = FakeSysfs::new();
        navi31(&fs);
        fs.bind(GPU, "amdgpu");
        fs.add_device("0000:03:00.1", 0x1002, 0xab30, 0x040300, &[]);
        let dev = SysfsPci::open_with(gpu(), opts(&fs)).unwrap();
        let unbind = fs.root().join("bus/pci/drivers/amdgpu/unbind");
        assert_eq!(std::fs::read_to_string(unbind).unwrap(), GPU);
        assert_eq!(fs.read("0000:03:00.1", "remove"), "1");
        assert_eq!(fs.read(GPU, "enable"), "1");
        assert_eq!(
            fs.read(GPU, "remove"),
            "",
            "the GPU itself must not be removed"
        );
        assert_eq!((dev.name(), dev.backend()), (GPU, "sysfs"));
    }

    #[test]
    fn open_leaves_a_sibling_gpu_function_alone() {
        let fs = FakeSysfs::new();
        navi31(&fs);
        fs.add_device("0000:03:00.1", 0x1002, 0x744c, 0x038000, &[]);
        SysfsPci::open_with(gpu(), opts(&fs)).unwrap();
        assert_eq!(fs.read("0000:03:00.1", "remove"), "");
    }

    #[test]
    fn a_second_open_is_locked() {
        let fs = FakeSysfs::new();
        navi31(&fs);
        let _first = SysfsPci::open_with(gpu(), opts(&fs)).unwrap();
        assert!(matches!(
            SysfsPci::open_with(gpu(), opts(&fs)),
            Err(Error {
                kind: ErrorKind::Locked { .. },
                ..
            })
        ));
    }

    #[test]
    fn a_bar_a_vfio_job_claimed_is_explained_beside_it_and_other_failures_are_kept() {
        // The kernel's EINVAL for mapping a region vfio-pci claimed cannot be made on a fake
        // tree; the explanation of it can.
        let fs = FakeSysfs::new();
        navi31(&fs);
        fs.bind(GPU, "vfio-pci");
        let holder = SysfsPci::open_with(gpu(), opts(&fs)).unwrap();
        let who = lock::holder_in(fs.root(), GPU).unwrap().unwrap();
        let beside = SysfsPci::open_beside(gpu(), opts(&fs), &who).unwrap();
        let mmap_failed = |errno| {
            Error::new(
                GPU,
                ErrorKind::Io {
                    op: "mmap",
                    path: fs.root().join("resource5"),
                    source: std::io::Error::from_raw_os_error(errno),
                },
            )
        };
        let e = beside.explain_beside_map(5, mmap_failed(libc::EINVAL));
        let msg = e.to_string();
        assert!(
            matches!(e.kind, ErrorKind::NoBar { bar: 5, .. })
                && msg.contains("BAR5 is not available: vfio-pci claimed it for pid ")
                && msg.contains("CONFIG_IO_STRICT_DEVMEM")
                && msg.contains("iomem=relaxed"),
            "{msg}"
        );
        let other = beside.explain_beside_map(5, mmap_failed(libc::ENOMEM));
        assert!(matches!(other.kind, ErrorKind::Io { .. }), "{other}");
        // Not beside a holder, the kernel's error is the error.
        let own = holder.explain_beside_map(5, mmap_failed(libc::EINVAL));
        assert!(matches!(own.kind, ErrorKind::Io { .. }), "{own}");
    }

    #[test]
    fn a_device_opened_beside_its_holder_reads_and_refuses_every_write_naming_the_holder() {
        let fs = FakeSysfs::new();
        navi31(&fs);
        fs.bind(GPU, "amdgpu");
        let holder = SysfsPci::open_with(gpu(), opts(&fs)).unwrap();
        holder.bar(5).unwrap().write32(0x40, 0x1234_5678).unwrap();
        let who = lock::holder_in(fs.root(), GPU).unwrap().unwrap();
        let beside = SysfsPci::open_beside(gpu(), opts(&fs), &who).unwrap();
        assert_eq!(beside.device_id().unwrap(), 0x744c);
        let bar5 = beside.bar(5).unwrap();
        assert!(
            Arc::ptr_eq(&bar5, &beside.bar(5).unwrap()),
            "BAR mapped once"
        );
        assert_eq!(bar5.read32(0x40).unwrap(), 0x1234_5678);
        let window = [
            IndexStep::Aim {
                offset: 0,
                value: 0x8000_0000,
            },
            IndexStep::Read { offset: 4 },
        ];
        let refusals = [
            beside.config_write(4, 2, 6).unwrap_err(),
            bar5.write32(0x40, 0).unwrap_err(),
            bar5.write64(0x40, 0).unwrap_err(),
            bar5.indexed(&window).unwrap_err(),
            beside.reset().unwrap_err(),
            beside.resize_bar(0).unwrap_err(),
            beside.alloc_sysmem(4096, false).err().unwrap(),
        ];
        for err in refusals {
            let msg = err.to_string();
            assert!(
                matches!(err.kind, ErrorKind::HeldBeside { .. })
                    && msg.contains(&format!("held by pid {}", std::process::id()))
                    && msg.contains("opened it beside the holder to read only"),
                "{msg}"
            );
        }
        assert_eq!(holder.bar(5).unwrap().read32(0x40).unwrap(), 0x1234_5678);
        assert_eq!(fs.read(GPU, "reset"), "", "no reset reached the device");
        // The holder keeps its lock: opening beside it took nothing.
        assert!(lock::holder_in(fs.root(), GPU).unwrap().is_some());
        drop(holder);
        assert_eq!(lock::holder_in(fs.root(), GPU).unwrap(), None);
    }

    #[test]
    fn opening_a_missing_device_names_its_path() {
        let fs = FakeSysfs::new();
        let err = SysfsPci::open_with(gpu(), opts(&fs)).err().unwrap();
        assert!(
            err.to_string().contains("bus/pci/devices/0000:03:00.0"),
            "{err}"
        );
    }

    #[test]
    fn config_space_reads_and_writes_the_config_file() {
        let fs = FakeSysfs::new();
        navi31(&fs);
        let dev = SysfsPci::open_with(gpu(), opts(&fs)).unwrap();
        assert_eq!(dev.vendor_id().unwrap(), 0x1002);
        assert_eq!(dev.device_id().unwrap(), 0x744c);
        assert_eq!(dev.config_read(0x0b, 1).unwrap(), 0x03);
        dev.set_bus_master(true).unwrap();
        let cfg = std::fs::read(fs.device_dir(GPU).join("config")).unwrap();
        assert_eq!(
            cfg[4] & 0x06,
            0x06,
            "memory and bus-master enable written to config"
        );
        assert!(matches!(
            dev.config_read(4095, 2),
            Err(Error {
                kind: ErrorKind::OutOfRange { .. },
                ..
            })
        ));
        assert!(matches!(
            dev.config_read(0, 3),
            Err(Error {
                kind: ErrorKind::OutOfRange { .. },
                ..
            })
        ));
        assert!(matches!(
            dev.config_read(2, 4),
            Err(Error {
                kind: ErrorKind::Misaligned { .. },
                ..
            })
        ));
    }

    #[test]
    fn bars_map_the_resource_files() {
        let fs = FakeSysfs::new();
        navi31(&fs);
        let dev = SysfsPci::open_with(gpu(), opts(&fs)).unwrap();
        let info = dev.bar_info(5).unwrap();
        assert_eq!((info.bus_addr, info.size), (0xfcc0_0000, 1 << 20));
        let bar5 = dev.bar(5).unwrap();
        assert_eq!(bar5.len(), 1 << 20);
        bar5.write32(0xde3 * 4, 24576).unwrap();
        assert!(Arc::ptr_eq(&bar5, &dev.bar(5).unwrap()), "BAR mapped once");
        let file = std::fs::read(fs.device_dir(GPU).join("resource5")).unwrap();
        assert_eq!(&file[0xde3 * 4..0xde3 * 4 + 4], &24576u32.to_le_bytes());
        assert!(matches!(
            dev.bar(1),
            Err(Error {
                kind: ErrorKind::NoBar { bar: 1, .. },
                ..
            })
        ));
        assert!(matches!(
            dev.bar(6),
            Err(Error {
                kind: ErrorKind::NoBar { bar: 6, .. },
                ..
            })
        ));
        assert!(matches!(
            bar5.read32(1 << 20),
            Err(Error {
                kind: ErrorKind::OutOfRange { .. },
                ..
            })
        ));
    }

    #[test]
    fn resize_writes_the_largest_supported_size() {
        let fs = FakeSysfs::new();
        navi31(&fs);
        // Sizes 256 MiB (bit 8) to 32 GiB (bit 15), as the kernel prints them.
        fs.write(GPU, "resource0_resize", "000000000000ff00\n");
        let dev = SysfsPci::open_with(gpu(), opts(&fs)).unwrap();
        assert_eq!(dev.bar_info(0).unwrap().size, 256 << 20);
        // What the kernel shows once the write below has resized the BAR.
        let mut resource = fs.read(GPU, "resource");
        resource.replace_range(
            ..56,
            "0x0000006000000000 0x00000067ffffffff 0x000000000014220c",
        );
        fs.write(GPU, "resource", &resource);
        let resource0 = OpenOptions::new()
            .write(true)
            .open(fs.device_dir(GPU).join("resource0"));
        resource0.unwrap().set_len(32 << 30).unwrap();
        dev.resize_bar(0).unwrap();
        assert_eq!(fs.read(GPU, "resource0_resize"), "15");
        assert_eq!(
            dev.bar_info(0).unwrap().size,
            32 << 30,
            "resources re-read after resize"
        );
        assert_eq!(dev.bar(0).unwrap().len(), 32 << 30);
    }

    #[test]
    fn resize_leaves_a_bar_that_is_already_largest() {
        let fs = FakeSysfs::new();
        navi31(&fs);
        fs.write(GPU, "resource0_resize", "000000000000ff00\n");
        let mut resource = fs.read(GPU, "resource");
        resource.replace_range(
            ..56,
            "0x0000006000000000 0x00000067ffffffff 0x000000000014220c",
        );
        fs.write(GPU, "resource", &resource);
        let dev = SysfsPci::open_with(gpu(), opts(&fs)).unwrap();
        assert_eq!(dev.bar_info(0).unwrap().size, 32 << 30);
        dev.resize_bar(0).unwrap();
        assert_eq!(fs.read(GPU, "resource0_resize"), "000000000000ff00\n");
    }

    #[test]
    fn resize_after_mapping_is_refused_and_missing_resize_is_a_no_op() {
        let fs = FakeSysfs::new();
        navi31(&fs);
        fs.write(GPU, "resource0_resize", "ff00\n");
        let dev = SysfsPci::open_with(gpu(), opts(&fs)).unwrap();
        dev.bar(0).unwrap();
        assert!(matches!(
            dev.resize_bar(0),
            Err(Error {
                kind: ErrorKind::NoBar { bar: 0, .. },
                ..
            })
        ));
        dev.resize_bar(5).unwrap();
        assert_eq!(dev.bar_info(5).unwrap().size, 1 << 20);
    }

    #[test]
    fn reset_writes_the_reset_file() {
        let fs = FakeSysfs::new();
        navi31(&fs);
        let dev = SysfsPci::open_with(gpu(), opts(&fs)).unwrap();
        dev.reset().unwrap();
        assert_eq!(fs.read(GPU, "reset"), "1");
    }

    #[test]
    fn sysmem_without_pagemap_entries_is_an_error_naming_the_pagemap() {
        let fs = FakeSysfs::new();
        navi31(&fs);
        let dev = SysfsPci::open_with(gpu(), opts(&fs)).unwrap();
        std::fs::write(fs.root().join("pagemap"), b"").unwrap();
        let err = dev.alloc_sysmem(8192, false).err().unwrap();
        assert!(err.to_string().contains("pagemap"), "{err}");
    }

    #[test]
    fn sysmem_from_the_real_pagemap_has_page_addresses_or_says_root_is_needed() {
        let fs = FakeSysfs::new();
        navi31(&fs);
        let mut o = opts(&fs);
        o.pagemap = "/proc/self/pagemap".into();
        let dev = SysfsPci::open_with(gpu(), o).unwrap();
        match dev.alloc_sysmem(3 * 4096 + 1, false) {
            Ok(mem) => {
                assert_eq!(mem.len(), 4 * 4096, "rounded up to whole pages");
                assert_eq!(mem.bus_addrs().len(), 4);
                assert!(mem.bus_addrs().iter().all(|a| *a != 0 && a % 4096 == 0));
                mem.write32(4 * 4096 - 4, 0xabcd).unwrap();
                assert_eq!(mem.read32(4 * 4096 - 4).unwrap(), 0xabcd);
                assert!(mem.read32(4 * 4096).is_err());
            }
            Err(e) => assert!(
                matches!(
                    e,
                    Error {
                        kind: ErrorKind::NoPhysAddr { .. },
                        ..
                    }
                ),
                "{e}"
            ),
        }
    }

    #[test]
    fn contiguous_sysmem_beyond_one_hugepage_is_refused() {
        let err = alloc_pinned(
            GPU,
            Path::new("/proc/self/pagemap"),
            HUGEPAGE_SIZE + 1,
            true,
        )
        .err()
        .unwrap();
        assert!(err.to_string().contains("2 MiB"), "{err}");
    }

    #[test]
    fn scan_reports_a_bad_vendor_file() {
        let fs = FakeSysfs::new();
        navi31(&fs);
        fs.write(GPU, "vendor", "amd\n");
        let err = scan(fs.root()).unwrap_err();
        assert!(matches!(
            err,
            Error {
                kind: ErrorKind::Parse { .. },
                ..
            }
        ));
        assert!(err.to_string().contains("vendor"), "{err}");
    }
}
