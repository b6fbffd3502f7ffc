//! `am bench kernels`: the tensor layer's kernels measured by what the emulator executes.
//!
//! A fixed suite of operations is realized on a mock device with the mock's shader statistics
//! on: per operation, the kernels launched, the wave-instructions they executed (deterministic:
//! the same code on the same shapes executes the same instructions), those per output element
//! or per multiply-add, and each instruction class's share. Every result is checked against the
//! `cpu` device (a bench that measures a wrong kernel measures nothing), whose wall time is set
//! against numpy's in the same run when python3 has numpy. The anchor is tinygrad's default
//! kernels (no BEAM) for the same operations at the same shapes: run live with `--tinygrad`
//! against `am serve` on loopback, or else the figures issue 37 measured, labelled as such.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use am_emu::Class;
use am_tensor::{DType, Device, Tensor};
use anyhow::{Context, bail};
use serde_json::{Value, json};

/// How an operation's work is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    /// Per element of the (largest) input.
    Element,
    /// Per multiply-add of a matrix product or convolution.
    Mac,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::Element => "element",
            Unit::Mac => "multiply-add",
        }
    }
}

/// What a result is compared with on the `cpu` device.
#[derive(Clone, Copy, Debug)]
enum Check {
    /// Largest difference at most this much of the largest magnitude of the `cpu` result.
    Close(f32),
    /// Equal (integer results).
    Exact,
}

type Build = fn(&[Tensor]) -> am_tensor::Result<Tensor>;

/// One operation of the suite.
struct Op {
    name: &'static str,
    /// Input shapes and their dtype.
    inputs: Vec<Vec<usize>>,
    dtype: DType,
    build: Build,
    unit: Unit,
    /// Elements or multiply-adds.
    units: u64,
    /// Wave-instructions per unit a kernel could approach (see docs/BENCHMARKS.md).
    ideal: f64,
    /// tinygrad's wave-instructions per unit as issue 37 measured them (gfx1100 only).
    anchor: Option<f64>,
    check: Check,
    /// The same operation in tinygrad, on tensors `a`, `b` of the same shapes.
    tinygrad: &'static str,
    /// The same operation in numpy, on arrays `a`, `b`.
    numpy: &'static str,
}

fn matmul(t: &[Tensor]) -> am_tensor::Result<Tensor> {
    t[0].matmul(&t[1])
}

/// The `k` windows of length `out` along `axis` (whose length is `out + k - 1`) as a new axis
/// before it, by movement alone: `k` copies laid end to end and read as rows one longer, so
/// row `i` starts `i` further on (tinygrad's way to pool without gathering).
fn windows(x: &Tensor, axis: usize, k: usize, out: usize) -> am_tensor::Result<Tensor> {
    let s: Vec<isize> = x.shape().iter().map(|&d| d as isize).collect();
    let len = s[axis];
    let mut wide: Vec<usize> = x.shape();
    wide.insert(axis, k);
    let mut flat = s.clone();
    flat[axis] = k as isize * len;
    let mut pad = vec![(0, 0); s.len()];
    pad[axis] = (0, k);
    let mut rows = s.clone();
    rows[axis] = len + 1;
    rows.insert(axis, k as isize);
    let mut keep: Vec<(usize, usize)> = rows.iter().map(|&d| (0, d as usize)).collect();
    keep[axis + 1] = (0, out);
    x.unsqueeze(axis as isize)?
        .expand(&wide)?
        .reshape(&flat)?
        .pad(&pad)?
        .reshape(&rows)?
        .shrink(&keep)
}

fn conv3x3(t: &[Tensor]) -> am_tensor::Result<Tensor> {
    // [N, C, H, W] ⊛ [O, C, 3, 3], padding 1: windows [N, 1, C, 3, H, 3, W] times weights
    // [1, O, C, 3, 1, 3, 1], summed over channels and taps.
    let (x, w) = (&t[0], &t[1]);
    let s = x.shape();
    let (h, wd) = (s[2], s[3]);
    let p = x.pad(&[(0, 0), (0, 0), (1, 1), (1, 1)])?;
    let win = windows(&windows(&p, 2, 3, h)?, 4, 3, wd)?.unsqueeze(1)?;
    let ws = w.shape();
    let wk = w.reshape(&[1, ws[0] as isize, ws[1] as isize, 3, 1, 3, 1])?;
    win.mul(&wk)?.sum(&[2, 3, 5], false)
}

fn layer_norm(t: &[Tensor]) -> am_tensor::Result<Tensor> {
    let x = &t[0];
    let c = x.sub(&x.mean(&[-1], true)?)?;
    let var = c.square().mean(&[-1], true)?;
    c.mul(&var.add(1e-5)?.rsqrt())
}

