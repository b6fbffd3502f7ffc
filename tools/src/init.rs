//! `am init DEVICE [--json]`: bring a device up with the driver's boot state machine, report
//! what the bring-up did (boot kind, phases, firmware), then finalise it.

use std::sync::Arc;

use am_driver::{AmDevice, BootReport, McLayout, Options, PciDevice};
use serde::Serialize;

use crate::device::open_device;

/// Arguments of `am init`.
#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// Device: a PCI BDF (0000:03:00.0), mock:PROFILE[:N] or remote:HOST:PORT[:N].
    pub device: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// What one open of the driver did.
#[derive(Debug, Serialize)]
pub struct BootSummary {
    /// `cold`, `warm`, `mode1-reset` (foreign firmware was reset first), `vf`, or
    /// `reset-only` (opened by `am reset`: nothing brought up).
    pub boot_kind: String,
    /// Why a full boot was done where a warm one might have been.
    pub full_boot_reason: Option<String>,
    /// Wall time of the whole open, milliseconds.
    pub duration_ms: f64,
    /// Register accesses of the whole open (reads + writes).
    pub reg_accesses: u64,
    /// The phases, in order.
    pub phases: Vec<PhaseSummary>,
    /// What the PSP loaded, in order; empty on a warm boot and on a VF.
    pub firmware: Vec<FirmwareStep>,
    /// Sum of `firmware[].bytes`.
    pub firmware_bytes: u64,
}

/// One phase of the bring-up.
#[derive(Debug, Serialize)]
pub struct PhaseSummary {
    /// `init_sw`, `probe`, `mode1_reset`, `soc`, `gmc`, `ih`, `psp`, `smu`, `gfx`, `sdma`, …
    pub name: String,
    /// Wall time, milliseconds.
    pub duration_ms: f64,
    /// Register reads.
    pub reg_reads: u64,
    /// Register writes.
    pub reg_writes: u64,
}

/// One firmware image the PSP loaded.
#[derive(Debug, Serialize)]
pub struct FirmwareStep {
    /// The load step (component or IP firmware).
    pub step: String,
    /// Bytes handed to the PSP.
    pub bytes: u64,
}

impl BootSummary {
    /// The driver's boot report in report form.
    pub fn from_report(r: &BootReport) -> Self {
        let firmware: Vec<FirmwareStep> = r
            .firmware
            .iter()
            .map(|(step, bytes)| FirmwareStep {
                step: step.clone(),
                bytes: *bytes as u64,
            })
            .collect();
        BootSummary {
            boot_kind: r.kind.to_string(),
            full_boot_reason: r.reason.clone(),
            duration_ms: ms(r.duration),
            reg_accesses: r.reg_accesses,
            phases: r
                .phases
                .iter()
                .map(|p| PhaseSummary {
                    name: p.name.to_string(),
                    duration_ms: ms(p.duration),
                    reg_reads: p.reg_reads,
                    reg_writes: p.reg_writes,
                })
                .collect(),
            firmware_bytes: firmware.iter().map(|f| f.bytes).sum(),
            firmware,
        }
    }
}

/// Where VRAM sits in MC space and the XGMI hive of the device.
#[derive(Debug, Serialize)]
pub struct Membership {
    /// `PF` or `VF`.
    pub function: String,
    /// `MC_VM_FB_LOCATION_BASE << 24`, hex.
    pub fb_base: String,
    /// `MC_VM_FB_LOCATION_TOP << 24 | 0xffffff`, hex.
    pub fb_top: String,
    /// The hive, absent outside one.
    pub hive: Option<HiveSummary>,
}

/// This device's place in an XGMI hive.
#[derive(Debug, Serialize)]
pub struct HiveSummary {
    /// Devices (regions) of the hive.
    pub regions: u32,
    /// This device's region (`PF_LFB_REGION`).
    pub region: u32,
    /// Segment size in bytes.
    pub segment_size: u64,
    /// This device's segment start in the hive's physical address space, hex.
    pub paddr_base: String,
}

