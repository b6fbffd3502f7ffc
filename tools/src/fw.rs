//! `am fw`: what firmware a device needs, what a file holds, synthetic sets.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use am_firmware::locate::{self, hex};
use am_firmware::parse::{self, Body, Gfx, Image, Kind, Region, Sdma, SosVariant};
use am_firmware::plan::{LoadPlan, PlanOptions, PspStep};
use am_firmware::set::{FirmwareSet, LoadedFile};
use am_firmware::{FileSpec, FirmwareError, IpVersions, Locator, Pins};
use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};

#[derive(Subcommand)]
pub enum FwCommand {
    /// Every file the driver loads for a profile (found or missing, versions, SHA-256)
    /// and the order the PSP loads them in.
    List(ListArgs),
    /// Parse one firmware file and print what it holds, or why it is malformed.
    Check(CheckArgs),
    /// Write a profile's synthetic firmware set (valid headers, deterministic content).
    Synth(SynthArgs),
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Profile {
    /// Radeon RX 7900 XTX: GC 11.0.0, MP0/MP1 13.0.0, SDMA 6.0.0.
    Navi31,
    /// Radeon RX 9070 XT: GC 12.0.1, MP0/MP1 14.0.3, SDMA 7.0.1.
    Navi48,
    /// Radeon RX 9060 XT: GC 12.0.0, MP0/MP1 14.0.2, SDMA 7.0.0.
    Navi44,
    /// Instinct MI300X: GC 9.4.3, MP0/MP1 13.0.6, SDMA 4.4.2.
    Mi300x,
    /// Instinct MI350X: GC 9.5.0, MP0/MP1 13.0.14, SDMA 4.4.5.
    Mi350x,
}

impl Profile {
    fn name(self) -> &'static str {
        match self {
            Profile::Navi31 => "navi31",
            Profile::Navi48 => "navi48",
            Profile::Navi44 => "navi44",
            Profile::Mi300x => "mi300x",
            Profile::Mi350x => "mi350x",
        }
    }

