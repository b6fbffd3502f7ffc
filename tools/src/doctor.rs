//! `am doctor [DEVICE] [--json]`: what this machine lacks for a real boot, read from sysfs and
//! procfs without touching a device, each finding with what to do about it.
//!
//! Machine-wide checks first (IOMMU, `vfio-pci`, privileges, memlock, hugepages, lockdown,
//! `AM_*` variables), then per AMD GPU (bound driver, IOMMU group, BARs, `enable`, file
//! permissions, firmware). Nothing is written anywhere. The roots are options so that tests
//! run every check on fake trees.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use am_driver::pci::ids::known_gpu;
use am_driver::pci::spec::vfio_requested;
use am_driver::pci::sysfs::{self, PciGpu, Resource};
use am_driver::pci::vfio::{self, VfioMode};
use am_driver::pci::{Bdf, caps};
use am_firmware::{FirmwareError, FirmwareSet, IpVersions, LoadedFile, Locator, Pins, PlanOptions};
use anyhow::{Context, bail};
use serde::Serialize;

/// Arguments of `am doctor`.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Check only this GPU (a PCI address, `0000:03:00.0`). Default: every AMD GPU of this
    /// machine's PCI bus.
    #[arg(value_name = "DEVICE")]
    pub device: Option<String>,
    /// Print one JSON object (findings and summary) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Look for firmware in DIR only (repeatable), instead of `$AM_FIRMWARE_PATH` and
    /// `/lib/firmware/amdgpu`.
    #[arg(long, value_name = "DIR")]
    pub firmware_dir: Vec<PathBuf>,
    /// Where sysfs is mounted (tests point this at a fake tree).
    #[arg(long, default_value = sysfs::SYSFS_ROOT, hide = true)]
    pub sysfs_root: PathBuf,
    /// Where procfs is mounted (tests point this at a fake tree).
    #[arg(long, default_value = "/proc", hide = true)]
    pub proc_root: PathBuf,
    /// Where the device nodes are (`/dev/vfio/…`; tests point this at a fake tree).
    #[arg(long, default_value = "/dev", hide = true)]
    pub dev_root: PathBuf,
}

/// How a finding stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Nothing to do.
    Ok,
    /// A boot may work, but something will be slow, limited or need care.
    Warn,
    /// A boot will not work until this is fixed.
    Fail,
    /// The check does not apply here.
    Skipped,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
            Status::Skipped => "skipped",
        }
    }
}

/// One thing `am doctor` looked at.
#[derive(Debug, Serialize)]
pub struct Finding {
    /// The check's name (`iommu`, `driver`, `firmware`, …).
    pub check: &'static str,
    /// How it stands.
    pub status: Status,
    /// The GPU it is about (its BDF); `None` for machine-wide checks.
    pub device: Option<String>,
    /// What was seen, naming the files and values read.
    pub seen: String,
    /// What to do about it; `None` when nothing is to be done.
    pub advice: Option<String>,
}

fn finding(check: &'static str, status: Status, device: Option<&Bdf>, seen: String) -> Finding {
    Finding {
        check,
        status,
        device: device.map(Bdf::to_string),
        seen,
        advice: None,
    }
}

impl Finding {
    fn advise(mut self, advice: impl Into<String>) -> Self {
        self.advice = Some(advice.into());
        self
    }
}

/// A GPU the report covers.
#[derive(Debug, Serialize)]
pub struct GpuSummary {
    /// Its PCI address.
    pub bdf: String,
    /// PCI device id.
    pub device_id: u16,
    /// Its name, when the project knows the id.
    pub name: Option<&'static str>,
}

/// Counts of the findings by status.
#[derive(Debug, Default, Serialize)]
pub struct Summary {
    pub ok: usize,
    pub warn: usize,
    pub fail: usize,
    pub skipped: usize,
    /// AMD GPUs checked.
    pub gpus: usize,
    /// The exit status: 1 when a GPU was checked and some finding failed, else 0.
    pub exit_code: u8,
}

/// Everything `am doctor` reports.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The GPUs checked.
    pub gpus: Vec<GpuSummary>,
    /// Machine-wide findings first, then each GPU's.
    pub findings: Vec<Finding>,
    /// With no AMD GPU: the per-device checks that would run.
    pub would_check: Vec<WouldCheck>,
    pub summary: Summary,
}

/// A per-device check, as a machine without a GPU lists it.
#[derive(Debug, Serialize)]
pub struct WouldCheck {
    /// The check's name.
    pub check: &'static str,
    /// What it reads and why.
    pub reads: &'static str,
}

/// The per-device checks and what each reads, for the report of a machine without a GPU.
pub const DEVICE_CHECKS: [(&str, &str); 6] = [
    (
        "driver",
        "the `driver` link: amdgpu must be unbound, vfio-pci serves VFIO=1",
    ),
    (
        "iommu-group",
        "the `iommu_group` link, the group's `type` and the other devices in it",
    ),
    (
        "bars",
        "`resource` (BAR0 VRAM window, BAR2 doorbells, BAR5 registers) and `resource0_resize`",
    ),
    ("enable", "`enable`: whether the kernel enabled the device"),
    (
        "permissions",
        "`config`, `resource0/2/5`, `enable`, `driver/unbind` and /dev/vfio for this user",
    ),
    (
        "firmware",
        "the files the device's profile loads, found and parsed (`am fw list`)",
    ),
];

/// Where the checks read, and what they know of this process.
struct Machine {
    sysfs: PathBuf,
    proc: PathBuf,
    dev: PathBuf,
    ident: Option<Ident>,
    env: Vec<(String, String)>,
}

