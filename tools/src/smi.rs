//! `am smi [DEVICE…] [--watch SECS] [--json|--csv]`: per GPU — identity, VF/PF, hive,
//! temperatures, power and its limit, clocks against their DPM ranges, activity, VRAM used
//! and total, fan, throttle reasons, firmware, and the processes holding the device.
//!
//! Metrics come from the SMU's metrics table (MP1 13.0.0 `SmuMetricsExternal_t`; 13.0.6 and
//! MI350X's 13.0.14 `MetricsTableX_t`, in Q10 fixed point), which the SMU writes into the
//! driver table the booting AM instance allocated: an inspect-only driver open finds it at
//! the same address and asks for a fresh copy. VRAM used is what VM context 0 maps. A served
//! device another client owns is asked through the server, which runs each SMU query
//! between the owner's messages (`am serve`'s SMU command); its owner is reported. A local
//! device another process holds is read beside it without its SMU mailbox, which is the
//! holder's: the holder is reported. A VF has no SMU (its PF owns it).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use am_autogen::smu::{v13_0_0 as s0, v14_0_2 as s14};
use am_driver::ip::smu::{Metrics, Smu};
use am_driver::mm::{PtEntry, VmLevel};
use am_driver::pci::lock;
use am_driver::{AmDevice, Ctx, HwIp, Options, Ownership};
use anyhow::{Context as _, bail};
use serde::Serialize;

use crate::inspect::{Target, holder};
use crate::vm::{self, Hub};

/// Arguments of `am smi`.
#[derive(Debug, clap::Args)]
pub struct SmiArgs {
    /// Devices (PCI BDF, mock:PROFILE[:N], remote:HOST:PORT[:N]); default: the AMD GPUs on
    /// this machine's PCI bus and every device an AM process holds.
    pub devices: Vec<String>,
    /// Redraw every SECS seconds, 0.01 to 86400 (a terminal table; with --json or --csv, or
    /// when stdout is not a terminal, one record or table per sample).
    #[arg(long, value_name = "SECS", value_parser = watch_secs)]
    pub watch: Option<f64>,
    /// With --watch: stop after this many samples (at least 1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Print JSON.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV.
    #[arg(long)]
    pub csv: bool,
    /// Mode1-reset the device(s) instead (needs --yes).
    #[arg(long)]
    pub reset: bool,
    /// Set the SMU power limit to W watts instead (needs --yes).
    #[arg(long, value_name = "W")]
    pub power_limit: Option<u32>,
    /// Confirm --reset or --power-limit.
    #[arg(long)]
    pub yes: bool,
}

/// The shortest and longest `--watch` period: a sample (a metrics table from the SMU, the
/// page tables walked) takes longer than a hundredth of a second anyway, and a day is the
/// longest wait anyone means.
const WATCH_SECS: (f64, f64) = (0.01, 86_400.0);

fn watch_secs(s: &str) -> Result<f64, String> {
    let (lo, hi) = WATCH_SECS;
    match s.parse::<f64>() {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(format!("`{s}`: give seconds from {lo} to {hi}")),
    }
}

/// A clock now and its DPM range (MHz).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Clock {
    /// Current frequency.
    pub mhz: Option<u32>,
    /// Lowest DPM level.
    pub min: Option<u32>,
    /// Highest DPM level.
    pub max: Option<u32>,
}

/// A process holding the device.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Process {
    /// Its pid.
    pub pid: Option<u32>,
    /// Its command line.
    pub command: Option<String>,
    /// The lock file it holds.
    pub lock_file: String,
}

