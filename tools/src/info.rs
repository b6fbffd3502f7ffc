//! `am info DEVICE [--json]`: what a device is, read without initialising it.
//!
//! Reads only: config space, `RCC_CONFIG_MEMSIZE`, `RCC_IOV_FUNC_IDENTIFIER`, the discovery
//! table (through BAR0, or the `MM_INDEX`/`MM_DATA` window on a small BAR, whose index
//! registers it writes), the XGMI hive layout (`MC_VM_XGMI_LFB_CNTL/SIZE`) and, on a PF,
//! `SCRATCH_REG6/7` of the first live GC instance. On a VF it first asks the PF for init
//! access through the mailbox (`IDH_REQ_GPU_INIT_DATA`, `IDH_REQ_GPU_INIT_ACCESS`) and gives
//! it back (`IDH_REL_GPU_INIT_ACCESS`) once the report is read.

use std::collections::BTreeMap;

use am_autogen::hwid as ids;
use am_driver::discovery::Discovery;
use am_driver::pci::ids::known_gpu;
use am_driver::regs::{Regs, gc};
use am_driver::vf::{MailboxTimings, VfMailbox};
use am_driver::{HwIp, IpVersion, Ownership, PciDevice, hwip, read_mc_layout};
use am_isa::GfxTarget;
use serde::Serialize;

use crate::device::open_device;
use crate::hive_reset::HiveReport;

