//! The VFIO backend: a GPU bound to `vfio-pci`, driven through its VFIO device fd.
//!
//! Chosen for a PCI address when `VFIO=1`. Opening takes the device lock, binds the function
//! to `vfio-pci` (`driver_override` + `drivers_probe`) unless it is already, removes non-GPU
//! sibling functions (they share the IOMMU group, which must be viable), then sets up one of
//! two IOMMU modes:
//!
//! - **type1** (an IOMMU translates the GPU's DMA): container, group and device through
//!   `vfio-ioctls` (no KVM). System memory is locked anonymous memory DMA-mapped at an IOVA
//!   chosen here; that IOVA is the bus address the GPU uses.
//! - **no-IOMMU** (`/sys/module/vfio/parameters/enable_unsafe_noiommu_mode` is `Y`): the
//!   group is `/dev/vfio/noiommu-N` and the container's IOMMU type `VFIO_NOIOMMU_IOMMU`,
//!   which `vfio-ioctls` does not offer, so these few ioctls are issued here. DMA goes to
//!   physical addresses, read from `/proc/self/pagemap` as in the sysfs backend.
//!
//! BARs are mmapped from the device fd at their region's offset, config space is read and
//! written through the config region, interrupts arrive as MSI on an eventfd, and `reset`
//! is `VFIO_DEVICE_RESET`.

use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use vfio_ioctls::{VfioContainer, VfioDevice};

use super::lock::DeviceLock;
use super::spec::Bdf;
use super::sysfs::{SysfsOptions, alloc_pinned, device_dir, link_name, remove_siblings};
use super::{Bar, BarInfo, PciDevice, SYSMEM_PAGE_SIZE, SysMem};
use crate::pci::mapping::{DmaMemory, MmioRegion};
use crate::{Error, ErrorKind, Result};

/// `VFIO_TYPE` of `linux/vfio.h`: the ioctl type byte `';'`.
const VFIO_TYPE: u8 = b';';
/// `VFIO_BASE`: number of the first VFIO ioctl.
const VFIO_BASE: u8 = 100;

/// VFIO ioctls are `_IO(VFIO_TYPE, VFIO_BASE + n)` whatever their argument.
const fn vfio_ioctl(n: u8) -> libc::c_ulong {
    nix::request_code_none!(VFIO_TYPE, VFIO_BASE + n) as libc::c_ulong
}
const VFIO_GET_API_VERSION: libc::c_ulong = vfio_ioctl(0);
const VFIO_CHECK_EXTENSION: libc::c_ulong = vfio_ioctl(1);
const VFIO_SET_IOMMU: libc::c_ulong = vfio_ioctl(2);
const VFIO_GROUP_GET_STATUS: libc::c_ulong = vfio_ioctl(3);
const VFIO_GROUP_SET_CONTAINER: libc::c_ulong = vfio_ioctl(4);
const VFIO_GROUP_GET_DEVICE_FD: libc::c_ulong = vfio_ioctl(6);
const VFIO_DEVICE_GET_REGION_INFO: libc::c_ulong = vfio_ioctl(8);
const VFIO_DEVICE_SET_IRQS: libc::c_ulong = vfio_ioctl(10);
const VFIO_DEVICE_RESET: libc::c_ulong = vfio_ioctl(11);

/// `VFIO_API_VERSION`.
const VFIO_API_VERSION: libc::c_int = 0;
/// `VFIO_NOIOMMU_IOMMU`: the container type of no-IOMMU mode.
const VFIO_NOIOMMU_IOMMU: libc::c_ulong = 8;
/// `VFIO_GROUP_FLAGS_VIABLE`: every device of the group is bound to vfio or to no driver.
const VFIO_GROUP_FLAGS_VIABLE: u32 = 1;
/// `VFIO_REGION_INFO_FLAG_MMAP`: the region can be mmapped from the device fd.
pub const VFIO_REGION_INFO_FLAG_MMAP: u32 = 1 << 2;
/// `VFIO_PCI_CONFIG_REGION_INDEX`: config space is region 7 (after BARs 0–5 and the ROM).
pub const VFIO_PCI_CONFIG_REGION_INDEX: u32 = 7;
/// `VFIO_PCI_MSI_IRQ_INDEX`.
pub const VFIO_PCI_MSI_IRQ_INDEX: u32 = 1;
const VFIO_IRQ_SET_DATA_EVENTFD: u32 = 1 << 2;
const VFIO_IRQ_SET_ACTION_TRIGGER: u32 = 1 << 5;

/// First IOVA handed out for system memory in type1 mode: above 4 GiB so it never meets the
/// x86 MSI window at 0xfee00000 or 32-bit MMIO.
pub const IOVA_BASE: u64 = 1 << 32;
/// End of the IOVA range: 44 bits, the narrowest DMA mask of the GPUs this driver supports.
pub const IOVA_END: u64 = 1 << 44;

