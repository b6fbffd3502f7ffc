//! `am bench boot`: full and warm boot of the mock profiles on the in-process mock.
//!
//! Each iteration builds a fresh strict mock device (outside the timed region) and opens it
//! twice: first with `force_reset` (`AM_RESET=1`: a full boot — cold, since nothing runs on
//! a fresh device), then, after `fini`, again without it (a warm boot). A VF profile has
//! one kind of boot (`vf`: the PF owns PSP and SMU), measured once per fresh device. The wall
//! time is what the caller of `AmDevice::open_with` waits for, firmware file reads included;
//! the register accesses are the driver's own count of its BAR5 accesses. The CPU time is
//! the booting thread's own (the in-process mock answers on it), the figure to compare on a
//! shared machine, where the wall time also holds the time other processes had the core.

use std::time::{Duration, Instant};

use am_driver::{AmDevice, BootKind, Options, PciDevice};
use am_mock::{MockGpu, Mode};
use anyhow::{Context, bail};
use serde::Serialize;

use crate::bench_runtime::thread_cpu_ns;
use crate::init::ms;

/// Profiles measured when none is named.
pub const DEFAULT_PROFILES: &[&str] = &["navi31", "navi48", "navi44", "mi300x", "mi350x-vf"];

/// One measured open.
struct Sample {
    wall: Duration,
    cpu: Duration,
    reg_accesses: u64,
    kind: BootKind,
    firmware_images: usize,
    firmware_bytes: u64,
}

/// The measurements of one kind of boot of one profile.
#[derive(Debug, Serialize)]
pub struct BootBench {
    /// Mock profile.
    pub profile: String,
    /// `full`, `warm` or `vf`.
    pub kind: String,
    /// The boot kinds the driver reported (`cold`, `warm`, `mode1-reset`, `vf`), distinct.
    pub boot_kinds: Vec<String>,
    /// Boots measured.
    pub iterations: usize,
    /// Fastest wall time, milliseconds.
    pub wall_ms_min: f64,
    /// Median wall time, milliseconds.
    pub wall_ms_median: f64,
    /// Least CPU time of the booting thread, milliseconds.
    pub cpu_ms_min: f64,
    /// Median CPU time of the booting thread, milliseconds.
    pub cpu_ms_median: f64,
    /// Fewest register accesses of one boot.
    pub reg_accesses_min: u64,
    /// Median register accesses.
    pub reg_accesses_median: u64,
    /// Most register accesses of one boot.
    pub reg_accesses_max: u64,
    /// Firmware images the PSP loaded per boot (last boot).
    pub firmware_images: usize,
    /// Firmware bytes the PSP loaded per boot (last boot).
    pub firmware_bytes: u64,
}

/// Everything `am bench boot --json` prints.
#[derive(Debug, Serialize)]
pub struct BootBenchReport {
    /// `release` or `debug` (debug assertions on).
    pub build: String,
    /// One entry per profile and kind.
    pub results: Vec<BootBench>,
}

fn timed_open(
    pci: std::sync::Arc<dyn PciDevice>,
    opts: Options,
) -> anyhow::Result<(AmDevice, Sample)> {
    let (t, c) = (Instant::now(), thread_cpu_ns()?);
    let dev = AmDevice::open_with(pci, opts)?;
    let wall = t.elapsed();
    let cpu = Duration::from_nanos(thread_cpu_ns()?.saturating_sub(c));
    let r = dev.boot_report();
    let sample = Sample {
        wall,
        cpu,
        reg_accesses: r.reg_accesses,
        kind: r.kind,
        firmware_images: r.firmware.len(),
        firmware_bytes: r.firmware.iter().map(|(_, b)| *b as u64).sum(),
    };
    Ok((dev, sample))
}

fn check_clean(gpu: &MockGpu, what: &str) -> anyhow::Result<()> {
    let v = gpu.violations();
    if !v.is_empty() {
        bail!(
            "{}: {what}: the mock recorded {} violation(s), not a valid measurement; first: {:?}",
            gpu.name(),
            v.len(),
            v[0]
        );
    }
    Ok(())
}