/// Arguments of `am info`.
#[derive(Debug, clap::Args)]
pub struct InfoArgs {
    /// Device: a PCI BDF (0000:03:00.0), mock:PROFILE[:N] or remote:HOST:PORT[:N].
    pub device: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `SCRATCH_REG7` value an AM driver leaves after a complete boot (tinygrad's
/// `AMDev.Version`).
pub const AM_BOOT_VERSION: u32 = 0xA000_0008;

/// Everything `am info` reports.
#[derive(Debug, Serialize)]
pub struct InfoReport {
    /// The device spec.
    pub device: String,
    /// Backend (`sysfs`, `vfio`, `remote`, `mock`).
    pub backend: String,
    /// PCI vendor id.
    pub vendor_id: String,
    /// PCI device id.
    pub device_id: String,
    /// Chip and product name, when the device id is known.
    pub product_name: String,
    /// `PF` or `VF` (`RCC_IOV_FUNC_IDENTIFIER` bit 0).
    pub function: String,
    /// VF only: what became of the init access asked of the PF (`granted and released`),
    /// or why it was not granted.
    pub vf_access: Option<String>,
    /// XGMI hive membership (`MC_VM_XGMI_LFB_CNTL/SIZE`); `null` outside a hive or when
    /// the registers could not be read.
    pub hive: Option<HiveReport>,
    /// BAR0 size in bytes.
    pub bar0_size: u64,
    /// Who may write a served device (`am serve` keeps one owner per device; the others
    /// read): absent for a device this process opened itself.
    pub owner: Option<String>,
    /// Discovery results; absent when discovery failed (see `error`).
    #[serde(flatten)]
    pub discovery: Option<DiscoveryReport>,
    /// Boot state from `SCRATCH_REG6/7`; absent on a VF or when unreadable.
    pub boot_state: Option<BootState>,
    /// Why part of the report is missing.
    pub error: Option<String>,
}

/// What discovery found.
#[derive(Debug, Serialize)]
pub struct DiscoveryReport {
    /// LLVM target of the GC version (`gfx1100`).
    pub gfx_target: Option<String>,
    /// VRAM size in bytes.
    pub vram_size: u64,
    /// VRAM size in MiB.
    pub vram_size_mib: u64,
    /// Whether BAR0 covers all of VRAM.
    pub large_bar: bool,
    /// VRAM reserved by firmware at the top.
    pub reserved_vram_size: u64,
    /// Whether the discovery binary checksum matches.
    pub discovery_checksum_valid: bool,
    /// Version of each IP block the driver knows (lowest live instance).
    pub ip_versions: BTreeMap<String, String>,
    /// Every IP entry of the table.
    pub ip_blocks: Vec<IpBlockReport>,
    /// Harvested instances.
    pub harvested: Vec<HarvestReport>,
    /// Live GC instances.
    pub xcc_count: usize,
    /// AIDs (MMHUB instances).
    pub aid_count: usize,
    /// The GC configuration.
    pub gc: Option<GcReport>,
}

/// One discovery entry.
#[derive(Debug, Serialize)]
pub struct IpBlockReport {
    /// Hardware-id name (`GC`, `NBIF`, …).
    pub name: String,
    /// Hardware id.
    pub hw_id: u16,
    /// Die.
    pub die: u16,
    /// Instance.
    pub instance: u8,
    /// Version.
    pub version: String,
    /// Whether the harvest table lists this instance.
    pub harvested: bool,
    /// Base addresses (dwords), hex.
    pub bases: Vec<String>,
}

/// A harvested instance.
#[derive(Debug, Serialize)]
pub struct HarvestReport {
    /// Hardware-id name.
    pub name: String,
    /// Hardware id.
    pub hw_id: u16,
    /// Instance.
    pub instance: u8,
}

/// Shader counts.
#[derive(Debug, Serialize)]
pub struct GcReport {
    /// `gc_info` version.
    pub table_version: String,
    /// Shader engines per XCC.
    pub se: u32,
    /// Shader arrays per SE.
    pub sh_per_se: u32,
    /// CUs per shader array.
    pub cu_per_sh: u32,
    /// CUs per XCC.
    pub cu_per_xcc: u64,
    /// CUs of the device.
    pub cu_count: u64,
    /// Wave size.
    pub wave_size: u32,
    /// LDS size as the table gives it.
    pub lds_size: u32,
    /// Maximum waves per SIMD.
    pub max_waves_per_simd: u32,
}

/// Boot state left by a previous driver.
#[derive(Debug, Serialize)]
pub struct BootState {
    /// `SCRATCH_REG7`, hex.
    pub scratch_reg7: String,
    /// `SCRATCH_REG6`, hex.
    pub scratch_reg6: String,
    /// Whether an AM driver booted the device (`SCRATCH_REG7 == 0xA0000008`).
    pub am_initialised: bool,
    /// Whether that driver finished cleanly (`SCRATCH_REG6 == 0`).
    pub clean: bool,
    /// In words.
    pub state: String,
}

/// The shader target of a GC version ([`GfxTarget::from_gc`]), or else of the device id's
/// entry in `pci::ids`.
pub fn gfx_target(gc: IpVersion, device_id: u16) -> Option<GfxTarget> {
    GfxTarget::from_gc(gc.major, gc.minor, gc.rev)
        .ok()
        .or_else(|| known_gpu(device_id).map(|g| g.gfx_target))
}

fn discovery_report(d: &Discovery, device_id: u16) -> DiscoveryReport {
    let mut ip_versions = BTreeMap::new();
    for &ip in HwIp::ALL.iter() {
        if let Some(v) = d.version(ip) {
            ip_versions.insert(hwip::name(ip).to_string(), v.to_string());
        }
    }
    let name = |hw_id: u16| hw_id_name(hw_id).map_or(format!("HWID{hw_id}"), str::to_string);
    let ip_blocks = d
        .table
        .ips
        .iter()
        .map(|e| IpBlockReport {
            name: name(e.hw_id),
            hw_id: e.hw_id,
            die: e.die,
            instance: e.instance,
            version: e.version.to_string(),
            harvested: d
                .table
                .harvest
                .iter()
                .any(|h| h.hw_id == e.hw_id && h.instance == e.instance),
            bases: e.bases.iter().map(|b| format!("{b:#x}")).collect(),
        })
        .collect();
    let harvested = d
        .table
        .harvest
        .iter()
        .map(|h| HarvestReport {
            name: name(h.hw_id),
            hw_id: h.hw_id,
            instance: h.instance,
        })
        .collect();
    let gc = d.table.gc_info.map(|g| GcReport {
        table_version: format!("{}.{}", g.version.0, g.version.1),
        se: g.num_se,
        sh_per_se: g.num_sh_per_se,
        cu_per_sh: g.num_cu_per_sh,
        cu_per_xcc: g.cus_per_xcc(),
        cu_count: d.cu_count().unwrap_or(0),
        wave_size: g.wave_size,
        lds_size: g.lds_size,
        max_waves_per_simd: g.max_waves_per_simd,
    });
    DiscoveryReport {
        gfx_target: d
            .version(HwIp::GC)
            .and_then(|v| gfx_target(v, device_id))
            .map(|t| t.to_string()),
        vram_size: d.vram_size,
        vram_size_mib: d.vram_size >> 20,
        large_bar: d.large_bar,
        reserved_vram_size: d.reserved_vram_size(),
        discovery_checksum_valid: d.table.checksum_valid,
        ip_versions,
        ip_blocks,
        harvested,
        xcc_count: d.xcc_count(),
        aid_count: d.aid_count(),
        gc,
    }
}

fn boot_state(dev: &dyn PciDevice, d: &Discovery) -> am_driver::Result<BootState> {
    let regs = Regs::new(dev, d)?;
    let xcc = d.instances(HwIp::GC).first().copied().unwrap_or(0);
    let reg7 = regs.reg(gc::SCRATCH_REG7)?.read(xcc)?;
    let reg6 = regs.reg(gc::SCRATCH_REG6)?.read(xcc)?;
    Ok(BootState::from_scratch(reg7, reg6))
}

impl BootState {
    /// What `SCRATCH_REG7` and `SCRATCH_REG6` say about the last driver instance.
    pub fn from_scratch(reg7: u32, reg6: u32) -> Self {
        let am_initialised = reg7 == AM_BOOT_VERSION;
        let clean = reg6 == 0;
        let state = match (am_initialised, clean) {
            (false, _) => "not booted by this AM version: the next open does a full boot",
            (true, true) => "booted by AM and finalised cleanly: the next open can warm boot",
            (true, false) => {
                "booted by AM, not finalised cleanly (or still in use): the next open does a \
                 full boot"
            }
        };
        BootState {
            scratch_reg7: format!("{reg7:#010x}"),
            scratch_reg6: format!("{reg6:#010x}"),
            am_initialised,
            clean,
            state: state.to_string(),
        }
    }
}

/// Gather the report for an open device. Failures past identification are recorded in
/// `error` so the rest of the report is still printed.
pub fn gather(dev: &dyn PciDevice) -> anyhow::Result<InfoReport> {
    gather_with(dev, MailboxTimings::default())
}

/// [`gather`] with the VF mailbox's timings given (tests shorten them).
pub fn gather_with(dev: &dyn PciDevice, timings: MailboxTimings) -> anyhow::Result<InfoReport> {
    let vendor_id = dev.vendor_id()?;
    let device_id = dev.device_id()?;
    let bar0_size = dev.bar_info(0)?.size;
    let is_vf = am_driver::vf::is_vf(&*dev.bar(5)?)?;
    let mut report = InfoReport {
        device: dev.name().to_string(),
        backend: dev.backend().to_string(),
        vendor_id: format!("{vendor_id:#06x}"),
        device_id: format!("{device_id:#06x}"),
        product_name: known_gpu(device_id)
            .map_or("unknown AMD GPU", |g| g.name)
            .to_string(),
        function: if is_vf { "VF" } else { "PF" }.to_string(),
        vf_access: None,
        hive: None,
        bar0_size,
        owner: owner_line(dev),
        discovery: None,
        boot_state: None,
        error: None,
    };
    // The PF gates a VF's registers and VRAM until it grants init access; the lease is
    // given back when it goes out of scope, after the last read.
    let _lease = if is_vf {
        let mb = VfMailbox::new(dev.name(), dev.bar(5)?, timings);
        match mb
            .request_init_data()
            .and_then(|()| mb.request_init_access())
        {
            Ok(lease) => {
                report.vf_access = Some("granted and released".into());
                Some(lease)
            }
            Err(e) => {
                report.vf_access = Some(format!("not granted: {e}"));
                report.error = Some(format!("init access not granted by the PF: {e}"));
                return Ok(report);
            }
        }
    } else {
        None
    };
    let d = match Discovery::read(dev) {
        Ok(d) => d,
        Err(e) => {
            report.error = Some(e.to_string());
            return Ok(report);
        }
    };
    report.discovery = Some(discovery_report(&d, device_id));
    match Regs::new(dev, &d).and_then(|r| read_mc_layout(&r)) {
        Ok(mc) => report.hive = HiveReport::from_layout(&mc),
        Err(e) => report.error = Some(e.to_string()),
    }
    // A VF's scratch registers belong to its PF's boot protocol, not to AM.
    if !is_vf {
        match boot_state(dev, &d) {
            Ok(s) => report.boot_state = Some(s),
            Err(e) => report.error = Some(e.to_string()),
        }
    }
    Ok(report)
}

/// What `am info` says of a served device's owner.
fn owner_line(dev: &dyn PciDevice) -> Option<String> {
    match dev.ownership() {
        Ok(None) => None,
        Ok(Some(Ownership::Nobody)) => {
            Some("nobody (the first client that writes owns the device)".to_string())
        }
        Ok(Some(Ownership::Mine)) => Some("this client".to_string()),
        Ok(Some(Ownership::Other(who))) => Some(format!("{who}; this client reads only")),
        Err(e) => Some(format!("not known: {e}")),
    }
}

fn print_text(r: &InfoReport) {
    println!(
        "{}  {} ({}:{})",
        r.device, r.product_name, r.vendor_id, r.device_id
    );
    println!("  backend      {}", r.backend);
    if let Some(o) = &r.owner {
        println!("  owner        {o}");
    }
    match &r.vf_access {
        Some(a) => println!("  function     {} (init access {a})", r.function),
        None => println!("  function     {}", r.function),
    }
    match &r.hive {
        Some(h) => println!(
            "  XGMI hive    region {} of {} ({} GiB segments)",
            h.region,
            h.regions,
            h.segment_size >> 30
        ),
        None if r.discovery.is_some() => println!("  XGMI hive    none"),
        None => {}
    }
    if let Some(d) = &r.discovery {
        if let Some(t) = &d.gfx_target {
            println!("  target       {t}");
        }
        println!(
            "  VRAM         {} MiB ({} BAR: BAR0 is {} MiB), {} MiB reserved",
            d.vram_size_mib,
            if d.large_bar { "large" } else { "small" },
            r.bar0_size >> 20,
            d.reserved_vram_size >> 20
        );
        println!("  XCCs         {} on {} AID(s)", d.xcc_count, d.aid_count);
        if let Some(g) = &d.gc {
            println!(
                "  shaders      {} CUs ({} SE x {} SH x {} CU per XCC), wave{}, LDS {}",
                g.cu_count, g.se, g.sh_per_se, g.cu_per_sh, g.wave_size, g.lds_size
            );
        }
        println!("  IP versions");
        for (ip, v) in &d.ip_versions {
            println!("    {ip:<8} {v}");
        }
        println!("  IP instances (die/instance: version)");
        for b in &d.ip_blocks {
            println!(
                "    {:<10} {}/{}: {}{}  bases {}",
                b.name,
                b.die,
                b.instance,
                b.version,
                if b.harvested { " (harvested)" } else { "" },
                b.bases.join(" ")
            );
        }
        if !d.harvested.is_empty() {
            let h: Vec<String> = d
                .harvested
                .iter()
                .map(|h| format!("{} {}", h.name, h.instance))
                .collect();
            println!("  harvested    {}", h.join(", "));
        }
        if !d.discovery_checksum_valid {
            println!("  warning      discovery binary checksum does not match");
        }
    }
    if let Some(b) = &r.boot_state {
        println!(
            "  boot state   {} (SCRATCH_REG7 {}, SCRATCH_REG6 {})",
            b.state, b.scratch_reg7, b.scratch_reg6
        );
    }
    if let Some(e) = &r.error {
        println!("  error        {e}");
    }
}

/// Run `am info`.
pub fn run(args: InfoArgs) -> anyhow::Result<()> {
    let dev = open_device(&args.device)?;
    let report = gather(&*dev)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report);
    }
    match &report.error {
        Some(_) => anyhow::bail!(
            "{}: the report is incomplete (see its error)",
            report.device
        ),
        None => Ok(()),
    }
}