/// Who this process is, from `/proc/self/status`.
#[derive(Debug)]
struct Ident {
    euid: u32,
    egid: u32,
    groups: Vec<u32>,
    cap_eff: u64,
}

/// `CAP_IPC_LOCK` (mlock beyond `RLIMIT_MEMLOCK`).
const CAP_IPC_LOCK: u32 = 14;
/// `CAP_SYS_ADMIN` (sysfs `enable`, full config space, PFNs in pagemap).
const CAP_SYS_ADMIN: u32 = 21;

impl Ident {
    fn parse(status: &str) -> Option<Self> {
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::split_whitespace)
        };
        // `Uid:` and `Gid:` list real, effective, saved and filesystem ids.
        let euid = field("Uid:")?.nth(1)?.parse().ok()?;
        let egid = field("Gid:")?.nth(1)?.parse().ok()?;
        let groups = field("Groups:")
            .map(|g| g.filter_map(|x| x.parse().ok()).collect())
            .unwrap_or_default();
        let cap_eff = u64::from_str_radix(field("CapEff:")?.next()?, 16).ok()?;
        Some(Ident {
            euid,
            egid,
            groups,
            cap_eff,
        })
    }

    fn has_cap(&self, cap: u32) -> bool {
        self.cap_eff & (1 << cap) != 0
    }

    /// Whether the mode bits of `meta` grant `want` (`r` 4, `w` 2) to this process.
    fn may(&self, meta: &std::fs::Metadata, want: u32) -> bool {
        if self.euid == 0 {
            return true;
        }
        let mode = meta.mode();
        let bits = if meta.uid() == self.euid {
            mode >> 6
        } else if meta.gid() == self.egid || self.groups.contains(&meta.gid()) {
            mode >> 3
        } else {
            mode
        };
        bits & want == want
    }
}