/// What `am smi` reports of one device.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SmiReport {
    /// Device name.
    pub device: String,
    /// Product name.
    pub product: String,
    /// `PF` or `VF`.
    pub function: String,
    /// `region R of N` in an XGMI hive.
    pub hive: Option<String>,
    /// MP1 (SMU) version.
    pub mp1: Option<String>,
    /// Edge temperature (°C).
    pub temp_edge: Option<u32>,
    /// Hotspot temperature (°C).
    pub temp_hotspot: Option<u32>,
    /// Memory temperature (°C).
    pub temp_mem: Option<u32>,
    /// Socket power (W).
    pub power_w: Option<u32>,
    /// Power limit the SMU enforces (W).
    pub power_limit_w: Option<u32>,
    /// Largest power limit the board allows (W).
    pub power_max_w: Option<u32>,
    /// `gfx`, `mem`, `soc`, `fclk`.
    pub clocks: BTreeMap<String, Clock>,
    /// GFXCLK of each XCC (MHz), on multi-XCC parts.
    pub gfx_per_xcc_mhz: Vec<u32>,
    /// GFX activity (%).
    pub gfx_activity: Option<u32>,
    /// Memory activity (%).
    pub mem_activity: Option<u32>,
    /// VRAM mapped in VM context 0 (bytes).
    pub vram_used: Option<u64>,
    /// VRAM size (bytes).
    pub vram_total: Option<u64>,
    /// Fan speed (RPM).
    pub fan_rpm: Option<u32>,
    /// Fan duty (%).
    pub fan_pwm: Option<u32>,
    /// Active throttlers.
    pub throttle: Vec<String>,
    /// Firmware versions by name (`pmfw`).
    pub firmware: BTreeMap<String, String>,
    /// The SMU's metrics update counter.
    pub metrics_counter: Option<u32>,
    /// Processes holding the device.
    pub processes: Vec<Process>,
    /// The client that owns a served device, as its server describes it, when another
    /// client does.
    pub owner: Option<String>,
    /// Why some of the report is missing.
    pub notes: Vec<String>,
}

/// SMU 13.0.6 reports in unsigned Q10 fixed point: round to the nearest integer.
fn q10(v: u32) -> u32 {
    (v + 512) >> 10
}

/// `THROTTLER_*_BIT` names of MP1 14.0.2, by bit.
const THROTTLERS_14_0_2: [&str; 21] = [
    "TEMP_EDGE",
    "TEMP_HOTSPOT",
    "TEMP_HOTSPOT_GFX",
    "TEMP_HOTSPOT_SOC",
    "TEMP_MEM",
    "TEMP_VR_GFX",
    "TEMP_VR_SOC",
    "TEMP_VR_MEM0",
    "TEMP_VR_MEM1",
    "TEMP_LIQUID0",
    "TEMP_LIQUID1",
    "TEMP_PLX",
    "TDC_GFX",
    "TDC_SOC",
    "PPT0",
    "PPT1",
    "PPT2",
    "PPT3",
    "FIT",
    "GFX_APCC_PLUS",
    "GFX_DVO",
];

/// `THROTTLER_*_BIT` names of MP1 13.0.0, by bit.
const THROTTLERS_13_0_0: [&str; 22] = [
    "TEMP_EDGE",
    "TEMP_HOTSPOT",
    "TEMP_HOTSPOT_G",
    "TEMP_HOTSPOT_M",
    "TEMP_MEM",
    "TEMP_VR_GFX",
    "TEMP_VR_MEM0",
    "TEMP_VR_MEM1",
    "TEMP_VR_SOC",
    "TEMP_VR_U",
    "TEMP_LIQUID0",
    "TEMP_LIQUID1",
    "TEMP_PLX",
    "TDC_GFX",
    "TDC_SOC",
    "TDC_U",
    "PPT0",
    "PPT1",
    "PPT2",
    "PPT3",
    "FIT",
    "GFX_APCC_PLUS",
];

