//! Operations of sequence models (transformers): normalisations, embeddings, masks, running
//! sums, attention, sampling and dropout — and [`Rng`], random numbers whose state lives in
//! device memory, so a captured step draws new numbers on every replay.
//!
//! Everything here is built from the primitive operations, so autograd differentiates it and
//! the scheduler fuses it like any other expression.

use crate::node::{Node, Op, no_grad};
use crate::tensor::axis;
use crate::{DType, Device, Error, Result, Tensor};

/// A stream of random numbers whose counter lives in device memory (one i32).
///
/// Every draw advances the counter by an assignment computed in the same schedule as the
/// draw, and mixes the counter's new value with the seed. A captured step ([`crate::Jit`])
/// replays that assignment too, so each replay draws new numbers — where
/// [`Tensor::rand`], whose seed is a constant of the recorded kernels, repeats. Starting
/// again from the same seed gives the same numbers, captured or not, on every device.
pub struct Rng {
    seed: u32,
    counter: Tensor,
}

impl Rng {
    /// A stream from `seed` on `dev`, its counter at 0.
    pub fn new(seed: u32, dev: &Device) -> Result<Rng> {
        let counter = Tensor::from_slice(&[0i32], &[1], dev)?;
        Ok(Rng { seed, counter })
    }

    /// The seed.
    pub fn seed(&self) -> u32 {
        self.seed
    }

    /// The device the counter lives on.
    pub fn device(&self) -> Device {
        self.counter.device()
    }

    /// Draws made so far (read from the device).
    pub fn counter(&self) -> Result<i32> {
        Ok(self.counter.to_vec::<i32>()?[0])
    }

    /// Uniform values in `[0, 1)` (f32) of `shape`: element `x` of the draw that moved the
    /// counter to `c` is [`rand_at_reference`]`(x, seed, c)`.
    pub fn rand(&self, shape: &[usize]) -> Result<Tensor> {
        let next = no_grad(|| self.counter.add(1))?;
        self.counter.assign(&next)?;
        // The draw reads the assignment, so realizing the draw advances the counter.
        let ones = vec![1isize; shape.len()];
        let c = self.counter.reshape(&ones)?.expand(shape)?;
        Ok(Tensor::from_node(Node::new(
            Op::RandAt(self.seed, c.node()),
            shape.to_vec(),
            DType::F32,
            self.device(),
        )))
    }
}

/// What element `x` of an [`Rng`]'s draw is, for the seed and the counter value the draw
/// moved the counter to (the reference tests check the kernels against).
pub fn rand_at_reference(x: u32, seed: u32, counter: i32) -> f32 {
    let mixed = seed.wrapping_add((counter as u32).wrapping_mul(crate::codegen::RAND_COUNTER_K));
    crate::codegen::rand_reference(x, mixed)
}

fn last_axis_param(
    op: &'static str,
    x: &Tensor,
    name: &str,
    p: Option<&Tensor>,
) -> Result<Option<Tensor>> {
    let Some(p) = p else {
        return Ok(None);
    };
    let shape = x.shape();
    let d = shape.last().copied().unwrap_or(1);
    if p.shape() != [d] {
        return Err(Error::Shape {
            op,
            shape,
            reason: format!("{name} has shape {:?}, not [{d}]", p.shape()),
        });
    }
    Ok(Some(p.clone()))
}

fn affine(y: Tensor, w: Option<Tensor>, b: Option<Tensor>) -> Result<Tensor> {
    let y = match w {
        Some(w) => y.mul(&w)?,
        None => y,
    };
    match b {
        Some(b) => y.add(&b),
        None => Ok(y),
    }
}

