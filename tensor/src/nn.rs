//! Building blocks for training: [`Linear`], [`Conv2d`], [`BatchNorm`], [`LayerNorm`],
//! [`Embedding`] and [`MultiHeadAttention`] layers, the [`Sgd`], [`Adam`] and [`AdamW`]
//! optimizers (updates by [`Tensor::assign`], so a captured step updates parameters in place)
//! with learning-rate schedules ([`LrSchedule`]) and gradient clipping ([`clip_grad_norm`]),
//! and parameters saved to and loaded from safetensors files.

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::{ConvOptions, DType, Device, Error, Result, Tensor};

/// `y = x · Wᵀ + b`, with `W` of shape `[outputs, inputs]` and `b` of `[outputs]` (the
/// layout PyTorch uses).
pub struct Linear {
    /// `[outputs, inputs]`.
    pub weight: Tensor,
    /// `[outputs]`.
    pub bias: Tensor,
}

impl Linear {
    /// A layer initialised as PyTorch does by default: weights and biases uniform in
    /// `±1/√inputs`, drawn on the device from `seed` (and `seed + 1` for the bias); both
    /// computed now and marked as requiring gradients.
    pub fn new(inputs: usize, outputs: usize, seed: u32, dev: &Device) -> Result<Linear> {
        let bound = 1.0 / (inputs.max(1) as f64).sqrt();
        let weight = Tensor::uniform(&[outputs, inputs], -bound, bound, seed, dev)?;
        let bias = Tensor::uniform(&[outputs], -bound, bound, seed.wrapping_add(1), dev)?;
        Tensor::realize_all(&[&weight, &bias])?;
        weight.set_requires_grad(true);
        bias.set_requires_grad(true);
        Ok(Linear { weight, bias })
    }

    /// The layer applied to `x` of shape `[…, inputs]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.matmul(&self.weight.t()?)?.add(&self.bias)
    }

    /// Weight and bias.
    pub fn parameters(&self) -> Vec<Tensor> {
        vec![self.weight.clone(), self.bias.clone()]
    }
}

fn grad_of(i: usize, p: &Tensor) -> Result<Tensor> {
    p.grad().ok_or_else(|| {
        Error::Autograd(format!(
            "parameter {i} (shape {:?}) has no gradient: call backward first",
            p.shape()
        ))
    })
}

/// What optimizers share.
pub trait Optimizer {
    /// Makes the update lazily: parameters (and state) become assignments, computed by the
    /// next realize.
    fn update(&mut self) -> Result<()>;
    /// The parameters and state tensors an update assigns.
    fn tensors(&self) -> Vec<Tensor>;
    /// The parameters.
    fn parameters(&self) -> &[Tensor];

    /// Updates and realizes, together with `also` (typically the loss) in one schedule,
    /// then forgets the gradients.
    fn step(&mut self, also: &[&Tensor]) -> Result<()> {
        self.update()?;
        let state = self.tensors();
        let mut all: Vec<&Tensor> = also.to_vec();
        all.extend(state.iter());
        Tensor::realize_all(&all)?;
        self.zero_grad();
        Ok(())
    }

    /// Forgets the parameters' gradients.
    fn zero_grad(&self) {
        for p in self.parameters() {
            p.zero_grad();
        }
    }
}

/// Stochastic gradient descent, with optional momentum: `v ← μ·v + g`, `p ← p − lr·v`.
pub struct Sgd {
    params: Vec<Tensor>,
    lr: f64,
    momentum: f64,
    velocity: Vec<Tensor>,
}

impl Sgd {
    /// Plain SGD.
    pub fn new(params: Vec<Tensor>, lr: f64) -> Sgd {
        Sgd::with_momentum(params, lr, 0.0)
    }

    /// SGD with momentum `momentum`.
    pub fn with_momentum(params: Vec<Tensor>, lr: f64, momentum: f64) -> Sgd {
        let velocity = if momentum != 0.0 {
            params.iter().map(|p| p.zeros_like()).collect()
        } else {
            vec![]
        };
        Sgd {
            params,
            lr,
            momentum,
            velocity,
        }
    }
}