/// Fill the report from a metrics table.
pub fn apply_metrics(r: &mut SmiReport, m: &Metrics) {
    r.metrics_counter = Some(m.counter());
    let clock = |r: &mut SmiReport, k: &str, v: u32| {
        r.clocks.entry(k.to_string()).or_default().mhz = Some(v);
    };
    // The RDNA tables (13.0.0, 14.0.2) name these fields alike; their enums number
    // temperatures and clocks alike too (tests in the driver's smu.rs check the clocks).
    macro_rules! rdna {
        ($s:expr, $m:ident, $throttlers:expr) => {{
            let s = $s;
            let t = |i: u32| s.AvgTemperature.get(i as usize).map(|&v| u32::from(v));
            r.temp_edge = t($m::TEMP_EDGE);
            r.temp_hotspot = t($m::TEMP_HOTSPOT);
            r.temp_mem = t($m::TEMP_MEM);
            r.power_w = Some(u32::from(s.AverageSocketPower));
            r.power_max_w = (s.dGPU_W_MAX != 0).then_some(u32::from(s.dGPU_W_MAX));
            let c = |i: u32| s.CurrClock.get(i as usize).copied().unwrap_or(0);
            clock(r, "gfx", c($m::PPCLK_GFXCLK));
            clock(r, "mem", c($m::PPCLK_UCLK));
            clock(r, "soc", c($m::PPCLK_SOCCLK));
            clock(r, "fclk", c($m::PPCLK_FCLK));
            r.gfx_activity = Some(u32::from(s.AverageGfxActivity));
            r.mem_activity = Some(u32::from(s.AverageUclkActivity));
            r.fan_rpm = Some(u32::from(s.AvgFanRpm));
            r.fan_pwm = Some(u32::from(s.AvgFanPwm));
            r.throttle = s
                .ThrottlingPercentage
                .iter()
                .enumerate()
                .filter(|(_, p)| **p > 0)
                .map(|(i, p)| format!("{} {p}%", $throttlers.get(i).unwrap_or(&"?")))
                .collect();
        }};
    }
    match m {
        Metrics::V13_0_0(x) => rdna!(&x.SmuMetrics, s0, THROTTLERS_13_0_0),
        Metrics::V14_0_2(x) => rdna!(&x.SmuMetrics, s14, THROTTLERS_14_0_2),
        Metrics::V13_0_6(x) => {
            r.temp_hotspot = Some(q10(x.MaxSocketTemperature));
            r.temp_mem = Some(q10(x.MaxHbmTemperature));
            r.power_w = Some(q10(x.SocketPower));
            r.power_max_w = Some(q10(x.MaxSocketPowerLimit));
            let gfx: Vec<u32> = x.GfxclkFrequency.iter().map(|&v| q10(v)).collect();
            r.gfx_per_xcc_mhz = gfx;
            clock(r, "gfx", r.gfx_per_xcc_mhz.first().copied().unwrap_or(0));
            clock(r, "mem", q10(x.UclkFrequency));
            clock(r, "soc", q10(x.SocclkFrequency[0]));
            clock(r, "fclk", q10(x.FclkFrequency));
            r.gfx_activity = Some(q10(x.SocketGfxBusy).min(100));
            r.mem_activity = Some(q10(x.DramBandwidthUtilization).min(100));
            // The firmware accumulates residency in each throttling state since it started.
            for (acc, name) in [
                (x.ProchotResidencyAcc, "PROCHOT"),
                (x.PptResidencyAcc, "PPT"),
                (x.SocketThmResidencyAcc, "SOCKET_THM"),
                (x.VrThmResidencyAcc, "VR_THM"),
                (x.HbmThmResidencyAcc, "HBM_THM"),
            ] {
                if acc > 0 {
                    r.throttle.push(format!("{name} (residency {acc})"));
                }
            }
        }
    }
}

/// VRAM bytes mapped by valid VRAM pages of VM context 0 (as the GC hub of the first XCC
/// sees it).
pub fn vram_mapped(t: &Target) -> anyhow::Result<u64> {
    let xcc = t.regs.instances(HwIp::GC).first().copied().unwrap_or(0);
    let (ctx, base, _) = vm::context(t, Hub::Gc(xcc), 0)?;
    if !ctx.enabled || base & 1 == 0 {
        return Ok(0);
    }
    let format = vm::format_of(t);
    let off = t.mc.xgmi_paddr_base;
    let root = (base & am_driver::mm::PDE_ADDR_MASK).saturating_sub(off);
    let mut used = 0u64;
    let mut stack = vec![(root, VmLevel::Pdb2)];
    while let Some((table, level)) = stack.pop() {
        let mut b = vec![0u8; 4096];
        t.vram_read(table, &mut b)?;
        for e in b.chunks_exact(8) {
            let raw = u64::from_le_bytes(e.try_into().unwrap_or([0; 8]));
            match format.decode(level, raw) {
                PtEntry::Invalid => {}
                PtEntry::Table { addr } => {
                    if let Some(child) = level.child() {
                        stack.push((addr.saturating_sub(off), child));
                    }
                }
                PtEntry::Page(p) if !p.flags.system => used += level.entry_size(),
                PtEntry::Page(_) => {}
            }
        }
    }
    Ok(used)
}

