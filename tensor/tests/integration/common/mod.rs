//! Shared helpers of the tensor tests: the devices (the CPU and one mock Navi31 per test
//! binary), a host reference of n-dimensional arrays in f64, and the forward and backward
//! checks of an operation against that reference.
#![allow(dead_code, clippy::unwrap_used)]

use std::sync::{Arc, OnceLock};

use am_compiler::{Cache, Compiler};
use am_tensor::{Device, Tensor};

/// One compiler for the whole test binary, caching in memory only.
pub fn compiler() -> Arc<Compiler> {
    static C: OnceLock<Arc<Compiler>> = OnceLock::new();
    C.get_or_init(|| Arc::new(Compiler::with_cache(Cache::new(None))))
        .clone()
}

/// The host CPU.
pub fn cpu() -> Device {
    static D: OnceLock<Device> = OnceLock::new();
    D.get_or_init(|| Device::cpu_with(compiler())).clone()
}

/// A mock Navi31 (gfx1100), booted once per test binary.
pub fn navi31() -> Device {
    static D: OnceLock<Device> = OnceLock::new();
    D.get_or_init(|| {
        am_mock::register();
        Device::open_with("mock:navi31", compiler()).unwrap()
    })
    .clone()
}

/// A mock Navi48 (gfx1201), booted once per test binary (a second open of a process-wide
/// mock would boot it again under the other tests' feet).
pub fn navi48() -> Device {
    static D: OnceLock<Device> = OnceLock::new();
    D.get_or_init(|| {
        am_mock::register();
        Device::open_with("mock:navi48", compiler()).unwrap()
    })
    .clone()
}

/// A mock MI300X (gfx942, 8 XCCs), booted once per test binary.
pub fn mi300x() -> Device {
    static D: OnceLock<Device> = OnceLock::new();
    D.get_or_init(|| {
        am_mock::register();
        Device::open_with("mock:mi300x", compiler()).unwrap()
    })
    .clone()
}

/// Both devices every operation is checked on.
pub fn devices() -> [Device; 2] {
    [cpu(), navi31()]
}

/// A small deterministic generator.
pub struct Rng(pub u64);

impl Rng {
    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        lo + (hi - lo) * ((self.0 >> 11) as f64 / (1u64 << 53) as f64)
    }

    /// `n` values in [lo, hi).
    pub fn values(&mut self, n: usize, lo: f64, hi: f64) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi) as f32).collect()
    }

    /// `n` values in [lo, hi), shuffled, no two closer than `(hi - lo) / (2n)`: for maxima
    /// checked by finite differences, where a near-tie within the step splits the gradient.
    pub fn distinct(&mut self, n: usize, lo: f64, hi: f64) -> Vec<f32> {
        let step = (hi - lo) / n as f64;
        let mut v: Vec<f32> = (0..n)
            .map(|i| (lo + step * (i as f64 + self.uniform(0.25, 0.75))) as f32)
            .collect();
        for i in (1..n).rev() {
            let j = (self.uniform(0.0, (i + 1) as f64) as usize).min(i);
            v.swap(i, j);
        }
        v
    }
}

/// A host array: the reference the tensors are checked against.
#[derive(Clone, Debug, PartialEq)]
pub struct Nd {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    idx
}

impl Nd {
    pub fn new(shape: &[usize], data: Vec<f64>) -> Nd {
        assert_eq!(shape.iter().product::<usize>(), data.len());
        Nd {
            shape: shape.to_vec(),
            data,
        }
    }

    pub fn from_f32(shape: &[usize], data: &[f32]) -> Nd {
        Nd::new(shape, data.iter().map(|&x| f64::from(x)).collect())
    }

    fn at(&self, idx: &[usize]) -> f64 {
        let s = strides(&self.shape);
        self.data[idx.iter().zip(&s).map(|(i, s)| i * s).sum::<usize>()]
    }

    pub fn map(&self, f: impl Fn(f64) -> f64) -> Nd {
        Nd::new(&self.shape, self.data.iter().map(|&x| f(x)).collect())
    }