impl Optimizer for Sgd {
    fn update(&mut self) -> Result<()> {
        for (i, p) in self.params.iter().enumerate() {
            let g = grad_of(i, p)?;
            let step = if self.momentum != 0.0 {
                let v = &self.velocity[i];
                v.assign(&v.mul(self.momentum)?.add(&g)?)?;
                v.clone()
            } else {
                g
            };
            p.assign(&crate::no_grad(|| p.sub(&step.mul(self.lr)?))?)?;
        }
        Ok(())
    }

    fn tensors(&self) -> Vec<Tensor> {
        self.params.iter().chain(&self.velocity).cloned().collect()
    }

    fn parameters(&self) -> &[Tensor] {
        &self.params
    }
}

/// Adam: `m ← β₁m + (1−β₁)g`, `v ← β₂v + (1−β₂)g²`, `p ← p − lr·m̂/(√v̂ + ε)` with
/// `m̂ = m/(1−β₁ᵗ)`, `v̂ = v/(1−β₂ᵗ)`. The step count `t` lives on the device, so a
/// captured step corrects its bias right on every replay.
pub struct Adam {
    params: Vec<Tensor>,
    lr: f64,
    betas: (f64, f64),
    eps: f64,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
    t: Tensor,
}

impl Adam {
    /// Adam with β = (0.9, 0.999) and ε = 1e-8.
    pub fn new(params: Vec<Tensor>, lr: f64) -> Result<Adam> {
        Adam::with(params, lr, (0.9, 0.999), 1e-8)
    }

    /// Adam with the given β and ε.
    pub fn with(params: Vec<Tensor>, lr: f64, betas: (f64, f64), eps: f64) -> Result<Adam> {
        let dev = params
            .first()
            .map(|p| p.device())
            .ok_or_else(|| Error::Autograd("an optimizer needs at least one parameter".into()))?;
        let m = params.iter().map(|p| p.zeros_like()).collect();
        let v = params.iter().map(|p| p.zeros_like()).collect();
        let t = Tensor::zeros(&[1], DType::F32, &dev);
        Ok(Adam {
            params,
            lr,
            betas,
            eps,
            m,
            v,
            t,
        })
    }
}

impl Adam {
    /// Counts a step on the device; the bias corrections `(1 − β₁ᵗ, 1 − β₂ᵗ)` of it.
    fn tick(&self) -> Result<(Tensor, Tensor)> {
        let (b1, b2) = self.betas;
        self.t.assign(&self.t.add(1.0)?)?;
        // βᵗ = 2^(t·log2 β), on the device.
        let c1 = self.t.mul(b1.log2())?.exp2().neg().add(1.0)?;
        let c2 = self.t.mul(b2.log2())?.exp2().neg().add(1.0)?;
        Ok((c1, c2))
    }

    /// Updates parameter `i`'s moments from its gradient; its direction `m̂/(√v̂ + ε)`.
    fn direction(&self, i: usize, c1: &Tensor, c2: &Tensor) -> Result<Tensor> {
        let (b1, b2) = self.betas;
        let g = grad_of(i, &self.params[i])?;
        let (m, v) = (&self.m[i], &self.v[i]);
        m.assign(&m.mul(b1)?.add(&g.mul(1.0 - b1)?)?)?;
        v.assign(&v.mul(b2)?.add(&g.square().mul(1.0 - b2)?)?)?;
        m.div(c1)?.div(&v.div(c2)?.sqrt().add(self.eps)?)
    }
}

impl Optimizer for Adam {
    fn update(&mut self) -> Result<()> {
        crate::no_grad(|| {
            let (c1, c2) = self.tick()?;
            for (i, p) in self.params.iter().enumerate() {
                let upd = self.direction(i, &c1, &c2)?.mul(self.lr)?;
                p.assign(&p.sub(&upd)?)?;
            }
            Ok(())
        })
    }

    fn tensors(&self) -> Vec<Tensor> {
        let mut v: Vec<Tensor> = vec![self.t.clone()];
        v.extend(self.params.iter().cloned());
        v.extend(self.m.iter().cloned());
        v.extend(self.v.iter().cloned());
        v
    }

    fn parameters(&self) -> &[Tensor] {
        &self.params
    }
}