/// `struct vfio_region_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct vfio_region_info {
    argsz: u32,
    flags: u32,
    index: u32,
    cap_offset: u32,
    size: u64,
    offset: u64,
}

/// `struct vfio_group_status`.
#[repr(C)]
#[derive(Default)]
struct vfio_group_status {
    argsz: u32,
    flags: u32,
}

/// `struct vfio_irq_set` with one eventfd as its data.
#[repr(C)]
struct vfio_irq_set_one_fd {
    argsz: u32,
    flags: u32,
    index: u32,
    start: u32,
    count: u32,
    fd: i32,
}

/// How DMA reaches system memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VfioMode {
    /// An IOMMU translates IOVAs (VFIO type1).
    Type1,
    /// No IOMMU: the device sees physical addresses (`enable_unsafe_noiommu_mode`).
    NoIommu,
}

/// The mode this machine's vfio module runs in.
pub fn detect_mode(sysfs_root: &Path) -> VfioMode {
    let param = sysfs_root.join("module/vfio/parameters/enable_unsafe_noiommu_mode");
    match std::fs::read_to_string(param) {
        Ok(v) if matches!(v.trim(), "Y" | "y" | "1") => VfioMode::NoIommu,
        _ => VfioMode::Type1,
    }
}

/// The IOMMU group of a function, from its `iommu_group` link.
pub fn iommu_group(sysfs_root: &Path, bdf: &Bdf) -> Result<u32> {
    let link = device_dir(sysfs_root, bdf).join("iommu_group");
    let name = link_name(&link).ok_or_else(|| {
        Error::new(
            bdf.to_string(),
            ErrorKind::Parse {
                path: link.clone(),
                reason: "no IOMMU group link: is the IOMMU (or vfio no-IOMMU mode) enabled?".into(),
            },
        )
    })?;
    name.parse().map_err(|_| {
        Error::new(
            bdf.to_string(),
            ErrorKind::Parse {
                path: link,
                reason: format!("IOMMU group {name:?} is not a number"),
            },
        )
    })
}

/// The character device of a VFIO group.
pub fn group_path(dev_root: &Path, mode: VfioMode, group: u32) -> PathBuf {
    match mode {
        VfioMode::Type1 => dev_root.join(group.to_string()),
        VfioMode::NoIommu => dev_root.join(format!("noiommu-{group}")),
    }
}

/// Bind a function to `vfio-pci` (unbinding its current driver first). Returns whether
/// anything had to change.
pub fn bind_vfio_pci(sysfs_root: &Path, bdf: &Bdf) -> Result<bool> {
    let name = bdf.to_string();
    let dir = device_dir(sysfs_root, bdf);
    if link_name(&dir.join("driver")).as_deref() == Some("vfio-pci") {
        return Ok(false);
    }
    let write = |path: PathBuf, value: &str| {
        std::fs::write(&path, value).map_err(|source| {
            Error::new(
                &name,
                ErrorKind::Io {
                    op: "write",
                    path,
                    source,
                },
            )
        })
    };
    super::sysfs::unbind_driver(sysfs_root, bdf)?;
    write(dir.join("driver_override"), "vfio-pci")?;
    write(sysfs_root.join("bus/pci/drivers_probe"), &name)?;
    Ok(true)
}

/// Where a VFIO region sits in the device fd and what it allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionInfo {
    /// `VFIO_REGION_INFO_FLAG_*`.
    pub flags: u32,
    /// Size in bytes (0: the region does not exist).
    pub size: u64,
    /// Offset of the region in the device fd.
    pub offset: u64,
}

impl RegionInfo {
    /// Whether the region can be mmapped.
    pub fn mappable(&self) -> bool {
        self.flags & VFIO_REGION_INFO_FLAG_MMAP != 0
    }

    /// The file offset of `len` bytes at `offset` in the region, if they fit.
    pub fn file_offset(&self, offset: u64, len: u64) -> Option<u64> {
        (offset.checked_add(len)? <= self.size).then(|| self.offset.checked_add(offset))?
    }
}

/// Hands out IOVAs for type1 DMA mappings: a bump allocator over [`IOVA_BASE`, [`IOVA_END`]).
/// Freed ranges are not reused; 16 TiB of IOVA space outlasts any driver instance.
#[derive(Debug)]
pub struct IovaAllocator {
    next: Mutex<u64>,
}

impl Default for IovaAllocator {
    fn default() -> Self {
        Self {
            next: Mutex::new(IOVA_BASE),
        }
    }
}

