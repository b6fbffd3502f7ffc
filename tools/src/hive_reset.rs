//! `am hive-reset [DEVICE...] [--json]`: mode1-reset every GPU of an XGMI hive, so that
//! members left running another driver's firmware can be brought up again.
//!
//! Without devices: every supported GPU of this machine's PCI bus (MI300X 0x74a1, MI350X
//! 0x75a0, MI350X VF 0x75b0 — a VF is listed but never reset: its PF owns the SMU). Refuses
//! to touch anything while `amdgpu` is bound to any of them. Then it opens every device in
//! reset mode and resets them all (`am_driver::hive::reset_all`), all or nothing.

use std::path::PathBuf;
use std::sync::Arc;

use am_driver::PciDevice;
use am_driver::hive::{MemberReset, ResetResult, VF_CANNOT_RESET, reset_all};
use am_driver::pci::DeviceSpec;
use am_driver::pci::sysfs::{self, PciGpu};
use am_driver::{McLayout, Options};
use anyhow::bail;
use serde::Serialize;

use crate::device::open_device;

/// Arguments of `am hive-reset`.
#[derive(Debug, clap::Args)]
pub struct HiveResetArgs {
    /// Devices to reset: PCI BDFs, mock:PROFILE[:N] (a hive: mock:mi300x-hive4:N) or
    /// remote:HOST:PORT:N. Default: every MI300X / MI350X (VF) on this machine's PCI bus.
    #[arg(value_name = "DEVICE")]
    pub devices: Vec<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Where sysfs is mounted (tests point this at a fake tree).
    #[arg(long, default_value = sysfs::SYSFS_ROOT, hide = true)]
    pub sysfs_root: PathBuf,
}

/// PCI device ids `am hive-reset` picks up by default: MI300X, MI350X, MI350X VF.
pub const SUPPORTED_IDS: [u16; 3] = [0x74a1, 0x75a0, 0x75b0];

/// A device's place in its hive, as reported.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct HiveReport {
    /// `PF_LFB_REGION`: this device's region id.
    pub region: u32,
    /// Devices in the hive (`PF_MAX_REGION + 1`).
    pub regions: u32,
    /// Bytes of each member's segment.
    pub segment_size: u64,
}

impl HiveReport {
    /// The hive part of a layout; `None` outside a hive.
    pub fn from_layout(mc: &McLayout) -> Option<Self> {
        mc.xgmi_region().map(|region| HiveReport {
            region,
            regions: mc.xgmi_regions,
            segment_size: mc.xgmi_seg_size,
        })
    }
}

/// One line of the report.
#[derive(Debug, Serialize)]
pub struct DeviceResult {
    /// Device name.
    pub device: String,
    /// `PF` or `VF`; absent when the device could not be reached.
    pub function: Option<String>,
    /// Hive membership, when the device was opened and is in a hive.
    pub hive: Option<HiveReport>,
    /// What opening it in reset mode found (the boot it did, or that foreign firmware was
    /// left for the reset).
    pub found: Option<String>,
    /// `reset`, `skipped` or `failed`.
    pub result: String,
    /// Why it was skipped or what failed.
    pub reason: Option<String>,
}

/// Everything `am hive-reset` reports.
#[derive(Debug, Serialize)]
pub struct HiveResetReport {
    /// One entry per device, in order.
    pub devices: Vec<DeviceResult>,
    /// Devices reset.
    pub reset: usize,
    /// Devices skipped (VFs; all of them when one could not be opened).
    pub skipped: usize,
    /// Devices that failed to open or reset.
    pub failed: usize,
}

impl HiveResetReport {
    fn new(devices: Vec<DeviceResult>) -> Self {
        let count = |r: &str| devices.iter().filter(|d| d.result == r).count();
        HiveResetReport {
            reset: count("reset"),
            skipped: count("skipped"),
            failed: count("failed"),
            devices,
        }
    }
}

fn function(is_vf: bool) -> String {
    if is_vf { "VF" } else { "PF" }.to_string()
}

fn skipped(device: &str, is_vf: Option<bool>, reason: impl Into<String>) -> DeviceResult {
    DeviceResult {
        device: device.to_string(),
        function: is_vf.map(function),
        hive: None,
        found: None,
        result: "skipped".into(),
        reason: Some(reason.into()),
    }
}

impl From<MemberReset> for DeviceResult {
    fn from(m: MemberReset) -> Self {
        let (result, reason) = match m.result {
            ResetResult::Reset => ("reset", None),
            ResetResult::Skipped(why) => ("skipped", Some(why)),
            ResetResult::Failed(e) => ("failed", Some(e.to_string())),
        };
        DeviceResult {
            device: m.device,
            function: Some(function(m.is_vf)),
            hive: m.layout.as_ref().and_then(HiveReport::from_layout),
            found: m.found,
            result: result.into(),
            reason,
        }
    }
}