fn smu_part(t: &Target, r: &mut SmiReport) -> anyhow::Result<()> {
    let mut opts = Options::from_env(t.name())?;
    opts.inspect = true;
    // One unanswered message should not stall a monitor for the driver's 10 s.
    opts.timeouts.smu = Duration::from_secs(2);
    let mut dev = AmDevice::open_with(t.pci.clone(), opts)
        .with_context(|| format!("{}: locating the SMU driver table", t.name()))?;
    dev.with_smu(|ctx: &Ctx, smu: &mut Smu| {
        r.mp1 = smu.mp1_version().map(|v| v.to_string());
        r.firmware.insert("pmfw".into(), smu.firmware_version(ctx)?);
        r.power_limit_w = Some(smu.power_limit(ctx)?);
        for (name, lo, hi) in smu.clock_ranges(ctx)? {
            let key = match name {
                "GFXCLK" => "gfx",
                "UCLK" => "mem",
                "SOCCLK" => "soc",
                "FCLK" => "fclk",
                other => other,
            };
            let c = r.clocks.entry(key.to_string()).or_default();
            c.min = Some(lo);
            c.max = Some(hi);
        }
        Ok(())
    })?;
    let m = dev.with_smu(|ctx, smu| smu.metrics(ctx)).with_context(|| {
        format!(
            "{}: the SMU did not write its metrics table (was the device booted by AM?)",
            t.name()
        )
    })?;
    apply_metrics(r, &m);
    Ok(())
}

/// Everything `am smi` says about one device; failures become notes.
pub fn gather(spec: &str) -> SmiReport {
    let mut r = SmiReport {
        device: spec.to_string(),
        ..Default::default()
    };
    let held = holder(spec);
    if let Some(h) = &held {
        r.processes.push(Process {
            pid: h.pid,
            command: h.command.clone(),
            lock_file: h.path.display().to_string(),
        });
    }
    // Beside a running job only reads: its SMU mailbox and index windows are the job's.
    let opened = match &held {
        Some(h) => Target::open_beside(spec, h),
        None => Target::open(spec),
    };
    let t = match opened {
        Ok(t) => t,
        Err(e) => {
            r.notes.push(match &held {
                Some(h) => format!("held by {h}: opened beside it to read, which failed: {e:#}"),
                None => format!("{e:#}"),
            });
            return r;
        }
    };
    if let Some(h) = &held {
        r.notes.push(format!(
            "held by {h}: opened beside it to read only; the SMU part (metrics, clocks, power \
             limit, firmware) is not read: its SMU mailbox is the holder's"
        ));
    }
    r.device = t.name().to_string();
    r.product = t.product().to_string();
    r.function = if t.is_vf { "VF" } else { "PF" }.into();
    r.hive =
        t.mc.xgmi_region()
            .map(|reg| format!("region {reg} of {}", t.mc.xgmi_regions));
    r.vram_total = Some(t.discovery.vram_size);
    match vram_mapped(&t) {
        Ok(u) => r.vram_used = Some(u),
        Err(e) => r.notes.push(format!("VRAM used: {e:#}")),
    }
    if let Ok(Some(Ownership::Other(who))) = t.pci.ownership() {
        r.owner = Some(who);
    }
    if held.is_some() {
        // Said above: beside a holder the SMU is not asked.
    } else if t.is_vf {
        r.notes
            .push("a VF has no SMU metrics: the PF owns the SMU".to_string());
    } else if let Err(e) = smu_part(&t, &mut r) {
        // Beside an owner the queries go through the server (which refuses none a
        // server with the SMU command takes); a server without it refuses the mailbox
        // writes, naming the owner.
        r.notes.push(match &r.owner {
            Some(who) => format!(
                "SMU part not read (metrics, clocks, power limit, firmware) beside the owner \
                 {who}: {e:#}"
            ),
            None => format!("{e:#}"),
        });
    }
    r
}

/// The devices `am smi` looks at by default: AMD GPUs on the PCI bus, then every device an
/// AM process holds.
fn default_devices() -> Vec<String> {
    let mut out: Vec<String> = crate::list::scan_local(Path::new("/sys/bus/pci/devices"))
        .unwrap_or_default()
        .into_iter()
        .map(|g| g.bdf.to_string())
        .collect();
    for h in lock::holders_in(&lock::lock_dir()) {
        if !out.contains(&h.device) {
            out.push(h.device);
        }
    }
    out
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or("-".into(), |v| v.to_string())
}

fn clock_cell(c: Option<&Clock>) -> String {
    match c {
        Some(c) => match (c.mhz, c.min, c.max) {
            (Some(m), Some(lo), Some(hi)) => format!("{m} ({lo}-{hi})"),
            (Some(m), _, _) => m.to_string(),
            _ => "-".into(),
        },
        None => "-".into(),
    }
}

