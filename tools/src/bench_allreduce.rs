//! `am bench allreduce`: the tensor layer's all-reduce (sum of f32) over a list of devices,
//! for sizes from 1 KiB up, with the algorithm and bus bandwidth nccl-tests reports
//! (`algbw = bytes / time`, `busbw = algbw × 2 (n − 1) / n`: what each link carries in a
//! ring), and the link each pair of neighbours takes with what that link moves on real
//! hardware. Two host `memcpy` anchors in the same run, labelled apart: the bytes the
//! all-reduce moves over its links in all, `2 (n − 1)` times the buffer (on the mock every
//! link is a memcpy on the host's shared cores: this is memcpy moving the same bytes), and
//! the buffer's bytes once. Beside each wall time, the CPU time it took (the whole
//! process's for an all-reduce: the mock's queue threads are in it; the copying thread's
//! for memcpy), which other work on the machine does not inflate as it inflates wall times.

use std::time::Instant;

use am_runtime::Link;
use am_tensor::shard::{Algorithm, ReduceOp};
use am_tensor::{Device, Sharded, Tensor};
use anyhow::Context;
use serde_json::json;

/// The sizes measured: 1 KiB, then ×4 up to `max_bytes`.
fn sizes(max_bytes: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut s = 1usize << 10;
    while s <= max_bytes {
        v.push(s);
        s *= 4;
    }
    if v.last() != Some(&max_bytes) && max_bytes >= 1 << 10 {
        v.push(max_bytes);
    }
    v
}

/// The best time of `repeat` host copies of `bytes` bytes, in seconds.
fn memcpy_time(bytes: usize, repeat: usize) -> f64 {
    let src = vec![0x5au8; bytes];
    let mut dst = vec![0u8; bytes];
    crate::bench_runtime::best_memcpy(&src, &mut dst, repeat)
}

/// The best time of `repeat` runs of `times` host copies of `bytes` bytes one after another
/// (each into its own destination, so none is served from the cache the one before left
/// when the buffer is larger than it), and the least CPU time of this thread one run took,
/// in seconds.
fn memcpy_times(bytes: usize, times: usize, repeat: usize) -> anyhow::Result<(f64, f64)> {
    let src = vec![0x5au8; bytes];
    let mut dst = vec![0u8; bytes * times];
    let (mut best, mut cpu) = (f64::MAX, f64::MAX);
    for _ in 0..repeat.max(1) {
        let c = crate::bench_runtime::thread_cpu_ns()?;
        let t = Instant::now();
        for d in dst.chunks_exact_mut(bytes.max(1)) {
            d.copy_from_slice(std::hint::black_box(&src));
        }
        std::hint::black_box(&dst);
        best = best.min(t.elapsed().as_secs_f64());
        cpu = cpu.min((crate::bench_runtime::thread_cpu_ns()? - c) as f64 * 1e-9);
    }
    Ok((best, cpu))
}

/// CPU time of the whole process (every thread: the mock's queues run on threads of their
/// own), in seconds.
fn process_cpu() -> anyhow::Result<f64> {
    let t = cpu_time::ProcessTime::try_now().context("reading the process's CPU clock")?;
    Ok(t.as_duration().as_secs_f64())
}

/// One size's figures.
struct Row {
    bytes: usize,
    seconds: f64,
    memcpy_seconds: f64,
    /// memcpy of what the ring's links carry in all: `2 (n − 1)` × `bytes`.
    link_memcpy_seconds: f64,
    /// The least CPU time (all threads) one timed all-reduce took.
    cpu_seconds: f64,
    /// The least CPU time one run of the link memcpy took.
    link_memcpy_cpu_seconds: f64,
}