/// The suite; `quick` shrinks every shape (for tests).
fn suite(quick: bool) -> Vec<Op> {
    // Sizes: (1M elements, softmax side, matmul side, conv [N, C, H, O], batch, batched side).
    let (m1, sm, mm, mm_big, conv, bat) = if quick {
        (
            4096usize,
            32usize,
            32usize,
            48usize,
            [2usize, 4, 8, 8],
            (2usize, 16usize),
        )
    } else {
        (1 << 20, 512, 256, 512, [8, 16, 32, 32], (8, 128))
    };
    let mac = |m: usize, k: usize, n: usize| (m * k * n) as u64;
    let mut ops = vec![
        Op {
            name: "add",
            inputs: vec![vec![m1], vec![m1]],
            dtype: DType::F32,
            build: |t| t[0].add(&t[1]),
            unit: Unit::Element,
            units: m1 as u64,
            ideal: 0.05,
            anchor: Some(0.19),
            check: Check::Close(0.0),
            tinygrad: "a + b",
            numpy: "a + b",
        },
        Op {
            name: "sum",
            inputs: vec![vec![m1]],
            dtype: DType::F32,
            build: |t| t[0].sum(&[0], false),
            unit: Unit::Element,
            units: m1 as u64,
            ideal: 0.03,
            anchor: Some(0.17),
            // A sum of ~1M f32 in another order (the device's tree, the cpu's serial
            // loop) differs by about sqrt(n)·2^-24 of the sum: ~6e-5 at 1M.
            check: Check::Close(2e-4),
            tinygrad: "a.sum()",
            numpy: "a.sum()",
        },
        Op {
            name: "softmax",
            inputs: vec![vec![sm, sm]],
            dtype: DType::F32,
            build: |t| t[0].softmax(-1),
            unit: Unit::Element,
            units: (sm * sm) as u64,
            ideal: 0.2,
            anchor: Some(1.60),
            check: Check::Close(1e-5),
            tinygrad: "a.softmax(-1)",
            numpy: "np.exp(a - a.max(-1, keepdims=True)) / np.exp(a - a.max(-1, keepdims=True)).sum(-1, keepdims=True)",
        },
        Op {
            name: "matmul_f32_256",
            inputs: vec![vec![mm, mm], vec![mm, mm]],
            dtype: DType::F32,
            build: matmul,
            unit: Unit::Mac,
            units: mac(mm, mm, mm),
            ideal: 1.0 / 64.0,
            anchor: Some(0.044),
            check: Check::Close(1e-5),
            tinygrad: "a @ b",
            numpy: "a @ b",
        },
    ];
    {
        ops.push(Op {
            name: "matmul_f32_512",
            inputs: vec![vec![mm_big, mm_big], vec![mm_big, mm_big]],
            dtype: DType::F32,
            build: matmul,
            unit: Unit::Mac,
            units: mac(mm_big, mm_big, mm_big),
            ideal: 1.0 / 64.0,
            anchor: Some(0.046),
            check: Check::Close(1e-5),
            tinygrad: "a @ b",
            numpy: "a @ b",
        });
    }
    let [cn, cc, ch, co] = conv;
    ops.extend([
        Op {
            name: "matmul_f16",
            inputs: vec![vec![mm, mm], vec![mm, mm]],
            dtype: DType::F16,
            build: matmul,
            unit: Unit::Mac,
            units: mac(mm, mm, mm),
            ideal: 1.0 / 4096.0,
            anchor: Some(0.0022),
            check: Check::Close(1e-2),
            tinygrad: "a @ b",
            numpy: "a @ b",
        },
        Op {
            name: "matmul_bf16",
            inputs: vec![vec![mm, mm], vec![mm, mm]],
            dtype: DType::BF16,
            build: matmul,
            unit: Unit::Mac,
            units: mac(mm, mm, mm),
            ideal: 1.0 / 4096.0,
            anchor: None,
            // Results rounded to bf16 (8 significant bits): half an ulp is 2^-9 of each.
            check: Check::Close(1e-2),
            tinygrad: "a @ b",
            // numpy has no bfloat16: no host anchor for this one.
            numpy: "",
        },
        Op {
            name: "conv3x3",
            inputs: vec![vec![cn, cc, ch, ch], vec![co, cc, 3, 3]],
            dtype: DType::F32,
            build: conv3x3,
            unit: Unit::Mac,
            units: (cn * co * ch * ch * cc * 9) as u64,
            ideal: 1.0 / 64.0,
            anchor: Some(0.043),
            check: Check::Close(1e-5),
            tinygrad: "a.conv2d(b, padding=1)",
            numpy: "conv(a, b)",
        },
        Op {
            name: "matmul_batched",
            inputs: vec![vec![bat.0, bat.1, bat.1], vec![bat.0, bat.1, bat.1]],
            dtype: DType::F32,
            build: matmul,
            unit: Unit::Mac,
            units: bat.0 as u64 * mac(bat.1, bat.1, bat.1),
            ideal: 1.0 / 64.0,
            anchor: None,
            check: Check::Close(1e-5),
            tinygrad: "a @ b",
            numpy: "a @ b",
        },
        Op {
            name: "matmul_transposed",
            inputs: vec![vec![mm, mm], vec![mm, mm]],
            dtype: DType::F32,
            build: |t| t[0].matmul(&t[1].t()?),
            unit: Unit::Mac,
            units: mac(mm, mm, mm),
            ideal: 1.0 / 64.0,
            anchor: None,
            check: Check::Close(1e-5),
            tinygrad: "a @ b.T",
            numpy: "a @ b.T",
        },
        Op {
            name: "layernorm",
            inputs: vec![vec![sm, sm]],
            dtype: DType::F32,
            build: layer_norm,
            unit: Unit::Element,
            units: (sm * sm) as u64,
            ideal: 0.2,
            anchor: None,
            check: Check::Close(1e-4),
            tinygrad: "a.layernorm(-1, 1e-5)",
            numpy: "(a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5)",
        },
        Op {
            name: "argmax",
            inputs: vec![vec![sm, sm]],
            dtype: DType::F32,
            build: |t| t[0].argmax(-1, false),
            unit: Unit::Element,
            units: (sm * sm) as u64,
            ideal: 0.03,
            anchor: None,
            check: Check::Exact,
            tinygrad: "a.argmax(-1)",
            numpy: "a.argmax(-1)",
        },
    ]);
    // Shapes that are not powers of two.
    let (r, c) = if quick { (10, 99) } else { (1000, 999) };
    let (m, k, n) = if quick { (20, 30, 17) } else { (200, 300, 170) };
    let odd = if quick { 7777 } else { 777_777 };
    ops.extend([
        Op {
            name: "add_odd",
            inputs: vec![vec![r, c], vec![r, c]],
            dtype: DType::F32,
            build: |t| t[0].add(&t[1]),
            unit: Unit::Element,
            units: (r * c) as u64,
            ideal: 0.05,
            anchor: None,
            check: Check::Close(0.0),
            tinygrad: "a + b",
            numpy: "a + b",
        },
        Op {
            name: "sum_odd",
            inputs: vec![vec![odd]],
            dtype: DType::F32,
            build: |t| t[0].sum(&[0], false),
            unit: Unit::Element,
            units: odd as u64,
            ideal: 0.03,
            anchor: None,
            // A sum of ~1M f32 in another order (the device's tree, the cpu's serial
            // loop) differs by about sqrt(n)·2^-24 of the sum: ~6e-5 at 1M.
            check: Check::Close(2e-4),
            tinygrad: "a.sum()",
            numpy: "a.sum()",
        },
        Op {
            name: "matmul_odd",
            inputs: vec![vec![m, k], vec![k, n]],
            dtype: DType::F32,
            build: matmul,
            unit: Unit::Mac,
            units: mac(m, k, n),
            ideal: 1.0 / 64.0,
            anchor: None,
            check: Check::Close(1e-5),
            tinygrad: "a @ b",
            numpy: "a @ b",
        },
    ]);
    ops
}

