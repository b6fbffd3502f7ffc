//! `am bench dispatch|graph|copy`: the runtime's host costs and copy throughput, on a device
//! the runtime opens (the in-process mock navi31 by default).
//!
//! - **dispatch**: host CPU time (this thread's CPU clock) per launch of an empty
//!   kernel — a fresh command buffer encoded and submitted per launch, encoding alone, and a
//!   pre-encoded buffer resubmitted — in batches queued behind a busy kernel (as launches of
//!   a program running ahead of the GPU are), and the wall-clock latency from submitting an
//!   empty kernel to an idle queue to the CPU seeing its fence.
//! - **graph**: host CPU time of a graph replay per kernel it holds (rounds of replays of
//!   ten executables of the graph, the median round), with no change and with one argument
//!   of every launch changed.
//! - **copy**: SDMA copies through `CopyCommands` (VRAM → VRAM, system memory → VRAM),
//!   submission to fence, against `memcpy` of the same size.

use std::time::Instant;

use am_compiler::{Compiler, DType, KernelBuilder, Target};
use am_runtime::{Arg, ComputeCommands, CopyCommands, Device, Graph, MemKind, Program};
use anyhow::Context;
use serde::Serialize;

/// Launches per timed batch (the ring and the emulator keep up between batches).
const BATCH: usize = 500;
/// Executables of the graph replayed in one timed round.
const GRAPHS: usize = 10;

/// CPU time of this thread in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`: exact, unlike
/// schedstat, which moves only at scheduler ticks).
pub(crate) fn thread_cpu_ns() -> anyhow::Result<u64> {
    let t = cpu_time::ThreadTime::try_now().context("reading this thread's CPU clock")?;
    Ok(t.as_duration().as_nanos() as u64)
}

fn open(spec: &str) -> anyhow::Result<Device> {
    am_mock::register();
    Device::open(spec).with_context(|| format!("opening {spec}"))
}

/// A kernel that keeps one wave busy for `n` dependent steps (a multiplicative recurrence
/// the compiler cannot fold), for `dev`'s target, loaded.
fn busy_kernel(dev: &Device) -> anyhow::Result<Program> {
    let target = Target::Gpu(dev.info().target);
    let mut b = KernelBuilder::new("busy", [target.wave_size(), 1, 1]);
    let out = b.param_ptr("out", DType::U32, true);
    let n = b.param("n", DType::U32);
    let acc = b.private(DType::U32, 1);
    let zero = b.const_u32(0);
    let one = b.const_u32(1);
    b.store_elem(acc, zero, one);
    b.range(zero, n, 1, |b, i| {
        let v = b.load_elem(acc, zero);
        let m = b.const_u32(1_664_525);
        let x = b.mul(v, m);
        let y = b.add(x, i);
        b.store_elem(acc, zero, y);
    });
    let id = b.local_id(am_compiler::Dim::X);
    let v = b.load_elem(acc, zero);
    b.store_elem(out, id, v);
    let k = b.finish()?;
    let code = Compiler::with_cache(am_compiler::Cache::new(None)).compile(&k, target)?;
    Ok(dev.load(&code.bytes, "busy")?)
}

/// Keeps the compute queue busy for the time a timed batch takes: what is submitted during
/// the batch queues up behind it, as launches do when a program runs ahead of the GPU (the
/// doorbell then finds the queue awake, as hardware's always is).
struct Busy {
    prog: Program,
    out: am_runtime::Buffer,
    steps: u32,
}

impl Busy {
    fn new(dev: &Device) -> anyhow::Result<Busy> {
        Ok(Busy {
            prog: busy_kernel(dev)?,
            out: dev.alloc(4096, MemKind::Vram)?,
            steps: 200_000,
        })
    }

    fn start(&self, dev: &Device) -> anyhow::Result<()> {
        let mut c = ComputeCommands::new(dev);
        c.exec(
            &self.prog,
            &[(&self.out).into(), Arg::U32(self.steps)],
            [1, 1, 1],
            [self.prog.wave_size, 1, 1],
        )?;
        c.submit()?;
        Ok(())
    }
}