/// Names of the discovery hardware ids (`soc15_hw_ip.h`) `am info` prints; others print as
/// `HWID<n>`.
const HW_ID_NAMES: &[(u16, &str)] = &[
    (ids::MP1_HWID, "MP1"),
    (ids::MP2_HWID, "MP2"),
    (ids::THM_HWID, "THM"),
    (ids::SMUIO_HWID, "SMUIO"),
    (ids::FUSE_HWID, "FUSE"),
    (ids::CLKA_HWID, "CLKA"),
    (ids::PWR_HWID, "PWR"),
    (ids::GC_HWID, "GC"),
    (ids::UVD_HWID, "VCN"),
    (ids::DCI_HWID, "DCI"),
    (ids::DMU_HWID, "DMU"),
    (ids::DCO_HWID, "DCO"),
    (ids::DIO_HWID, "DIO"),
    (ids::VPE_HWID, "VPE"),
    (ids::IOHC_HWID, "IOHC"),
    (ids::MMHUB_HWID, "MMHUB"),
    (ids::ATHUB_HWID, "ATHUB"),
    (ids::OSSSYS_HWID, "OSSSYS"),
    (ids::HDP_HWID, "HDP"),
    (ids::SDMA0_HWID, "SDMA0"),
    (ids::SDMA1_HWID, "SDMA1"),
    (ids::SDMA2_HWID, "SDMA2"),
    (ids::SDMA3_HWID, "SDMA3"),
    (ids::ISP_HWID, "ISP"),
    (ids::DF_HWID, "DF"),
    (ids::CLKB_HWID, "CLKB"),
    (ids::FCH_HWID, "FCH"),
    (ids::PCIE_HWID, "PCIE"),
    (ids::LSDMA_HWID, "LSDMA"),
    (ids::IOAGR_HWID, "IOAGR"),
    (ids::NBIF_HWID, "NBIF"),
    (ids::IOAPIC_HWID, "IOAPIC"),
    (ids::SYSTEMHUB_HWID, "SYSTEMHUB"),
    (ids::UMC_HWID, "UMC"),
    (ids::XGMI_HWID, "XGMI"),
    (ids::MP0_HWID, "MP0"),
];