/// Table columns: header and cell per report.
pub const COLUMNS: [&str; 14] = [
    "GPU",
    "DEVICE",
    "FN",
    "TEMP E/H/M C",
    "POWER/LIMIT W",
    "GFX MHz",
    "MEM MHz",
    "SOC MHz",
    "FCLK MHz",
    "GFX%",
    "MEM%",
    "VRAM MiB",
    "FAN RPM",
    "THROTTLE",
];

/// The cells of one report, in [`COLUMNS`] order.
pub fn cells(i: usize, r: &SmiReport) -> Vec<String> {
    let temps = format!(
        "{}/{}/{}",
        opt(r.temp_edge),
        opt(r.temp_hotspot),
        opt(r.temp_mem)
    );
    let vram = match (r.vram_used, r.vram_total) {
        (Some(u), Some(t)) => format!("{}/{}", u >> 20, t >> 20),
        (None, Some(t)) => format!("-/{}", t >> 20),
        _ => "-".into(),
    };
    vec![
        i.to_string(),
        r.device.clone(),
        if r.function.is_empty() {
            "-".into()
        } else {
            r.function.clone()
        },
        temps,
        format!("{}/{}", opt(r.power_w), opt(r.power_limit_w)),
        clock_cell(r.clocks.get("gfx")),
        clock_cell(r.clocks.get("mem")),
        clock_cell(r.clocks.get("soc")),
        clock_cell(r.clocks.get("fclk")),
        opt(r.gfx_activity),
        opt(r.mem_activity),
        vram,
        opt(r.fan_rpm),
        if r.throttle.is_empty() {
            if r.metrics_counter.is_some() {
                "none".into()
            } else {
                "-".into()
            }
        } else {
            r.throttle.join(", ")
        },
    ]
}

/// The text report: a table, then per device what does not fit a cell.
pub fn render(reports: &[SmiReport]) -> String {
    let rows: Vec<Vec<String>> = reports
        .iter()
        .enumerate()
        .map(|(i, r)| cells(i, r))
        .collect();
    let mut widths: Vec<usize> = COLUMNS.iter().map(|c| c.len()).collect();
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let s: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        s.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(COLUMNS.to_vec());
    for row in &rows {
        out += &line(row.iter().map(String::as_str).collect());
    }
    for (i, r) in reports.iter().enumerate() {
        out += &format!("\nGPU {i}  {}  {}\n", r.device, r.product);
        if let Some(h) = &r.hive {
            out += &format!("  XGMI hive   {h}\n");
        }
        if let Some(v) = &r.mp1 {
            out += &format!("  MP1         {v}\n");
        }
        for (k, v) in &r.firmware {
            out += &format!("  firmware    {k} {v}\n");
        }
        if let Some(m) = r.power_max_w {
            out += &format!("  power max   {m} W\n");
        }
        if !r.gfx_per_xcc_mhz.is_empty() {
            let v: Vec<String> = r.gfx_per_xcc_mhz.iter().map(u32::to_string).collect();
            out += &format!("  GFX per XCC {} MHz\n", v.join(" "));
        }
        if let Some(p) = r.fan_pwm {
            out += &format!("  fan duty    {p}%\n");
        }
        if let Some(o) = &r.owner {
            out += &format!("  owner       {o} (another client of the server)\n");
        }
        if r.processes.is_empty() {
            out += "  processes   none\n";
        }
        for p in &r.processes {
            out += &format!(
                "  process     pid {} ({}) holds {}\n",
                opt(p.pid),
                p.command.as_deref().unwrap_or("?"),
                p.lock_file
            );
        }
        for n in &r.notes {
            out += &format!("  note        {n}\n");
        }
    }
    out
}

/// CSV: [`COLUMNS`] and one line per report.
pub fn csv(reports: &[SmiReport], header: bool) -> String {
    let quote = |c: &str| {
        if c.contains([',', '"']) {
            format!("\"{}\"", c.replace('"', "\"\""))
        } else {
            c.to_string()
        }
    };
    let mut out = String::new();
    if header {
        out += &(COLUMNS.join(",") + "\n");
    }
    for (i, r) in reports.iter().enumerate() {
        let c: Vec<String> = cells(i, r).iter().map(|c| quote(c)).collect();
        out += &(c.join(",") + "\n");
    }
    out
}