/// An empty kernel taking one `u32`, for `dev`'s target, loaded.
fn empty_kernel(dev: &Device) -> anyhow::Result<Program> {
    let target = Target::Gpu(dev.info().target);
    let mut b = KernelBuilder::new("empty", [target.wave_size(), 1, 1]);
    b.param("x", DType::U32);
    let k = b.finish()?;
    let code = Compiler::with_cache(am_compiler::Cache::new(None)).compile(&k, target)?;
    Ok(dev.load(&code.bytes, "empty")?)
}

fn build() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Everything `am bench dispatch --json` prints.
#[derive(Debug, Serialize)]
pub struct DispatchReport {
    /// `release` or `debug`.
    pub build: String,
    /// The device.
    pub device: String,
    /// Launches timed per measurement.
    pub launches: usize,
    /// Host CPU ns per launch: a command buffer built, encoded and submitted per launch.
    pub encode_submit_ns: f64,
    /// Host CPU ns per launch: encoding only (into one command buffer).
    pub encode_ns: f64,
    /// Host CPU ns per submission of a pre-encoded one-launch command buffer.
    pub submit_ns: f64,
    /// Empty kernel, submit to the CPU seeing its fence: median µs (wall clock).
    pub latency_us_median: f64,
    /// 99th percentile, µs.
    pub latency_us_p99: f64,
    /// tinygrad's HCQ per dispatch on MI300X (its issue's anchor), µs.
    pub anchor_tinygrad_us: f64,
    /// HIP launch plus synchronisation, µs (anchor).
    pub anchor_hip_us: f64,
}

/// `am bench dispatch`.
pub fn dispatch(spec: &str, launches: usize, samples: usize, json: bool) -> anyhow::Result<()> {
    let dev = open(spec)?;
    let prog = empty_kernel(&dev)?;
    let block = [prog.wave_size, 1, 1];
    let launches = launches.max(BATCH);
    // Warm up: page-ins, the kernel-argument ring, the decoded program in the mock.
    for i in 0..BATCH {
        let mut c = ComputeCommands::new(&dev);
        c.exec(&prog, &[Arg::U32(i as u32)], [1, 1, 1], block)?;
        c.submit()?;
    }
    dev.synchronize()?;
    let busy = Busy::new(&dev)?;

    let mut cpu = 0u64;
    for b in 0..launches / BATCH {
        busy.start(&dev)?;
        let t = thread_cpu_ns()?;
        for i in 0..BATCH {
            let mut c = ComputeCommands::new(&dev);
            c.exec(&prog, &[Arg::U32((b * BATCH + i) as u32)], [1, 1, 1], block)?;
            c.submit()?;
        }
        cpu += thread_cpu_ns()? - t;
        dev.synchronize()?;
    }
    let n = (launches / BATCH * BATCH) as f64;
    let encode_submit_ns = cpu as f64 / n;

    let mut cpu = 0u64;
    for _ in 0..launches / BATCH {
        let mut c = ComputeCommands::new(&dev);
        let t = thread_cpu_ns()?;
        for i in 0..BATCH {
            c.exec(&prog, &[Arg::U32(i as u32)], [1, 1, 1], block)?;
        }
        cpu += thread_cpu_ns()? - t;
        drop(c);
    }
    let encode_ns = cpu as f64 / n;

    let mut c = ComputeCommands::new(&dev);
    c.exec(&prog, &[Arg::U32(7)], [1, 1, 1], block)?;
    let mut cpu = 0u64;
    for _ in 0..launches / BATCH {
        busy.start(&dev)?;
        let t = thread_cpu_ns()?;
        for _ in 0..BATCH {
            c.submit()?;
        }
        cpu += thread_cpu_ns()? - t;
        dev.synchronize()?;
    }
    let submit_ns = cpu as f64 / n;

    let mut lat = Vec::with_capacity(samples);
    for _ in 0..samples.max(1) {
        let t = Instant::now();
        c.submit()?.wait()?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    lat.sort_by(f64::total_cmp);
    let r = DispatchReport {
        build: build().into(),
        device: dev.name().into(),
        launches: n as usize,
        encode_submit_ns,
        encode_ns,
        submit_ns,
        latency_us_median: percentile(&lat, 0.5),
        latency_us_p99: percentile(&lat, 0.99),
        anchor_tinygrad_us: 20.0,
        anchor_hip_us: 17.0,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "am bench dispatch on {} ({} build), {} launches of an empty kernel",
            r.device, r.build, r.launches
        );
        println!(
            "  encode + submit, one command buffer per launch: {:8.0} ns host CPU per launch",
            r.encode_submit_ns
        );
        println!(
            "  encode only:                                   {:8.0} ns",
            r.encode_ns
        );
        println!(
            "  resubmit a pre-encoded buffer:                 {:8.0} ns",
            r.submit_ns
        );
        println!(
            "  submit → fence seen (wall):  median {:.1} µs, p99 {:.1} µs",
            r.latency_us_median, r.latency_us_p99
        );
        println!(
            "  anchors: tinygrad HCQ ≈ {} µs per dispatch (MI300X), HIP launch + sync ≈ {} µs",
            r.anchor_tinygrad_us, r.anchor_hip_us
        );
    }
    Ok(())
}