/// Writes `tensors` to a safetensors file (computing them first).
pub fn save(path: &Path, tensors: &[(&str, &Tensor)]) -> Result<()> {
    let mut header = Map::new();
    let mut data: Vec<u8> = Vec::new();
    for (name, t) in tensors {
        let bytes = t.to_bytes()?;
        let begin = data.len();
        data.extend_from_slice(&bytes);
        header.insert(
            (*name).to_string(),
            json!({
                "dtype": t.dtype().safetensors_name(),
                "shape": t.shape(),
                "data_offsets": [begin, data.len()],
            }),
        );
    }
    let mut h = Value::Object(header).to_string().into_bytes();
    // The data starts 8-byte aligned: the header is padded with spaces.
    while !(8 + h.len()).is_multiple_of(8) {
        h.push(b' ');
    }
    let mut file = Vec::with_capacity(8 + h.len() + data.len());
    file.extend_from_slice(&(h.len() as u64).to_le_bytes());
    file.extend_from_slice(&h);
    file.extend_from_slice(&data);
    std::fs::write(path, file).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads every tensor of a safetensors file onto `dev`, in the file's order of data.
pub fn load(path: &Path, dev: &Device) -> Result<Vec<(String, Tensor)>> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let bad = |reason: String| Error::Safetensors {
        path: path.to_path_buf(),
        reason,
    };
    let n = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| bad("shorter than its 8-byte header length".into()))?;
    let hend = usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_add(8))
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| bad(format!("header of {n} bytes runs past the end of the file")))?;
    let header: Value = serde_json::from_slice(&bytes[8..hend])
        .map_err(|e| bad(format!("header is not JSON: {e}")))?;
    let obj = header
        .as_object()
        .ok_or_else(|| bad("header is not a JSON object".into()))?;
    let data = &bytes[hend..];
    let mut out = Vec::new();
    for (name, entry) in obj {
        if name == "__metadata__" {
            continue;
        }
        let field = |k: &str| {
            entry
                .get(k)
                .ok_or_else(|| bad(format!("tensor {name}: no `{k}`")))
        };
        let dtype_name = field("dtype")?.as_str().unwrap_or("");
        let dtype = DType::from_safetensors_name(dtype_name).ok_or_else(|| {
            bad(format!(
                "tensor {name}: dtype `{dtype_name}` is not supported"
            ))
        })?;
        let shape: Vec<usize> = field("shape")?
            .as_array()
            .and_then(|a| {
                a.iter()
                    .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
                    .collect()
            })
            .ok_or_else(|| bad(format!("tensor {name}: shape is not a list of sizes")))?;
        let offs: Vec<usize> = field("data_offsets")?
            .as_array()
            .and_then(|a| {
                a.iter()
                    .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
                    .collect()
            })
            .filter(|v: &Vec<usize>| v.len() == 2)
            .ok_or_else(|| bad(format!("tensor {name}: data_offsets is not [begin, end]")))?;
        let numel = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| bad(format!("tensor {name}: shape {shape:?} is too large")))?;
        let (b, e) = (offs[0], offs[1]);
        if b > e || e > data.len() || e - b != numel * dtype.size() {
            return Err(bad(format!(
                "tensor {name}: data [{b}, {e}) does not hold {numel} {dtype} in {} bytes of data",
                data.len()
            )));
        }
        out.push((
            b,
            name.clone(),
            Tensor::from_bytes(&data[b..e], &shape, dtype, dev)?,
        ));
    }
    out.sort_by_key(|(b, _, _)| *b);
    Ok(out.into_iter().map(|(_, n, t)| (n, t)).collect())
}

/// Loads a safetensors file into existing tensors by name (shapes and dtypes must match),
/// assigning in place.
pub fn load_into(path: &Path, tensors: &[(&str, &Tensor)]) -> Result<()> {
    let Some((_, first)) = tensors.first() else {
        return Ok(());
    };
    let loaded = load(path, &first.device())?;
    for (name, t) in tensors {
        let (_, v) = loaded
            .iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| Error::Safetensors {
                path: path.to_path_buf(),
                reason: format!("no tensor named {name}"),
            })?;
        if v.shape() != t.shape() || v.dtype() != t.dtype() {
            return Err(Error::Safetensors {
                path: path.to_path_buf(),
                reason: format!(
                    "tensor {name} is {:?} {}, the model's {:?} {}",
                    v.shape(),
                    v.dtype(),
                    t.shape(),
                    t.dtype()
                ),
            });
        }
        t.assign(&v.to(&t.device()))?;
        t.realize()?;
    }
    Ok(())
}