/// Boot `profile` `iterations` times per kind.
pub fn bench_profile(
    profile: &str,
    iterations: u32,
    base: &Options,
) -> anyhow::Result<Vec<BootBench>> {
    let mut full = vec![];
    let mut warm = vec![];
    for i in 0..iterations.max(1) {
        let gpu = MockGpu::with_mode(profile, i, Mode::Strict)
            .with_context(|| format!("building mock profile {profile}"))?;
        let pci: std::sync::Arc<dyn PciDevice> = gpu.open();
        let first = Options {
            force_reset: true,
            ..base.clone()
        };
        let (dev, s) = timed_open(pci.clone(), first)?;
        let vf = s.kind == BootKind::Vf;
        full.push(s);
        dev.fini()?;
        check_clean(&gpu, "full boot")?;
        if vf {
            continue;
        }
        let (dev, s) = timed_open(pci, base.clone())?;
        if s.kind != BootKind::Warm {
            bail!(
                "{}: the open after a clean fini was a {} boot, not warm",
                gpu.name(),
                s.kind
            );
        }
        warm.push(s);
        dev.fini()?;
        check_clean(&gpu, "warm boot")?;
    }
    let vf = full.first().is_some_and(|s| s.kind == BootKind::Vf);
    let mut out = vec![summarise(profile, if vf { "vf" } else { "full" }, &full)];
    if !warm.is_empty() {
        out.push(summarise(profile, "warm", &warm));
    }
    Ok(out)
}

fn median<T: Copy + PartialOrd>(mut v: Vec<T>) -> T {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

fn summarise(profile: &str, kind: &str, samples: &[Sample]) -> BootBench {
    let walls: Vec<f64> = samples.iter().map(|s| ms(s.wall)).collect();
    let cpus: Vec<f64> = samples.iter().map(|s| ms(s.cpu)).collect();
    let accesses: Vec<u64> = samples.iter().map(|s| s.reg_accesses).collect();
    let mut kinds: Vec<String> = samples.iter().map(|s| s.kind.to_string()).collect();
    kinds.sort();
    kinds.dedup();
    let last = samples.last();
    BootBench {
        profile: profile.to_string(),
        kind: kind.to_string(),
        boot_kinds: kinds,
        iterations: samples.len(),
        wall_ms_min: walls.iter().copied().fold(f64::INFINITY, f64::min),
        wall_ms_median: median(walls),
        cpu_ms_min: cpus.iter().copied().fold(f64::INFINITY, f64::min),
        cpu_ms_median: median(cpus),
        reg_accesses_min: accesses.iter().copied().min().unwrap_or(0),
        reg_accesses_median: median(accesses.clone()),
        reg_accesses_max: accesses.iter().copied().max().unwrap_or(0),
        firmware_images: last.map_or(0, |s| s.firmware_images),
        firmware_bytes: last.map_or(0, |s| s.firmware_bytes),
    }
}

/// Run `am bench boot`.
pub fn run(profiles: Vec<String>, iterations: u32, json: bool) -> anyhow::Result<()> {
    let profiles: Vec<String> = if profiles.is_empty() {
        DEFAULT_PROFILES.iter().map(|p| p.to_string()).collect()
    } else {
        profiles
    };
    // Firmware from the environment's path; AM_RESET and AM_POWER_LIMIT are the benchmark's
    // to choose (force_reset per kind, clocks pinned to their highest level).
    let mut base = Options::from_env("am bench boot")?;
    base.force_reset = false;
    base.power_limit_w = None;
    let mut results = vec![];
    for p in &profiles {
        results.extend(bench_profile(p, iterations, &base)?);
    }
    let report = BootBenchReport {
        build: if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
        .to_string(),
        results,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "boot on the in-process mock ({} build), {} iteration(s) per kind, a fresh device each",
        report.build,
        iterations.max(1)
    );
    println!(
        "  {:<10} {:<5} {:<12} {:>11} {:>11} {:>11} {:>13}  firmware",
        "profile", "kind", "driver says", "wall min", "median", "cpu min", "reg accesses"
    );
    for r in &report.results {
        let accesses = if r.reg_accesses_min == r.reg_accesses_max {
            r.reg_accesses_median.to_string()
        } else {
            format!("{}..{}", r.reg_accesses_min, r.reg_accesses_max)
        };
        println!(
            "  {:<10} {:<5} {:<12} {:>8.3} ms {:>8.3} ms {:>8.3} ms {:>13}  {} images, {} KiB",
            r.profile,
            r.kind,
            r.boot_kinds.join(","),
            r.wall_ms_min,
            r.wall_ms_median,
            r.cpu_ms_min,
            accesses,
            r.firmware_images,
            r.firmware_bytes >> 10
        );
    }
    println!(
        "  targets: navi31 full < 50 ms and < 20,000 register accesses, warm < 5 ms (docs/BENCHMARKS.md)"
    );
    Ok(())
}