/// Everything `am bench graph --json` prints.
#[derive(Debug, Serialize)]
pub struct GraphReport {
    /// `release` or `debug`.
    pub build: String,
    /// The device.
    pub device: String,
    /// Launches in the graph.
    pub kernels: usize,
    /// Replays timed.
    pub replays: usize,
    /// Host CPU ns per kernel of a replay with nothing changed (median replay / kernels).
    pub replay_ns_per_kernel: f64,
    /// Host CPU ns per kernel of a replay with one argument of every launch changed.
    pub replay_patched_ns_per_kernel: f64,
    /// The same launches as one command buffer, encoded and submitted: host CPU ns per kernel.
    pub commands_ns_per_kernel: f64,
}

/// `am bench graph`.
pub fn graph(spec: &str, kernels: usize, replays: usize, json: bool) -> anyhow::Result<()> {
    let dev = open(spec)?;
    let prog = empty_kernel(&dev)?;
    let block = [prog.wave_size, 1, 1];
    let kernels = kernels.max(1);
    let q = dev.compute_queue();
    // Several executables of the same graph, replayed one after the other in a round: a
    // replay waits for the previous replay of its own executable only, so a round's host
    // time is launches alone (and the thread clock is read twice per round, not per replay).
    let mut execs = Vec::with_capacity(GRAPHS);
    let mut nodes = Vec::with_capacity(kernels);
    for _ in 0..GRAPHS {
        let mut g = Graph::new(&dev);
        nodes.clear();
        for i in 0..kernels {
            nodes.push(g.exec(&q, &prog, &[Arg::U32(i as u32)], [1, 1, 1], block)?);
        }
        let mut exec = g.build()?;
        exec.launch()?;
        execs.push(exec);
    }
    dev.synchronize()?;
    let rounds = replays.max(GRAPHS).div_ceil(GRAPHS);
    let replays = rounds * GRAPHS;
    let busy = Busy::new(&dev)?;
    let (mut plain, mut patched) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        dev.synchronize()?;
        busy.start(&dev)?;
        let t = thread_cpu_ns()?;
        for exec in &mut execs {
            exec.launch()?;
        }
        plain.push((thread_cpu_ns()? - t) as f64 / GRAPHS as f64);
        dev.synchronize()?;
        busy.start(&dev)?;
        let t = thread_cpu_ns()?;
        for exec in &mut execs {
            for (i, node) in nodes.iter().enumerate() {
                exec.set_arg(*node, 0, &Arg::U32((r * kernels + i) as u32))?;
            }
            exec.launch()?;
        }
        patched.push((thread_cpu_ns()? - t) as f64 / GRAPHS as f64);
    }
    dev.synchronize()?;
    let mut cmd = Vec::new();
    for _ in 0..rounds {
        busy.start(&dev)?;
        let t = thread_cpu_ns()?;
        for _ in 0..GRAPHS {
            let mut c = ComputeCommands::new(&dev);
            for i in 0..kernels {
                c.exec(&prog, &[Arg::U32(i as u32)], [1, 1, 1], block)?;
            }
            c.submit()?;
        }
        cmd.push((thread_cpu_ns()? - t) as f64 / GRAPHS as f64);
        dev.synchronize()?;
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        percentile(v, 0.5)
    };
    let k = kernels as f64;
    let r = GraphReport {
        build: build().into(),
        device: dev.name().into(),
        kernels,
        replays,
        replay_ns_per_kernel: median(&mut plain) / k,
        replay_patched_ns_per_kernel: median(&mut patched) / k,
        commands_ns_per_kernel: median(&mut cmd) / k,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "am bench graph on {} ({} build): {} empty kernels, {} replays",
            r.device, r.build, r.kernels, r.replays
        );
        println!(
            "  replay, nothing changed:            {:8.1} ns host CPU per kernel",
            r.replay_ns_per_kernel
        );
        println!(
            "  replay, one argument per kernel:    {:8.1} ns",
            r.replay_patched_ns_per_kernel
        );
        println!(
            "  the same as a command buffer:       {:8.1} ns (encode + submit)",
            r.commands_ns_per_kernel
        );
    }
    Ok(())
}