/// Inputs in [-1, 1) from a fixed generator, the same for every device and run.
fn input(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The operation's inputs on `dev`, realized (casts included) so that only the operation
/// itself is measured.
fn inputs(op: &Op, dev: &Device) -> anyhow::Result<Vec<Tensor>> {
    op.inputs
        .iter()
        .enumerate()
        .map(|(i, shape)| {
            let n = shape.iter().product();
            let t = Tensor::from_slice(&input(n, i as u64 + 1), shape, dev)?;
            let t = if op.dtype == DType::F32 {
                t
            } else {
                t.cast(op.dtype)
            };
            t.realize()?;
            Ok(t)
        })
        .collect()
}

/// The name of an operation's dtype in the JSON and in the host scripts.
fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        _ => "f32",
    }
}

/// What the mock executed for one operation.
struct Measured {
    kernels: u64,
    instructions: u64,
    classes: [u64; 7],
}

/// The mock profile that runs an ISA.
fn profile_of(isa: &str) -> anyhow::Result<&'static str> {
    Ok(match isa {
        "gfx1100" => "navi31",
        "gfx1201" => "navi48",
        "gfx942" => "mi300x",
        other => bail!("--isa {other}: one of gfx1100, gfx1201, gfx942"),
    })
}

/// Compares a result with the `cpu` device's; an error names the operation and how far off
/// it is.
fn check(op: &Op, got: &Tensor, want: &Tensor) -> anyhow::Result<()> {
    if got.shape() != want.shape() {
        bail!(
            "{}: shape {:?} on the device, {:?} on cpu",
            op.name,
            got.shape(),
            want.shape()
        );
    }
    match op.check {
        Check::Exact => {
            let (g, w) = (got.to_vec::<i32>()?, want.to_vec::<i32>()?);
            if let Some(i) = (0..g.len()).find(|&i| g[i] != w[i]) {
                bail!(
                    "{}: element {i} is {} on the device, {} on cpu",
                    op.name,
                    g[i],
                    w[i]
                );
            }
        }
        Check::Close(tol) => {
            let (g, w) = (got.to_vec_f32()?, want.to_vec_f32()?);
            let scale = w.iter().fold(1.0f32, |m, x| m.max(x.abs()));
            for (i, (a, b)) in g.iter().zip(&w).enumerate() {
                // NaN on either side fails too.
                let close = (a - b).abs() <= tol * scale;
                if !close {
                    bail!(
                        "{}: element {i} is {a} on the device, {b} on cpu (tolerance {} of {scale})",
                        op.name,
                        tol
                    );
                }
            }
        }
    }
    Ok(())
}