fn read_trim(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn dir_names(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(path)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn size_text(bytes: u64) -> String {
    match bytes {
        0 => "none".to_string(),
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b => format!("{} KiB", b >> 10),
    }
}

/// What the IOMMU checks found, for the checks that depend on it.
struct IommuFacts {
    units: Vec<String>,
    groups: usize,
    /// The IOMMU and vfio options of the kernel command line.
    flags: Vec<String>,
    passthrough_cmdline: bool,
    noiommu: bool,
}

impl IommuFacts {
    fn present(&self) -> bool {
        !self.units.is_empty() || self.groups > 0
    }
}

fn iommu_facts(m: &Machine) -> IommuFacts {
    let cmdline = read_trim(&m.proc.join("cmdline")).unwrap_or_default();
    let flags: Vec<String> = cmdline
        .split_whitespace()
        .filter(|w| {
            ["iommu", "amd_iommu", "intel_iommu", "vfio"]
                .iter()
                .any(|p| w.starts_with(p))
        })
        .map(str::to_string)
        .collect();
    IommuFacts {
        units: dir_names(&m.sysfs.join("class/iommu")),
        groups: dir_names(&m.sysfs.join("kernel/iommu_groups")).len(),
        passthrough_cmdline: flags
            .iter()
            .any(|f| f == "iommu=pt" || f == "iommu.passthrough=1"),
        flags,
        noiommu: vfio::detect_mode(&m.sysfs) == VfioMode::NoIommu,
    }
}

/// The machine's IOMMU and what it means for the two backends; `gpus_identity` says every GPU
/// checked is in a group whose DMA is not translated.
fn check_iommu(m: &Machine, facts: &IommuFacts, gpus_identity: bool) -> Finding {
    let cmd = if facts.flags.is_empty() {
        "no IOMMU option on the kernel command line".to_string()
    } else {
        format!("kernel command line: {}", facts.flags.join(" "))
    };
    if !facts.present() {
        let f = finding(
            "iommu",
            Status::Ok,
            None,
            format!(
                "no IOMMU: {} and {} are empty; {cmd}; vfio no-IOMMU mode {} \
                 (module/vfio/parameters/enable_unsafe_noiommu_mode). The GPU sees physical \
                 addresses, which the sysfs backend hands it; VFIO=1 works only in no-IOMMU mode",
                m.sysfs.join("class/iommu").display(),
                m.sysfs.join("kernel/iommu_groups").display(),
                if facts.noiommu { "on" } else { "off" }
            ),
        );
        return if facts.noiommu {
            f
        } else {
            f.advise(
                "nothing for the sysfs backend; for VFIO=1: sudo modprobe vfio \
                 enable_unsafe_noiommu_mode=1",
            )
        };
    }
    let (status, mode) = if facts.passthrough_cmdline {
        (
            Status::Ok,
            "passthrough: devices DMA to physical addresses, so the sysfs backend and VFIO both work",
        )
    } else if gpus_identity {
        (
            Status::Ok,
            "every GPU's group is of type identity (passthrough), so the sysfs backend and VFIO \
             both work",
        )
    } else {
        (
            Status::Warn,
            "translating unless a group's `type` says identity (see each GPU's iommu-group): \
             the sysfs backend needs passthrough, VFIO=1 works either way",
        )
    };
    let units = if facts.units.is_empty() {
        "no unit under class/iommu".to_string()
    } else {
        facts.units.join(", ")
    };
    let f = finding(
        "iommu",
        status,
        None,
        format!(
            "IOMMU on ({units}), {} groups under {}; {cmd}; {mode}",
            facts.groups,
            m.sysfs.join("kernel/iommu_groups").display()
        ),
    );
    if status == Status::Ok {
        f
    } else {
        f.advise(
            "use VFIO=1, or boot with iommu=pt (amd_iommu=on iommu=pt / intel_iommu=on \
             iommu=pt) for the sysfs backend",
        )
    }
}

fn check_vfio_pci(m: &Machine, iommu: &IommuFacts, translating: bool, wanted: bool) -> Finding {
    let driver = m.sysfs.join("bus/pci/drivers/vfio-pci");
    let module = m.sysfs.join("module/vfio_pci");
    if driver.is_dir() || module.is_dir() {
        let mode = if iommu.noiommu {
            "no-IOMMU mode (/dev/vfio/noiommu-N, DMA to physical addresses)"
        } else {
            "type1 (an IOMMU maps each DMA buffer)"
        };
        let f = finding(
            "vfio-pci",
            Status::Ok,
            None,
            format!(
                "vfio-pci is loaded ({}); VFIO=1 would run in {mode}",
                if driver.is_dir() { &driver } else { &module }.display()
            ),
        );
        if !iommu.present() && !iommu.noiommu {
            return Finding {
                status: Status::Warn,
                ..f
            }
            .advise(
                "without an IOMMU VFIO needs no-IOMMU mode: sudo modprobe vfio \
                 enable_unsafe_noiommu_mode=1 (or echo Y > \
                 /sys/module/vfio/parameters/enable_unsafe_noiommu_mode)",
            );
        }
        return f;
    }
    let why = if translating {
        "the IOMMU translates the GPU's DMA, so VFIO is the only backend that works"
    } else if wanted {
        "VFIO=1 is set, so the VFIO backend is asked for"
    } else {
        "only VFIO=1 needs it; the sysfs backend does not"
    };
    finding(
        "vfio-pci",
        if translating || wanted {
            Status::Fail
        } else {
            Status::Warn
        },
        None,
        format!(
            "vfio-pci is not loaded (no {} and no {}): {why}",
            driver.display(),
            module.display()
        ),
    )
    .advise("sudo modprobe vfio-pci")
}

fn check_privileges(m: &Machine) -> Finding {
    let status = m.proc.join("self/status");
    let Some(id) = &m.ident else {
        return finding(
            "privileges",
            Status::Skipped,
            None,
            format!(
                "{} is unreadable: who this process is is unknown",
                status.display()
            ),
        );
    };
    let admin = id.has_cap(CAP_SYS_ADMIN);
    let seen = format!(
        "effective uid {}, CAP_SYS_ADMIN {} (CapEff {:#x} in {})",
        id.euid,
        if admin { "held" } else { "missing" },
        id.cap_eff,
        status.display()
    );
    if admin {
        return finding("privileges", Status::Ok, None, seen);
    }
    finding(
        "privileges",
        Status::Fail,
        None,
        format!(
            "{seen}: without it the kernel refuses writes to `enable`, shows only 64 bytes of \
             `config`, and hides the physical addresses in /proc/self/pagemap that the sysfs \
             backend and VFIO no-IOMMU mode give the GPU"
        ),
    )
    .advise("run am as root: sudo -E am …")
}

/// `Max locked memory` of a `/proc/PID/limits`: the soft limit, `None` for unlimited.
fn memlock_soft_limit(limits: &str) -> Option<Option<u64>> {
    let line = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max locked memory"))?;
    match line.split_whitespace().next()? {
        "unlimited" => Some(None),
        n => n.parse().ok().map(Some),
    }
}

fn check_memlock(m: &Machine) -> Finding {
    let path = m.proc.join("self/limits");
    let Some(limit) = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| memlock_soft_limit(&t))
    else {
        return finding(
            "memlock",
            Status::Skipped,
            None,
            format!("no \"Max locked memory\" line in {}", path.display()),
        );
    };
    let ipc_lock = m.ident.as_ref().is_some_and(|i| i.has_cap(CAP_IPC_LOCK));
    match limit {
        None => finding(
            "memlock",
            Status::Ok,
            None,
            format!("Max locked memory: unlimited ({})", path.display()),
        ),
        Some(bytes) if ipc_lock => finding(
            "memlock",
            Status::Ok,
            None,
            format!(
                "Max locked memory {} ({}), but CAP_IPC_LOCK is held, which the limit does not \
                 bind",
                size_text(bytes),
                path.display()
            ),
        ),
        Some(bytes) => finding(
            "memlock",
            Status::Warn,
            None,
            format!(
                "Max locked memory {} ({}) without CAP_IPC_LOCK: every DMA buffer in system \
                 memory is mlock()ed, and more than that in total fails",
                size_text(bytes),
                path.display()
            ),
        )
        .advise(
            "ulimit -l unlimited (as root), or `* - memlock unlimited` in \
             /etc/security/limits.conf; root holds CAP_IPC_LOCK",
        ),
    }
}

/// `HugePages_Total`, `HugePages_Free` and `Hugepagesize` (kB) of `/proc/meminfo`.
fn hugepages_of(meminfo: &str) -> Option<(u64, u64, u64)> {
    let field = |name: &str| {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some((
        field("HugePages_Total:")?,
        field("HugePages_Free:")?,
        field("Hugepagesize:")?,
    ))
}

fn check_hugepages(m: &Machine) -> Finding {
    let meminfo = m.proc.join("meminfo");
    let Some((total, free, size_kb)) = std::fs::read_to_string(&meminfo)
        .ok()
        .and_then(|t| hugepages_of(&t))
    else {
        return finding(
            "hugepages",
            Status::Skipped,
            None,
            format!("no HugePages_* lines in {}", meminfo.display()),
        );
    };
    // The driver asks for 2 MiB pages by size (MAP_HUGE_2MB); when the default size differs,
    // the 2 MiB pool has its own directory.
    let pool = m.sysfs.join("kernel/mm/hugepages/hugepages-2048kB");
    let (total, free, source) = if size_kb == 2048 {
        (total, free, meminfo.display().to_string())
    } else {
        let n = |f: &str| {
            read_trim(&pool.join(f))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        (
            n("nr_hugepages"),
            n("free_hugepages"),
            pool.display().to_string(),
        )
    };
    let seen = format!("2 MiB hugepages: {total} reserved, {free} free ({source})");
    if free > 0 {
        return finding("hugepages", Status::Ok, None, seen);
    }
    let set = if size_kb == 2048 {
        "echo 16 | sudo tee /proc/sys/vm/nr_hugepages".to_string()
    } else {
        format!("echo 16 | sudo tee {}", pool.join("nr_hugepages").display())
    };
    finding(
        "hugepages",
        Status::Warn,
        None,
        format!(
            "{seen}: physically contiguous system memory (what remote clients of `am serve` \
             such as tinygrad ask for) cannot be allocated; nothing else needs it"
        ),
    )
    .advise(set)
}

/// The level in brackets of a securityfs `lockdown` file (`none [integrity] confidentiality`).
fn lockdown_level(text: &str) -> Option<&str> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
}

fn check_lockdown(m: &Machine) -> Finding {
    let path = m.sysfs.join("kernel/security/lockdown");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return finding(
            "lockdown",
            Status::Skipped,
            None,
            format!(
                "{} does not exist: no lockdown LSM (or securityfs is not mounted), nothing is \
                 locked down",
                path.display()
            ),
        );
    };
    match lockdown_level(&text) {
        Some("none") | None => finding(
            "lockdown",
            Status::Ok,
            None,
            format!(
                "kernel lockdown: none ({}: {})",
                path.display(),
                text.trim()
            ),
        ),
        Some(level) => finding(
            "lockdown",
            Status::Fail,
            None,
            format!(
                "kernel lockdown: {level} ({}): the kernel refuses mmap of `resourceN` and writes \
                 to `config` (LOCKDOWN_PCI_ACCESS), which the sysfs backend needs",
                path.display()
            ),
        )
        .advise(
            "lockdown cannot be lowered at run time: disable Secure Boot in the firmware setup \
             (distribution kernels lock down under it), or boot a kernel without lockdown",
        ),
    }
}

/// The environment variables `am` reads, and what each does.
pub const KNOWN_VARS: [(&str, &str); 15] = [
    ("AM_LOG", "log filter of the am command (e.g. debug)"),
    (
        "AM_DEBUG",
        "tinygrad's debug level: 2 logs every kernel, 4 its IR",
    ),
    (
        "AM_BEAM",
        "tinygrad's BEAM: N searches the tensor layer's kernels on the device",
    ),
    (
        "AM_NOOPT",
        "tinygrad's NOOPT: 1 turns the tensor layer's kernel optimiser off",
    ),
    (
        "AM_CPU_THREADS",
        "threads a kernel of the cpu device uses (default: every core)",
    ),
    (
        "AM_CONFORMANCE_CACHE",
        "am bench kernels --tinygrad: where scripts/conformance keeps tinygrad",
    ),
    ("AM_RESET", "1: never warm boot, always a full boot"),
    (
        "AM_POWER_LIMIT",
        "SMU power limit in watts, clocks left unpinned",
    ),
    (
        "AM_FIRMWARE_PATH",
        "firmware search path, before /lib/firmware/amdgpu",
    ),
    (
        "AM_FIRMWARE_PINS",
        "pin file: firmware must match its SHA-256",
    ),
    ("AM_LOCK_DIR", "directory of the per-device lock files"),
    (
        "AM_MOCK_FOREIGN_FIRMWARE",
        "mock only: devices start with another driver's firmware",
    ),
    (
        "AM_MOCK_SHADER_STATISTICS",
        "mock only: file the devices write shader statistics to",
    ),
    (
        "AM_TRACE",
        "file every access to the opened device is recorded to",
    ),
    ("VFIO", "1: open PCI addresses through vfio-pci"),
];

fn check_env(m: &Machine) -> Finding {
    let mut set: Vec<&(String, String)> = m
        .env
        .iter()
        .filter(|(k, _)| k.starts_with("AM_") || k == "VFIO")
        .collect();
    set.sort();
    if set.is_empty() {
        return finding(
            "environment",
            Status::Ok,
            None,
            "no AM_* variable (nor VFIO) set: defaults everywhere".to_string(),
        );
    }
    let mut unknown = Vec::new();
    let described: Vec<String> = set
        .iter()
        .map(|(k, v)| match KNOWN_VARS.iter().find(|(n, _)| n == k) {
            Some((_, meaning)) => format!("{k}={v} ({meaning})"),
            None => {
                unknown.push(k.as_str());
                format!("{k}={v} (not read by am)")
            }
        })
        .collect();
    let f = finding(
        "environment",
        if unknown.is_empty() {
            Status::Ok
        } else {
            Status::Warn
        },
        None,
        described.join("; "),
    );
    if unknown.is_empty() {
        f
    } else {
        f.advise(format!(
            "check the spelling of {}: am reads {}",
            unknown.join(", "),
            KNOWN_VARS.map(|(n, _)| n).join(", ")
        ))
    }
}

fn check_driver(gpu: &PciGpu) -> Finding {
    let bdf = &gpu.bdf;
    match gpu.driver.as_deref() {
        None => finding(
            "driver",
            Status::Ok,
            Some(bdf),
            format!("{bdf} has no driver bound"),
        ),
        Some("vfio-pci") => finding(
            "driver",
            Status::Ok,
            Some(bdf),
            format!("{bdf} is bound to vfio-pci: ready for VFIO=1 (the sysfs backend unbinds it)"),
        ),
        Some("amdgpu") => finding(
            "driver",
            Status::Fail,
            Some(bdf),
            format!(
                "{bdf} is bound to amdgpu (its `driver` link): the kernel driver owns the GPU, its \
                 firmware runs, and unbinding it under a display or compute user can hang the \
                 machine"
            ),
        )
        .advise(format!(
            "stop what uses the GPU, then `sudo modprobe -r amdgpu` (or echo {bdf} | sudo tee \
             /sys/bus/pci/drivers/amdgpu/unbind); to keep it off, blacklist amdgpu"
        )),
        Some(other) => finding(
            "driver",
            Status::Warn,
            Some(bdf),
            format!("{bdf} is bound to {other}: am unbinds it when it opens the device"),
        )
        .advise(format!(
            "echo {bdf} | sudo tee /sys/bus/pci/drivers/{other}/unbind"
        )),
    }
}

/// Drivers that leave a VFIO group viable: vfio itself, and those that manage no DMA.
const VFIO_FRIENDLY: [&str; 3] = ["vfio-pci", "pci-stub", "pcieport"];

/// The group finding, and the group's default domain type (`identity`, `DMA-FQ`, …) if any.
fn check_group(m: &Machine, gpu: &PciGpu, iommu: &IommuFacts) -> (Finding, Option<String>) {
    let bdf = &gpu.bdf;
    let Ok(group) = vfio::iommu_group(&m.sysfs, bdf) else {
        let link = sysfs::device_dir(&m.sysfs, bdf).join("iommu_group");
        let f = if iommu.noiommu {
            finding(
                "iommu-group",
                Status::Ok,
                Some(bdf),
                format!(
                    "no {}: vfio no-IOMMU mode gives {bdf} a group when it is bound to vfio-pci",
                    link.display()
                ),
            )
        } else {
            finding(
                "iommu-group",
                Status::Skipped,
                Some(bdf),
                format!(
                    "no {}: no IOMMU, so the sysfs backend's physical addresses reach memory; \
                     VFIO=1 would need vfio no-IOMMU mode",
                    link.display()
                ),
            )
        };
        return (f, None);
    };
    let dir = m.sysfs.join("kernel/iommu_groups").join(group.to_string());
    let kind = read_trim(&dir.join("type"));
    let translating = kind.as_deref().is_some_and(|t| t.starts_with("DMA"));
    let mut others = Vec::new();
    let mut blockers = Vec::new();
    for name in dir_names(&dir.join("devices")) {
        let Ok(member) = Bdf::parse(&name) else {
            continue;
        };
        if member == *bdf {
            continue;
        }
        let driver = sysfs::link_name(&sysfs::device_dir(&m.sysfs, &member).join("driver"));
        let same_slot = member.with_function(0) == bdf.with_function(0);
        let text = format!(
            "{member} ({})",
            driver.as_deref().map_or("no driver", |d| d)
        );
        if !same_slot
            && driver
                .as_deref()
                .is_some_and(|d| !VFIO_FRIENDLY.contains(&d))
        {
            blockers.push(text.clone());
        }
        others.push(text);
    }
    let mut seen = format!(
        "{bdf} is in IOMMU group {group} (type {})",
        kind.as_deref().unwrap_or("unknown")
    );
    if others.is_empty() {
        seen.push_str(", alone");
    } else {
        seen.push_str(&format!(" with {}", others.join(", ")));
    }
    let mut advice = Vec::new();
    if translating {
        seen.push_str(
            "; its DMA is translated, so the physical addresses of the sysfs backend would fault",
        );
        advice
            .push("use VFIO=1, or boot with iommu=pt so the group's type is identity".to_string());
    }
    if !blockers.is_empty() {
        seen.push_str(&format!(
            "; VFIO needs every device of the group bound to vfio-pci or to no driver, and {} \
             {} not",
            blockers.join(", "),
            if blockers.len() == 1 { "is" } else { "are" }
        ));
        advice.push(format!(
            "for VFIO=1 bind the others to vfio-pci too (echo vfio-pci > \
             /sys/bus/pci/devices/BDF/driver_override, unbind, echo BDF > \
             /sys/bus/pci/drivers_probe), or move the GPU to a slot with its own group; the \
             GPU's own audio function is removed by am (sibling functions of {})",
            bdf.with_function(0)
        ));
    }
    let status = if advice.is_empty() {
        Status::Ok
    } else {
        Status::Warn
    };
    let f = finding("iommu-group", status, Some(bdf), seen);
    let f = if advice.is_empty() {
        f
    } else {
        f.advise(advice.join("; "))
    };
    (f, kind)
}

/// The largest BAR0 that still counts as the legacy small window.
const SMALL_BAR: u64 = 256 << 20;

fn check_bars(m: &Machine, gpu: &PciGpu) -> Finding {
    let bdf = &gpu.bdf;
    let dir = sysfs::device_dir(&m.sysfs, bdf);
    let path = dir.join("resource");
    let resources = match std::fs::read_to_string(&path)
        .map_err(|e| e.to_string())
        .and_then(|t| sysfs::parse_resource(&t))
    {
        Ok(r) => r,
        Err(e) => {
            return finding(
                "bars",
                Status::Fail,
                Some(bdf),
                format!("{}: {e}", path.display()),
            );
        }
    };
    let size = |i: usize| resources.get(i).map_or(0, Resource::size);
    let sizes = format!(
        "BAR0 (VRAM window) {}, BAR2 (doorbells) {}, BAR5 (registers) {} ({})",
        size_text(size(0)),
        size_text(size(2)),
        size_text(size(5)),
        path.display()
    );
    if size(0) == 0 || size(5) == 0 {
        return finding(
            "bars",
            Status::Fail,
            Some(bdf),
            format!("{sizes}: a BAR the driver maps has no address"),
        )
        .advise(
            "enable Above 4G Decoding in the firmware setup, or boot with pci=realloc so the \
             kernel assigns the BARs",
        );
    }
    let resize = dir.join("resource0_resize");
    let largest = read_trim(&resize)
        .and_then(|t| u64::from_str_radix(t.trim_start_matches("0x"), 16).ok())
        .and_then(caps::largest_rebar_size)
        .map(|n| (1u64 << 20) << n);
    match largest {
        Some(max) if max > size(0) => finding(
            "bars",
            Status::Ok,
            Some(bdf),
            format!(
                "{sizes}; resizable up to {} ({}): am resizes BAR0 when it opens the device",
                size_text(max),
                resize.display()
            ),
        ),
        Some(_) => finding(
            "bars",
            Status::Ok,
            Some(bdf),
            format!("{sizes}; BAR0 is at its largest resizable size"),
        ),
        None if size(0) <= SMALL_BAR => finding(
            "bars",
            Status::Warn,
            Some(bdf),
            format!(
                "{sizes}; no {}: a small BAR without Resizable BAR, so the driver reads \
                 discovery through MM_INDEX/MM_DATA and reaches VRAM only through a {} window",
                resize.display(),
                size_text(size(0))
            ),
        )
        .advise("enable Resizable BAR (Re-Size BAR Support) and Above 4G Decoding in the firmware setup"),
        None => finding("bars", Status::Ok, Some(bdf), sizes),
    }
}

fn check_enable(m: &Machine, gpu: &PciGpu) -> Finding {
    let bdf = &gpu.bdf;
    let path = sysfs::device_dir(&m.sysfs, bdf).join("enable");
    match read_trim(&path).and_then(|v| v.parse::<u32>().ok()) {
        Some(0) => finding(
            "enable",
            Status::Ok,
            Some(bdf),
            format!(
                "{} is 0: not enabled yet; am writes 1 to it when it opens the device",
                path.display()
            ),
        ),
        Some(n) => finding(
            "enable",
            Status::Ok,
            Some(bdf),
            format!("{} is {n}: enabled", path.display()),
        ),
        None => finding(
            "enable",
            Status::Warn,
            Some(bdf),
            format!("{} is missing or not a number", path.display()),
        )
        .advise("check that sysfs is mounted and the device still exists (am list)"),
    }
}

fn check_permissions(m: &Machine, gpu: &PciGpu, vfio_wanted: bool) -> Finding {
    let bdf = &gpu.bdf;
    let Some(id) = &m.ident else {
        return finding(
            "permissions",
            Status::Skipped,
            Some(bdf),
            format!(
                "{} is unreadable: whose permissions to check is unknown",
                m.proc.join("self/status").display()
            ),
        );
    };
    let dir = sysfs::device_dir(&m.sysfs, bdf);
    let mut wanted: Vec<(PathBuf, u32)> = vec![(dir.join("config"), 6)];
    // A BAR without a file has no address, which the `bars` check reports.
    for bar in [0, 2, 5] {
        let file = dir.join(format!("resource{bar}"));
        if file.exists() {
            wanted.push((file, 6));
        }
    }
    wanted.push((dir.join("enable"), 2));
    if gpu.driver.is_some() {
        wanted.push((dir.join("driver/unbind"), 2));
    }
    if vfio_wanted || gpu.driver.as_deref() == Some("vfio-pci") {
        let vfio_dir = m.dev.join("vfio");
        wanted.push((vfio_dir.join("vfio"), 6));
        if let Ok(group) = vfio::iommu_group(&m.sysfs, bdf) {
            let mode = vfio::detect_mode(&m.sysfs);
            wanted.push((vfio::group_path(&vfio_dir, mode, group), 6));
        }
    }
    let mut missing = Vec::new();
    let mut denied = Vec::new();
    for (path, want) in &wanted {
        match std::fs::metadata(path) {
            Err(_) => missing.push(path.display().to_string()),
            Ok(meta) if !id.may(&meta, *want) => denied.push(format!(
                "{} (mode {:o}, owner {}:{})",
                path.display(),
                meta.mode() & 0o777,
                meta.uid(),
                meta.gid()
            )),
            Ok(_) => {}
        }
    }
    let who = format!("uid {}", id.euid);
    if missing.is_empty() && denied.is_empty() {
        return finding(
            "permissions",
            Status::Ok,
            Some(bdf),
            format!(
                "{who} may read and write all {} files am opens for {bdf}",
                wanted.len()
            ),
        );
    }
    let mut seen = Vec::new();
    if !denied.is_empty() {
        seen.push(format!("{who} may not use {}", denied.join(", ")));
    }
    if !missing.is_empty() {
        seen.push(format!("missing: {}", missing.join(", ")));
    }
    let mut advice = vec!["run am as root (sudo -E am …)".to_string()];
    if missing.iter().any(|p| p.contains("/vfio")) {
        advice.push(format!(
            "/dev/vfio nodes appear once vfio-pci is loaded and {bdf} is bound to it (am does \
             that with VFIO=1)"
        ));
    }
    let fail = !denied.is_empty() || missing.iter().any(|p| !p.contains("/vfio"));
    finding(
        "permissions",
        if fail { Status::Fail } else { Status::Warn },
        Some(bdf),
        seen.join("; "),
    )
    .advise(advice.join("; "))
}

/// The firmware profiles whose GC version matches the GPU's shader target.
fn profiles_for(device_id: u16) -> Vec<(&'static str, IpVersions)> {
    let Some(gpu) = known_gpu(device_id) else {
        return Vec::new();
    };
    IpVersions::PROFILES
        .iter()
        .filter(|(_, ips)| {
            gpu.gfx_target
                .gc_versions()
                .contains(&(ips.gc.major, ips.gc.minor, ips.gc.rev))
        })
        .copied()
        .collect()
}

fn check_firmware(locator: &Locator, gpu: &PciGpu) -> Finding {
    let bdf = &gpu.bdf;
    let known = known_gpu(gpu.device_id);
    if gpu.is_vf || known.is_some_and(|g| g.is_vf) {
        return finding(
            "firmware",
            Status::Skipped,
            Some(bdf),
            format!(
                "{bdf} is an SR-IOV VF: its PF loaded the firmware, and the VF needs none of it"
            ),
        );
    }
    let searched: Vec<String> = locator
        .dirs()
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    let searched = searched.join(":");
    let profiles = profiles_for(gpu.device_id);
    if profiles.is_empty() {
        let what = known.map_or("an unknown AMD GPU".to_string(), |g| {
            format!("{} ({})", g.name, g.gfx_target.name())
        });
        return finding(
            "firmware",
            Status::Warn,
            Some(bdf),
            format!(
                "device {:#06x} is {what}, for which no firmware profile is known: the files \
                 are known only after IP discovery",
                gpu.device_id
            ),
        )
        .advise(
            "`am init` names the first missing file; `am fw list --profile P` lists a known set",
        );
    }
    let mut parts = Vec::new();
    let mut bad = Vec::new();
    let mut names = Vec::new();
    for (name, ips) in &profiles {
        names.push(*name);
        let mut files = Vec::new();
        let mut problems = Vec::new();
        for spec in ips.files() {
            match LoadedFile::load(locator, &spec) {
                Ok(f) => files.push(f),
                Err(FirmwareError::NotFound { .. }) => {
                    problems.push(format!("{} missing", spec.name));
                }
                Err(e) => problems.push(format!("{}: {e}", spec.name)),
            }
        }
        if problems.is_empty() {
            let count = files.len();
            match (FirmwareSet { ips: *ips, files }).plan(PlanOptions::default()) {
                Ok(plan) => parts.push(format!(
                    "profile {name} ({ips}): {count} files found and parsed, PSP load order of {} \
                     steps",
                    plan.steps.len()
                )),
                Err(e) => problems.push(format!("the PSP load order cannot be built: {e}")),
            }
        }
        if !problems.is_empty() {
            bad.push(format!("profile {name} ({ips}): {}", problems.join(", ")));
        }
    }
    let note = "the exact set is known only after IP discovery; this is the set of the device id's profile";
    if bad.is_empty() {
        return finding(
            "firmware",
            Status::Ok,
            Some(bdf),
            format!("{} in {searched}; {note}", parts.join("; ")),
        );
    }
    finding(
        "firmware",
        Status::Fail,
        Some(bdf),
        format!("{} (searched {searched}); {note}", bad.join("; ")),
    )
    .advise(format!(
        "install the distribution's amdgpu firmware (Debian: firmware-amd-graphics; others: \
         linux-firmware) or point AM_FIRMWARE_PATH at a directory holding the files; `am fw \
         list --profile {}` shows each file",
        names.join("|")
    ))
}

fn locator(args: &DoctorArgs, env: &[(String, String)]) -> anyhow::Result<Locator> {
    if args.firmware_dir.is_empty() {
        return Locator::from_env().context("reading the firmware search settings");
    }
    let mut locator = Locator::new(args.firmware_dir.clone());
    if let Some((_, pins)) = env.iter().find(|(k, _)| k == "AM_FIRMWARE_PINS") {
        locator = locator.with_pins(Pins::load(Path::new(pins))?);
    }
    Ok(locator)
}

/// Run every check on the machine `args` describes, with `env` as the environment.
pub fn doctor(args: &DoctorArgs, env: Vec<(String, String)>) -> anyhow::Result<Report> {
    let ident = std::fs::read_to_string(args.proc_root.join("self/status"))
        .ok()
        .and_then(|s| Ident::parse(&s));
    let m = Machine {
        sysfs: args.sysfs_root.clone(),
        proc: args.proc_root.clone(),
        dev: args.dev_root.clone(),
        ident,
        env,
    };
    let mut gpus = sysfs::scan(&m.sysfs).with_context(|| {
        format!(
            "scanning the PCI bus under {}",
            m.sysfs.join("bus/pci/devices").display()
        )
    })?;
    if let Some(spec) = &args.device {
        let bdf = Bdf::parse(spec)
            .with_context(|| format!("am doctor checks this machine's PCI devices: {spec:?}"))?;
        gpus.retain(|g| g.bdf == bdf);
        if gpus.is_empty() {
            bail!(
                "no AMD GPU at {bdf} under {}",
                m.sysfs.join("bus/pci/devices").display()
            );
        }
    }
    let vfio_wanted = m
        .env
        .iter()
        .any(|(k, v)| k == "VFIO" && vfio_requested(Some(v)));

    let facts = iommu_facts(&m);
    let mut device_findings = Vec::new();
    let mut translating = false;
    let mut gpus_identity = !gpus.is_empty();
    if !gpus.is_empty() {
        let locator = locator(args, &m.env)?;
        for gpu in &gpus {
            let (group, kind) = check_group(&m, gpu, &facts);
            translating |= kind.as_deref().is_some_and(|k| k.starts_with("DMA"));
            gpus_identity &= kind.as_deref() == Some("identity");
            device_findings.extend([
                check_driver(gpu),
                group,
                check_bars(&m, gpu),
                check_enable(&m, gpu),
                check_permissions(&m, gpu, vfio_wanted),
                check_firmware(&locator, gpu),
            ]);
        }
    }
    let mut findings = vec![
        check_iommu(&m, &facts, gpus_identity),
        check_vfio_pci(&m, &facts, translating, vfio_wanted),
        check_privileges(&m),
        check_memlock(&m),
        check_hugepages(&m),
        check_lockdown(&m),
        check_env(&m),
    ];
    findings.extend(device_findings);

    let count = |s: Status| findings.iter().filter(|f| f.status == s).count();
    let summary = Summary {
        ok: count(Status::Ok),
        warn: count(Status::Warn),
        fail: count(Status::Fail),
        skipped: count(Status::Skipped),
        gpus: gpus.len(),
        exit_code: u8::from(!gpus.is_empty() && count(Status::Fail) > 0),
    };
    Ok(Report {
        gpus: gpus
            .iter()
            .map(|g| GpuSummary {
                bdf: g.bdf.to_string(),
                device_id: g.device_id,
                name: known_gpu(g.device_id).map(|k| k.name),
            })
            .collect(),
        would_check: if gpus.is_empty() {
            DEVICE_CHECKS
                .iter()
                .map(|&(check, reads)| WouldCheck { check, reads })
                .collect()
        } else {
            Vec::new()
        },
        findings,
        summary,
    })
}

fn render_finding(out: &mut String, f: &Finding) {
    out.push_str(&format!(
        "  {:<8} {:<12} {}\n",
        f.status.label(),
        f.check,
        f.seen
    ));
    if let Some(a) = &f.advice {
        out.push_str(&format!("  {:<8} {:<12} do: {a}\n", "", ""));
    }
}

/// The report as text for people.
pub fn render(r: &Report, sysfs_root: &Path) -> String {
    let mut out = String::from("This machine\n");
    for f in r.findings.iter().filter(|f| f.device.is_none()) {
        render_finding(&mut out, f);
    }
    for g in &r.gpus {
        out.push_str(&format!(
            "\n{} {} (1002:{:04x})\n",
            g.bdf,
            g.name.unwrap_or("unknown AMD GPU"),
            g.device_id
        ));
        for f in r
            .findings
            .iter()
            .filter(|f| f.device.as_deref() == Some(g.bdf.as_str()))
        {
            render_finding(&mut out, f);
        }
    }
    if r.gpus.is_empty() {
        out.push_str(&format!(
            "\nNo AMD GPU found on this machine's PCI bus ({}): nothing to boot here.\nFor each \
             AMD GPU (vendor 0x1002, display or accelerator class) am doctor would check:\n",
            sysfs_root.join("bus/pci/devices").display()
        ));
        for w in &r.would_check {
            out.push_str(&format!("  {:<12} {}\n", w.check, w.reads));
        }
    }
    let s = &r.summary;
    out.push_str(&format!(
        "\n{} ok, {} warn, {} fail, {} skipped\n",
        s.ok, s.warn, s.fail, s.skipped
    ));
    out
}

/// Run `am doctor`: exit status 1 when a GPU was checked and a finding failed.
pub fn run(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    // Lossy: a variable that is not UTF-8 is still listed rather than a panic of `env::vars`.
    let env = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    let report = doctor(&args, env)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report, &args.sysfs_root));
    }
    Ok(ExitCode::from(report.summary.exit_code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_file_gives_effective_ids_groups_and_capabilities() {
        let id = Ident::parse(
            "Name:\tam\nUid:\t1000\t0\t0\t0\nGid:\t100\t27\t27\t27\nGroups:\t4 27 44 \n\
             CapEff:\t0000000000204000\n",
        )
        .unwrap();
        assert_eq!((id.euid, id.egid), (0, 27));
        assert_eq!(id.groups, [4, 27, 44]);
        assert!(id.has_cap(CAP_SYS_ADMIN) && id.has_cap(CAP_IPC_LOCK));
        assert!(Ident::parse("Uid:\t1000\n").is_none());
    }

    #[test]
    fn memlock_limit_is_the_soft_column() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max locked memory         8388608              16777216             bytes     \n";
        assert_eq!(memlock_soft_limit(limits), Some(Some(8 << 20)));
        let unlimited =
            "Max locked memory         unlimited            unlimited            bytes\n";
        assert_eq!(memlock_soft_limit(unlimited), Some(None));
        assert_eq!(memlock_soft_limit("Max open files 1024 1024 files\n"), None);
    }

    #[test]
    fn lockdown_level_is_the_bracketed_word() {
        assert_eq!(
            lockdown_level("[none] integrity confidentiality\n"),
            Some("none")
        );
        assert_eq!(
            lockdown_level("none integrity [confidentiality]\n"),
            Some("confidentiality")
        );
        assert_eq!(lockdown_level("none integrity confidentiality"), None);
    }

    #[test]
    fn hugepage_fields_come_from_meminfo() {
        let m = "HugePages_Total:      16\nHugePages_Free:       12\nHugePages_Rsvd: 0\nHugepagesize:       2048 kB\n";
        assert_eq!(hugepages_of(m), Some((16, 12, 2048)));
        assert_eq!(hugepages_of("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn profiles_follow_the_device_id_to_its_gc_version() {
        let names = |id| profiles_for(id).iter().map(|(n, _)| *n).collect::<Vec<_>>();
        assert_eq!(names(0x744c), ["navi31"]);
        assert_eq!(names(0x74a1), ["mi300x"]);
        assert_eq!(names(0x7550), ["navi48"]);
        assert!(names(0x7480).is_empty(), "Navi 33 has no profile");
        assert!(names(0x1234).is_empty());
    }
}
