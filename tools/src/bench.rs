//! `am bench`: measured speed of the project's engines. Numbers go to `docs/BENCHMARKS.md`.

use std::process::Command;
use std::time::Instant;

use am_emu::{CodeObject, HostMemory, Isa, Launch, Program};
use anyhow::{Context, bail};
use clap::{Args, Subcommand};

/// What to measure.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Shader-emulator throughput in wave-instructions per second on one core.
    Emu(EmuArgs),
    /// Full and warm boot of the mock profiles (in-process): wall time and register accesses.
    Boot(BootArgs),
    /// The mock's packet engines: SDMA copy bandwidth against memcpy, CP packet throughput,
    /// doorbell-to-fence latency.
    Engines(EnginesArgs),
    /// Compile latency (cold, cache hits, per stage) and matmul instructions per output.
    Compile(CompileBenchArgs),
}

/// Options of `am bench engines`.
#[derive(Args, Debug)]
pub struct EnginesArgs {
    /// MiB per SDMA copy.
    #[arg(long, default_value_t = 64)]
    mib: u64,
    /// NOP packets per CP run.
    #[arg(long, default_value_t = 200_000)]
    nops: u64,
    /// Empty submissions timed for the latency.
    #[arg(long, default_value_t = 1000)]
    samples: usize,
    /// Timed runs of each copy and of the NOP ring (the best counts).
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Options of `am bench compile`.
#[derive(Args, Debug)]
pub struct CompileBenchArgs {
    /// Compilations per measurement (cache hits: at least 1000).
    #[arg(long, default_value_t = 30)]
    iterations: u32,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Options of `am bench boot`.
#[derive(Args, Debug)]
pub struct BootArgs {
    /// Mock profile to boot (repeatable); navi31, mi300x and mi350x-vf by default.
    #[arg(long = "profile", value_name = "P")]
    profiles: Vec<String>,
    /// Boots of each kind per profile, each on a fresh mock device.
    #[arg(long, default_value_t = 10)]
    iterations: u32,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Options of `am bench emu`.
#[derive(Args, Debug)]
pub struct EmuArgs {
    /// Loop iterations of the `spin` kernel (11 instructions each, 5 of them VALU).
    #[arg(long, default_value_t = 8000)]
    iters: u32,
    /// Workgroups of 256 work-items (8 waves of 32 each).
    #[arg(long, default_value_t = 8)]
    workgroups: u32,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Run a benchmark.
pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Emu(args) => emu(args),
        BenchCommand::Boot(args) => {
            crate::bench_boot::run(args.profiles, args.iterations, args.json)
        }
        BenchCommand::Engines(a) => {
            crate::bench_engines::run(a.mib, a.nops, a.samples, a.repeat.max(1), a.json)
        }
        BenchCommand::Compile(args) => crate::bench_compile::run(args.iterations, args.json),
    }
}

/// The emulator's compute-bound kernel, shared with its tests.
const KERNELS_CL: &str = include_str!("../../emu/tests/kernels/kernels.cl");

fn compile_gfx1100(source: &str) -> anyhow::Result<Vec<u8>> {
    let dir = std::env::temp_dir().join(format!("am-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let result = (|| {
        let (cl, obj, hsaco) = (dir.join("k.cl"), dir.join("k.o"), dir.join("k.hsaco"));
        std::fs::write(&cl, source)?;
        let clang = Command::new("clang-22")
            .args([
                "-x",
                "cl",
                "-cl-std=CL2.0",
                "--target=amdgcn-amd-amdhsa",
                "-mcpu=gfx1100",
            ])
            .args(["-nogpulib", "-O3", "-c"])
            .arg(&cl)
            .arg("-o")
            .arg(&obj)
            .output()
            .context("running clang-22 (scripts/setup installs it)")?;
        // The shared kernel file warns about LDS in helper functions; show clang's output only
        // when it fails.
        if !clang.status.success() {
            bail!(
                "clang-22 failed to compile the benchmark kernel ({}):\n{}",
                clang.status,
                String::from_utf8_lossy(&clang.stderr)
            );
        }
        let lld = Command::new("ld.lld-22")
            .arg("-shared")
            .arg(&obj)
            .arg("-o")
            .arg(&hsaco)
            .status()
            .context("running ld.lld-22 (scripts/setup installs it)")?;
        if !lld.success() {
            bail!("ld.lld-22 failed to link the benchmark kernel ({lld})");
        }
        Ok(std::fs::read(&hsaco)?)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn emu(args: EmuArgs) -> anyhow::Result<()> {
    let bytes = compile_gfx1100(KERNELS_CL)?;
    let co = CodeObject::parse(&bytes, "kernels.cl")?;
    let prog = Program::new(&co, Isa::Gfx1100)?;
    let k = co.kernel("spin")?;
    let groups = args.workgroups.max(1);

    let mut mem = HostMemory::new();
    let out = mem.alloc(4 * 256 * groups as usize);
    // Compiled kernels load kernargs in 32-byte blocks past `kernarg_size`: pad the buffer.
    let mut kernarg = vec![0u8; (k.descriptor.kernarg_size as usize).max(16) + 64];
    kernarg[..8].copy_from_slice(&out.to_le_bytes());
    kernarg[8..12].copy_from_slice(&args.iters.to_le_bytes());
    let ka = mem.alloc_bytes(&kernarg);
    let launch = Launch::new([256 * groups, 1, 1], [256, 1, 1], ka);

    // One warm-up dispatch, then the best of three. On a shared machine the wall clock counts
    // time other processes held the core, so this thread's CPU time (schedstat) is reported
    // too: it is the one-core figure.
    am_emu::dispatch(&prog, k, &launch, &mut mem)?;
    let (mut wall, mut cpu) = (f64::INFINITY, f64::INFINITY);
    let mut instructions = 0;
    for _ in 0..3 {
        let (t, c) = (Instant::now(), thread_cpu_ns());
        let stats = am_emu::dispatch(&prog, k, &launch, &mut mem)?;
        wall = wall.min(t.elapsed().as_secs_f64());
        if let (Some(a), Some(b)) = (c, thread_cpu_ns()) {
            cpu = cpu.min(b.saturating_sub(a) as f64 / 1e9);
        }
        instructions = stats.instructions;
    }
    let n = instructions as f64;
    // schedstat can read 0 for runs shorter than its tick: no figure rather than infinity.
    let cpu = (cpu.is_finite() && cpu > 0.0).then_some(cpu);
    let per_cpu = cpu.map(|c| n / c / 1e6);
    if args.json {
        let v = serde_json::json!({
            "kernel": "spin", "isa": "gfx1100", "wave_size": k.descriptor.wave_size(),
            "workgroups": groups, "workgroup_size": 256, "iterations": args.iters,
            "wave_instructions": instructions,
            "wall_seconds": wall, "wall_mips": n / wall / 1e6,
            "cpu_seconds": cpu, "cpu_mips": per_cpu,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "emu: spin kernel, {groups} workgroups x 256 work-items (wave{}), {} iterations: {instructions} wave-instructions",
            k.descriptor.wave_size(),
            args.iters
        );
        println!(
            "  wall: {wall:.3} s = {:.1} M wave-instructions/s",
            n / wall / 1e6
        );
        if let (Some(c), Some(m)) = (cpu, per_cpu) {
            println!("  cpu:  {c:.3} s = {m:.1} M wave-instructions/s (one core)");
        }
    }
    Ok(())
}

/// CPU time of this thread in nanoseconds (Linux schedstat), if available.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}