/// Everything `am bench copy --json` prints.
#[derive(Debug, Serialize)]
pub struct CopyReport {
    /// `release` or `debug`.
    pub build: String,
    /// The device.
    pub device: String,
    /// Bytes per copy.
    pub bytes: u64,
    /// `memcpy` between two host buffers, GB/s (best run).
    pub memcpy_gbps: f64,
    /// VRAM → VRAM through the copy queue, GB/s (best run).
    pub vram_to_vram_gbps: f64,
    /// System memory → VRAM, GB/s (best run).
    pub sys_to_vram_gbps: f64,
}

/// `am bench copy`.
pub fn copy(spec: &str, mib: u64, repeat: usize, json: bool) -> anyhow::Result<()> {
    let dev = open(spec)?;
    let bytes = mib.max(1) << 20;
    let a = dev.alloc(bytes, MemKind::Vram)?;
    let b = dev.alloc(bytes, MemKind::Vram)?;
    let s = dev.alloc(bytes, MemKind::System { uncached: false })?;
    let fill: Vec<u8> = (0..bytes).map(|i| ((i * 131) >> 3) as u8).collect();
    dev.write(&s, 0, &fill)?;
    dev.write(&a, 0, &fill)?;
    let gbps = |t: f64| bytes as f64 / t / 1e9;
    let time = |dst: &am_runtime::Buffer, src: &am_runtime::Buffer| -> anyhow::Result<f64> {
        let mut c = CopyCommands::new(&dev);
        c.copy(dst, src)?;
        c.submit()?.wait()?;
        let mut best = f64::MAX;
        for _ in 0..repeat.max(1) {
            let t = Instant::now();
            c.submit()?.wait()?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        Ok(best)
    };
    let vv = gbps(time(&b, &a)?);
    let sv = gbps(time(&b, &s)?);
    let mut back = vec![0u8; 4096];
    dev.read(&b, bytes - 4096, &mut back)?;
    anyhow::ensure!(
        back[..] == fill[(bytes - 4096) as usize..],
        "the copy's last page differs from its source"
    );
    let src = fill.clone();
    let mut dst = vec![1u8; bytes as usize];
    dst.copy_from_slice(&src);
    let best = best_memcpy(&src, &mut dst, repeat);
    let r = CopyReport {
        build: build().into(),
        device: dev.name().into(),
        bytes,
        memcpy_gbps: gbps(best),
        vram_to_vram_gbps: vv,
        sys_to_vram_gbps: sv,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "am bench copy on {} ({} build): {} MiB per copy, best of {}",
            r.device,
            r.build,
            mib,
            repeat.max(1)
        );
        println!("  memcpy (host):          {:6.2} GB/s", r.memcpy_gbps);
        println!(
            "  VRAM → VRAM (SDMA):     {:6.2} GB/s ({:.0} % of memcpy)",
            r.vram_to_vram_gbps,
            100.0 * r.vram_to_vram_gbps / r.memcpy_gbps
        );
        println!(
            "  system → VRAM (SDMA):   {:6.2} GB/s ({:.0} % of memcpy)",
            r.sys_to_vram_gbps,
            100.0 * r.sys_to_vram_gbps / r.memcpy_gbps
        );
    }
    Ok(())
}

/// The best time of `repeat` (at least one) host copies of `src` into `dst`, in seconds: the
/// memcpy anchor of the copy and all-reduce benchmarks.
pub(crate) fn best_memcpy(src: &[u8], dst: &mut [u8], repeat: usize) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        dst.copy_from_slice(std::hint::black_box(src));
        std::hint::black_box(&*dst);
        best = best.min(t.elapsed().as_secs_f64());
    }
    best
}