impl IovaAllocator {
    /// Reserve `len` bytes (a multiple of 4 KiB), aligned to 2 MiB when `len` is at least
    /// that, so the GPU can use large PTE fragments.
    pub fn alloc(&self, len: u64) -> Option<u64> {
        let mut next = self.next.lock().ok()?;
        let align = if len >= 2 << 20 {
            2 << 20
        } else {
            SYSMEM_PAGE_SIZE as u64
        };
        let start = next.checked_next_multiple_of(align)?;
        let end = start.checked_add(len)?;
        if end > IOVA_END {
            return None;
        }
        *next = end;
        Some(start)
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

/// Issue an ioctl whose argument is an integer.
fn ioctl_int(
    fd: BorrowedFd<'_>,
    request: libc::c_ulong,
    arg: libc::c_ulong,
) -> std::io::Result<i32> {
    // SAFETY: the VFIO ioctls called through here take a plain integer (or nothing), so the
    // kernel reads no user memory; `fd` is a live descriptor.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request, arg) };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Issue an ioctl whose argument is a pointer to `T`.
///
/// # Safety
/// `T` must be the structure the kernel expects for `request` (with `argsz` set), so that the
/// kernel reads and writes only within `*arg`.
unsafe fn ioctl_ptr<T>(
    fd: BorrowedFd<'_>,
    request: libc::c_ulong,
    arg: *mut T,
) -> std::io::Result<i32> {
    // SAFETY: the caller guarantees `arg` points to the right, live structure.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request, arg) };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Region info of `index` from the device fd.
fn region_info(device: &str, fd: &File, path: &Path, index: u32) -> Result<RegionInfo> {
    let mut info = vfio_region_info {
        argsz: std::mem::size_of::<vfio_region_info>() as u32,
        index,
        ..Default::default()
    };
    // SAFETY: VFIO_DEVICE_GET_REGION_INFO takes a `struct vfio_region_info` whose `argsz` is
    // its size; the kernel writes at most that many bytes.
    unsafe { ioctl_ptr(fd.as_fd(), VFIO_DEVICE_GET_REGION_INFO, &mut info) }
        .map_err(|e| io_err(device, "VFIO_DEVICE_GET_REGION_INFO", path, e))?;
    Ok(RegionInfo {
        flags: info.flags,
        size: info.size,
        offset: info.offset,
    })
}

/// The no-IOMMU container and group, set up by hand (`vfio-ioctls` only knows type1).
struct NoIommu {
    _container: File,
    _group: File,
}

fn open_noiommu(device: &str, bdf: &Bdf, group: &Path) -> Result<(NoIommu, File)> {
    let open = |path: &Path| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| io_err(device, "open", path, e))
    };
    let container_path = Path::new("/dev/vfio/vfio");
    let container = open(container_path)?;
    let cerr = |op, e| io_err(device, op, container_path, e);
    if ioctl_int(container.as_fd(), VFIO_GET_API_VERSION, 0)
        .map_err(|e| cerr("VFIO_GET_API_VERSION", e))?
        != VFIO_API_VERSION
    {
        return Err(Error::new(
            device.to_string(),
            ErrorKind::Backend {
                message: "unknown VFIO API version".into(),
            },
        ));
    }
    if ioctl_int(container.as_fd(), VFIO_CHECK_EXTENSION, VFIO_NOIOMMU_IOMMU)
        .map_err(|e| cerr("VFIO_CHECK_EXTENSION", e))?
        != 1
    {
        return Err(Error::new(
            device.to_string(),
            ErrorKind::Backend {
                message: "the vfio module does not offer no-IOMMU mode".into(),
            },
        ));
    }
    let group_file = open(group)?;
    let gerr = |op, e| io_err(device, op, group, e);
    let mut status = vfio_group_status {
        argsz: std::mem::size_of::<vfio_group_status>() as u32,
        flags: 0,
    };
    // SAFETY: VFIO_GROUP_GET_STATUS takes a `struct vfio_group_status` with `argsz` set.
    unsafe { ioctl_ptr(group_file.as_fd(), VFIO_GROUP_GET_STATUS, &mut status) }
        .map_err(|e| gerr("VFIO_GROUP_GET_STATUS", e))?;
    if status.flags & VFIO_GROUP_FLAGS_VIABLE == 0 {
        return Err(Error::new(
            device.to_string(),
            ErrorKind::Backend {
                message: format!(
                    "VFIO group {} is not viable: bind every device of the group to vfio-pci",
                    group.display()
                ),
            },
        ));
    }
    let mut container_fd: libc::c_int = container.as_raw_fd();
    // SAFETY: VFIO_GROUP_SET_CONTAINER reads one `int` (the container fd) from the pointer.
    unsafe {
        ioctl_ptr(
            group_file.as_fd(),
            VFIO_GROUP_SET_CONTAINER,
            &mut container_fd,
        )
    }
    .map_err(|e| gerr("VFIO_GROUP_SET_CONTAINER", e))?;
    ioctl_int(container.as_fd(), VFIO_SET_IOMMU, VFIO_NOIOMMU_IOMMU)
        .map_err(|e| cerr("VFIO_SET_IOMMU", e))?;
    let mut name = bdf.to_string().into_bytes();
    name.push(0);
    // SAFETY: VFIO_GROUP_GET_DEVICE_FD reads a NUL-terminated device name; `name` is one.
    let fd = unsafe {
        ioctl_ptr(
            group_file.as_fd(),
            VFIO_GROUP_GET_DEVICE_FD,
            name.as_mut_ptr(),
        )
    }
    .map_err(|e| gerr("VFIO_GROUP_GET_DEVICE_FD", e))?;
    // SAFETY: on success the ioctl returned a new descriptor that nothing else owns.
    let device_file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    Ok((
        NoIommu {
            _container: container,
            _group: group_file,
        },
        device_file,
    ))
}

/// What keeps the IOMMU side of the device alive.
enum Iommu {
    Type1 {
        /// Held for its Drop, which releases the group (the device fd is a dup in `VfioPci`).
        #[allow(dead_code, reason = "held for its Drop")]
        device: VfioDevice,
        container: Arc<VfioContainer>,
        iova: IovaAllocator,
    },
    NoIommu(#[allow(dead_code, reason = "held for its Drop")] NoIommu),
}

/// A GPU driven through VFIO.
pub struct VfioPci {
    name: String,
    dir: PathBuf,
    opts: SysfsOptions,
    mode: VfioMode,
    /// The VFIO device fd (a dup of the one `vfio-ioctls` holds in type1 mode).
    device: File,
    device_path: PathBuf,
    config: RegionInfo,
    bars: Mutex<[Option<Arc<MmioRegion>>; 6]>,
    irq: Option<OwnedFd>,
    // Dropped after the device fd above: releases the group and container.
    iommu: Iommu,
    _lock: DeviceLock,
}

impl VfioPci {
    /// Open the GPU at `bdf` through VFIO with the real sysfs, `/dev/vfio` and pagemap.
    pub fn open(bdf: Bdf) -> Result<Self> {
        Self::open_with(bdf, SysfsOptions::default())
    }

    /// Open the GPU at `bdf` through VFIO, with sysfs, pagemap and lock directory from `opts`
    /// (group devices are always under `/dev/vfio`).
    pub fn open_with(bdf: Bdf, opts: SysfsOptions) -> Result<Self> {
        let name = bdf.to_string();
        let dir = device_dir(&opts.root, &bdf);
        let lock = DeviceLock::acquire_in(&opts.lock_dir, &name)?;
        remove_siblings(&opts.root, &bdf)?;
        bind_vfio_pci(&opts.root, &bdf)?;
        let mode = detect_mode(&opts.root);
        let group = iommu_group(&opts.root, &bdf)?;
        let group_dev = group_path(Path::new("/dev/vfio"), mode, group);
        tracing::info!("{name}: VFIO {mode:?}, group {}", group_dev.display());
        let (device, iommu) = match mode {
            VfioMode::Type1 => {
                let verr = |op, source| {
                    Error::new(
                        &name,
                        ErrorKind::Vfio {
                            op,
                            path: group_dev.clone(),
                            source,
                        },
                    )
                };
                let container =
                    Arc::new(VfioContainer::new(None).map_err(|e| verr("open container", e))?);
                let vdev = VfioDevice::new(&dir, container.clone(), false)
                    .map_err(|e| verr("open device", e))?;
                // SAFETY: `vdev` owns this descriptor and outlives the borrow, which is only
                // used to dup it.
                let borrowed = unsafe { BorrowedFd::borrow_raw(vdev.as_raw_fd()) };
                let fd = borrowed
                    .try_clone_to_owned()
                    .map_err(|e| io_err(&name, "dup", &group_dev, e))?;
                (
                    File::from(fd),
                    Iommu::Type1 {
                        device: vdev,
                        container,
                        iova: IovaAllocator::default(),
                    },
                )
            }
            VfioMode::NoIommu => {
                let (noiommu, device) = open_noiommu(&name, &bdf, &group_dev)?;
                (device, Iommu::NoIommu(noiommu))
            }
        };
        let config = region_info(&name, &device, &group_dev, VFIO_PCI_CONFIG_REGION_INDEX)?;
        let irq = match enable_msi(&name, &device, &group_dev) {
            Ok(fd) => Some(fd),
            Err(e) => {
                tracing::warn!("{e}; interrupts will not be delivered");
                None
            }
        };
        Ok(Self {
            name,
            dir,
            opts,
            mode,
            device,
            device_path: group_dev,
            config,
            bars: Mutex::new(Default::default()),
            irq,
            iommu,
            _lock: lock,
        })
    }

    /// The IOMMU mode in use.
    pub fn mode(&self) -> VfioMode {
        self.mode
    }

    fn region(&self, index: u8) -> Result<RegionInfo> {
        let no_bar =
            |reason: String| Error::new(&self.name, ErrorKind::NoBar { bar: index, reason });
        if index > 5 {
            return Err(no_bar("a PCI function has BARs 0 to 5".into()));
        }
        let info = region_info(&self.name, &self.device, &self.device_path, index.into())?;
        if info.size == 0 {
            return Err(no_bar("it is not implemented (size 0)".into()));
        }
        Ok(info)
    }

    fn config_offset(&self, offset: u16, size: u8) -> Result<u64> {
        let range = Error::new(
            &self.name,
            ErrorKind::OutOfRange {
                what: "config space".into(),
                offset: offset.into(),
                size: size.into(),
                len: self.config.size,
            },
        );
        if !matches!(size, 1 | 2 | 4) {
            return Err(range);
        }
        self.config
            .file_offset(offset.into(), size.into())
            .ok_or(range)
    }
}

/// Route MSI vector 0 to a fresh eventfd.
fn enable_msi(device: &str, fd: &File, path: &Path) -> Result<OwnedFd> {
    // SAFETY: eventfd has no memory arguments; the result is checked.
    let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if efd < 0 {
        return Err(io_err(
            device,
            "eventfd",
            path,
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    let efd = unsafe { OwnedFd::from_raw_fd(efd) };
    let mut set = vfio_irq_set_one_fd {
        argsz: std::mem::size_of::<vfio_irq_set_one_fd>() as u32,
        flags: VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER,
        index: VFIO_PCI_MSI_IRQ_INDEX,
        start: 0,
        count: 1,
        fd: efd.as_raw_fd(),
    };
    // SAFETY: VFIO_DEVICE_SET_IRQS reads a `struct vfio_irq_set` followed by `count` fds;
    // `argsz` covers exactly the header and the one fd.
    unsafe { ioctl_ptr(fd.as_fd(), VFIO_DEVICE_SET_IRQS, &mut set) }
        .map_err(|e| io_err(device, "VFIO_DEVICE_SET_IRQS (MSI)", path, e))?;
    Ok(efd)
}

/// System memory DMA-mapped through the IOMMU; unmapped before it is freed.
struct IommuMemory {
    container: Arc<VfioContainer>,
    iova: u64,
    mem: DmaMemory,
}

impl Drop for IommuMemory {
    fn drop(&mut self) {
        if let Err(e) = self.container.vfio_dma_unmap(self.iova, self.mem.len()) {
            tracing::error!("VFIO DMA unmap of IOVA {:#x}: {e}", self.iova);
        }
    }
}

/// A peer's BAR mapped into this device's IOMMU domain ([`VfioPci::peer_bar`]).
struct PeerBarMapping {
    container: Arc<VfioContainer>,
    iova: u64,
    len: usize,
    /// The peer's BAR mapping the IOVA range points at; dropped after the unmap.
    _region: Arc<dyn Bar>,
}

impl Drop for PeerBarMapping {
    fn drop(&mut self) {
        if let Err(e) = self.container.vfio_dma_unmap(self.iova, self.len) {
            tracing::error!("VFIO DMA unmap of a peer BAR at IOVA {:#x}: {e}", self.iova);
        }
    }
}

impl SysMem for IommuMemory {
    fn len(&self) -> usize {
        self.mem.len()
    }
    fn bus_addrs(&self) -> &[u64] {
        self.mem.bus_addrs()
    }
    fn read_bytes(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.mem.read_bytes(offset, buf)
    }
    fn write_bytes(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.mem.write_bytes(offset, data)
    }
}

impl PciDevice for VfioPci {
    fn name(&self) -> &str {
        &self.name
    }

    fn backend(&self) -> &'static str {
        "vfio"
    }

    fn config_read(&self, offset: u16, size: u8) -> Result<u32> {
        let at = self.config_offset(offset, size)?;
        let mut b = [0u8; 4];
        self.device
            .read_exact_at(&mut b[..usize::from(size)], at)
            .map_err(|e| io_err(&self.name, "read config", &self.device_path, e))?;
        Ok(u32::from_le_bytes(b))
    }

    fn config_write(&self, offset: u16, size: u8, value: u32) -> Result<()> {
        let at = self.config_offset(offset, size)?;
        self.device
            .write_all_at(&value.to_le_bytes()[..usize::from(size)], at)
            .map_err(|e| io_err(&self.name, "write config", &self.device_path, e))
    }

    fn bar_info(&self, index: u8) -> Result<BarInfo> {
        let size = self.region(index)?.size;
        // The bus address is the BAR's assignment, which VFIO does not report: read it from
        // sysfs `resource` like the sysfs backend.
        let text = std::fs::read_to_string(self.dir.join("resource"))
            .map_err(|e| io_err(&self.name, "read", &self.dir.join("resource"), e))?;
        let resources = super::sysfs::parse_resource(&text).map_err(|reason| {
            Error::new(
                &self.name,
                ErrorKind::Parse {
                    path: self.dir.join("resource"),
                    reason,
                },
            )
        })?;
        let bus_addr = resources.get(usize::from(index)).map_or(0, |r| r.start);
        Ok(BarInfo {
            index,
            bus_addr,
            size,
        })
    }

    fn bar(&self, index: u8) -> Result<Arc<dyn Bar>> {
        let info = self.region(index)?;
        if !info.mappable() {
            return Err(Error::new(
                &self.name,
                ErrorKind::NoBar {
                    bar: index,
                    reason: "VFIO does not allow mmap of this region".into(),
                },
            ));
        }
        let mut bars = self.bars.lock().map_err(|_| {
            Error::new(
                &self.name,
                ErrorKind::Backend {
                    message: "a thread panicked while holding the BAR table".into(),
                },
            )
        })?;
        let slot = &mut bars[usize::from(index)];
        if let Some(bar) = slot {
            return Ok(bar.clone());
        }
        let len = usize::try_from(info.size).map_err(|_| {
            Error::new(
                &self.name,
                ErrorKind::NoBar {
                    bar: index,
                    reason: "it is larger than the address space".into(),
                },
            )
        })?;
        let region = Arc::new(MmioRegion::map_file(
            &self.name,
            &format!("BAR{index}"),
            &self.device,
            &self.device_path,
            info.offset,
            len,
        )?);
        *slot = Some(region.clone());
        Ok(region)
    }

    /// Under an IOMMU (type1) the peer's BAR must be in this device's IOMMU domain: its
    /// `mmap` (the peer must be a VFIO device of this process) is DMA-mapped at a fresh IOVA
    /// (`VFIO_IOMMU_MAP_DMA` takes MMIO mappings as it takes memory), kept while the
    /// returned [`crate::pci::PeerBar`] lives. Without one (no-IOMMU mode) the BAR's bus
    /// address is used, both devices under one PCI root as the sysfs backend asks.
    fn peer_bar(&self, peer: &dyn PciDevice, bar: u8) -> Result<crate::pci::PeerBar> {
        use super::sysfs::no_peer_access;
        if peer.backend() != "vfio" {
            return Err(no_peer_access(
                &self.name,
                peer,
                format!(
                    "it is a {} device; a VFIO device reaches only BARs it can map into its \
                     IOMMU domain, which are other VFIO devices'",
                    peer.backend()
                ),
            ));
        }
        match &self.iommu {
            Iommu::NoIommu(_) => super::sysfs::peer_bar_at_bus_address(
                &self.name,
                &self.opts.root,
                &self.dir,
                peer,
                bar,
            ),
            Iommu::Type1 {
                container, iova, ..
            } => {
                let region = peer.bar(bar)?;
                let ptr = region.host_ptr().ok_or_else(|| {
                    no_peer_access(
                        &self.name,
                        peer,
                        format!("its BAR{bar} is not mapped into this process"),
                    )
                })?;
                let len = region.len();
                let base = iova.alloc(len).ok_or_else(|| {
                    no_peer_access(
                        &self.name,
                        peer,
                        format!("IOVA space exhausted mapping its {len:#x}-byte BAR{bar}"),
                    )
                })?;
                let size = usize::try_from(len).map_err(|_| {
                    no_peer_access(
                        &self.name,
                        peer,
                        format!("BAR{bar} exceeds the address space"),
                    )
                })?;
                // SAFETY: `ptr` is the start of the peer's BAR mapping of `len` bytes, kept
                // mapped by `region`, which the returned guard holds; the guard unmaps the
                // IOVA range before it drops `region`.
                unsafe { container.vfio_dma_map(base, size, ptr) }.map_err(|e| {
                    Error::new(
                        &self.name,
                        ErrorKind::Vfio {
                            op: "DMA map of a peer's BAR",
                            path: self.device_path.clone(),
                            source: e,
                        },
                    )
                })?;
                Ok(crate::pci::PeerBar {
                    peer: peer.name().to_string(),
                    index: bar,
                    dma_addr: base,
                    size: len,
                    keep: Some(Box::new(PeerBarMapping {
                        container: container.clone(),
                        iova: base,
                        len: size,
                        _region: region,
                    })),
                })
            }
        }
    }

    fn resize_bar(&self, index: u8) -> Result<()> {
        // vfio-pci owns the device; a resize needs the driver unbound. The BAR stays as it is.
        tracing::debug!("{}: BAR{index} is not resized under VFIO", self.name);
        Ok(())
    }

    fn alloc_sysmem(&self, size: usize, contiguous: bool) -> Result<Arc<dyn SysMem>> {
        match &self.iommu {
            Iommu::NoIommu(_) => {
                let (region, addrs) =
                    alloc_pinned(&self.name, &self.opts.pagemap, size, contiguous)?;
                Ok(Arc::new(DmaMemory::new(region, addrs)))
            }
            Iommu::Type1 {
                container, iova, ..
            } => {
                let len = size
                    .max(1)
                    .checked_next_multiple_of(SYSMEM_PAGE_SIZE)
                    .ok_or_else(|| {
                        Error::new(
                            &self.name,
                            ErrorKind::OutOfRange {
                                what: "system memory allocation".into(),
                                offset: 0,
                                size: size as u64,
                                len: isize::MAX as u64,
                            },
                        )
                    })?;
                let region = MmioRegion::anonymous(&self.name, "system memory", len, false)?;
                let base = iova.alloc(len as u64).ok_or_else(|| {
                    Error::new(
                        &self.name,
                        ErrorKind::Backend {
                            message: format!("IOVA space exhausted allocating {len:#x} bytes"),
                        },
                    )
                })?;
                // SAFETY: `region` is a private anonymous mapping of `len` bytes that is only
                // ever accessed through volatile raw-pointer accesses (no references), and it
                // is unmapped from the IOMMU in `IommuMemory::drop` before `region` is
                // munmapped (the `mem` field drops after `drop` runs).
                unsafe { container.vfio_dma_map(base, len, region.as_ptr()) }.map_err(|e| {
                    Error::new(
                        &self.name,
                        ErrorKind::Vfio {
                            op: "DMA map",
                            path: self.device_path.clone(),
                            source: e,
                        },
                    )
                })?;
                // One IOVA run: contiguous as the GPU sees it, whatever `contiguous` asked.
                let addrs = (0..len / SYSMEM_PAGE_SIZE)
                    .map(|i| base + (i * SYSMEM_PAGE_SIZE) as u64)
                    .collect();
                Ok(Arc::new(IommuMemory {
                    container: container.clone(),
                    iova: base,
                    mem: DmaMemory::new(region, addrs),
                }))
            }
        }
    }

    fn reset(&self) -> Result<()> {
        ioctl_int(self.device.as_fd(), VFIO_DEVICE_RESET, 0)
            .map(|_| ())
            .map_err(|e| io_err(&self.name, "VFIO_DEVICE_RESET", &self.device_path, e))
    }

    fn wait_irq(&self, timeout: Duration) -> Result<bool> {
        let Some(efd) = &self.irq else {
            return Err(Error::new(
                &self.name,
                ErrorKind::Unsupported {
                    op: "interrupt wait (MSI could not be enabled)",
                    backend: "vfio",
                },
            ));
        };
        let mut fds = [nix::poll::PollFd::new(
            efd.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        let timeout =
            nix::poll::PollTimeout::try_from(timeout).unwrap_or(nix::poll::PollTimeout::MAX);
        let ready = nix::poll::poll(&mut fds, timeout)
            .map_err(|e| io_err(&self.name, "poll MSI eventfd", &self.device_path, e.into()))?;
        if ready == 0 {
            return Ok(false);
        }
        // Reading resets the eventfd counter (several MSIs since the last wait count as one).
        let mut counter = [0u8; 8];
        nix::unistd::read(efd.as_fd(), &mut counter)
            .map_err(|e| io_err(&self.name, "read MSI eventfd", &self.device_path, e.into()))?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pci::fake_sysfs::{FakeSysfs, navi31_bars};

    const GPU: &str = "0000:03:00.0";

    fn gpu() -> Bdf {
        Bdf::parse(GPU).unwrap()
    }

    #[test]
    fn ioctl_numbers_match_linux_vfio_h() {
        // _IO(';', 100 + n) = 0x3b00 | (100 + n).
        assert_eq!(VFIO_GET_API_VERSION, 0x3b64);
        assert_eq!(VFIO_SET_IOMMU, 0x3b66);
        assert_eq!(VFIO_GROUP_GET_DEVICE_FD, 0x3b6a);
        assert_eq!(VFIO_DEVICE_GET_REGION_INFO, 0x3b6c);
        assert_eq!(VFIO_DEVICE_SET_IRQS, 0x3b6e);
        assert_eq!(VFIO_DEVICE_RESET, 0x3b6f);
        assert_eq!(std::mem::size_of::<vfio_region_info>(), 32);
        assert_eq!(std::mem::size_of::<vfio_irq_set_one_fd>(), 24);
    }

    #[test]
    fn mode_follows_the_noiommu_parameter() {
        let fs = FakeSysfs::new();
        assert_eq!(
            detect_mode(fs.root()),
            VfioMode::Type1,
            "no vfio module loaded"
        );
        let p = fs.root().join("module/vfio/parameters");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("enable_unsafe_noiommu_mode"), "N\n").unwrap();
        assert_eq!(detect_mode(fs.root()), VfioMode::Type1);
        std::fs::write(p.join("enable_unsafe_noiommu_mode"), "Y\n").unwrap();
        assert_eq!(detect_mode(fs.root()), VfioMode::NoIommu);
    }

    #[test]
    fn group_comes_from_the_iommu_group_link() {
        let fs = FakeSysfs::new();
        fs.add_device(GPU, 0x1002, 0x744c, 0x030000, &navi31_bars());
        let err = iommu_group(fs.root(), &gpu()).unwrap_err();
        assert!(err.to_string().contains("iommu_group"), "{err}");
        fs.set_iommu_group(GPU, 27);
        assert_eq!(iommu_group(fs.root(), &gpu()).unwrap(), 27);
        assert_eq!(
            group_path(Path::new("/dev/vfio"), VfioMode::Type1, 27),
            Path::new("/dev/vfio/27")
        );
        assert_eq!(
            group_path(Path::new("/dev/vfio"), VfioMode::NoIommu, 27),
            Path::new("/dev/vfio/noiommu-27")
        );
    }

    #[test]
    fn binding_overrides_the_driver_and_probes() {
        let fs = FakeSysfs::new();
        fs.add_device(GPU, 0x1002, 0x744c, 0x030000, &navi31_bars());
        fs.bind(GPU, "amdgpu");
        std::fs::write(fs.root().join("bus/pci/drivers_probe"), "").unwrap();
        assert!(bind_vfio_pci(fs.root(), &gpu()).unwrap());
        assert_eq!(
            std::fs::read_to_string(fs.root().join("bus/pci/drivers/amdgpu/unbind")).unwrap(),
            GPU
        );
        assert_eq!(fs.read(GPU, "driver_override"), "vfio-pci");
        assert_eq!(
            std::fs::read_to_string(fs.root().join("bus/pci/drivers_probe")).unwrap(),
            GPU
        );
    }

    #[test]
    fn a_device_on_vfio_pci_is_left_alone() {
        let fs = FakeSysfs::new();
        fs.add_device(GPU, 0x1002, 0x744c, 0x030000, &navi31_bars());
        fs.bind(GPU, "vfio-pci");
        assert!(!bind_vfio_pci(fs.root(), &gpu()).unwrap());
        assert_eq!(fs.read(GPU, "driver_override"), "");
    }

    #[test]
    fn region_offsets_are_bounds_checked() {
        // vfio-pci places region N at N << 40 in the device fd.
        let config = RegionInfo {
            flags: 3,
            size: 4096,
            offset: 7 << 40,
        };
        assert_eq!(config.file_offset(0x10, 4), Some((7 << 40) + 0x10));
        assert_eq!(config.file_offset(4092, 4), Some((7 << 40) + 4092));
        assert_eq!(config.file_offset(4093, 4), None);
        assert_eq!(config.file_offset(u64::MAX, 4), None);
        assert!(!config.mappable());
        assert!(
            RegionInfo {
                flags: 7,
                size: 1 << 20,
                offset: 5 << 40
            }
            .mappable()
        );
    }

    #[test]
    fn iovas_are_disjoint_aligned_and_bounded() {
        let a = IovaAllocator::default();
        let x = a.alloc(4096).unwrap();
        let y = a.alloc(8192).unwrap();
        let z = a.alloc(4 << 20).unwrap();
        assert_eq!(x, IOVA_BASE);
        assert_eq!(y, IOVA_BASE + 4096);
        assert!(z >= y + 8192 && z % (2 << 20) == 0);
        assert_eq!(a.alloc(IOVA_END), None, "larger than the IOVA range");
        assert!(
            a.alloc(4096).unwrap() >= z + (4 << 20),
            "a refused request reserves nothing"
        );
    }

    #[test]
    fn open_without_vfio_fails_with_the_path_involved() {
        // The fake tree has the device but this machine has no VFIO group for it (and no
        // IOMMU group link): the open fails cleanly, after binding, naming the link.
        let fs = FakeSysfs::new();
        fs.add_device(GPU, 0x1002, 0x744c, 0x030000, &navi31_bars());
        std::fs::write(fs.root().join("bus/pci/drivers_probe"), "").unwrap();
        let opts = SysfsOptions {
            root: fs.root().to_path_buf(),
            pagemap: "/proc/self/pagemap".into(),
            lock_dir: fs.root().to_path_buf(),
        };
        let err = VfioPci::open_with(gpu(), opts).err().unwrap();
        assert!(err.to_string().contains("iommu_group"), "{err}");
        assert_eq!(fs.read(GPU, "driver_override"), "vfio-pci");
    }
}