    /// Broadcasting elementwise combination.
    pub fn zip(&self, o: &Nd, f: impl Fn(f64, f64) -> f64) -> Nd {
        let n = self.shape.len().max(o.shape.len());
        let pad = |s: &[usize]| {
            let mut v = vec![1; n - s.len()];
            v.extend_from_slice(s);
            v
        };
        let (sa, sb) = (pad(&self.shape), pad(&o.shape));
        let shape: Vec<usize> = sa.iter().zip(&sb).map(|(a, b)| *a.max(b)).collect();
        let (a, b) = (self.reshape(&sa), o.reshape(&sb));
        let total: usize = shape.iter().product();
        let data = (0..total)
            .map(|i| {
                let idx = unravel(i, &shape);
                let ia: Vec<usize> = idx
                    .iter()
                    .zip(&sa)
                    .map(|(i, d)| if *d == 1 { 0 } else { *i })
                    .collect();
                let ib: Vec<usize> = idx
                    .iter()
                    .zip(&sb)
                    .map(|(i, d)| if *d == 1 { 0 } else { *i })
                    .collect();
                f(a.at(&ia), b.at(&ib))
            })
            .collect();
        Nd::new(&shape, data)
    }

    pub fn reshape(&self, shape: &[usize]) -> Nd {
        Nd::new(shape, self.data.clone())
    }

    /// Reduction over `axes` (kept with size 1).
    pub fn reduce(&self, axes: &[usize], init: f64, f: impl Fn(f64, f64) -> f64) -> Nd {
        let mut shape = self.shape.clone();
        for &a in axes {
            shape[a] = 1;
        }
        let total: usize = shape.iter().product();
        let mut out = vec![init; total];
        let so = strides(&shape);
        for (i, &x) in self.data.iter().enumerate() {
            let idx = unravel(i, &self.shape);
            let o: usize = idx
                .iter()
                .enumerate()
                .map(|(d, &v)| if axes.contains(&d) { 0 } else { v * so[d] })
                .sum();
            out[o] = f(out[o], x);
        }
        Nd::new(&shape, out)
    }

    pub fn sum(&self, axes: &[usize]) -> Nd {
        self.reduce(axes, 0.0, |a, b| a + b)
    }

    pub fn max(&self, axes: &[usize]) -> Nd {
        self.reduce(axes, f64::NEG_INFINITY, f64::max)
    }

    pub fn permute(&self, order: &[usize]) -> Nd {
        let shape: Vec<usize> = order.iter().map(|&a| self.shape[a]).collect();
        let total = self.data.len();
        let data = (0..total)
            .map(|i| {
                let idx = unravel(i, &shape);
                let mut src = vec![0; idx.len()];
                for (k, &a) in order.iter().enumerate() {
                    src[a] = idx[k];
                }
                self.at(&src)
            })
            .collect();
        Nd::new(&shape, data)
    }

    pub fn pad(&self, p: &[(usize, usize)]) -> Nd {
        let shape: Vec<usize> = self
            .shape
            .iter()
            .zip(p)
            .map(|(d, (a, b))| d + a + b)
            .collect();
        let total: usize = shape.iter().product();
        let data = (0..total)
            .map(|i| {
                let idx = unravel(i, &shape);
                let mut src = Vec::with_capacity(idx.len());
                for ((&v, &(a, _)), &d) in idx.iter().zip(p).zip(&self.shape) {
                    if v < a || v >= a + d {
                        return 0.0;
                    }
                    src.push(v - a);
                }
                self.at(&src)
            })
            .collect();
        Nd::new(&shape, data)
    }

    pub fn shrink(&self, r: &[(usize, usize)]) -> Nd {
        let shape: Vec<usize> = r.iter().map(|(a, b)| b - a).collect();
        let total: usize = shape.iter().product();
        let data = (0..total)
            .map(|i| {
                let idx = unravel(i, &shape);
                let src: Vec<usize> = idx.iter().zip(r).map(|(v, (a, _))| v + a).collect();
                self.at(&src)
            })
            .collect();
        Nd::new(&shape, data)
    }

    pub fn flip(&self, axes: &[usize]) -> Nd {
        let total = self.data.len();
        let data = (0..total)
            .map(|i| {
                let mut idx = unravel(i, &self.shape);
                for &a in axes {
                    idx[a] = self.shape[a] - 1 - idx[a];
                }
                self.at(&idx)
            })
            .collect();
        Nd::new(&self.shape, data)
    }