    fn ips(self) -> IpVersions {
        match self {
            Profile::Navi31 => IpVersions::NAVI31,
            Profile::Navi48 => IpVersions::NAVI48,
            Profile::Navi44 => IpVersions::NAVI44,
            Profile::Mi300x => IpVersions::MI300X,
            Profile::Mi350x => IpVersions::MI350X,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub enum SosArg {
    /// The primary component set (amdgpu's default).
    Primary,
    /// The auxiliary set of a v2.1 package (amdgpu on MP0 13.0.6 with an older PMFW).
    Aux,
}

#[derive(Args)]
pub struct ListArgs {
    /// The device whose firmware to list.
    #[arg(long, value_enum)]
    profile: Profile,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Exit non-zero if any file is missing, malformed or differs from its pin, or the
    /// load order cannot be built.
    #[arg(long)]
    strict: bool,
    /// Pin file (`sha256sum` format) to check the files against; overrides
    /// `$AM_FIRMWARE_PINS`.
    #[arg(long, value_name = "FILE")]
    pins: Option<PathBuf>,
    /// Which sOS component set to put in the load order.
    #[arg(long, value_enum, default_value = "primary")]
    sos: SosArg,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum KindArg {
    PspSos,
    Smc,
    Sdma,
    Gfx,
    Imu,
    Rlc,
    Mes,
    Ta,
    Common,
}

#[derive(Args)]
pub struct CheckArgs {
    /// The file (plain or `.zst`).
    file: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Parse as this kind instead of the kind the file name implies.
    #[arg(long, value_enum)]
    kind: Option<KindArg>,
}

#[derive(Args)]
pub struct SynthArgs {
    /// The device whose firmware set to write.
    #[arg(long, value_enum)]
    profile: Profile,
    /// Directory to write into (created if needed); point `AM_FIRMWARE_PATH` at it.
    dir: PathBuf,
    /// Write only the files the search path does not have (e.g. MI350X's GC 9.5.0 set).
    #[arg(long)]
    only_missing: bool,
}

pub fn run(cmd: FwCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        FwCommand::List(args) => list(args),
        FwCommand::Check(args) => check(args),
        FwCommand::Synth(args) => synth(args),
    }
}

/// One file of a profile's set, as `fw list` found it.
enum Entry {
    Found(Box<LoadedFile>),
    Missing,
    Invalid {
        path: Option<PathBuf>,
        error: FirmwareError,
    },
}

fn list(args: ListArgs) -> anyhow::Result<ExitCode> {
    let ips = args.profile.ips();
    let mut locator = Locator::from_env().context("reading the firmware search settings")?;
    if let Some(pins) = &args.pins {
        locator = locator.with_pins(Pins::load(pins)?);
    }
    let specs = ips.files();
    let entries: Vec<(FileSpec, Entry)> = specs
        .iter()
        .map(|spec| (spec.clone(), inspect(&locator, spec)))
        .collect();

    let found: Vec<LoadedFile> = entries
        .iter()
        .filter_map(|(_, e)| match e {
            Entry::Found(f) => Some((**f).clone()),
            _ => None,
        })
        .collect();
    let complete = found.len() == specs.len();
    let options = PlanOptions {
        sos: match args.sos {
            SosArg::Primary => SosVariant::Primary,
            SosArg::Aux => SosVariant::Aux,
        },
    };
    let plan: Result<LoadPlan, String> = if complete {
        FirmwareSet { ips, files: found }
            .plan(options)
            .map_err(|e| e.to_string())
    } else {
        Err("not every file is present and valid".to_string())
    };

    if args.json {
        print_list_json(&args, &ips, &locator, &entries, &plan)?;
    } else {
        print_list_human(&args, &ips, &locator, &entries, &plan);
    }
    let ok = complete && plan.is_ok();
    Ok(if args.strict && !ok {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn inspect(locator: &Locator, spec: &FileSpec) -> Entry {
    match locator.read(&spec.name) {
        Err(FirmwareError::NotFound { .. }) => Entry::Missing,
        Err(error) => Entry::Invalid {
            path: locator.find(&spec.name),
            error,
        },
        Ok(raw) => {
            let path = raw.path.clone();
            match LoadedFile::from_raw(spec.clone(), raw) {
                Ok(file) => Entry::Found(Box::new(file)),
                Err(error) => Entry::Invalid {
                    path: Some(path),
                    error,
                },
            }
        }
    }
}

fn version(image: &Image) -> String {
    let (major, minor) = image.header_version();
    format!("{major}.{minor}")
}

fn print_list_human(
    args: &ListArgs,
    ips: &IpVersions,
    locator: &Locator,
    entries: &[(FileSpec, Entry)],
    plan: &Result<LoadPlan, String>,
) {
    println!(
        "Firmware the driver loads for {} ({ips})",
        args.profile.name()
    );
    let dirs: Vec<String> = locator
        .dirs()
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    println!("Searched: {}", dirs.join(":"));
    if !locator.pins().is_empty() {
        println!("Pinned:   {} files (SHA-256)", locator.pins().len());
    }
    println!();
    print_file_table(args, entries);
    println!();
    print_load_order(plan);
    print_checksums(entries);
}

/// One line per file the driver wants, then what is missing or invalid.
fn print_file_table(args: &ListArgs, entries: &[(FileSpec, Entry)]) {
    println!(
        "  {:<5} {:<21} {:<8} {:<6} {:>10} {:>8}  DIRECTORY",
        "ROLE", "FILE", "STATUS", "HEADER", "UCODE VER", "BYTES"
    );
    let mut missing = Vec::new();
    let mut invalid = Vec::new();
    for (spec, entry) in entries {
        let (status, detail) = match entry {
            Entry::Found(f) => (
                "found",
                format!(
                    "{:<6} {:>10} {:>8}  {}",
                    format!("v{}", version(&f.image)),
                    format!("{:#x}", f.image.header.ucode_version),
                    f.data.len(),
                    f.path
                        .parent()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default(),
                ),
            ),
            Entry::Missing => {
                missing.push(spec.name.as_str());
                ("MISSING", String::new())
            }
            Entry::Invalid { error, .. } => {
                invalid.push(error.to_string());
                ("INVALID", String::new())
            }
        };
        println!(
            "  {:<5} {:<21} {:<8} {detail}",
            spec.role.name(),
            spec.name,
            status
        );
    }
    println!();
    if missing.is_empty() && invalid.is_empty() {
        println!("All {} files found and valid.", entries.len());
    }
    if !missing.is_empty() {
        println!(
            "{} of {} files missing: {}.",
            missing.len(),
            entries.len(),
            missing.join(", ")
        );
        println!(
            "  Debian's firmware-amd-graphics (bookworm-backports; scripts/setup installs it) has the \
             navi31 and mi300x sets, no GC 9.5.0 files.\n  For tests, `am fw synth --profile {} \
             --only-missing DIR` writes synthetic stand-ins; then set AM_FIRMWARE_PATH=DIR.",
            args.profile.name()
        );
    }
    for e in &invalid {
        println!("error: {e}");
    }
}

/// The PSP load plan step by step, then the RS64 start addresses.
fn print_load_order(plan: &Result<LoadPlan, String>) {
    match plan {
        Ok(plan) => {
            println!("PSP load order ({} steps):", plan.steps.len());
            let mut ring_started = false;
            println!("  sOS bootloader (C2PMSG_35 command, component from the sOS package):");
            for (i, step) in plan.steps.iter().enumerate() {
                if !ring_started && !matches!(step, PspStep::Bootloader { .. }) {
                    ring_started = true;
                    println!("  PSP ring commands, once the sOS runs:");
                }
                let what = match step {
                    PspStep::Bootloader {
                        component, command, ..
                    } => {
                        let cmd = command.name().unwrap_or("?");
                        if *component == am_firmware::PspFwType::KDB
                            && *command == am_firmware::BootloaderCmd::LOAD_TOS_SPL_TABLE
                        {
                            format!("{cmd} <- KDB (SPL slot, MP0 < 14)")
                        } else {
                            format!("{cmd} <- {component}")
                        }
                    }
                    PspStep::LoadToc { .. } => "LOAD_TOC (sizes the TMR)".to_string(),
                    PspStep::SetupTmr => "SETUP_TMR".to_string(),
                    PspStep::LoadIpFw { fw_type, .. } => {
                        format!("LOAD_IP_FW {} ({})", fw_type, fw_type.0)
                    }
                    PspStep::AutoloadRlc => {
                        "AUTOLOAD_RLC (RLC starts the loaded engines)".to_string()
                    }
                };
                let bytes = step
                    .payload()
                    .map(|p| format!("{:>7} bytes  {} @ {:#x}", p.len(), p.file, p.offset))
                    .unwrap_or_default();
                println!("  {:>4}. {:<46} {bytes}", i + 1, what);
            }
            for (role, addr) in &plan.ucode_start {
                println!(
                    "  {} starts at RS64 address {addr:#x} (ucode_start_addr)",
                    role.name()
                );
            }
        }
        Err(why) => println!("PSP load order: unavailable ({why})."),
    }
}

/// The SHA-256 of every file found, in `sha256sum` format.
fn print_checksums(entries: &[(FileSpec, Entry)]) {
    let found: Vec<&LoadedFile> = entries
        .iter()
        .filter_map(|(_, e)| match e {
            Entry::Found(f) => Some(&**f),
            _ => None,
        })
        .collect();
    if !found.is_empty() {
        println!();
        println!(
            "SHA-256 (sha256sum format: save it and pass it to --pins to check these files later):"
        );
        for f in found {
            println!("  {}  {}", hex(&f.sha256()), f.spec.name);
        }
    }
}

fn print_list_json(
    args: &ListArgs,
    ips: &IpVersions,
    locator: &Locator,
    entries: &[(FileSpec, Entry)],
    plan: &Result<LoadPlan, String>,
) -> anyhow::Result<()> {
    let files: Vec<Value> = entries
        .iter()
        .map(|(spec, entry)| {
            let mut v = json!({"role": spec.role.name(), "name": spec.name});
            let extra = match entry {
                Entry::Found(f) => json!({
                    "status": "found",
                    "path": f.path,
                    "kind": f.image.kind().name(),
                    "header_version": version(&f.image),
                    "ucode_version": f.image.header.ucode_version,
                    "size": f.data.len(),
                    "sha256": hex(&f.sha256()),
                    "pinned": locator.pins().get(&spec.name).is_some(),
                }),
                Entry::Missing => json!({"status": "missing"}),
                Entry::Invalid { path, error } => {
                    json!({"status": "invalid", "path": path, "error": error.to_string()})
                }
            };
            merge(&mut v, extra);
            v
        })
        .collect();
    let (order, order_error) = match plan {
        Ok(plan) => (Some(plan_json(plan)), None),
        Err(e) => (None, Some(e.clone())),
    };
    let out = json!({
        "profile": args.profile.name(),
        "ip_versions": {
            "gc": ips.gc.to_string(),
            "mp0": ips.mp0.to_string(),
            "mp1": ips.mp1.to_string(),
            "sdma": ips.sdma.to_string(),
        },
        "search_path": locator.dirs(),
        "files": files,
        "complete": entries.iter().all(|(_, e)| matches!(e, Entry::Found(_))),
        "psp_load_order": order,
        "psp_load_order_error": order_error,
        "ucode_start": plan.as_ref().ok().map(|p| {
            p.ucode_start
                .iter()
                .map(|(role, addr)| (role.name().to_string(), json!(addr)))
                .collect::<serde_json::Map<_, _>>()
        }),
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

fn merge(into: &mut Value, from: Value) {
    if let (Value::Object(a), Value::Object(b)) = (into, from) {
        a.extend(b);
    }
}

fn plan_json(plan: &LoadPlan) -> Vec<Value> {
    plan.steps
        .iter()
        .map(|step| {
            let mut v = match step {
                PspStep::Bootloader {
                    component, command, ..
                } => json!({
                    "step": "bootloader",
                    "name": step.name(),
                    "component": component.full_name(),
                    "command": command.0,
                }),
                PspStep::LoadToc { .. } => json!({"step": "load_toc", "name": step.name()}),
                PspStep::SetupTmr => json!({"step": "setup_tmr", "name": step.name()}),
                PspStep::LoadIpFw { fw_type, .. } => json!({
                    "step": "load_ip_fw",
                    "name": step.name(),
                    "fw_type": fw_type.0,
                }),
                PspStep::AutoloadRlc => json!({"step": "autoload_rlc", "name": step.name()}),
            };
            if let Some(p) = step.payload() {
                merge(
                    &mut v,
                    json!({"file": p.file, "offset": p.offset, "size": p.len()}),
                );
            }
            v
        })
        .collect()
}

fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let name = args
        .file
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("firmware")
        .to_string();
    let name = name.strip_suffix(".zst").unwrap_or(&name).to_string();
    let kind = match args.kind {
        Some(k) => match k {
            KindArg::PspSos => Kind::PspSos,
            KindArg::Smc => Kind::Smc,
            KindArg::Sdma => Kind::Sdma,
            KindArg::Gfx => Kind::Gfx,
            KindArg::Imu => Kind::Imu,
            KindArg::Rlc => Kind::Rlc,
            KindArg::Mes => Kind::Mes,
            KindArg::Ta => Kind::Ta,
            KindArg::Common => Kind::Other,
        },
        None => Kind::from_file_name(&name),
    };
    let parsed = locate::read_maybe_zst(&args.file).and_then(|data| {
        let image = parse::parse_as(kind, &name, &data)?;
        Ok((data, image))
    });
    let (data, image) = match parsed {
        Ok(p) => p,
        Err(error) => {
            if args.json {
                let out = json!({"file": args.file, "valid": false, "error": error.to_string()});
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                // The verdict and the reason are errors: stderr, so a script reading
                // stdout sees nothing it could mistake for a description.
                eprintln!("{}: INVALID", args.file.display());
                eprintln!("error: {error}");
            }
            return Ok(ExitCode::FAILURE);
        }
    };
    let parts = describe(&image);
    if args.json {
        let h = &image.header;
        let out = json!({
            "file": args.file,
            "valid": true,
            "kind": image.kind().name(),
            "size": data.len(),
            "sha256": hex(&locate::sha256(&data)),
            "header_version": version(&image),
            "ip_version": format!("{}.{}", h.ip_version_major, h.ip_version_minor),
            "ucode_version": h.ucode_version,
            "ucode_array": region_json(&image.ucode),
            "crc32": h.crc32,
            "parts": parts.iter().map(|(what, detail)| json!({"what": what, "detail": detail})).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        let h = &image.header;
        println!(
            "{}: valid {} firmware, header v{}",
            args.file.display(),
            image.kind().name(),
            version(&image)
        );
        println!("  size           {} bytes", data.len());
        println!("  SHA-256        {}", hex(&locate::sha256(&data)));
        println!(
            "  IP version     {}.{}",
            h.ip_version_major, h.ip_version_minor
        );
        println!("  ucode version  {:#x}", h.ucode_version);
        println!("  ucode array    {}", region_text(&image.ucode));
        for (what, detail) in parts {
            println!("  {what:<14} {detail}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn region_text(r: &Region) -> String {
    format!("{:#x}..{:#x} ({} bytes)", r.offset, r.offset + r.len, r.len)
}

fn region_json(r: &Region) -> Value {
    json!({"offset": r.offset, "size": r.len})
}

/// The versioned parts of an image as (label, text) lines.
fn describe(image: &Image) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut add = |what: &str, detail: String| out.push((what.to_string(), detail));
    match &image.body {
        Body::PspSos(sos) => {
            if let Some(aux) = sos.aux_index {
                add(
                    "aux index",
                    format!("{aux} (descriptors {aux}.. are the auxiliary sOS)"),
                );
            }
            for c in &sos.components {
                add(
                    &format!("bin[{}]", c.index),
                    format!(
                        "{:<12} version {:#x}  {}",
                        c.fw_type.to_string(),
                        c.fw_version,
                        region_text(&c.region)
                    ),
                );
            }
        }
        Body::Smc(smc) => {
            add("start addr", format!("{:#x}", smc.ucode_start_addr));
            for t in &smc.pptables {
                let id =
                    t.id.map(|id| format!("id {id:#x}"))
                        .unwrap_or_else(|| "soft pptable".to_string());
                add("pptable", format!("{id}  {}", region_text(&t.region)));
            }
        }
        Body::Sdma(Sdma::V1 {
            feature_version,
            jt,
        }) => {
            add("feature", feature_version.to_string());
            add("jump table", region_text(jt));
        }
        Body::Sdma(Sdma::V2 {
            feature_version,
            ctx,
            ctl,
        }) => {
            add("feature", feature_version.to_string());
            add("TH0 (ctx)", region_text(ctx));
            add("TH1 (ctl)", region_text(ctl));
        }
        Body::Sdma(Sdma::V3 {
            feature_version,
            ucode,
        }) => {
            add("feature", feature_version.to_string());
            add("ucode", region_text(ucode));
        }
        Body::Gfx(Gfx::V1 {
            feature_version,
            code,
            jt,
        }) => {
            add("feature", feature_version.to_string());
            add("code", region_text(code));
            add("jump table", region_text(jt));
        }
        Body::Gfx(Gfx::V2 {
            feature_version,
            ucode,
            data,
            ucode_start_addr,
        }) => {
            add("feature", feature_version.to_string());
            add("instructions", region_text(ucode));
            add("data (stack)", region_text(data));
            add("start addr", format!("{ucode_start_addr:#x}"));
        }
        Body::Imu(imu) => {
            add("IRAM", region_text(&imu.iram));
            add("DRAM", region_text(&imu.dram));
        }
        Body::Rlc(rlc) => {
            add("feature", rlc.feature_version.to_string());
            add("reg list fmt", region_text(&rlc.reg_list_format));
            add("reg list", region_text(&rlc.reg_list));
            if let Some(l) = &rlc.restore_lists {
                add("SR list cntl", region_text(&l.cntl));
                add("SR list gpm", region_text(&l.gpm));
                add("SR list srm", region_text(&l.srm));
            }
            if let Some((iram, dram)) = &rlc.iram_dram {
                add("IRAM", region_text(iram));
                add("DRAM boot", region_text(dram));
            }
            if let Some((p, v)) = &rlc.rlcp_rlcv {
                add("RLC P", region_text(p));
                add("RLC V", region_text(v));
            }
        }
        Body::Mes(mes) => {
            add(
                "instructions",
                format!(
                    "version {:#x}  {}",
                    mes.ucode_version,
                    region_text(&mes.ucode)
                ),
            );
            add(
                "data",
                format!(
                    "version {:#x}  {}",
                    mes.data_version,
                    region_text(&mes.data)
                ),
            );
            add("start addr", format!("{:#x}", mes.uc_start_addr));
            add("data addr", format!("{:#x}", mes.data_start_addr));
        }
        Body::Ta(ta) => {
            for b in &ta.bins {
                add(
                    &format!("bin[{}]", b.index),
                    format!(
                        "type {:<2} version {:#x}  {}",
                        b.fw_type,
                        b.fw_version,
                        region_text(&b.region)
                    ),
                );
            }
        }
        Body::Other => {}
    }
    out
}

fn synth(args: SynthArgs) -> anyhow::Result<ExitCode> {
    let ips = args.profile.ips();
    let written = if args.only_missing {
        let locator = Locator::from_env()?;
        let mut written = Vec::new();
        for spec in ips.files() {
            if locator.find(&spec.name).is_none() {
                written.push(write_one(&args.dir, &spec, &ips)?);
            }
        }
        written
    } else {
        am_firmware::synth::write_set(&args.dir, &ips)?
    };
    for path in &written {
        println!("wrote {}", path.display());
    }
    if written.is_empty() {
        println!(
            "nothing to write: the search path has every file of {}",
            args.profile.name()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn write_one(dir: &Path, spec: &FileSpec, ips: &IpVersions) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(&spec.name);
    std::fs::write(&path, am_firmware::synth::build(spec, ips))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}