/// A 2-D convolution layer: `y = conv2d(x, W) + b` with `W` `[out, in / groups, k, k]` and
/// `b` `[out]` (PyTorch's layout and default initialisation).
pub struct Conv2d {
    /// `[out channels, in channels / groups, k, k]`.
    pub weight: Tensor,
    /// `[out channels]`.
    pub bias: Tensor,
    /// Stride, padding, dilation, groups.
    pub options: ConvOptions,
}

impl Conv2d {
    /// A layer of `k × k` kernels, weights and biases uniform in `±1/√fan_in` (`fan_in = in
    /// / groups · k²`, PyTorch's default) drawn on the device from `seed` (and `seed + 1`).
    pub fn new(
        inputs: usize,
        outputs: usize,
        k: usize,
        options: ConvOptions,
        seed: u32,
        dev: &Device,
    ) -> Result<Conv2d> {
        let g = options.groups.max(1);
        if !inputs.is_multiple_of(g) || !outputs.is_multiple_of(g) || k == 0 {
            return Err(Error::Shape {
                op: "Conv2d",
                shape: vec![outputs, inputs, k, k],
                reason: format!("{g} groups must divide both channel counts, and k ≥ 1"),
            });
        }
        let fan_in = inputs / g * k * k;
        let bound = 1.0 / (fan_in.max(1) as f64).sqrt();
        let weight = Tensor::uniform(&[outputs, inputs / g, k, k], -bound, bound, seed, dev)?;
        let bias = Tensor::uniform(&[outputs], -bound, bound, seed.wrapping_add(1), dev)?;
        Tensor::realize_all(&[&weight, &bias])?;
        weight.set_requires_grad(true);
        bias.set_requires_grad(true);
        Ok(Conv2d {
            weight,
            bias,
            options,
        })
    }

    /// The layer applied to `x` `[n, in, h, w]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.conv2d(&self.weight, Some(&self.bias), self.options)
    }

    /// Weight and bias.
    pub fn parameters(&self) -> Vec<Tensor> {
        vec![self.weight.clone(), self.bias.clone()]
    }
}

/// Batch normalisation of the channels (axis 1) of `[n, c, …]` inputs (PyTorch's
/// `BatchNorm2d`): in training, by the batch's statistics, which also move the running
/// averages; in inference (`training` false), by the running averages.
pub struct BatchNorm {
    /// Scale per channel (starts at 1).
    pub weight: Tensor,
    /// Shift per channel (starts at 0).
    pub bias: Tensor,
    /// Running mean per channel (starts at 0).
    pub running_mean: Tensor,
    /// Running (unbiased) variance per channel (starts at 1).
    pub running_var: Tensor,
    /// Weight of a batch in the running averages (0.1).
    pub momentum: f64,
    /// Added to the variance (1e-5).
    pub eps: f64,
    /// Normalise by the batch (true) or by the running averages.
    pub training: bool,
}

impl BatchNorm {
    /// A layer of `channels`, in training mode.
    pub fn new(channels: usize, dev: &Device) -> Result<BatchNorm> {
        let c = [channels];
        let weight = Tensor::ones(&c, DType::F32, dev);
        let bias = Tensor::zeros(&c, DType::F32, dev);
        let running_mean = Tensor::zeros(&c, DType::F32, dev);
        let running_var = Tensor::ones(&c, DType::F32, dev);
        // In memory from the start: a captured step updates the running averages in place.
        Tensor::realize_all(&[&weight, &bias, &running_mean, &running_var])?;
        weight.set_requires_grad(true);
        bias.set_requires_grad(true);
        Ok(BatchNorm {
            weight,
            bias,
            running_mean,
            running_var,
            momentum: 0.1,
            eps: 1e-5,
            training: true,
        })
    }