/// What to reset: the named devices, or the supported GPUs of the bus. Each target is a
/// spec and, for local PCI functions, what sysfs says of it.
fn targets(args: &HiveResetArgs) -> anyhow::Result<Vec<(String, Option<PciGpu>)>> {
    let scan = sysfs::scan(&args.sysfs_root);
    if args.devices.is_empty() {
        let gpus = scan?;
        let found: Vec<(String, Option<PciGpu>)> = gpus
            .into_iter()
            .filter(|g| SUPPORTED_IDS.contains(&g.device_id))
            .map(|g| (g.bdf.to_string(), Some(g)))
            .collect();
        if found.is_empty() {
            bail!(
                "no supported AMD GPU (MI300X 0x74a1, MI350X 0x75a0, MI350X VF 0x75b0) on this \
                 machine's PCI bus; name the devices to reset"
            );
        }
        return Ok(found);
    }
    let mut out = Vec::with_capacity(args.devices.len());
    for spec in &args.devices {
        let gpu = match DeviceSpec::parse(spec)? {
            DeviceSpec::Pci(bdf) => match &scan {
                Ok(gpus) => gpus.iter().find(|g| g.bdf == bdf).cloned(),
                Err(e) => bail!("{spec}: cannot check its driver in sysfs: {e}"),
            },
            _ => None,
        };
        out.push((spec.clone(), gpu));
    }
    Ok(out)
}

/// Reset what `args` names; the report is returned even when devices failed.
pub fn hive_reset(args: &HiveResetArgs) -> anyhow::Result<HiveResetReport> {
    let targets = targets(args)?;
    let bound: Vec<String> = targets
        .iter()
        .filter_map(|(_, g)| g.as_ref())
        .filter(|g| g.driver.as_deref() == Some("amdgpu"))
        .map(|g| format!("{} is bound to amdgpu", g.bdf))
        .collect();
    if !bound.is_empty() {
        bail!(
            "refusing to reset: {}; the kernel driver owns the hive (unload it first: \
             `sudo modprobe -r amdgpu`)",
            bound.join(", ")
        );
    }
    // Phase 1: reach every PCI function (a VF the bus scan already knows is left alone, not
    // even opened).
    let mut rows: Vec<Option<DeviceResult>> = Vec::with_capacity(targets.len());
    let mut devices: Vec<Arc<dyn PciDevice>> = Vec::new();
    let mut open_failed = Vec::new();
    for (spec, gpu) in &targets {
        if gpu.as_ref().is_some_and(|g| g.is_vf) {
            rows.push(Some(skipped(spec, Some(true), VF_CANNOT_RESET)));
            continue;
        }
        match open_device(spec) {
            Ok(d) => {
                devices.push(d);
                rows.push(None);
            }
            Err(e) => {
                open_failed.push(spec.clone());
                rows.push(Some(DeviceResult {
                    device: spec.clone(),
                    function: None,
                    hive: None,
                    found: None,
                    result: "failed".into(),
                    reason: Some(format!("{e:#}")),
                }));
            }
        }
    }
    // Phase 2: open in reset mode and reset, all or nothing.
    let mut results: std::vec::IntoIter<MemberReset> = if open_failed.is_empty() {
        let opts = Options::from_env("am hive-reset")?;
        reset_all(&devices, &opts).into_iter()
    } else {
        Vec::new().into_iter()
    };
    let mut names = devices.iter().map(|d| d.name().to_string());
    let rows = rows
        .into_iter()
        .map(|row| match row {
            Some(r) => r,
            None => {
                let name = names.next().unwrap_or_default();
                match results.next() {
                    Some(m) => m.into(),
                    None => skipped(
                        &name,
                        None,
                        format!(
                            "not reset: {} could not be opened, and a hive is reset whole or not at all",
                            open_failed.join(", ")
                        ),
                    ),
                }
            }
        })
        .collect();
    Ok(HiveResetReport::new(rows))
}

/// The report as text for people.
pub fn render(r: &HiveResetReport) -> String {
    let mut out = String::new();
    for d in &r.devices {
        let mut what = vec![];
        if let Some(f) = &d.function {
            what.push(f.clone());
        }
        if let Some(h) = &d.hive {
            what.push(format!(
                "hive region {} of {}, {} GiB segments",
                h.region,
                h.regions,
                h.segment_size >> 30
            ));
        }
        let what = if what.is_empty() {
            String::new()
        } else {
            format!(" ({})", what.join(", "))
        };
        out.push_str(&format!("{}{what}: {}", d.device, d.result));
        if let Some(why) = &d.reason {
            out.push_str(&format!(": {why}"));
        }
        out.push('\n');
        if let Some(f) = &d.found {
            out.push_str(&format!("  found: {f}\n"));
        }
    }
    out.push_str(&format!(
        "{} reset, {} skipped, {} failed\n",
        r.reset, r.skipped, r.failed
    ));
    out
}

/// Run `am hive-reset`.
pub fn run(args: HiveResetArgs) -> anyhow::Result<()> {
    let report = hive_reset(&args)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    if report.failed > 0 {
        bail!("{} device(s) failed (see the report)", report.failed);
    }
    if report.reset == 0 {
        bail!("nothing was reset");
    }
    Ok(())
}