    pub fn expand(&self, shape: &[usize]) -> Nd {
        Nd::new(shape, vec![0.0; shape.iter().product()]).zip(self, |_, b| b)
    }

    /// `[m, k] · [k, n]`.
    pub fn matmul(&self, o: &Nd) -> Nd {
        let (m, k, n) = (self.shape[0], self.shape[1], o.shape[1]);
        let mut out = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                out[i * n + j] = (0..k)
                    .map(|p| self.data[i * k + p] * o.data[p * n + j])
                    .sum();
            }
        }
        Nd::new(&[m, n], out)
    }
}

/// Whether `got` is within `tol` (relative to the magnitude, with `tol` as the floor) of
/// `want`, elementwise.
pub fn assert_close(what: &str, got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: {} values, want {}",
        got.len(),
        want.len()
    );
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let g = f64::from(g);
        let ok = (g - w).abs() <= tol * w.abs().max(1.0) || (g.is_nan() && w.is_nan());
        assert!(ok, "{what}: element {i} is {g}, want {w} (tolerance {tol})");
    }
}

/// Central differences of `f` (f64) at `inputs`: the gradient of `Σ f(inputs) · w`.
pub fn numeric_grad(f: &dyn Fn(&[Nd]) -> Nd, inputs: &[Nd], w: &[f64], which: usize) -> Vec<f64> {
    let h = 1e-5;
    let loss = |ins: &[Nd]| -> f64 { f(ins).data.iter().zip(w).map(|(a, b)| a * b).sum() };
    (0..inputs[which].data.len())
        .map(|i| {
            let mut up = inputs.to_vec();
            up[which].data[i] += h;
            let mut down = inputs.to_vec();
            down[which].data[i] -= h;
            (loss(&up) - loss(&down)) / (2.0 * h)
        })
        .collect()
}

/// An operation checked forward and backward against a host reference on a device.
pub struct Check<'a> {
    pub name: &'a str,
    /// Shapes and values of the inputs.
    pub inputs: Vec<(Vec<usize>, Vec<f32>)>,
    /// Relative tolerance of the forward values.
    pub tol: f64,
    /// Whether to check gradients (float inputs, differentiable op).
    pub grad: bool,
}

impl Check<'_> {
    /// Runs `op` on `dev` and compares with `reference`; with `grad`, compares the
    /// gradients of `Σ op(inputs) · w` (w fixed) with central differences of `reference`.
    pub fn run(
        &self,
        dev: &Device,
        op: &dyn Fn(&[Tensor]) -> am_tensor::Result<Tensor>,
        reference: &dyn Fn(&[Nd]) -> Nd,
    ) {
        let what = format!("{} on {}", self.name, dev.name());
        let ts: Vec<Tensor> = self
            .inputs
            .iter()
            .map(|(s, v)| Tensor::from_slice(v, s, dev).unwrap())
            .collect();
        if self.grad {
            for t in &ts {
                t.set_requires_grad(true);
            }
        }
        let nds: Vec<Nd> = self
            .inputs
            .iter()
            .map(|(s, v)| Nd::from_f32(s, v))
            .collect();
        let want = reference(&nds);
        let out = op(&ts).unwrap();
        assert_eq!(out.shape(), want.shape, "{what}: shape");
        let got = out.to_vec_f32().unwrap();
        assert_close(&format!("{what}: forward"), &got, &want.data, self.tol);
        if !self.grad {
            return;
        }
        let mut rng = Rng(7);
        let w: Vec<f32> = rng.values(want.data.len(), -1.0, 1.0);
        let wt = Tensor::from_slice(&w, &want.shape, dev).unwrap();
        out.mul(&wt)
            .unwrap()
            .sum(&[], false)
            .unwrap()
            .backward()
            .unwrap();
        let w64: Vec<f64> = w.iter().map(|&x| f64::from(x)).collect();
        for (k, t) in ts.iter().enumerate() {
            let want_g = numeric_grad(reference, &nds, &w64, k);
            let got_g = t
                .grad()
                .unwrap_or_else(|| panic!("{what}: input {k} has no gradient"))
                .to_vec_f32()
                .unwrap();
            assert_close(
                &format!("{what}: gradient of input {k}"),
                &got_g,
                &want_g,
                self.tol.max(1e-4) * 10.0,
            );
        }
    }
}
