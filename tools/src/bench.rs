//! `am bench`: measured speed of the project's engines. Numbers go to `docs/BENCHMARKS.md`.

use std::process::Command;
use std::time::Instant;

use am_emu::{CodeObject, HostMemory, Isa, Launch, Memory, Program, SharedHostMemory};
use anyhow::{Context, bail};
use clap::builder::RangedU64ValueParser;
use clap::{Args, Subcommand};

/// What to measure.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Shader-emulator throughput on a suite of kernels (gfx1100, gfx942, gfx950): wave-
    /// instructions per second per kernel and their geometric mean, on one core and on all
    /// (against as many independent one-core runs at once, the machine's own ceiling).
    Emu(EmuArgs),
    /// Full and warm boot of the mock profiles (in-process): wall time and register accesses.
    Boot(BootArgs),
    /// The mock's packet engines: SDMA copy bandwidth against memcpy, CP packet throughput,
    /// doorbell-to-fence latency.
    Engines(EnginesArgs),
    /// Compile latency (cold, cache hits, per stage) and matmul instructions per output.
    Compile(CompileBenchArgs),
    /// The runtime's host CPU time per kernel launch (encode, submit) and submit-to-fence
    /// latency of an empty kernel.
    Dispatch(DispatchArgs),
    /// The runtime's host CPU time per kernel of a graph replay.
    Graph(GraphArgs),
    /// SDMA copy throughput through the runtime's copy queue, against memcpy.
    Copy(CopyArgs),
    /// The demo's training step: host time outside GPU execution uncaptured and captured,
    /// kernels per step, and the step on the CPU against numpy.
    Tensor(TensorBenchArgs),
    /// The tensor layer's kernels on the mock: executed wave-instructions per operation, per
    /// output element or multiply-add, by instruction class, against tinygrad's (live with
    /// --tinygrad, else issue 37's figures) and the ideal; the cpu device against numpy.
    Kernels(KernelsBenchArgs),
    /// The tensor layer's all-reduce over several devices (the mock hive by default): algorithm
    /// and bus bandwidth (nccl-tests' definitions) from 1 KiB up, against memcpy of the same
    /// bytes, with the links' speeds on real hardware beside.
    Allreduce(AllreduceArgs),
}