impl Tensor {
    /// Normalised over the last axis — `(x − mean) / √(var + eps)`, the variance biased —
    /// then scaled by `weight` and shifted by `bias` (each `[last]`, optional).
    pub fn layer_norm(
        &self,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<Tensor> {
        if self.ndim() == 0 {
            return Err(Error::Shape {
                op: "layer_norm",
                shape: vec![],
                reason: "a scalar has no axis to normalise".into(),
            });
        }
        let w = last_axis_param("layer_norm", self, "weight", weight)?;
        let b = last_axis_param("layer_norm", self, "bias", bias)?;
        let x = self.cast(self.dtype().to_float());
        let xc = x.sub(&x.mean(&[-1], true)?)?;
        let var = xc.square().mean(&[-1], true)?;
        affine(xc.mul(&var.add(eps)?.rsqrt())?, w, b)
    }

    /// Divided by the root mean square over the last axis, `x / √(mean(x²) + eps)`, then
    /// scaled by `weight` (`[last]`, optional).
    pub fn rms_norm(&self, weight: Option<&Tensor>, eps: f64) -> Result<Tensor> {
        if self.ndim() == 0 {
            return Err(Error::Shape {
                op: "rms_norm",
                shape: vec![],
                reason: "a scalar has no axis to normalise".into(),
            });
        }
        let w = last_axis_param("rms_norm", self, "weight", weight)?;
        let x = self.cast(self.dtype().to_float());
        let ms = x.square().mean(&[-1], true)?;
        affine(x.mul(&ms.add(eps)?.rsqrt())?, w, None)
    }

    /// Rows of this table `[rows, dim]` picked by `indices` (i32, any shape): the result is
    /// `indices.shape + [dim]`. An index outside `0..rows` picks a row of zeros. The
    /// gradient adds each picked row's gradient into its row of the table.
    pub fn embedding(&self, indices: &Tensor) -> Result<Tensor> {
        let shape = self.shape();
        if shape.len() != 2 || indices.dtype() != DType::I32 {
            return Err(Error::Shape {
                op: "embedding",
                shape,
                reason: format!(
                    "the table must be [rows, dim] and the indices i32 (they are {})",
                    indices.dtype()
                ),
            });
        }
        // A one-hot row times the table: its transpose times the gradient is the scatter-add.
        let onehot = indices.one_hot(shape[0])?.cast(self.dtype());
        onehot.matmul(self)
    }

    fn band(&self, op: &'static str, k: i64, lower: bool) -> Result<Tensor> {
        let shape = self.shape();
        if shape.len() < 2 {
            return Err(Error::Shape {
                op,
                shape,
                reason: "needs at least two axes (a matrix)".into(),
            });
        }
        let (r, c) = (shape[shape.len() - 2], shape[shape.len() - 1]);
        let dev = self.device();
        let idx =
            |a| Tensor::from_node(Node::new(Op::Index(a), vec![r, c], DType::I32, dev.clone()));
        let diag = idx(1).sub(&idx(0))?;
        let k = crate::Operand::Int(k);
        let keep = if lower { diag.le(k)? } else { diag.ge(k)? };
        keep.where_(self, zero_of(self.dtype()))
    }

    /// The lower triangle of the last two axes: elements with `column − row ≤ k` kept, the
    /// others 0.
    pub fn tril(&self, k: i64) -> Result<Tensor> {
        self.band("tril", k, true)
    }

    /// The upper triangle of the last two axes: elements with `column − row ≥ k` kept.
    pub fn triu(&self, k: i64) -> Result<Tensor> {
        self.band("triu", k, false)
    }

    /// Running sums along `axis`: element `i` is the sum of elements `0..=i` (bools count
    /// in i32). Computed as a masked sum of `n²` terms per row: meant for short axes
    /// (sequences, vocabularies), not for millions of elements.
    pub fn cumsum(&self, axis_: isize) -> Result<Tensor> {
        let shape = self.shape();
        if shape.is_empty() {
            return Ok(self.clone());
        }
        let a = axis("cumsum", &shape, axis_)? as isize;
        let n = shape[a as usize];
        let x = self.transpose(a, -1)?;
        let x = if x.dtype() == DType::Bool {
            x.cast(DType::I32)
        } else {
            x
        };
        let ones = Tensor::ones(&[n, n], DType::Bool, &self.device());
        // Row i of the mask keeps columns j ≤ i.
        let mask = ones.tril(0)?;
        let summed = mask
            .where_(&x.unsqueeze(-2)?, zero_of(x.dtype()))?
            .sum(&[-1], false)?;
        summed.transpose(a, -1)
    }

    /// Attention of queries `self` `[…, L, E]` over keys `[…, S, E]` and values `[…, S, Ev]`
    /// (leading axes broadcast): `softmax(q·kᵀ/√E + mask)·v`. `mask` (broadcasting to
    /// `[…, L, S]`) is added to the scores, or, if bool, keeps the scores where it is true
    /// (the others −∞); `causal` lets query `i` see keys `j ≤ i` only (PyTorch's `is_causal`:
    /// the triangle from the top left). A query that sees no key gives NaN.
    pub fn scaled_dot_product_attention(
        &self,
        key: &Tensor,
        value: &Tensor,
        mask: Option<&Tensor>,
        causal: bool,
    ) -> Result<Tensor> {
        let (qs, ks, vs) = (self.shape(), key.shape(), value.shape());
        let fits = qs.len() >= 2
            && ks.len() >= 2
            && vs.len() >= 2
            && qs[qs.len() - 1] == ks[ks.len() - 1]
            && ks[ks.len() - 2] == vs[vs.len() - 2];
        if !fits {
            return Err(Error::Shape {
                op: "scaled_dot_product_attention",
                shape: qs,
                reason: format!(
                    "queries [.., L, E], keys [.., S, E] and values [.., S, Ev] expected; keys are {ks:?}, values {vs:?}"
                ),
            });
        }
        let e = qs[qs.len() - 1];
        let (l, s) = (qs[qs.len() - 2], ks[ks.len() - 2]);
        let mut scores = self
            .matmul(&key.transpose(-2, -1)?)?
            .mul(1.0 / (e.max(1) as f64).sqrt())?;
        if causal {
            let keep = Tensor::ones(&[l, s], DType::Bool, &self.device()).tril(0)?;
            scores = keep.where_(&scores, f64::NEG_INFINITY)?;
        }
        if let Some(m) = mask {
            scores = if m.dtype() == DType::Bool {
                m.where_(&scores, f64::NEG_INFINITY)?
            } else {
                scores.add(m)?
            };
        }
        scores.softmax(-1)?.matmul(value)
    }

    /// One index per row of the last axis, drawn with probability proportional to the
    /// row's non-negative weights (they need not sum to 1), from `rng`: i32 of the shape
    /// without the last axis.
    pub fn multinomial(&self, rng: &Rng) -> Result<Tensor> {
        let shape = self.shape();
        let Some(&n) = shape.last() else {
            return Err(Error::Shape {
                op: "multinomial",
                shape,
                reason: "a scalar has no weights to draw from".into(),
            });
        };
        if n == 0 {
            return Err(Error::Shape {
                op: "multinomial",
                shape,
                reason: "no weights to draw from".into(),
            });
        }
        no_grad(|| {
            let c = self.detach().cast(DType::F32).cumsum(-1)?;
            let total = c.narrow(-1, n - 1, 1)?;
            let mut ushape = shape.clone();
            ushape[shape.len() - 1] = 1;
            let u = rng.rand(&ushape)?.mul(&total)?;
            // The first index whose running sum passes u: how many do not.
            let below = c.le(&u)?.sum(&[-1], false)?;
            below.minimum(n as i32 - 1)
        })
    }

    /// Each element zeroed with probability `p` (drawn from `rng`), the others divided by
    /// `1 − p`, so the expected value stays; `p = 0` changes nothing, `p = 1` gives zeros.
    pub fn dropout(&self, p: f64, rng: &Rng) -> Result<Tensor> {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::Shape {
                op: "dropout",
                shape: self.shape(),
                reason: format!("probability {p} is not in [0, 1]"),
            });
        }
        if p == 0.0 {
            return Ok(self.clone());
        }
        if p == 1.0 {
            return Ok(self.cast(self.dtype().to_float()).zeros_like());
        }
        let keep = rng.rand(&self.shape())?.ge(p)?;
        keep.where_(&self.mul(1.0 / (1.0 - p))?, 0.0)
    }
}

/// Zero as an operand of `where_` that keeps `dtype`.
fn zero_of(dtype: DType) -> crate::Operand<'static> {
    if dtype.is_float() {
        crate::Operand::Float(0.0)
    } else if dtype == DType::Bool {
        crate::Operand::Bool(false)
    } else {
        crate::Operand::Int(0)
    }
}