impl Membership {
    /// VF/PF and hive membership of an open device.
    pub fn of(is_vf: bool, mc: McLayout) -> Self {
        Membership {
            function: if is_vf { "VF" } else { "PF" }.to_string(),
            fb_base: format!("{:#x}", mc.fb_base),
            fb_top: format!("{:#x}", mc.fb_top),
            hive: mc.is_hive().then(|| HiveSummary {
                regions: mc.xgmi_regions,
                region: mc.xgmi_region().unwrap_or(0),
                segment_size: mc.xgmi_seg_size,
                paddr_base: format!("{:#x}", mc.xgmi_paddr_base),
            }),
        }
    }

    /// One line of text.
    pub fn describe(&self) -> String {
        let hive = match &self.hive {
            Some(h) => format!(
                "region {} of an XGMI hive of {} ({} MiB segments, this one at {})",
                h.region,
                h.regions,
                h.segment_size >> 20,
                h.paddr_base
            ),
            None => "not in an XGMI hive".to_string(),
        };
        format!(
            "{}, {hive}; VRAM at {}..{} in MC space",
            self.function, self.fb_base, self.fb_top
        )
    }
}

/// Everything `am init` reports.
#[derive(Debug, Serialize)]
pub struct InitReport {
    /// The device spec.
    pub device: String,
    /// Backend (`sysfs`, `vfio`, `remote`, `mock`).
    pub backend: String,
    /// What the open did.
    #[serde(flatten)]
    pub boot: BootSummary,
    /// VF/PF, MC layout, hive.
    #[serde(flatten)]
    pub membership: Membership,
    /// Whether `fini` completed (`SCRATCH_REG6 = 0` on a PF, lease released on a VF).
    pub finalised: bool,
    /// Why finalising failed.
    pub error: Option<String>,
}

/// Milliseconds, from whole nanoseconds (so that JSON shows `0.000712`, not a product's
/// rounding error).
pub(crate) fn ms(d: std::time::Duration) -> f64 {
    d.as_nanos() as f64 / 1e6
}

/// Open with `opts`, report, finalise. An open that fails is an error (the driver's message); a `fini`
/// that fails is recorded in the report's `error`.
pub fn init_once(pci: Arc<dyn PciDevice>, opts: Options) -> anyhow::Result<InitReport> {
    let backend = pci.backend().to_string();
    let dev = AmDevice::open_with(pci, opts)?;
    let mut report = InitReport {
        device: dev.name().to_string(),
        backend,
        boot: BootSummary::from_report(dev.boot_report()),
        membership: Membership::of(dev.ctx().is_vf, dev.ctx().mc),
        finalised: false,
        error: None,
    };
    match dev.fini() {
        Ok(()) => report.finalised = true,
        Err(e) => report.error = Some(format!("finalising: {e}")),
    }
    Ok(report)
}

/// The boot part of a report as text lines (shared with `am reset`).
pub fn print_boot(b: &BootSummary) {
    if let Some(why) = &b.full_boot_reason {
        println!("  full boot    {why}");
    }
    println!("  phases       (wall time, register reads / writes)");
    for p in &b.phases {
        println!(
            "    {:<12} {:>9.3} ms {:>7} r {:>7} w",
            p.name, p.duration_ms, p.reg_reads, p.reg_writes
        );
    }
    let phases_ms: f64 = b.phases.iter().map(|p| p.duration_ms).sum();
    let phases_accesses: u64 = b.phases.iter().map(|p| p.reg_reads + p.reg_writes).sum();
    println!(
        "    {:<12} {:>9.3} ms {:>7} accesses (BARs, discovery, firmware files, boot-state checks)",
        "outside",
        (b.duration_ms - phases_ms).max(0.0),
        b.reg_accesses.saturating_sub(phases_accesses)
    );
    if b.firmware.is_empty() {
        println!("  firmware     none loaded by this open");
    } else {
        println!(
            "  firmware     {} images, {} bytes, in PSP load order",
            b.firmware.len(),
            b.firmware_bytes
        );
        for f in &b.firmware {
            println!("    {:<32} {:>9} bytes", f.step, f.bytes);
        }
    }
}

/// How a boot kind reads in a sentence.
pub fn kind_words(kind: &str) -> &'static str {
    match kind {
        "cold" => "cold boot",
        "warm" => "warm boot (firmware kept: GFX and SDMA only)",
        "mode1-reset" => "full boot after a mode1 reset of foreign firmware",
        "vf" => "VF boot (the PF owns PSP and SMU)",
        "reset-only" => "for reset only (nothing brought up)",
        _ => "boot",
    }
}

