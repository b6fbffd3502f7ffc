//! The `am` command: one subcommand per module.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod bench_allreduce;
mod bench_boot;
mod bench_compile;
mod bench_engines;
mod bench_kernels;
mod bench_runtime;
mod bench_tensor;
mod compile;
mod decode;
mod demo;
mod demo_cnn;
mod demo_gpt;
mod demo_parallel;
mod device;
mod digits;
mod doctor;
mod files;
mod fw;
mod hive_reset;
mod info;
mod init;
mod inspect;
mod list;
mod reg;
mod replay;
mod reset;
mod ring;
mod run;
mod serve;
mod smi;
mod smi_tui;
mod trace;
mod vm;

/// Userspace AMD GPU driver toolkit: bring AMD GPUs up without the amdgpu kernel driver
/// (or on the mock), and inspect what that takes.
#[derive(Parser)]
#[command(name = "am", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure the speed of the project's engines (see docs/BENCHMARKS.md).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Compile a kernel written in the IR's text form (code object, LLVM IR or assembly).
    Compile(compile::CompileArgs),
    /// Train a network (`mlp`, the default, or `cnn`) on the 8×8 handwritten digits on a
    /// device (the main job).
    Demo(demo::DemoArgs),
    /// Check this machine before a real boot: IOMMU, vfio-pci, drivers, BARs, permissions,
    /// memlock, hugepages, lockdown, firmware; each finding with what to do (exit 1 on a fail).
    Doctor(doctor::DoctorArgs),
    /// amdgpu firmware: list what a device needs, check a file, write synthetic sets.
    #[command(subcommand)]
    Fw(fw::FwCommand),
    /// Mode1-reset every GPU of an XGMI hive (default: every MI300X/MI350X here).
    HiveReset(hive_reset::HiveResetArgs),
    /// Identity, VRAM, IP versions, shader counts and boot state of a device (reads only).
    Info(info::InfoArgs),
    /// Bring a device up (boot kind, phases, firmware loaded), then finalise it.
    Init(init::InitArgs),
    /// List the AMD GPUs on this machine's PCI bus (and on remote servers).
    List(list::ListArgs),
    /// Read and write registers by name or glob, every field decoded.
    Reg(reg::RegArgs),
    /// Replay an access trace's writes on a fresh mock and report the first read it
    /// answers differently (exit 1 on a divergence).
    Replay(replay::ReplayArgs),
    /// Mode1 reset of the whole GPU through the SMU.
    Reset(reset::ResetArgs),
    /// Run one kernel of a code object with buffers from files or patterns; print or save them.
    Run(run::RunArgs),
    /// Live queues (compute, AQL, SDMA) and the packets between their pointers, decoded.
    Ring(ring::RingArgs),
    /// Export devices over the remote PCI protocol (tinygrad's REMOTE=host:port).
    Serve(serve::ServeArgs),
    /// GPU monitor: temperatures, power, clocks, activity, VRAM, fan, throttling, firmware
    /// and holders; --watch redraws it.
    Smi(smi::SmiArgs),
    /// Access traces (AM_TRACE=FILE, am serve --trace): show one, diff two.
    #[command(subcommand)]
    Trace(trace::TraceCommand),
    /// Walk the page tables for a GPU virtual address, or show the VM faults (reads only).
    Vm(vm::VmArgs),
}

/// `am … | head`: once the reader has gone, printing fails with a broken pipe. That is the
/// reader's choice, not an error of ours: leave quietly with the status a shell reports for
/// SIGPIPE (128 + 13) instead of a panic and a backtrace.
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    quiet_on_broken_pipe();
    let cli = Cli::parse();
    // A server's connections and refusals are worth seeing by default; other commands print
    // their own results and log only warnings.
    init_logging(if matches!(cli.command, Command::Serve(_)) {
        "info"
    } else {
        "warn"
    });
    let result = match cli.command {
        Command::Bench(cmd) => bench::run(cmd).map(|()| ExitCode::SUCCESS),
        Command::Compile(args) => compile::run(args).map(|()| ExitCode::SUCCESS),
        Command::Demo(args) => demo::run(args).map(|()| ExitCode::SUCCESS),
        Command::Doctor(args) => doctor::run(args),
        Command::Fw(cmd) => fw::run(cmd),
        Command::HiveReset(args) => hive_reset::run(args).map(|()| ExitCode::SUCCESS),
        Command::Info(args) => info::run(args).map(|()| ExitCode::SUCCESS),
        Command::Init(args) => init::run(args).map(|()| ExitCode::SUCCESS),
        Command::List(args) => list::run(args).map(|()| ExitCode::SUCCESS),
        Command::Reg(args) => reg::run(args).map(|()| ExitCode::SUCCESS),
        Command::Replay(args) => replay::run(args),
        Command::Reset(args) => reset::run(args).map(|()| ExitCode::SUCCESS),
        Command::Run(args) => run::run(args).map(|()| ExitCode::SUCCESS),
        Command::Ring(args) => ring::run(args).map(|()| ExitCode::SUCCESS),
        Command::Serve(args) => serve::run(args).map(|()| ExitCode::SUCCESS),
        Command::Smi(args) => smi::run(args).map(|()| ExitCode::SUCCESS),
        Command::Trace(cmd) => trace::run(cmd),
        Command::Vm(args) => vm::run(args).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("am: {}", report(&err));
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line, leaving out a cause whose text the line already holds
/// (errors that quote their source in their own message would otherwise print it twice).
fn report(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// Logs go to stderr, filtered by `AM_LOG` (e.g. `AM_LOG=debug`), else by `default`.
fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("AM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour codes only for a person reading a terminal, never into a log file.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .init();
}