fn act(specs: &[String], args: &SmiArgs) -> anyhow::Result<()> {
    let what = if args.reset {
        "--reset (a mode1 reset of the whole GPU)".to_string()
    } else {
        format!("--power-limit {} W", args.power_limit.unwrap_or(0))
    };
    if !args.yes {
        bail!(
            "{what} on {} changes the device: add --yes to do it",
            specs.join(", ")
        );
    }
    for spec in specs {
        if let Some(h) = holder(spec) {
            bail!("{spec}: held by {h}; {what} needs the device");
        }
        let pci = crate::device::open_device(spec)?;
        let mut opts = Options::from_env(spec)?;
        if args.reset {
            opts.reset_mode = true;
            let dev = AmDevice::open_with(pci, opts)?;
            let reset = dev.mode1_reset()?;
            println!(
                "{spec}: {}",
                if reset {
                    "mode1 reset done"
                } else {
                    "the SMU was not running: nothing to reset"
                }
            );
        } else if let Some(w) = args.power_limit {
            opts.inspect = true;
            let mut dev = AmDevice::open_with(pci, opts)?;
            let now = dev.with_smu(|ctx, smu| {
                smu.set_power_limit(ctx, w)?;
                smu.power_limit(ctx)
            })?;
            println!("{spec}: power limit {now} W");
        }
    }
    Ok(())
}

/// Run `am smi`.
pub fn run(args: SmiArgs) -> anyhow::Result<()> {
    let specs = if args.devices.is_empty() {
        default_devices()
    } else {
        args.devices.clone()
    };
    if args.reset || args.power_limit.is_some() {
        return act(&specs, &args);
    }
    if specs.is_empty() {
        bail!(
            "no AMD GPU on this machine's PCI bus and none held by an AM process: name a device (e.g. mock:navi31)"
        );
    }
    let sample = || specs.iter().map(|s| gather(s)).collect::<Vec<_>>();
    let Some(secs) = args.watch else {
        let reports = sample();
        if args.json {
            println!("{}", serde_json::to_string_pretty(&reports)?);
        } else if args.csv {
            print!("{}", csv(&reports, true));
        } else {
            print!("{}", render(&reports));
        }
        return Ok(());
    };
    let period = Duration::from_secs_f64(secs);
    // The redrawn table needs a terminal; into a pipe or a file each sample is printed.
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    if args.json || args.csv || !terminal {
        for n in 0.. {
            if args.count.is_some_and(|c| n >= c) {
                break;
            }
            if n > 0 {
                std::thread::sleep(period);
            }
            let reports = sample();
            if args.json {
                println!("{}", serde_json::to_string(&reports)?);
            } else if args.csv {
                print!("{}", csv(&reports, n == 0));
            } else {
                if n > 0 {
                    println!();
                }
                print!("{}", render(&reports));
            }
        }
        return Ok(());
    }
    crate::smi_tui::watch(sample, period, args.count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::FromZeros;

    #[test]
    fn q10_rounds_to_nearest() {
        assert_eq!(q10(40 << 10), 40);
        assert_eq!(q10((40 << 10) + 511), 40);
        assert_eq!(q10((40 << 10) + 512), 41);
    }

    #[test]
    fn throttlers_of_13_0_0_are_named_by_bit() {
        let mut m = s0::SmuMetricsExternal_t::new_zeroed();
        m.SmuMetrics.ThrottlingPercentage[s0::THROTTLER_PPT0_BIT as usize] = 12;
        m.SmuMetrics.ThrottlingPercentage[s0::THROTTLER_TEMP_MEM_BIT as usize] = 3;
        let mut r = SmiReport::default();
        apply_metrics(&mut r, &Metrics::V13_0_0(Box::new(m)));
        assert_eq!(r.throttle, ["TEMP_MEM 3%", "PPT0 12%"]);
    }

    #[test]
    fn csv_quotes_cells_with_commas() {
        let r = SmiReport {
            device: "mock:navi31:0".into(),
            throttle: vec!["PPT0 1%".into(), "FIT 2%".into()],
            ..Default::default()
        };
        let text = csv(&[r], true);
        assert!(text.ends_with(",\"PPT0 1%, FIT 2%\"\n"), "{text}");
        assert!(text.starts_with("GPU,DEVICE,FN,"), "{text}");
    }
}