/// Median wall time of realizing the operation on the `cpu` device (after one untimed run
/// that compiles).
/// Timed realizes per operation on the `cpu` device (their median is the figure): enough
/// that the first few, slower while the machine settles, do not make it.
const CPU_REALIZES: usize = 11;

fn time_cpu(op: &Op, ins: &[Tensor], reps: usize) -> anyhow::Result<Duration> {
    (op.build)(ins)?.realize()?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        (op.build)(ins)?.realize()?;
        times.push(t.elapsed());
    }
    times.sort_unstable();
    Ok(times[times.len() / 2])
}

/// numpy's median time per operation (microseconds, by name), when python3 has numpy.
const NUMPY: &str = r#"
import json, sys, time
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
ops = json.loads(sys.argv[1])
def conv(x, w):
    p = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = sliding_window_view(p, (3, 3), axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", win, w, optimize=True)
out = {"numpy": np.__version__, "us": {}}
rng = np.random.default_rng(0)
for op in ops:
    if not op["numpy"]:
        continue
    dt = np.float16 if op["dtype"] == "f16" else np.float32
    xs = [rng.uniform(-1, 1, s).astype(dt) for s in op["inputs"]]
    a = xs[0]
    b = xs[1] if len(xs) > 1 else None
    f = eval("lambda a, b: " + op["numpy"])
    f(a, b)
    reps, times = 0, []
    start = time.perf_counter()
    while reps < 3 or (reps < 50 and time.perf_counter() - start < 0.5):
        t0 = time.perf_counter()
        f(a, b)
        times.append(time.perf_counter() - t0)
        reps += 1
    times.sort()
    out["us"][op["name"]] = times[len(times) // 2] * 1e6
print(json.dumps(out))
"#;

fn numpy(ops: &[Op]) -> Option<(String, Vec<(String, f64)>)> {
    let spec: Vec<Value> = ops
        .iter()
        .map(|o| {
            json!({
                "name": o.name,
                "inputs": o.inputs,
                "dtype": dtype_name(o.dtype),
                "numpy": o.numpy,
            })
        })
        .collect();
    let out = Command::new("python3")
        .args(["-c", NUMPY, &Value::Array(spec).to_string()])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let j: Value = serde_json::from_slice(&out.stdout).ok()?;
    let times = j["us"]
        .as_object()?
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v.as_f64()?)))
        .collect();
    Some((j["numpy"].as_str()?.to_string(), times))
}

/// tinygrad's figures for one operation, from the live run.
#[derive(Clone, Debug)]
struct Tinygrad {
    kernels: u64,
    instructions: u64,
}

/// The kernel search's figures for one operation (`--beam N`).
struct Searched {
    /// The chosen kernels' executed wave-instructions and kernel count.
    kernels: u64,
    instructions: u64,
    /// Kernels searched, kernels whose choice the compiler's cache held, candidates
    /// measured, and the search's time.
    searched: u64,
    recalled: u64,
    candidates: u64,
    time: Duration,
}

/// One operation's row.
struct Row {
    op: Op,
    ours: Measured,
    beam: Option<Searched>,
    cpu: Duration,
    numpy: Option<f64>,
    tinygrad: Option<Tinygrad>,
}