    /// The layer applied to `x`. In training the running averages become assignments: a
    /// step realizes them with its loss ([`BatchNorm::buffers`]).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if self.training {
            x.batch_norm(
                Some(&self.weight),
                Some(&self.bias),
                Some((&self.running_mean, &self.running_var)),
                self.momentum,
                self.eps,
            )
        } else {
            x.batch_norm_inference(
                Some(&self.weight),
                Some(&self.bias),
                &self.running_mean,
                &self.running_var,
                self.eps,
            )
        }
    }

    /// Weight and bias.
    pub fn parameters(&self) -> Vec<Tensor> {
        vec![self.weight.clone(), self.bias.clone()]
    }

    /// The running mean and variance (no gradients; saved with the weights).
    pub fn buffers(&self) -> Vec<Tensor> {
        vec![self.running_mean.clone(), self.running_var.clone()]
    }
}

/// A learning rate's factor as a function of the step (1 for the first step): the
/// optimizer multiplies its learning rate by it. Computed on the device from the
/// optimizer's step count, so a captured step follows the schedule on every replay.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LrSchedule {
    /// Always 1.
    Constant,
    /// Linear warm-up from `1/warmup` at step 1 to 1 at step `warmup`, then half a cosine
    /// down to `min_ratio` at step `total`, and `min_ratio` after.
    WarmupCosine {
        /// Steps of the warm-up (0: none).
        warmup: u64,
        /// The step where the cosine ends.
        total: u64,
        /// The factor at the end.
        min_ratio: f64,
    },
}

impl LrSchedule {
    /// The factor at `step`, on the host.
    pub fn factor(&self, step: u64) -> f64 {
        match *self {
            LrSchedule::Constant => 1.0,
            LrSchedule::WarmupCosine {
                warmup,
                total,
                min_ratio,
            } => {
                if step < warmup {
                    return step as f64 / warmup as f64;
                }
                let span = total.saturating_sub(warmup).max(1) as f64;
                let p = ((step - warmup) as f64 / span).min(1.0);
                min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + (std::f64::consts::PI * p).cos())
            }
        }
    }

    /// The factor at the steps `step` (f32 counts), on their device.
    pub fn factor_on(&self, step: &Tensor) -> Result<Tensor> {
        let t = step.cast(DType::F32);
        match *self {
            LrSchedule::Constant => Ok(t.ones_like()),
            LrSchedule::WarmupCosine {
                warmup,
                total,
                min_ratio,
            } => {
                let span = total.saturating_sub(warmup).max(1) as f64;
                let p = t.sub(warmup as f64)?.mul(1.0 / span)?.clamp(0.0, 1.0)?;
                let cosine = p
                    .mul(std::f64::consts::PI)?
                    .cos()
                    .add(1.0)?
                    .mul(0.5 * (1.0 - min_ratio))?
                    .add(min_ratio)?;
                if warmup == 0 {
                    return Ok(cosine);
                }
                t.lt(warmup as f64)?
                    .where_(&t.mul(1.0 / warmup as f64)?, &cosine)
            }
        }
    }
}

/// AdamW: Adam whose weight decay is decoupled from the gradient's moments —
/// `p ← p·(1 − lr·wd) − lr·m̂/(√v̂ + ε)` — with the learning rate following an
/// [`LrSchedule`] (`lr` times its factor at the step).
pub struct AdamW {
    /// The moments, the step count, β and ε; its learning rate is this one's.
    adam: Adam,
    weight_decay: f64,
    schedule: LrSchedule,
}

impl AdamW {
    /// AdamW with β = (0.9, 0.999), ε = 1e-8 and a constant learning rate.
    pub fn new(params: Vec<Tensor>, lr: f64, weight_decay: f64) -> Result<AdamW> {
        Ok(AdamW {
            adam: Adam::new(params, lr)?,
            weight_decay,
            schedule: LrSchedule::Constant,
        })
    }

    /// The same with the learning rate following `schedule`.
    pub fn with_schedule(mut self, schedule: LrSchedule) -> AdamW {
        self.schedule = schedule;
        self
    }

    /// The same with other β and ε.
    pub fn with_betas(mut self, betas: (f64, f64), eps: f64) -> AdamW {
        self.adam.betas = betas;
        self.adam.eps = eps;
        self
    }
}