fn print_text(r: &InitReport) {
    println!(
        "{}  {} in {:.3} ms, {} register accesses",
        r.device,
        kind_words(&r.boot.boot_kind),
        r.boot.duration_ms,
        r.boot.reg_accesses
    );
    println!("  backend      {}", r.backend);
    println!("  function     {}", r.membership.describe());
    print_boot(&r.boot);
    if r.finalised {
        let how = if r.membership.function == "VF" {
            "init-access lease released"
        } else {
            "SCRATCH_REG6 = 0: the next open can warm boot"
        };
        println!("  finalised    {how}");
    }
    if let Some(e) = &r.error {
        println!("  error        {e}");
    }
}

/// Run `am init`.
pub fn run(args: InitArgs) -> anyhow::Result<()> {
    let pci = open_device(&args.device)?;
    // AM_RESET, AM_POWER_LIMIT, AM_FIRMWARE_PATH: what `AmDevice::open` would read.
    let opts = Options::from_env(pci.name())?;
    let report = init_once(pci, opts)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report);
    }
    match &report.error {
        Some(e) => anyhow::bail!("{e}"),
        None => Ok(()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The environment's options without `AM_RESET`/`AM_POWER_LIMIT`, so that a caller's
    /// shell cannot turn a warm boot into a full one (the unit tests of every command use it).
    pub(crate) fn opts() -> Options {
        let mut o = Options::from_env("test").unwrap();
        o.force_reset = false;
        o.power_limit_w = None;
        o
    }

    #[test]
    fn a_second_init_of_the_same_device_is_a_warm_boot_without_firmware_loads() {
        // Index 300: this test's own device in the mock's process-wide registry.
        let pci = am_mock::open("navi31", 300).unwrap();
        let first = init_once(pci.clone(), opts()).unwrap();
        assert_eq!(first.boot.boot_kind, "cold");
        assert!(first.boot.full_boot_reason.is_some());
        assert!(first.finalised);
        let second = init_once(pci, opts()).unwrap();
        assert_eq!(second.boot.boot_kind, "warm");
        assert_eq!(second.boot.full_boot_reason, None);
        assert!(second.boot.firmware.is_empty());
        // A warm boot skips the PSP and SMU phases.
        let names: Vec<&str> = second.boot.phases.iter().map(|p| p.name.as_str()).collect();
        assert!(
            !names.contains(&"psp") && !names.contains(&"smu"),
            "{names:?}"
        );
        assert!(
            names.contains(&"gfx") && names.contains(&"sdma"),
            "{names:?}"
        );
        assert!(
            am_mock::gpu("navi31", 300).unwrap().violations().is_empty(),
            "{:?}",
            am_mock::gpu("navi31", 300).unwrap().violations()
        );
    }

    #[test]
    fn phase_accesses_are_part_of_the_whole_open() {
        let r = init_once(am_mock::open("navi31", 301).unwrap(), opts()).unwrap();
        let phase_accesses: u64 = r
            .boot
            .phases
            .iter()
            .map(|p| p.reg_reads + p.reg_writes)
            .sum();
        // The open also reads the MC layout and writes SCRATCH_REG7/6 outside any phase.
        assert!(phase_accesses <= r.boot.reg_accesses);
        assert!(r.boot.reg_accesses > phase_accesses);
        assert_eq!(
            r.boot.firmware_bytes,
            r.boot.firmware.iter().map(|f| f.bytes).sum::<u64>()
        );
    }

    #[test]
    fn membership_names_the_hive_only_inside_one() {
        let alone = Membership::of(false, McLayout::default());
        assert!(alone.hive.is_none());
        assert!(alone.describe().starts_with("PF, not in an XGMI hive"));
        let member = Membership::of(
            true,
            McLayout {
                fb_base: 0x80_0000_0000,
                fb_top: 0x87_ffff_ffff,
                xgmi_paddr_base: 0x8_0000_0000,
                xgmi_seg_size: 0x8_0000_0000,
                xgmi_regions: 8,
            },
        );
        let h = member.hive.as_ref().unwrap();
        assert_eq!(
            (h.regions, h.region, h.paddr_base.as_str()),
            (8, 1, "0x800000000")
        );
        assert!(
            member.describe().contains("hive of 8"),
            "{}",
            member.describe()
        );
        assert_eq!(member.function, "VF");
    }
}