impl Row {
    fn per_unit(&self) -> f64 {
        self.ours.instructions as f64 / self.op.units as f64
    }

    /// The anchor per unit and where it comes from.
    fn anchor(&self, isa: &str) -> Option<(f64, &'static str)> {
        match (&self.tinygrad, self.op.anchor) {
            (Some(t), _) => Some((t.instructions as f64 / self.op.units as f64, "tinygrad")),
            (None, Some(a)) if isa == "gfx1100" => Some((a, "issue 37")),
            _ => None,
        }
    }
}

/// Options of `am bench kernels`.
pub struct Options {
    pub isa: String,
    pub json: bool,
    pub quick: bool,
    /// Operations to run by name (all when empty).
    pub ops: Vec<String>,
    pub tinygrad: bool,
    pub am: Option<PathBuf>,
    /// The kernel search's width to set beside the heuristics (`None`: `AM_BEAM`'s).
    pub beam: Option<u32>,
}

/// `am bench kernels`.
pub fn run(o: Options) -> anyhow::Result<()> {
    am_mock::register();
    let profile = profile_of(&o.isa)?;
    let mut ops = suite(o.quick);
    if let Some(bad) = o
        .ops
        .iter()
        .find(|n| !ops.iter().any(|op| op.name == n.as_str()))
    {
        let names: Vec<&str> = ops.iter().map(|op| op.name).collect();
        bail!("--op {bad}: the suite has {}", names.join(", "));
    }
    if !o.ops.is_empty() {
        ops.retain(|op| o.ops.iter().any(|n| n == op.name));
    }
    // The host first, while nothing else of ours runs.
    let np = numpy(&ops);
    let tg = if o.tinygrad {
        Some(tinygrad(&o, profile, &ops))
    } else {
        None
    };
    let gpu = am_mock::gpu(profile, 0)?;
    gpu.set_shader_statistics(true);
    let compiler = std::sync::Arc::new(am_compiler::Compiler::new());
    let dev = Device::open_with(&format!("mock:{profile}"), compiler.clone())
        .with_context(|| format!("opening mock:{profile}"))?;
    // The heuristics' kernels, whatever AM_BEAM says; the search's on a second tensor
    // device on the same mock (plans of its own), when a width is asked for.
    let width = match o.beam {
        Some(n) => n,
        None => dev.beam()?,
    };
    dev.set_beam(0);
    let searching = if width > 0 {
        let rt = dev
            .runtime()
            .cloned()
            .context("a mock device has a runtime")?;
        let d = Device::from_runtime(rt, compiler)?;
        d.set_beam(width);
        Some(d)
    } else {
        None
    };
    let cpu = Device::cpu();
    let mut rows = Vec::with_capacity(ops.len());
    for op in ops {
        let on_dev = inputs(&op, &dev)?;
        let on_cpu = inputs(&op, &cpu)?;
        let k0 = dev.kernels_launched();
        let s0 = gpu.shader_statistics();
        let got = (op.build)(&on_dev)?;
        got.realize()?;
        let s1 = gpu.shader_statistics();
        let kernels = dev.kernels_launched() - k0;
        let want = (op.build)(&on_cpu)?;
        check(&op, &got, &want)?;
        let mut classes = [0u64; 7];
        for c in Class::ALL {
            classes[c as usize] = s1.histogram.class(c) - s0.histogram.class(c);
        }
        let ours = Measured {
            kernels,
            instructions: s1.instructions - s0.instructions,
            classes,
        };
        let beam = match &searching {
            Some(d) => Some(search(&op, d, &gpu, &want)?),
            None => None,
        };
        let cpu_time = time_cpu(&op, &on_cpu, if o.quick { 1 } else { CPU_REALIZES })?;
        let numpy = np
            .as_ref()
            .and_then(|(_, t)| t.iter().find(|(n, _)| n == op.name).map(|x| x.1));
        let tinygrad = match &tg {
            Some(Ok(t)) => t.iter().find(|(n, _)| n == op.name).map(|x| x.1.clone()),
            _ => None,
        };
        rows.push(Row {
            op,
            ours,
            beam,
            cpu: cpu_time,
            numpy,
            tinygrad,
        });
    }
    gpu.set_shader_statistics(false);
    let tg_status = match &tg {
        None => "not run (--tinygrad runs it); anchors are issue 37's figures".to_string(),
        Some(Ok(_)) => "live: tinygrad 0.14.0 on am serve, same shapes, no BEAM".to_string(),
        Some(Err(e)) => format!("failed ({e:#}); anchors are issue 37's figures"),
    };
    if o.json {
        print_json(&o, &rows, np.as_ref().map(|n| n.0.as_str()), &tg_status)
    } else {
        print_table(&o, &rows, np.as_ref().map(|n| n.0.as_str()), &tg_status);
        Ok(())
    }
}