impl Optimizer for AdamW {
    fn update(&mut self) -> Result<()> {
        let adam = &self.adam;
        crate::no_grad(|| {
            let (c1, c2) = adam.tick()?;
            // A constant rate stays a number, so the decay factor is exactly 1 − lr·wd.
            let lr = match self.schedule {
                LrSchedule::Constant => None,
                s => Some(s.factor_on(&adam.t)?.mul(adam.lr)?),
            };
            for (i, p) in adam.params.iter().enumerate() {
                let dir = adam.direction(i, &c1, &c2)?;
                let next = match &lr {
                    None => p
                        .mul(1.0 - adam.lr * self.weight_decay)?
                        .sub(&dir.mul(adam.lr)?)?,
                    Some(lr) => p
                        .mul(&lr.mul(-self.weight_decay)?.add(1.0)?)?
                        .sub(&dir.mul(lr)?)?,
                };
                p.assign(&next)?;
            }
            Ok(())
        })
    }

    fn tensors(&self) -> Vec<Tensor> {
        self.adam.tensors()
    }

    fn parameters(&self) -> &[Tensor] {
        &self.adam.params
    }
}

/// Scales the gradients of `params` together so that their global norm (the 2-norm of all
/// of them as one vector) is at most `max_norm`, by `min(1, max_norm / (norm + 1e-6))` as
/// PyTorch's `clip_grad_norm_` does. Lazy, so a captured step clips on every replay.
/// Returns the norm before clipping.
pub fn clip_grad_norm(params: &[Tensor], max_norm: f64) -> Result<Tensor> {
    crate::no_grad(|| {
        let grads: Vec<Tensor> = params
            .iter()
            .enumerate()
            .map(|(i, p)| grad_of(i, p))
            .collect::<Result<_>>()?;
        let mut total: Option<Tensor> = None;
        for g in &grads {
            let s = g.cast(DType::F32).square().sum(&[], false)?;
            total = Some(match total {
                Some(t) => t.add(&s)?,
                None => s,
            });
        }
        let norm = total
            .ok_or_else(|| Error::Autograd("clip_grad_norm needs at least one parameter".into()))?
            .sqrt();
        let scale = norm.add(1e-6)?.recip().mul(max_norm)?.minimum(1.0)?;
        for (p, g) in params.iter().zip(grads) {
            p.zero_grad();
            p.accumulate_grad(g.mul(&scale)?)?;
        }
        Ok(norm)
    })
}

/// Layer normalisation over the last axis ([`Tensor::layer_norm`]) with a learned scale
/// (ones at first) and shift (zeros).
pub struct LayerNorm {
    /// `[dim]`.
    pub weight: Tensor,
    /// `[dim]`.
    pub bias: Tensor,
    /// Added to the variance.
    pub eps: f64,
}

impl LayerNorm {
    /// A layer over `dim` features with ε = 1e-5 (PyTorch's default).
    pub fn new(dim: usize, dev: &Device) -> Result<LayerNorm> {
        let weight = Tensor::from_slice(&vec![1.0f32; dim], &[dim], dev)?;
        let bias = Tensor::from_slice(&vec![0.0f32; dim], &[dim], dev)?;
        weight.set_requires_grad(true);
        bias.set_requires_grad(true);
        Ok(LayerNorm {
            weight,
            bias,
            eps: 1e-5,
        })
    }

    /// The layer applied to `x` of shape `[…, dim]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.layer_norm(Some(&self.weight), Some(&self.bias), self.eps)
    }

    /// Weight and bias.
    pub fn parameters(&self) -> Vec<Tensor> {
        vec![self.weight.clone(), self.bias.clone()]
    }
}

/// A table of `rows` learned vectors of `dim` features, looked up by i32 indices
/// ([`Tensor::embedding`]).
pub struct Embedding {
    /// `[rows, dim]`.
    pub weight: Tensor,
}

impl Embedding {
    /// A table initialised as PyTorch does, standard normal values drawn on the device from
    /// `seed`, computed now and requiring gradients.
    pub fn new(rows: usize, dim: usize, seed: u32, dev: &Device) -> Result<Embedding> {
        Embedding::with_scale(rows, dim, 1.0, seed, dev)
    }