/// Runs the benchmark on the devices `spec` lists (`am demo`'s `--device` syntax).
pub fn run(
    spec: &str,
    mib: usize,
    algorithm: &str,
    repeat: usize,
    json: bool,
) -> anyhow::Result<()> {
    let algo = match algorithm {
        "auto" => Algorithm::Auto,
        "ring" => Algorithm::Ring,
        "tree" => Algorithm::Tree,
        "direct" => Algorithm::Direct,
        other => anyhow::bail!("`{other}`: the algorithms are auto, direct, ring and tree"),
    };
    let names = crate::device::device_list(spec);
    anyhow::ensure!(
        names.len() >= 2,
        "`{spec}` names {} device(s): an all-reduce needs at least two",
        names.len()
    );
    am_mock::register();
    let devs = names
        .iter()
        .map(|n| Device::open(n).with_context(|| format!("opening {n}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let n = devs.len();
    let links = (0..n)
        .map(|i| {
            let (a, b) = (&devs[i], &devs[(i + 1) % n]);
            match (a.runtime(), b.runtime()) {
                (Some(x), Some(y)) => Ok(y.link_with_reason(x)?),
                _ => Ok((Link::Host, "not both am devices".to_string())),
            }
        })
        .collect::<anyhow::Result<Vec<(Link, String)>>>()?;
    let (links, why): (Vec<Link>, Vec<String>) = links.into_iter().unzip();
    let slowest = links
        .iter()
        .filter_map(|l| l.paper_gbps())
        .fold(f64::INFINITY, f64::min);
    let bus = 2.0 * (n as f64 - 1.0) / n as f64;
    let mut rows = Vec::new();
    for bytes in sizes(mib << 20) {
        let numel = bytes / 4;
        let parts = devs
            .iter()
            .enumerate()
            .map(|(i, d)| Tensor::from_slice(&vec![(i + 1) as f32; numel], &[numel], d))
            .collect::<am_tensor::Result<Vec<_>>>()?;
        let input = Sharded::from_parts(parts, None)?;
        input.realize()?;
        // The first run compiles the kernels; the best of the others counts.
        let (mut best, mut cpu) = (f64::MAX, f64::MAX);
        for k in 0..=repeat.max(1) {
            let c = process_cpu()?;
            let t = Instant::now();
            let out = input.all_reduce_with(ReduceOp::Sum, algo)?;
            out.realize()?;
            let s = t.elapsed().as_secs_f64();
            let c = process_cpu()? - c;
            if k > 0 {
                best = best.min(s);
                cpu = cpu.min(c);
            }
            if k == 0 {
                let want = (n * (n + 1) / 2) as f32;
                for p in out.parts() {
                    let got = p.narrow(0, numel - 1, 1)?.item()?;
                    anyhow::ensure!(
                        got == want,
                        "{}: the last element is {got}, not {want}",
                        p.device()
                    );
                }
            }
        }
        let (link, link_cpu) = memcpy_times(bytes, 2 * (n - 1), repeat.max(1) + 2)?;
        rows.push(Row {
            bytes,
            seconds: best,
            memcpy_seconds: memcpy_time(bytes, repeat.max(1) + 2),
            link_memcpy_seconds: link,
            cpu_seconds: cpu,
            link_memcpy_cpu_seconds: link_cpu,
        });
    }
    let gbps = |b: usize, s: f64| b as f64 / s / 1e9;
    if json {
        let r: Vec<_> = rows
            .iter()
            .map(|r| {
                json!({
                    "bytes": r.bytes,
                    "seconds": r.seconds,
                    "algbw_gbps": gbps(r.bytes, r.seconds),
                    "busbw_gbps": gbps(r.bytes, r.seconds) * bus,
                    "memcpy_seconds": r.memcpy_seconds,
                    "memcpy_gbps": gbps(r.bytes, r.memcpy_seconds),
                    "ratio_to_memcpy": r.seconds / r.memcpy_seconds,
                    "link_bytes": 2 * (n - 1) * r.bytes,
                    "link_memcpy_seconds": r.link_memcpy_seconds,
                    "ratio_to_link_memcpy": r.seconds / r.link_memcpy_seconds,
                    "cpu_seconds": r.cpu_seconds,
                    "link_memcpy_cpu_seconds": r.link_memcpy_cpu_seconds,
                    "cpu_ratio_to_link_memcpy": r.cpu_seconds / r.link_memcpy_cpu_seconds,
                    "paper_seconds": paper_seconds(r.bytes, bus, slowest),
                })
            })
            .collect();
        let l: Vec<_> = links
            .iter()
            .enumerate()
            .map(|(i, l)| {
                json!({
                    "from": names[i], "to": names[(i + 1) % n],
                    "link": l.name(), "paper_gbps": l.paper_gbps(), "why": why[i],
                })
            })
            .collect();
        println!(
            "{}",
            json!({
                "build": if cfg!(debug_assertions) { "debug" } else { "release" },
                "devices": names, "algorithm": algorithm, "repeat": repeat,
                "links": l, "sizes": r,
                "anchors": {
                    "memcpy_seconds": "host memcpy of the buffer's bytes once",
                    "link_memcpy_seconds": "host memcpy of link_bytes = 2 (n - 1) x bytes, \
                        the bytes the all-reduce moves over its links in all: memcpy moving \
                        the same bytes",
                    "cpu_seconds": "CPU time of the whole process (all threads) in one \
                        all-reduce, the least over the timed runs; link_memcpy_cpu_seconds: \
                        of the thread copying link_bytes",
                },
            })
        );
        return Ok(());
    }
    println!(
        "all-reduce (sum, f32) over {n} devices: {}",
        names.join(", ")
    );
    for (i, l) in links.iter().enumerate() {
        let paper = l.paper_gbps().map_or("-".into(), |g| {
            format!("{g:.0} GB/s per direction on hardware")
        });
        println!(
            "  {} → {}: {} ({paper}): {}",
            names[i],
            names[(i + 1) % n],
            l,
            why[i]
        );
    }
    println!(
        "{:>10} {:>12} {:>10} {:>10} {:>12} {:>10} {:>9} {:>12} {:>9} {:>12} {:>10} {:>10}",
        "size",
        "time µs",
        "algbw GB/s",
        "busbw GB/s",
        "memcpy µs",
        "GB/s",
        "× memcpy",
        "link cpy µs",
        "× link",
        "paper µs",
        "CPU µs",
        "× link CPU"
    );
    for r in &rows {
        println!(
            "{:>10} {:>12.1} {:>10.3} {:>10.3} {:>12.1} {:>10.2} {:>9.1} {:>12.1} {:>9.1} {:>12.1} {:>10.1} {:>10.1}",
            human(r.bytes),
            r.seconds * 1e6,
            gbps(r.bytes, r.seconds),
            gbps(r.bytes, r.seconds) * bus,
            r.memcpy_seconds * 1e6,
            gbps(r.bytes, r.memcpy_seconds),
            r.seconds / r.memcpy_seconds,
            r.link_memcpy_seconds * 1e6,
            r.seconds / r.link_memcpy_seconds,
            paper_seconds(r.bytes, bus, slowest).map_or(f64::NAN, |s| s * 1e6),
            r.cpu_seconds * 1e6,
            r.cpu_seconds / r.link_memcpy_cpu_seconds,
        );
    }
    println!(
        "busbw = algbw × 2(n−1)/n; memcpy: the buffer's bytes (the anchor); link cpy: \
         2(n−1) × the buffer's bytes, what the ring's links carry in all; paper: a ring's \
         bytes per link over the slowest link's hardware speed (no latency, no reduction \
         cost); CPU: the process's CPU time in one all-reduce (all threads), × link CPU \
         against the CPU time of the link memcpy"
    );
    Ok(())
}

/// A ring's time on hardware with no latency: `2 (n − 1) / n` of the bytes over the slowest
/// link of the ring.
fn paper_seconds(bytes: usize, bus: f64, slowest_gbps: f64) -> Option<f64> {
    slowest_gbps
        .is_finite()
        .then(|| bytes as f64 * bus / (slowest_gbps * 1e9))
}

fn human(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}