/// `op` on the searching device `d`: a first realize searches (or finds the choices in the
/// compiler's cache), a second one is counted; its result is checked as the heuristics' is.
fn search(op: &Op, d: &Device, gpu: &am_mock::MockGpu, want: &Tensor) -> anyhow::Result<Searched> {
    let (s0, r0, c0, t0) = (
        d.kernels_searched(),
        d.searches_recalled(),
        d.candidates_measured(),
        d.search_time(),
    );
    let on_dev = inputs(op, d)?;
    (op.build)(&on_dev)?.realize()?;
    let k0 = d.kernels_launched();
    let i0 = gpu.shader_statistics().instructions;
    let got = (op.build)(&on_dev)?;
    got.realize()?;
    let instructions = gpu.shader_statistics().instructions - i0;
    check(op, &got, want).context("the searched kernels")?;
    Ok(Searched {
        kernels: d.kernels_launched() - k0,
        instructions,
        searched: d.kernels_searched() - s0,
        recalled: d.searches_recalled() - r0,
        candidates: d.candidates_measured() - c0,
        time: d.search_time() - t0,
    })
}

fn print_json(
    o: &Options,
    rows: &[Row],
    numpy: Option<&str>,
    tinygrad: &str,
) -> anyhow::Result<()> {
    let ops: Vec<Value> = rows
        .iter()
        .map(|r| {
            let classes: serde_json::Map<String, Value> = Class::ALL
                .iter()
                .map(|&c| (c.name().to_string(), json!(r.ours.classes[c as usize])))
                .collect();
            let anchor = r.anchor(&o.isa);
            json!({
                "op": r.op.name,
                "inputs": r.op.inputs,
                "dtype": dtype_name(r.op.dtype),
                "unit": r.op.unit.name(),
                "units": r.op.units,
                "kernels": r.ours.kernels,
                "wave_instructions": r.ours.instructions,
                "per_unit": r.per_unit(),
                "classes": classes,
                "ideal_per_unit": r.op.ideal,
                "anchor": anchor.map(|(a, from)| json!({"per_unit": a, "source": from})),
                "tinygrad": r.tinygrad.as_ref().map(|t| json!({"kernels": t.kernels, "wave_instructions": t.instructions})),
                "ratio": anchor.map(|(a, _)| r.per_unit() / a),
                "cpu_us": r.cpu.as_secs_f64() * 1e6,
                "numpy_us": r.numpy,
                "beam": r.beam.as_ref().map(|b| json!({
                    "kernels": b.kernels,
                    "wave_instructions": b.instructions,
                    "per_unit": b.instructions as f64 / r.op.units as f64,
                    "kernels_searched": b.searched,
                    "kernels_recalled": b.recalled,
                    "candidates": b.candidates,
                    "search_s": b.time.as_secs_f64(),
                })),
            })
        })
        .collect();
    let out = json!({
        "isa": o.isa,
        "device": format!("mock:{}", profile_of(&o.isa)?),
        "quick": o.quick,
        "numpy": numpy,
        "cpu_threads": am_compiler::host_threads(),
        "tinygrad": tinygrad,
        "beam": rows.iter().any(|r| r.beam.is_some()).then_some(o.beam),
        "ops": ops,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// The width the search ran with.
fn searched_width(o: &Options) -> String {
    o.beam.map_or_else(
        || std::env::var("AM_BEAM").unwrap_or_default(),
        |n| n.to_string(),
    )
}

fn print_table(o: &Options, rows: &[Row], numpy: Option<&str>, tinygrad: &str) {
    println!(
        "am bench kernels: the tensor layer's kernels on mock:{} ({}), executed wave-instructions; \
         every result checked against the cpu device",
        profile_of(&o.isa).unwrap_or("?"),
        o.isa
    );
    println!("anchor: {tinygrad}");
    println!(
        "per unit: wave-instructions per element or multiply-add; tgk: tinygrad's kernels; \
         ratio: ours over the anchor; classes: share of ours"
    );
    println!(
        "{:<18} {:>3} {:>12} {:>9} {:>3} {:>9} {:>6} {:>5} {:>4} {:>4} {:>4} {:>4} {:>5} {:>4} {:>8} {:>7} {:>9} {:>9} {:>6}",
        "operation",
        "krn",
        "wave-instr",
        "per unit",
        "tgk",
        "anchor",
        "ratio",
        "valu",
        "salu",
        "vmem",
        "smem",
        "lds",
        "wait",
        "oth",
        "ideal",
        "unit",
        "cpu ms",
        "numpy ms",
        "×np"
    );
    for r in rows {
        let total = r.ours.instructions.max(1) as f64;
        let pct = |c: Class| 100.0 * r.ours.classes[c as usize] as f64 / total;
        let anchor = r.anchor(&o.isa);
        let (a, ratio) = match anchor {
            Some((a, from)) => (
                format!("{a:.4}{}", if from == "issue 37" { "*" } else { "" }),
                format!("{:.1}×", r.per_unit() / a),
            ),
            None => ("—".to_string(), "—".to_string()),
        };
        let cpu_ms = r.cpu.as_secs_f64() * 1e3;
        let (np_ms, x) = match r.numpy {
            Some(us) => (
                format!("{:.3}", us / 1e3),
                format!("{:.1}", cpu_ms / (us / 1e3)),
            ),
            None => ("—".into(), "—".into()),
        };
        println!(
            "{:<18} {:>3} {:>12} {:>9.4} {:>3} {:>9} {:>6} {:>4.0}% {:>3.0}% {:>3.0}% {:>3.0}% {:>3.0}% {:>4.0}% {:>3.0}% {:>8.5} {:>7} {:>9.3} {:>9} {:>6}",
            r.op.name,
            r.ours.kernels,
            r.ours.instructions,
            r.per_unit(),
            r.tinygrad
                .as_ref()
                .map_or("—".to_string(), |t| t.kernels.to_string()),
            a,
            ratio,
            pct(Class::Valu),
            pct(Class::Salu),
            pct(Class::VectorMemory),
            pct(Class::ScalarMemory),
            pct(Class::Lds),
            pct(Class::Wait),
            pct(Class::Other),
            r.op.ideal,
            if r.op.unit == Unit::Mac {
                "mac"
            } else {
                "elem"
            },
            cpu_ms,
            np_ms,
            x
        );
    }
    if rows.iter().any(|r| r.beam.is_some()) {
        println!();
        println!(
            "kernel search (beam width {}): the same operations with the kernels it chose, against \
             the heuristics' above",
            searched_width(o)
        );
        println!(
            "{:<18} {:>3} {:>12} {:>9} {:>12} {:>7} {:>5} {:>5} {:>6} {:>9}",
            "operation",
            "krn",
            "wave-instr",
            "per unit",
            "heuristics",
            "ratio",
            "srch",
            "hit",
            "cands",
            "search s"
        );
        for r in rows {
            let Some(b) = &r.beam else { continue };
            println!(
                "{:<18} {:>3} {:>12} {:>9.4} {:>12} {:>6.3}× {:>5} {:>5} {:>6} {:>9.1}",
                r.op.name,
                b.kernels,
                b.instructions,
                b.instructions as f64 / r.op.units as f64,
                r.ours.instructions,
                b.instructions as f64 / r.ours.instructions.max(1) as f64,
                b.searched,
                b.recalled,
                b.candidates,
                b.time.as_secs_f64()
            );
        }
        println!(
            "srch: kernels searched; hit: kernels whose choice the compile cache held (no search); \
             cands: candidates measured"
        );
    }
    if rows
        .iter()
        .any(|r| matches!(r.anchor(&o.isa), Some((_, "issue 37"))))
    {
        println!("* tinygrad's figure from issue 37 (a fixed anchor, not measured in this run)");
    }
    println!(
        "cpu: the tensor layer's cpu device, wall time of a realize (median of {CPU_REALIZES}) on up to {} threads",
        am_compiler::host_threads()
    );
    match numpy {
        Some(v) => println!("numpy {v}: the same operations in numpy on the host, same run"),
        None => {
            println!("numpy: not available (python3 with numpy not found); cpu times stand alone")
        }
    }
}

// ---- tinygrad, live ----------------------------------------------------------------------

/// The tinygrad side: builds the same inputs, realizes each operation, and reads the served
/// mock's statistics file before and after it (the file is rewritten after every dispatch,
/// before the dispatch's completion can be seen).
const TINYGRAD: &str = r#"
import json, os, sys
from tinygrad import Tensor, Device, dtypes
stats, ops = sys.argv[1], json.loads(sys.argv[2])
dev = Device[Device.DEFAULT]
def counts():
    try:
        with open(stats) as f:
            return json.load(f)
    except FileNotFoundError:
        return {"dispatches": 0, "wave_instructions": 0}
for op in ops:
    xs = [Tensor.uniform(*s, low=-1, high=1) for s in op["inputs"]]
    if op["dtype"] == "f16":
        xs = [x.half() for x in xs]
    if op["dtype"] == "bf16":
        xs = [x.cast(dtypes.bfloat16) for x in xs]
    xs = [x.realize() for x in xs]
    a = xs[0]
    b = xs[1] if len(xs) > 1 else None
    dev.synchronize()
    before = counts()
    out = eval(op["tinygrad"]).realize()
    dev.synchronize()
    after = counts()
    print(json.dumps({"op": op["name"],
                      "kernels": after["dispatches"] - before["dispatches"],
                      "wave_instructions": after["wave_instructions"] - before["wave_instructions"]}),
          flush=True)
"#;

/// The private environment `scripts/conformance` builds with tinygrad.
fn tinygrad_python() -> anyhow::Result<PathBuf> {
    let cache = match std::env::var_os("AM_CONFORMANCE_CACHE") {
        Some(c) => PathBuf::from(c),
        None => {
            let home = std::env::var_os("HOME").context("HOME is not set")?;
            Path::new(&home).join(".cache/am-conformance")
        }
    };
    let base = cache.join("tinygrad-0.14.0");
    let python = base.join("venv/bin/python");
    if !python.is_file() || !base.join("ready").exists() {
        bail!(
            "no tinygrad environment in {} (scripts/conformance --setup makes one)",
            base.display()
        );
    }
    Ok(python)
}

/// `am serve` on loopback with the statistics file, killed (by its own pid) when dropped.
struct Server {
    child: Child,
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(am: &Path, profile: &str, stats: &Path) -> anyhow::Result<Server> {
    use std::io::BufRead;
    let mut child = Command::new(am)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            &format!("mock:{profile}"),
        ])
        .env(am_mock::SHADER_STATISTICS_ENV, stats)
        .env("AM_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {} serve", am.display()))?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let mut out = std::io::BufReader::new(out);
        out.read_line(&mut line)?;
        // The server goes on printing (its devices); a closed pipe would end it.
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    }
    let mut server = Server {
        child,
        addr: String::new(),
    };
    let Some(addr) = line
        .trim()
        .rsplit(' ')
        .next()
        .filter(|_| line.contains("listening on"))
    else {
        bail!("am serve did not start: {:?}", line.trim());
    };
    server.addr = addr.to_string();
    // Listening is announced before the first accept; wait until a connection is taken.
    let start = Instant::now();
    while std::net::TcpStream::connect(&server.addr).is_err() {
        if start.elapsed() > Duration::from_secs(30) {
            bail!("am serve on {} takes no connection", server.addr);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(server)
}

fn tinygrad(o: &Options, profile: &str, ops: &[Op]) -> anyhow::Result<Vec<(String, Tinygrad)>> {
    let python = tinygrad_python()?;
    let am = match &o.am {
        Some(p) => p.clone(),
        None => std::env::current_exe()?,
    };
    let dir = std::env::temp_dir().join(format!("am-bench-kernels-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let stats = dir.join("stats.json");
    let result = (|| {
        let server = serve(&am, profile, &stats)?;
        let spec: Vec<Value> = ops
            .iter()
            .map(|o| {
                json!({
                    "name": o.name,
                    "inputs": o.inputs,
                    "dtype": dtype_name(o.dtype),
                    "tinygrad": o.tinygrad,
                })
            })
            .collect();
        let mut cmd = Command::new(&python);
        cmd.args(["-c", TINYGRAD])
            .arg(&stats)
            .arg(Value::Array(spec).to_string())
            .env("REMOTE", &server.addr)
            .env("DEV", "PCI+AMD:LLVM")
            .env("BEAM", "0")
            .env("PYTHONUNBUFFERED", "1")
            .env_remove("PYTHONPATH")
            .env_remove("VIRTUAL_ENV");
        if profile == "mi300x" {
            cmd.env("AMD_AQL", "1");
        }
        let llvm = Path::new("/usr/lib/llvm-22");
        if llvm.is_dir() {
            let lib = llvm.join("lib");
            let old = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
            cmd.env(
                "LD_LIBRARY_PATH",
                if old.is_empty() {
                    lib.display().to_string()
                } else {
                    format!("{}:{old}", lib.display())
                },
            );
        }
        let out = cmd.output().context("running tinygrad")?;
        drop(server);
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = err.lines().rev().take(3).collect();
            bail!(
                "tinygrad failed: {}",
                tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
            );
        }
        let mut res = Vec::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Ok(j) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let (Some(name), Some(k), Some(n)) = (
                j["op"].as_str(),
                j["kernels"].as_u64(),
                j["wave_instructions"].as_u64(),
            ) else {
                continue;
            };
            res.push((
                name.to_string(),
                Tinygrad {
                    kernels: k,
                    instructions: n,
                },
            ));
        }
        Ok(res)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}