/// Name of a discovery hardware id, when the table above knows it.
fn hw_id_name(hw_id: u16) -> Option<&'static str> {
    HW_ID_NAMES
        .iter()
        .find(|(id, _)| *id == hw_id)
        .map(|(_, n)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(spec: &str) -> InfoReport {
        gather(&*open_device(spec).unwrap()).unwrap()
    }

    #[test]
    fn navi31_is_gc_11_0_0_with_96_cus_wave32() {
        let r = info("mock:navi31");
        assert_eq!(r.device_id, "0x744c");
        assert_eq!(r.function, "PF");
        let d = r.discovery.unwrap();
        assert_eq!(d.ip_versions["GC"], "11.0.0");
        assert_eq!(d.gfx_target.as_deref(), Some("gfx1100"));
        let gc = d.gc.unwrap();
        assert_eq!(
            (gc.se, gc.sh_per_se, gc.cu_per_sh, gc.cu_count),
            (6, 2, 8, 96)
        );
        assert_eq!(gc.wave_size, 32);
        assert_eq!(d.xcc_count, 1);
        assert_eq!(d.vram_size_mib, 24 << 10);
        assert_eq!(d.reserved_vram_size, 64 << 20);
        assert!(d.discovery_checksum_valid);
    }

    #[test]
    fn navi31_small_bar_reads_discovery_through_the_window() {
        // Its own device index: two tests on one mock device are two drivers on one GPU, and
        // their MM_INDEX/MM_DATA window reads would interleave.
        let r = info("mock:navi31:1");
        let d = r.discovery.unwrap();
        // The profile's BAR0 is smaller than its VRAM.
        assert!(r.bar0_size < d.vram_size);
        assert!(!d.large_bar);
    }

    #[test]
    fn mi300x_has_8_xccs_on_4_aids_wave64() {
        let r = info("mock:mi300x");
        let d = r.discovery.unwrap();
        assert_eq!(d.xcc_count, 8);
        assert_eq!(d.aid_count, 4);
        assert_eq!(d.ip_versions["GC"], "9.4.3");
        assert_eq!(d.gfx_target.as_deref(), Some("gfx942"));
        assert_eq!(d.gc.as_ref().unwrap().wave_size, 64);
        assert_eq!(d.reserved_vram_size, 384 << 20);
        let gcs: Vec<(u16, u8)> = d
            .ip_blocks
            .iter()
            .filter(|b| b.name == "GC")
            .map(|b| (b.die, b.instance))
            .collect();
        assert_eq!(
            gcs,
            (0..8u8).map(|i| (u16::from(i / 2), i)).collect::<Vec<_>>()
        );
        assert!(d.large_bar);
    }

    #[test]
    fn mi350x_vf_asks_for_init_access_reads_discovery_and_gives_access_back() {
        let gpu = am_mock::gpu("mi350x-vf", 246).unwrap();
        let r = info("mock:mi350x-vf:246");
        assert_eq!(r.function, "VF");
        assert_eq!(r.vf_access.as_deref(), Some("granted and released"));
        assert_eq!(r.error, None);
        let d = r.discovery.unwrap();
        assert_eq!(d.ip_versions["GC"], "9.5.0");
        assert_eq!(d.xcc_count, 8);
        assert!(r.hive.is_none());
        // The scratch registers are the PF's business: not read on a VF.
        assert!(r.boot_state.is_none());
        let requests: Vec<u32> = gpu
            .with_vf_pf(|pf| {
                pf.log()
                    .iter()
                    .filter_map(|m| match m {
                        am_mock::vf_pf::MailboxMessage::Request { request, .. } => Some(*request),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap();
        assert_eq!(
            requests,
            vec![6, 1, 2],
            "INIT_DATA, INIT_ACCESS, then the release"
        );
        assert!(!gpu.with_vf_pf(|pf| pf.access_granted()).unwrap());
        assert!(gpu.violations().is_empty(), "{:?}", gpu.violations());
    }

    #[test]
    fn a_vf_whose_pf_does_not_answer_says_access_was_not_granted() {
        let gpu = am_mock::gpu("mi350x-vf", 247).unwrap();
        gpu.with_vf_pf(|pf| pf.faults.drop_acks = 1).unwrap();
        let timings = MailboxTimings {
            ack_timeout: std::time::Duration::from_millis(5),
            ack_poll: std::time::Duration::from_millis(1),
            ..MailboxTimings::default()
        };
        let r = gather_with(&*open_device("mock:mi350x-vf:247").unwrap(), timings).unwrap();
        assert_eq!(r.function, "VF");
        assert!(r.discovery.is_none());
        let e = r.error.unwrap();
        assert!(e.contains("init access not granted"), "{e}");
        assert!(e.contains("was not acknowledged"), "{e}");
    }

    #[test]
    fn hive_members_report_their_region() {
        for i in 0..4u32 {
            let r = info(&format!("mock:mi300x-hive4:{}", 248 + i));
            assert_eq!(
                r.hive,
                Some(HiveReport {
                    region: i,
                    regions: 4,
                    segment_size: 192 << 30
                })
            );
        }
        assert!(info("mock:mi300x:248").hive.is_none());
    }

    #[test]
    fn boot_state_follows_what_a_previous_driver_left_in_the_scratch_registers() {
        // Index 5: a device of its own in the mock's process-wide registry.
        let dev = open_device("mock:navi31:5").unwrap();
        assert!(!gather(&*dev).unwrap().boot_state.unwrap().am_initialised);
        let d = Discovery::read(&*dev).unwrap();
        let regs = Regs::new(&*dev, &d).unwrap();
        regs.reg(gc::SCRATCH_REG7)
            .unwrap()
            .write(0, AM_BOOT_VERSION)
            .unwrap();
        regs.reg(gc::SCRATCH_REG6).unwrap().write(0, 1).unwrap();
        let b = gather(&*dev).unwrap().boot_state.unwrap();
        assert!(b.am_initialised && !b.clean, "{b:?}");
        regs.reg(gc::SCRATCH_REG6).unwrap().write(0, 0).unwrap();
        let b = gather(&*dev).unwrap().boot_state.unwrap();
        assert!(b.am_initialised && b.clean, "{b:?}");
    }

    #[test]
    fn boot_state_reads_scratch_reg7_then_reg6() {
        let fresh = BootState::from_scratch(0, 0);
        assert!(!fresh.am_initialised);
        assert!(fresh.state.contains("full boot"));
        let clean = BootState::from_scratch(0xA000_0008, 0);
        assert!(clean.am_initialised && clean.clean);
        assert!(clean.state.contains("warm boot"));
        let dirty = BootState::from_scratch(0xA000_0008, 1);
        assert!(dirty.am_initialised && !dirty.clean);
        assert!(dirty.state.contains("not finalised"));
        // An older AM version's marker is not ours.
        assert!(!BootState::from_scratch(0xA000_0002, 0).am_initialised);
        assert_eq!(dirty.scratch_reg7, "0xa0000008");
    }

    #[test]
    fn gfx_targets_follow_kfd_not_the_ip_version_digits() {
        assert_eq!(
            gfx_target(IpVersion::new(9, 4, 3), 0).map(GfxTarget::name),
            Some("gfx942")
        );
        assert_eq!(
            gfx_target(IpVersion::new(11, 0, 3), 0).map(GfxTarget::name),
            Some("gfx1101")
        );
        assert_eq!(
            gfx_target(IpVersion::new(9, 5, 0), 0).map(GfxTarget::name),
            Some("gfx950")
        );
        // Unknown version: the device id's entry.
        assert_eq!(
            gfx_target(IpVersion::new(11, 5, 9), 0x744c).map(GfxTarget::name),
            Some("gfx1100")
        );
        assert_eq!(gfx_target(IpVersion::new(11, 5, 9), 0x1234), None);
    }
}