    /// A table of normal values of standard deviation `scale` (transformers use about 0.02).
    pub fn with_scale(
        rows: usize,
        dim: usize,
        scale: f64,
        seed: u32,
        dev: &Device,
    ) -> Result<Embedding> {
        let weight = Tensor::randn(&[rows, dim], seed, dev)?.mul(scale)?;
        weight.realize()?;
        weight.set_requires_grad(true);
        Ok(Embedding { weight })
    }

    /// The rows of `indices` (i32, any shape): `indices.shape + [dim]`.
    pub fn forward(&self, indices: &Tensor) -> Result<Tensor> {
        self.weight.embedding(indices)
    }

    /// The table.
    pub fn parameters(&self) -> Vec<Tensor> {
        vec![self.weight.clone()]
    }
}

/// Multi-head self-attention: one linear map makes queries, keys and values of every head
/// (`[3·dim, dim]`, PyTorch's `in_proj`), each head attends with
/// [`Tensor::scaled_dot_product_attention`], and a second linear map mixes the heads
/// (`out_proj`).
pub struct MultiHeadAttention {
    /// `dim → 3·dim`: queries, keys, values.
    pub in_proj: Linear,
    /// `dim → dim`.
    pub out_proj: Linear,
    /// Heads (`dim` is a multiple of them).
    pub heads: usize,
}

impl MultiHeadAttention {
    /// Attention over `dim` features in `heads` heads, weights from `seed` (and `seed + 2`).
    pub fn new(dim: usize, heads: usize, seed: u32, dev: &Device) -> Result<MultiHeadAttention> {
        if heads == 0 || !dim.is_multiple_of(heads) {
            return Err(Error::Shape {
                op: "MultiHeadAttention",
                shape: vec![dim],
                reason: format!("{dim} features do not split into {heads} heads"),
            });
        }
        Ok(MultiHeadAttention {
            in_proj: Linear::new(dim, 3 * dim, seed, dev)?,
            out_proj: Linear::new(dim, dim, seed.wrapping_add(2), dev)?,
            heads,
        })
    }

    /// Queries, keys and values of `x` `[batch, seq, dim]`, each `[batch, heads, seq,
    /// dim / heads]` (what a key-value cache keeps).
    pub fn project(&self, x: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        let s = x.shape();
        if s.len() != 3 || s[2] * 3 != self.in_proj.weight.shape()[0] {
            return Err(Error::Shape {
                op: "MultiHeadAttention",
                shape: s,
                reason: format!(
                    "the input must be [batch, seq, {}]",
                    self.in_proj.weight.shape()[1]
                ),
            });
        }
        let (b, t, d) = (s[0] as isize, s[1] as isize, s[2]);
        let hd = (d / self.heads) as isize;
        let qkv = self
            .in_proj
            .forward(x)?
            .reshape(&[b, t, 3, self.heads as isize, hd])?
            .permute(&[2, 0, 3, 1, 4])?;
        let part = |i: usize| qkv.narrow(0, i, 1)?.squeeze(0);
        Ok((part(0)?, part(1)?, part(2)?))
    }

    /// Heads' outputs `[batch, heads, seq, dim / heads]` joined and mixed: `[batch, seq,
    /// dim]`.
    pub fn merge(&self, o: &Tensor) -> Result<Tensor> {
        let s = o.shape();
        let (b, t) = (s[0] as isize, s.get(2).copied().unwrap_or(0) as isize);
        let joined = o.permute(&[0, 2, 1, 3])?.reshape(&[b, t, -1])?;
        self.out_proj.forward(&joined)
    }

    /// Self-attention of `x` `[batch, seq, dim]`; `causal` hides later positions, `mask` is
    /// added to (or, if bool, selects) the scores `[…, seq, seq]`.
    pub fn forward(&self, x: &Tensor, mask: Option<&Tensor>, causal: bool) -> Result<Tensor> {
        let (q, k, v) = self.project(x)?;
        self.merge(&q.scaled_dot_product_attention(&k, &v, mask, causal)?)
    }

    /// The two maps' weights and biases.
    pub fn parameters(&self) -> Vec<Tensor> {
        let mut p = self.in_proj.parameters();
        p.extend(self.out_proj.parameters());
        p
    }
}