/// Options of `am bench allreduce`.
#[derive(Args, Debug)]
pub struct AllreduceArgs {
    /// Devices, comma-separated; a hive profile without an index is every member of its
    /// first hive.
    #[arg(long, default_value = "mock:mi300x-hive4")]
    device: String,
    /// Largest size in MiB (sizes go from 1 KiB up by ×4 to this one).
    #[arg(long, default_value_t = 256, value_parser = RangedU64ValueParser::<usize>::new().range(1..=1024))]
    mib: usize,
    /// Algorithm: auto (tree below 256 KiB; from there direct in one XGMI hive, else ring),
    /// direct, ring or tree.
    #[arg(long, default_value = "auto")]
    algo: String,
    /// Timed runs per size after an untimed one (the best counts).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Options of `am bench kernels`.
#[derive(Args, Debug)]
pub struct KernelsBenchArgs {
    /// ISA to run the suite on: gfx1100 (mock:navi31), gfx1201 (mock:navi48) or gfx942
    /// (mock:mi300x).
    #[arg(long, default_value = "gfx1100")]
    isa: String,
    /// Run tinygrad 0.14.0 (the environment scripts/conformance makes) on the same
    /// operations and shapes against `am serve` on loopback, and count its kernels the same
    /// way.
    #[arg(long)]
    tinygrad: bool,
    /// The `am` binary that serves the mock for --tinygrad (default: this one).
    #[arg(long, value_name = "PATH")]
    am: Option<std::path::PathBuf>,
    /// Small shapes, for a quick check of the machinery (numbers not comparable).
    #[arg(long)]
    quick: bool,
    /// Operation of the suite to run (repeatable; all by default): add, sum, softmax,
    /// matmul_f32_256, matmul_f32_512, matmul_f16, matmul_bf16, conv3x3, matmul_batched,
    /// matmul_transposed, layernorm, argmax, add_odd, sum_odd, matmul_odd.
    #[arg(long = "op", value_name = "NAME")]
    ops: Vec<String>,
    /// Also run every operation with the kernel search of this width (AM_BEAM's when not
    /// given; 0: none) and print its counts beside the heuristics', with the search's time.
    #[arg(long, value_name = "N")]
    beam: Option<u32>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Options of `am bench dispatch`.
#[derive(Args, Debug)]
pub struct DispatchArgs {
    /// Device spec.
    #[arg(long, default_value = "mock:navi31")]
    device: String,
    /// Launches per measurement (whole batches of 500).
    #[arg(long, default_value_t = 5000)]
    launches: usize,
    /// Submit-to-fence samples.
    #[arg(long, default_value_t = 500)]
    samples: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Options of `am bench graph`.
#[derive(Args, Debug)]
pub struct GraphArgs {
    /// Device spec.
    #[arg(long, default_value = "mock:navi31")]
    device: String,
    /// Launches in the graph.
    #[arg(long, default_value_t = 100)]
    kernels: usize,
    /// Replays timed.
    #[arg(long, default_value_t = 50)]
    replays: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Options of `am bench copy`.
#[derive(Args, Debug)]
pub struct CopyArgs {
    /// Device spec.
    #[arg(long, default_value = "mock:navi31")]
    device: String,
    /// MiB per copy.
    #[arg(long, default_value_t = 64)]
    mib: u64,
    /// Timed runs of each copy (the best counts).
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Options of `am bench tensor`.
#[derive(Args, Debug)]
pub struct TensorBenchArgs {
    /// Device to time the step on.
    #[arg(long, default_value = "mock:navi31")]
    device: String,
    /// Timed steps of each kind (after two untimed ones), for the MLP, the cnn and the gpt.
    #[arg(long, default_value_t = 20)]
    steps: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
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
    /// Mock profile to boot (repeatable); navi31, navi48, navi44, mi300x and mi350x-vf by
    /// default.
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
    /// ISA to run (repeatable): gfx1100, gfx942, gfx950, gfx1200, gfx1201; the first three by
    /// default.
    #[arg(long = "isa", value_name = "ISA")]
    isas: Vec<String>,
    /// Kernel of the suite to run (repeatable): copy, saxpy, histogram, reduce, fmath, int64,
    /// matmul; all of them by default.
    #[arg(long = "kernel", value_name = "NAME")]
    kernels: Vec<String>,
    /// Threads of the all-cores runs and of their anchor, as many independent one-core runs
    /// at once (default: the cores this process may use); 0 skips both (to profile the
    /// one-core path alone).
    #[arg(long)]
    threads: Option<usize>,
    /// Multiplies the workgroups of every dispatch (the matrix product's side grows by its
    /// square root); the default makes each dispatch 0.3 to 3 million wave-instructions.
    #[arg(long, default_value_t = 16)]
    scale: u32,
    /// Seconds a measured round lasts at least: a round repeats the dispatch (as many times
    /// as the warm-up dispatch says) so short dispatches are timed precisely.
    #[arg(long, default_value_t = 0.3, value_name = "S", value_parser = round_secs)]
    round: f64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// `--round`: a finite number of seconds, up to a minute (NaN made every round zero
/// dispatches long).
fn round_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 60.0 => Ok(v),
        _ => Err(format!("`{s}`: give seconds above 0 and at most 60")),
    }
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
        BenchCommand::Dispatch(a) => {
            crate::bench_runtime::dispatch(&a.device, a.launches, a.samples, a.json)
        }
        BenchCommand::Graph(a) => {
            crate::bench_runtime::graph(&a.device, a.kernels, a.replays, a.json)
        }
        BenchCommand::Copy(a) => crate::bench_runtime::copy(&a.device, a.mib, a.repeat, a.json),
        BenchCommand::Tensor(a) => crate::bench_tensor::run(&a.device, a.steps, a.json),
        BenchCommand::Kernels(a) => crate::bench_kernels::run(crate::bench_kernels::Options {
            isa: a.isa,
            json: a.json,
            quick: a.quick,
            ops: a.ops,
            tinygrad: a.tinygrad,
            am: a.am,
            beam: a.beam,
        }),
        BenchCommand::Allreduce(a) => {
            crate::bench_allreduce::run(&a.device, a.mib, &a.algo, a.repeat, a.json)
        }
    }
}

/// The benchmark suite's kernels.
const BENCH_CL: &str = include_str!("bench_emu.cl");

fn compile(source: &str, isa: Isa) -> anyhow::Result<Vec<u8>> {
    let dir = std::env::temp_dir().join(format!("am-bench-{}-{}", std::process::id(), isa.name()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let result = (|| {
        let (cl, obj, hsaco) = (dir.join("k.cl"), dir.join("k.o"), dir.join("k.hsaco"));
        std::fs::write(&cl, source)?;
        let clang = Command::new("clang-22")
            .args(["-x", "cl", "-cl-std=CL2.0", "--target=amdgcn-amd-amdhsa"])
            .arg(format!("-mcpu={}", isa.name()))
            .args(["-nogpulib", "-O3", "-c"])
            .arg(&cl)
            .arg("-o")
            .arg(&obj)
            .output()
            .context("running clang-22 (scripts/setup installs it)")?;
        if !clang.status.success() {
            bail!(
                "clang-22 failed to compile the benchmark kernels for {} ({}):\n{}",
                isa.name(),
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
            bail!("ld.lld-22 failed to link the benchmark kernels ({lld})");
        }
        Ok(std::fs::read(&hsaco)?)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// A kernel argument.
enum Arg {
    Buf(usize),
    Bytes(Vec<u8>),
    U32(u32),
    F32(f32),
}

/// One benchmark: a kernel of the suite, its workgroups and its arguments.
struct Case {
    kernel: &'static str,
    what: &'static str,
    groups: u32,
    args: Vec<Arg>,
}

impl Case {
    /// The case's arguments laid out through `alloc` (which copies bytes into the memory and
    /// returns their address): its dispatch, and each buffer argument's address and length.
    fn lay_out(
        &self,
        kernarg_size: usize,
        alloc: &mut dyn FnMut(&[u8]) -> u64,
    ) -> (Launch, Vec<(u64, usize)>) {
        let mut buffers = vec![];
        let ka = kernarg(&self.args, kernarg_size, &mut |b| {
            let at = alloc(b);
            buffers.push((at, b.len()));
            at
        });
        let ka = alloc(&ka);
        let launch = Launch::new([256 * self.groups, 1, 1], [256, 1, 1], ka);
        (launch, buffers)
    }
}

/// The suite at `scale` (workgroups of 256 work-items: `scale` times a base count, the matrix
/// side `64 * sqrt(scale)`). Inputs are deterministic pseudo-random data.
fn suite(scale: u32) -> Vec<Case> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move || {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let mut words = |n: usize, f: &mut dyn FnMut(u64) -> u32| -> Vec<u8> {
        (0..n).flat_map(|_| f(rnd()).to_le_bytes()).collect()
    };
    // Base counts are for scale 16, the default.
    let g = |n: u32| (n * scale.max(1) / 16).max(1);
    let items = |groups: u32| groups as usize * 256;
    let matmul_n = 64 * (scale.max(1) as f64).sqrt().max(1.0) as u32;
    vec![
        Case {
            kernel: "copy",
            what: "memory-bound copy, 16 bytes per work-item",
            groups: g(8192),
            args: vec![
                Arg::Bytes(words(4 * items(g(8192)), &mut |r| r as u32)),
                Arg::Buf(16 * items(g(8192))),
            ],
        },
        Case {
            kernel: "saxpy",
            what: "memory-bound y = a * x + y",
            groups: g(8192),
            args: vec![
                Arg::F32(1.5),
                Arg::Bytes(words(items(g(8192)), &mut |r| {
                    ((r >> 40) as f32 / 1e7).to_bits()
                })),
                Arg::Bytes(words(items(g(8192)), &mut |r| {
                    ((r >> 40) as f32 / 1e6).to_bits()
                })),
            ],
        },
        Case {
            kernel: "histogram",
            what: "global atomics, 64 bins",
            groups: g(4096),
            args: vec![
                Arg::Bytes(words(items(g(4096)), &mut |r| r as u32)),
                Arg::Buf(4 * 64),
            ],
        },
        Case {
            kernel: "reduce",
            what: "LDS tree reduction with barriers",
            groups: g(1024),
            args: vec![
                Arg::Bytes(words(items(g(1024)), &mut |r| {
                    ((r >> 40) as f32 / 1e7).to_bits()
                })),
                Arg::Buf(4 * g(1024) as usize),
            ],
        },
        Case {
            kernel: "fmath",
            what: "float math: sqrt, exp and FMAs in a loop",
            groups: g(256),
            args: vec![Arg::Bytes(words(items(g(256)), &mut |r| {
                ((r >> 40) as f32 / 1e6).to_bits()
            }))],
        },
        Case {
            kernel: "int64",
            what: "64-bit integer multiplies, shifts and xors",
            groups: g(512),
            args: vec![Arg::Bytes(
                (0..items(g(512)))
                    .flat_map(|k| (k as u64 * 7919).to_le_bytes())
                    .collect(),
            )],
        },
        Case {
            kernel: "matmul",
            what: "16x16 LDS-tiled matrix product",
            groups: (matmul_n / 16) * (matmul_n / 16),
            args: vec![
                Arg::Bytes(words((matmul_n * matmul_n) as usize, &mut |r| {
                    ((r >> 40) as f32 / 1e7).to_bits()
                })),
                Arg::Bytes(words((matmul_n * matmul_n) as usize, &mut |r| {
                    ((r >> 40) as f32 / 1e7).to_bits()
                })),
                Arg::Buf(4 * (matmul_n * matmul_n) as usize),
                Arg::U32(matmul_n),
            ],
        },
    ]
}

/// Lays out the kernel arguments (buffers allocated by `alloc`) with natural alignment, padded
/// past `kernarg_size` because compiled kernels load their arguments in 32-byte blocks.
fn kernarg(args: &[Arg], size: usize, alloc: &mut dyn FnMut(&[u8]) -> u64) -> Vec<u8> {
    let mut k: Vec<u8> = Vec::new();
    let align = |k: &mut Vec<u8>, a: usize| {
        while !k.len().is_multiple_of(a) {
            k.push(0);
        }
    };
    for a in args {
        match a {
            Arg::Buf(n) => {
                let p = alloc(&vec![0u8; *n]);
                align(&mut k, 8);
                k.extend(p.to_le_bytes());
            }
            Arg::Bytes(b) => {
                let p = alloc(b);
                align(&mut k, 8);
                k.extend(p.to_le_bytes());
            }
            Arg::U32(v) => {
                align(&mut k, 4);
                k.extend(v.to_le_bytes());
            }
            Arg::F32(v) => {
                align(&mut k, 4);
                k.extend(v.to_bits().to_le_bytes());
            }
        }
    }
    k.resize(k.len().max(size) + 64, 0);
    k
}

/// What one benchmark measured.
struct Measured {
    instructions: u64,
    /// FNV-1a of every buffer argument after the first dispatch (one core).
    output_hash: u64,
    reps: u32,
    one_core_cpu: Option<f64>,
    one_core_wall: f64,
    /// `None` when the all-cores runs are skipped (`--threads 0`).
    all_cores_wall: Option<f64>,
    /// The machine's ceiling for `all_cores_wall` (see [`independent`]); `None` as it.
    independent_wall: Option<f64>,
}

/// Rounds of each figure; the best counts.
const ROUNDS: usize = 3;

/// One kernel's one-core and all-cores setups, warmed up, with the best round times so far.
struct Bench<'a> {
    prog: &'a Program,
    k: &'a am_emu::Kernel,
    case: &'a Case,
    mem: HostMemory,
    launch: Launch,
    shared: Option<(SharedHostMemory, Launch)>,
    /// The independent runs' memories, one per thread (none with `--threads 0`).
    copies: Vec<(HostMemory, Launch)>,
    m: Measured,
}

impl<'a> Bench<'a> {
    /// Lays out the kernel's buffers and runs the warm-up dispatch, which gives the
    /// wave-instructions, the output hash and how many dispatches make a round of at least
    /// `round` seconds; then lays out and warms up the all-cores memory and the independent
    /// runs' memories, each of whose dispatches must run as many wave-instructions.
    fn new(
        prog: &'a Program,
        k: &'a am_emu::Kernel,
        case: &'a Case,
        threads: usize,
        round: f64,
    ) -> anyhow::Result<Bench<'a>> {
        let size = k.descriptor.kernarg_size as usize;
        let mut mem = HostMemory::new();
        let (launch, buffers) = case.lay_out(size, &mut |b| mem.alloc_bytes(b));
        let t = Instant::now();
        let instructions = am_emu::dispatch(prog, k, &launch, &mut mem)?.instructions;
        let reps = (round / t.elapsed().as_secs_f64().max(1e-6))
            .ceil()
            .clamp(1.0, 100.0) as u32;
        // The buffers after the first dispatch, hashed so that two builds can be compared.
        let mut output_hash = 0xcbf2_9ce4_8422_2325u64;
        for (at, len) in buffers {
            let mut b = vec![0u8; len];
            mem.read(at, &mut b)
                .map_err(|f| anyhow::anyhow!("{}: reading its output: {f}", case.kernel))?;
            for x in b {
                output_hash = (output_hash ^ x as u64).wrapping_mul(0x0100_0000_01b3);
            }
        }
        let shared = if threads == 0 {
            None
        } else {
            let mut shared = SharedHostMemory::new();
            let (launch, _) = case.lay_out(size, &mut |b| shared.alloc_bytes(b));
            am_emu::dispatch_parallel(prog, k, &launch, &shared, threads)?;
            Some((shared, launch))
        };
        let mut copies = vec![];
        for _ in 0..threads {
            let mut mem = HostMemory::new();
            let (launch, _) = case.lay_out(size, &mut |b| mem.alloc_bytes(b));
            let n = am_emu::dispatch(prog, k, &launch, &mut mem)?.instructions;
            if n != instructions {
                bail!(
                    "{}: {n} wave-instructions in an independent run but {instructions} in the first",
                    case.kernel
                );
            }
            copies.push((mem, launch));
        }
        let some = |x: f64| (threads > 0).then_some(x);
        Ok(Bench {
            prog,
            k,
            case,
            mem,
            launch,
            shared,
            copies,
            m: Measured {
                instructions,
                output_hash,
                reps,
                one_core_cpu: None,
                one_core_wall: f64::INFINITY,
                all_cores_wall: some(f64::INFINITY),
                independent_wall: some(f64::INFINITY),
            },
        })
    }

    /// One round of each figure: `reps` dispatches on one core (this thread's CPU time, the
    /// one-core figure on a shared machine, and wall time), on all cores, and as many
    /// independent one-core runs at once; each figure keeps its best round.
    fn round(&mut self, threads: usize) -> anyhow::Result<()> {
        let (prog, k, reps) = (self.prog, self.k, self.m.reps);
        let (t, c) = (Instant::now(), thread_cpu_ns());
        for _ in 0..reps {
            am_emu::dispatch(prog, k, &self.launch, &mut self.mem)?;
        }
        let m = &mut self.m;
        m.one_core_wall = m.one_core_wall.min(t.elapsed().as_secs_f64() / reps as f64);
        // schedstat can read 0 for runs shorter than its tick: no figure rather than 0.
        if let (Some(a), Some(b)) = (c, thread_cpu_ns())
            && b > a
        {
            let cpu = (b - a) as f64 / 1e9 / reps as f64;
            m.one_core_cpu = Some(m.one_core_cpu.map_or(cpu, |x| x.min(cpu)));
        }
        if let Some((shared, launch)) = &self.shared {
            let all = all_cores(
                prog,
                k,
                self.case,
                shared,
                launch,
                threads,
                reps,
                m.instructions,
            )?;
            let ind = independent(prog, k, &mut self.copies, reps)?;
            m.all_cores_wall = m.all_cores_wall.map(|x| x.min(all));
            m.independent_wall = m.independent_wall.map(|x| x.min(ind));
        }
        Ok(())
    }
}

/// The all-cores figure: one round of `reps` dispatches over `threads` threads on a
/// [`SharedHostMemory`], wall clock per dispatch; each must run `instructions`
/// wave-instructions.
#[allow(clippy::too_many_arguments)]
fn all_cores(
    prog: &Program,
    k: &am_emu::Kernel,
    case: &Case,
    shared: &SharedHostMemory,
    launch: &Launch,
    threads: usize,
    reps: u32,
    instructions: u64,
) -> anyhow::Result<f64> {
    let t = Instant::now();
    for _ in 0..reps {
        let stats = am_emu::dispatch_parallel(prog, k, launch, shared, threads)?;
        if stats.instructions != instructions {
            bail!(
                "{}: {} wave-instructions on {threads} threads but {instructions} on one",
                case.kernel,
                stats.instructions
            );
        }
    }
    Ok(t.elapsed().as_secs_f64() / reps as f64)
}

/// The anchor of the all-cores figure: what this machine gives as many copies of the
/// one-core run at once as there are `copies` (warmed-up memories, one per thread, each with
/// its own buffers: nothing shared, no atomics between them), so that cores, caches and
/// memory bandwidth limit it but nothing the parallel dispatch does. The threads start
/// together and each runs one round of `reps` dispatches; the slowest thread's time counts.
/// Returns the wall seconds per dispatch of the threads together (comparable with
/// [`all_cores`]).
fn independent(
    prog: &Program,
    k: &am_emu::Kernel,
    copies: &mut [(HostMemory, Launch)],
    reps: u32,
) -> anyhow::Result<f64> {
    let threads = copies.len();
    let start = std::sync::Barrier::new(threads);
    let times: Vec<anyhow::Result<f64>> = std::thread::scope(|s| {
        let workers: Vec<_> = copies
            .iter_mut()
            .map(|(mem, launch)| {
                let start = &start;
                s.spawn(move || -> anyhow::Result<f64> {
                    start.wait();
                    let t = Instant::now();
                    for _ in 0..reps {
                        am_emu::dispatch(prog, k, launch, mem)?;
                    }
                    Ok(t.elapsed().as_secs_f64())
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("an independent run panicked")))
            })
            .collect()
    });
    let mut slowest = 0f64;
    for t in times {
        slowest = slowest.max(t?);
    }
    Ok(slowest / reps as f64 / threads as f64)
}

fn geomean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp())
}

fn emu(args: EmuArgs) -> anyhow::Result<()> {
    let isas: Vec<Isa> = if args.isas.is_empty() {
        vec![Isa::Gfx1100, Isa::Gfx942, Isa::Gfx950]
    } else {
        args.isas
            .iter()
            .map(|n| n.parse::<Isa>())
            .collect::<Result<_, _>>()?
    };
    // Names checked on the smallest suite, before the asked-for scale's inputs are built.
    let known: Vec<&str> = suite(1).iter().map(|c| c.kernel).collect();
    if let Some(k) = args.kernels.iter().find(|k| !known.contains(&k.as_str())) {
        bail!(
            "no kernel of the suite is named {k:?} (the suite: {})",
            known.join(", ")
        );
    }
    let cases: Vec<Case> = suite(args.scale)
        .into_iter()
        .filter(|c| args.kernels.is_empty() || args.kernels.iter().any(|k| k == c.kernel))
        .collect();
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let mut report = vec![];
    for &isa in &isas {
        let bytes = compile(BENCH_CL, isa)?;
        let co = CodeObject::parse(&bytes, "bench_emu.cl")?;
        let prog = Program::new(&co, isa)?;
        let (mut one, mut all, mut ind) = (vec![], vec![], vec![]);
        let mut rows = vec![];
        // Every kernel warmed up, then the rounds in turn over the kernels (a round of each,
        // three times), so that a slow spell of a shared machine falls on one round of
        // several kernels rather than on every round of one.
        let mut benches = vec![];
        for case in &cases {
            benches.push(Bench::new(
                &prog,
                co.kernel(case.kernel)?,
                case,
                threads,
                args.round,
            )?);
        }
        for _ in 0..ROUNDS {
            for b in &mut benches {
                b.round(threads)?;
            }
        }
        for b in &benches {
            let (m, case, k) = (&b.m, b.case, b.k);
            let n = m.instructions as f64;
            let one_core = n / m.one_core_cpu.unwrap_or(m.one_core_wall) / 1e6;
            let all_cores = m.all_cores_wall.map(|t| n / t / 1e6);
            let independent = m.independent_wall.map(|t| n / t / 1e6);
            one.push(one_core);
            all.extend(all_cores);
            ind.extend(independent);
            if !args.json {
                let all_text = match (all_cores, independent) {
                    (Some(a), Some(i)) => {
                        format!("  {threads} threads {a:7.1} M/s ({threads} independent {i:7.1})")
                    }
                    _ => String::new(),
                };
                println!(
                    "{:8} {:10} {:>11} wave-instr  one core {:7.1} M/s (wall {:6.1}){all_text}   {}",
                    isa.name(),
                    case.kernel,
                    m.instructions,
                    one_core,
                    n / m.one_core_wall / 1e6,
                    case.what
                );
            }
            rows.push(serde_json::json!({
                "kernel": case.kernel, "what": case.what, "workgroups": case.groups,
                "dispatches_per_round": m.reps,
                "wave_size": k.descriptor.wave_size(), "wave_instructions": m.instructions,
                "output_hash": format!("{:016x}", m.output_hash),
                "one_core_cpu_seconds": m.one_core_cpu, "one_core_wall_seconds": m.one_core_wall,
                "one_core_mips": one_core, "all_cores_wall_seconds": m.all_cores_wall,
                "all_cores_mips": all_cores,
                "independent_wall_seconds": m.independent_wall, "independent_mips": independent,
            }));
        }
        let (g1, ga, gi) = (geomean(&one), geomean(&all), geomean(&ind));
        if !args.json {
            let all_text = match (ga, gi) {
                (Some(a), Some(i)) => {
                    format!(", {threads} threads {a:.1} M/s ({threads} independent {i:.1})")
                }
                _ => String::new(),
            };
            println!(
                "{:8} geometric mean: one core {:.1} M wave-instructions/s{all_text}",
                isa.name(),
                g1.unwrap_or(0.0),
            );
        }
        report.push(serde_json::json!({
            "isa": isa.name(), "kernels": rows, "threads": threads,
            "geomean_one_core_mips": g1, "geomean_all_cores_mips": ga,
            "geomean_independent_mips": gi,
        }));
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "emu": report }))?
        );
    }
    Ok(())
}

/// CPU time of this thread in nanoseconds (Linux schedstat), if available.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}
