//! `am bench tensor`: the demo's training step on a device (the mock Navi31 by default):
//! host time outside GPU execution, uncaptured (every step scheduled, its kernels looked up
//! and encoded) and captured (one runtime graph replayed); kernels per step; and the same
//! step on the CPU device against numpy (when python3 has it) in the same run. Then the
//! captured steps of `am demo cnn` and `am demo gpt` on the device, with the same measures.
//! On a mock device, also the wave-instructions one captured step of each executes
//! (deterministic: the emulator's count, measured after the timings with the mock's shader
//! statistics on; `AM_NOOPT=1` gives the same steps without the kernel optimiser).

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use am_compiler::{Cache, Compiler};
use am_tensor::nn::Adam;
use am_tensor::{Device, Jit, Tensor};
use anyhow::Context;
use serde_json::json;

use crate::demo::{self, Config, DigitsModel, Mlp};
use crate::demo_cnn::Cnn;
use crate::demo_gpt::{self, Gpt, GptConfig};
use crate::digits::{self, PIXELS};

/// The demo's setup, timed.
const HIDDEN: usize = 128;
const BATCH: usize = 32;
const LR: f64 = 0.01;

/// One device's numbers.
struct Timing {
    /// Median wall time of a step.
    wall: Duration,
    /// Median host time of a step outside waiting for the device.
    host: Duration,
    /// Kernels per step.
    kernels: f64,
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// `n` batches of `BATCH` training images, each `shape`.
fn batches(dev: &Device, n: usize, shape: &[usize]) -> anyhow::Result<Vec<(Tensor, Tensor)>> {
    let (train, _) = digits::split()?;
    let per = train.len() / BATCH;
    (0..n)
        .map(|i| {
            let idx: Vec<usize> = ((i % per) * BATCH..(i % per + 1) * BATCH).collect();
            let b = train.select(&idx);
            Ok((
                Tensor::from_slice(&b.pixels, shape, dev)?,
                Tensor::from_slice(&b.labels, &[BATCH], dev)?,
            ))
        })
        .collect()
}

/// `steps` timed steps (after `warm` untimed ones), captured or not. Returns the timing and
/// the first step's (cold: compiling) host time.
fn time_steps(
    dev: &Device,
    captured: bool,
    warm: usize,
    steps: usize,
) -> anyhow::Result<(Timing, Duration)> {
    let model = Mlp::new(HIDDEN, 0, dev)?;
    let mut opt = Adam::new(model.parameters(), LR)?;
    let mut jit = Jit::new(dev);
    let data = batches(dev, warm + steps, &[BATCH, PIXELS])?;
    let (mut walls, mut hosts) = (Vec::new(), Vec::new());
    let mut first = Duration::ZERO;
    let mut k_timed = 0;
    for (i, (x, y)) in data.iter().enumerate() {
        let (t, waited, k) = (Instant::now(), dev.wait_time(), dev.kernels_launched());
        let out = if captured {
            jit.run(&[x, y], |inp| {
                demo::step(&model, &mut opt, &inp[0], &inp[1])
            })?
        } else {
            demo::step(&model, &mut opt, x, y)?
        };
        let wall = t.elapsed();
        let host = wall.saturating_sub(dev.wait_time() - waited);
        if i == 0 {
            first = host;
        }
        if i >= warm {
            walls.push(wall);
            hosts.push(host);
            k_timed += dev.kernels_launched() - k;
        }
        // Reading the loss is outside the timed step.
        out[0].item()?;
    }
    Ok((
        Timing {
            wall: median(walls),
            host: median(hosts),
            kernels: k_timed as f64 / steps.max(1) as f64,
        },
        first,
    ))
}

/// `steps` timed replays (after the first run and the capture) of the captured step
/// `step`, fed batch `i` by `batch(i)`.
fn time_captured(
    dev: &Device,
    steps: usize,
    mut batch: impl FnMut(usize) -> am_tensor::Result<(Tensor, Tensor)>,
    mut step: impl FnMut(&Tensor, &Tensor) -> am_tensor::Result<Vec<Tensor>>,
) -> anyhow::Result<Timing> {
    let mut jit = Jit::new(dev);
    let (mut walls, mut hosts) = (Vec::new(), Vec::new());
    let mut k_timed = 0;
    for i in 0..2 + steps {
        let (x, y) = batch(i)?;
        let (t, waited, k) = (Instant::now(), dev.wait_time(), dev.kernels_launched());
        let out = jit.run(&[&x, &y], |inp| step(&inp[0], &inp[1]))?;
        let wall = t.elapsed();
        if i >= 2 {
            walls.push(wall);
            hosts.push(wall.saturating_sub(dev.wait_time() - waited));
            k_timed += dev.kernels_launched() - k;
        }
        out[0].item()?;
    }
    Ok(Timing {
        wall: median(walls),
        host: median(hosts),
        kernels: k_timed as f64 / steps.max(1) as f64,
    })
}

/// `am demo cnn`'s settings at batch 32, its default.
fn cnn_config() -> Config {
    Config {
        epochs: 1,
        batch: BATCH,
        hidden: 0,
        lr: LR,
        seed: 0,
    }
}

/// `am demo cnn`'s captured step (batch 32, its default).
fn time_cnn(dev: &Device, steps: usize) -> anyhow::Result<Timing> {
    let mut model = Cnn::new(&cnn_config(), steps + 2, dev)?;
    let data = batches(dev, steps + 2, &Cnn::input_shape(BATCH))?;
    time_captured(dev, steps, |i| Ok(data[i].clone()), |x, y| model.step(x, y))
}

/// `am demo gpt`'s captured step (its default model, batch and optimizer).
fn time_gpt(dev: &Device, steps: usize) -> anyhow::Result<(Timing, GptConfig)> {
    let cfg = GptConfig::new(2, steps + 2, 0);
    let model = Gpt::new(&cfg, dev)?;
    let mut opt = demo_gpt::optimizer(&model, &cfg)?;
    let mut rng = demo_gpt::training_rng(&cfg);
    let t = time_captured(
        dev,
        steps,
        |i| demo_gpt::training_batch(&cfg, &mut rng, i, dev),
        |x, y| demo_gpt::step(&model, &mut opt, x, y),
    )?;
    Ok((t, cfg))
}

/// The mock behind `spec`, when it names one (its shader statistics count wave-instructions).
fn mock_of(spec: &str) -> Option<am_mock::MockGpu> {
    match am_driver::pci::DeviceSpec::parse(spec).ok()? {
        am_driver::pci::DeviceSpec::Mock { profile, index } => am_mock::gpu(&profile, index).ok(),
        _ => None,
    }
}

/// Wave-instructions of one captured step of the MLP, the cnn and the gpt on `gpu`'s device
/// `dev`: each model's third step (the first runs, the second is captured, the third replays),
/// counted by the mock's shader statistics, which are on only while this runs.
fn step_instructions(dev: &Device, gpu: &am_mock::MockGpu) -> anyhow::Result<[u64; 3]> {
    let third = |run: &mut dyn FnMut(usize) -> anyhow::Result<()>| -> anyhow::Result<u64> {
        run(0)?;
        run(1)?;
        let before = gpu.shader_statistics().instructions;
        run(2)?;
        Ok(gpu.shader_statistics().instructions - before)
    };
    gpu.set_shader_statistics(true);
    let counted = (|| {
        let mlp = {
            let model = Mlp::new(HIDDEN, 0, dev)?;
            let mut opt = Adam::new(model.parameters(), LR)?;
            let mut jit = Jit::new(dev);
            let data = batches(dev, 3, &[BATCH, PIXELS])?;
            third(&mut |i| {
                let (x, y) = &data[i];
                let out = jit.run(&[x, y], |inp| {
                    demo::step(&model, &mut opt, &inp[0], &inp[1])
                })?;
                out[0].item()?;
                Ok(())
            })?
        };
        let cnn = {
            let mut model = Cnn::new(&cnn_config(), 3, dev)?;
            let mut jit = Jit::new(dev);
            let data = batches(dev, 3, &Cnn::input_shape(BATCH))?;
            third(&mut |i| {
                let (x, y) = &data[i];
                let out = jit.run(&[x, y], |inp| model.step(&inp[0], &inp[1]))?;
                out[0].item()?;
                Ok(())
            })?
        };
        let gpt = {
            let cfg = GptConfig::new(2, 3, 0);
            let model = Gpt::new(&cfg, dev)?;
            let mut opt = demo_gpt::optimizer(&model, &cfg)?;
            let mut rng = demo_gpt::training_rng(&cfg);
            let mut jit = Jit::new(dev);
            third(&mut |i| {
                let (x, y) = demo_gpt::training_batch(&cfg, &mut rng, i, dev)?;
                let out = jit.run(&[&x, &y], |inp| {
                    demo_gpt::step(&model, &mut opt, &inp[0], &inp[1])
                })?;
                out[0].item()?;
                Ok(())
            })?
        };
        Ok([mlp, cnn, gpt])
    })();
    gpu.set_shader_statistics(false);
    counted
}

/// The same step in numpy, timed by python3 (median microseconds), if it has numpy.
const NUMPY_STEP: &str = r#"
import json, sys, time
import numpy as np
steps = int(sys.argv[1])
B, I, H, O = 32, 64, 128, 10
rng = np.random.default_rng(0)
x = rng.standard_normal((B, I)).astype(np.float32)
y = rng.integers(0, O, B)
k1, k2 = 1 / np.sqrt(I), 1 / np.sqrt(H)
P = [rng.uniform(-k1, k1, (H, I)).astype(np.float32), rng.uniform(-k1, k1, H).astype(np.float32),
     rng.uniform(-k2, k2, (O, H)).astype(np.float32), rng.uniform(-k2, k2, O).astype(np.float32)]
M = [np.zeros_like(p) for p in P]
V = [np.zeros_like(p) for p in P]
t = 0
rows = np.arange(B)
def step():
    global t
    pre = x @ P[0].T + P[1]
    h = np.maximum(pre, 0)
    z = h @ P[2].T + P[3]
    e = np.exp(z - z.max(1, keepdims=True))
    s = e.sum(1, keepdims=True)
    loss = -np.log(e[rows, y] / s[:, 0]).mean()
    dz = e / s
    dz[rows, y] -= 1
    dz /= B
    dh = dz @ P[2]
    dh[pre <= 0] = 0
    G = [dh.T @ x, dh.sum(0), dz.T @ h, dz.sum(0)]
    t += 1
    for p, g, m, v in zip(P, G, M, V):
        m *= 0.9; m += 0.1 * g
        v *= 0.999; v += 0.001 * g * g
        p -= 0.01 * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    return loss
for _ in range(5):
    step()
times = []
for _ in range(steps):
    t0 = time.perf_counter()
    step()
    times.append(time.perf_counter() - t0)
times.sort()
print(json.dumps({"numpy": np.__version__, "step_us": times[len(times) // 2] * 1e6}))
"#;

fn numpy(steps: usize) -> Option<(String, f64)> {
    let out = Command::new("python3")
        .args(["-c", NUMPY_STEP, &steps.to_string()])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    Some((j["numpy"].as_str()?.to_string(), j["step_us"].as_f64()?))
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// `am bench tensor`.
pub fn run(device: &str, steps: usize, json: bool) -> anyhow::Result<()> {
    am_mock::register();
    let steps = steps.max(1);
    // The host first, while nothing else of ours runs.
    let np = numpy(steps.max(20));
    let cpu = Device::cpu();
    let (cpu_plain, _) = time_steps(&cpu, false, 2, steps)?;
    let (cpu_cap, _) = time_steps(&cpu, true, 2, steps)?;
    drop(cpu);
    // A compiler caching in memory only: the first step compiles every kernel.
    let compiler = Arc::new(Compiler::with_cache(Cache::new(None)));
    let dev = Device::open_with(device, compiler).with_context(|| format!("opening {device}"))?;
    // Two untimed steps: the first compiles, the second is captured.
    let (plain, cold) = time_steps(&dev, false, 2, steps)?;
    let (cap, _) = time_steps(&dev, true, 2, steps)?;
    let cnn = time_cnn(&dev, steps)?;
    let (gpt, gcfg) = time_gpt(&dev, steps)?;
    let counted = match mock_of(device) {
        Some(gpu) => Some(step_instructions(&dev, &gpu)?),
        None => None,
    };
    let wave = |i: usize| counted.map(|c| c[i]);
    let row = |t: &Timing, i: usize| {
        json!({"wall_us": us(t.wall), "host_us": us(t.host), "kernels": t.kernels,
               "wave_instructions": wave(i)})
    };
    if json {
        let out = json!({
            "device": dev.name(),
            "model": [PIXELS, HIDDEN, 10],
            "batch": BATCH,
            "steps": steps,
            "first_step_host_us": us(cold),
            "uncaptured": {"wall_us": us(plain.wall), "host_us": us(plain.host), "kernels": plain.kernels},
            "captured": row(&cap, 0),
            "optimized": dev.optimize(),
            "cpu": {
                "uncaptured_wall_us": us(cpu_plain.wall),
                "captured_wall_us": us(cpu_cap.wall),
                "kernels": cpu_cap.kernels,
            },
            "numpy": np.as_ref().map(|(v, t)| json!({"version": v, "step_us": t})),
            "cnn": {"batch": BATCH, "captured": row(&cnn, 1)},
            "gpt": {
                "batch": gcfg.batch, "dim": gcfg.dim, "layers": gcfg.layers,
                "tokens": gcfg.context(), "captured": row(&gpt, 2),
            },
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "am bench tensor: one training step of the demo (MLP {PIXELS} → {HIDDEN} → 10, batch {BATCH}, \
         Adam), median of {steps} steps"
    );
    println!(
        "{:<14} uncaptured  {:>5.1} kernels  wall {:>9.2} ms  host outside GPU execution {:>9.1} µs (first step, compiling: {:.0} ms)",
        dev.name(),
        plain.kernels,
        plain.wall.as_secs_f64() * 1e3,
        us(plain.host),
        cold.as_secs_f64() * 1e3
    );
    let waves = |i: usize| match counted {
        Some(c) => format!("; {} wave-instructions", c[i]),
        None => String::new(),
    };
    println!(
        "{:<14} captured    {:>5.1} kernels  wall {:>9.2} ms  host outside GPU execution {:>9.1} µs (goal < 50 µs){}",
        "",
        cap.kernels,
        cap.wall.as_secs_f64() * 1e3,
        us(cap.host),
        waves(0)
    );
    println!(
        "{:<14} uncaptured  {:>5.1} kernels  wall {:>9.2} ms; captured {:.2} ms",
        "cpu",
        cpu_plain.kernels,
        cpu_plain.wall.as_secs_f64() * 1e3,
        cpu_cap.wall.as_secs_f64() * 1e3
    );
    match np {
        Some((v, t)) => println!(
            "{:<14} {:>46.2} ms (the same step written with numpy arrays)",
            format!("numpy {v}"),
            t / 1e3
        ),
        None => println!("numpy          not available (python3 with numpy not found)"),
    }
    for (i, name, t) in [
        (1, format!("cnn, batch {BATCH}"), &cnn),
        (2, format!("gpt, batch {}", gcfg.batch), &gpt),
    ] {
        println!(
            "{name:<14} captured    {:>5.1} kernels  wall {:>9.2} ms  host outside GPU execution {:>9.1} µs (goal < 50 µs){}",
            t.kernels,
            t.wall.as_secs_f64() * 1e3,
            us(t.host),
            waves(i)
        );
    }
    if counted.is_some() && !dev.optimize() {
        println!("(AM_NOOPT: the kernels are the unoptimised ones)");
    }
    Ok(())
}
