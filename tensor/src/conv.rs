//! Operations of convolutional networks: convolutions (plain and transposed), pooling,
//! batch normalisation, SiLU, and integer division and remainder.
//!
//! Convolutions and pooling are built from movement operations: a sliding-window view of the
//! input (`windows`) made of reshapes, expands and shrinks, then elementwise products and
//! reductions. So they need no primitives of their own — the scheduler fuses them like any
//! other expression and autograd differentiates them through the views' inverses.

use std::sync::Arc;

use crate::node::{BinaryOp, Node, Op, no_grad};
use crate::tensor::{Operand, broadcast_shape};
use crate::{DType, Error, Result, Tensor};

/// Stride, padding, dilation and groups of a convolution (PyTorch's meaning of each); the
/// default is the plain convolution: stride 1, no padding, no dilation, one group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvOptions {
    /// Steps between windows, `[rows, columns]`.
    pub stride: [usize; 2],
    /// Zeros added on both sides of the input, `[rows, columns]` (for a transposed
    /// convolution: removed from both sides of the output).
    pub padding: [usize; 2],
    /// Steps between the kernel's taps.
    pub dilation: [usize; 2],
    /// Channel groups: input and output channels are split into `groups` independent parts.
    pub groups: usize,
    /// Transposed convolutions only: extra rows and columns at the end of the output
    /// (below the stride or the dilation), which picks among the output sizes a strided
    /// convolution maps to one input size.
    pub output_padding: [usize; 2],
}

impl Default for ConvOptions {
    fn default() -> ConvOptions {
        ConvOptions {
            stride: [1, 1],
            padding: [0, 0],
            dilation: [1, 1],
            groups: 1,
            output_padding: [0, 0],
        }
    }
}

impl ConvOptions {
    /// The same stride along both axes.
    pub fn stride(mut self, s: usize) -> ConvOptions {
        self.stride = [s, s];
        self
    }

    /// The same padding along both axes.
    pub fn padding(mut self, p: usize) -> ConvOptions {
        self.padding = [p, p];
        self
    }

    /// The same dilation along both axes.
    pub fn dilation(mut self, d: usize) -> ConvOptions {
        self.dilation = [d, d];
        self
    }

    /// Channel groups.
    pub fn groups(mut self, g: usize) -> ConvOptions {
        self.groups = g;
        self
    }

    /// The same output padding along both axes (transposed convolutions).
    pub fn output_padding(mut self, p: usize) -> ConvOptions {
        self.output_padding = [p, p];
        self
    }
}

fn shape_err(op: &'static str, shape: Vec<usize>, reason: String) -> Error {
    Error::Shape { op, shape, reason }
}

/// Windows along one axis of an input of length `len`: kernel taps `k` apart by `d`,
/// windows `s` apart. `None` when the kernel does not fit.
fn outputs(len: usize, k: usize, s: usize, d: usize) -> Option<usize> {
    let span = d.checked_mul(k.checked_sub(1)?)?.checked_add(1)?;
    (k > 0 && s > 0 && d > 0 && len >= span).then(|| (len - span) / s + 1)
}

impl Tensor {
    /// Along axis `a` (of length `len`), the view `[…, k, o, …]` whose element `(r, j)` is
    /// the input's element `j·s + r·d`: tap `r` of window `j`.
    fn window_axis(&self, a: usize, k: usize, s: usize, d: usize) -> Result<Tensor> {
        let shape = self.shape();
        let len = shape[a];
        let o = outputs(len, k, s, d).ok_or_else(|| {
            shape_err(
                "windows",
                shape.clone(),
                format!("a kernel of {k} taps dilated by {d} does not fit {len} elements"),
            )
        })?;
        let with = |middle: &[usize]| -> Vec<usize> {
            let mut v = shape[..a].to_vec();
            v.extend_from_slice(middle);
            v.extend_from_slice(&shape[a + 1..]);
            v
        };
        let range = |middle: &[(usize, usize)]| -> Vec<(usize, usize)> {
            let mut v: Vec<(usize, usize)> = shape[..a].iter().map(|&n| (0, n)).collect();
            v.extend_from_slice(middle);
            v.extend(shape[a + 1..].iter().map(|&n| (0, n)));
            v
        };
        let swap = |t: Tensor| t.transpose(a as isize, a as isize + 1);
        if d == 1 && s == k {
            // Windows side by side: a reshape of the elements they cover.
            let x = self.shrink(&range(&[(0, o * k)]))?;
            return swap(x.reshape_to(&with(&[o, k]))?);
        }
        // The input repeated `reps` times and read in rows of `row` = len·f + d elements:
        // row r then starts at element r·d of a copy, so its element j is x[r·d + j] (no
        // wrap-around: r·d + j < len for the elements kept). f makes a row long enough for
        // o windows `s` apart.
        let f = (o * s).saturating_sub(d).div_ceil(len).max(1);
        let row = len * f + d;
        let reps = (k * row).div_ceil(len);
        let mut x = self.unsqueeze(a as isize)?;
        x = x.expand(&with(&[reps, len]))?;
        x = x.reshape_to(&with(&[reps * len]))?;
        x = x.shrink(&range(&[(0, k * row)]))?;
        x = x.reshape_to(&with(&[k, row]))?;
        x = x.shrink(&range(&[(0, k), (0, o * s)]))?;
        x = x.reshape_to(&with(&[k, o, s]))?;
        x = x.shrink(&range(&[(0, k), (0, o), (0, 1)]))?;
        x.reshape_to(&with(&[k, o]))
    }

    /// The sliding windows of the last two axes: `[…, h, w]` → `[…, oh, ow, kh, kw]`.
    fn windows(&self, k: [usize; 2], s: [usize; 2], d: [usize; 2]) -> Result<Tensor> {
        let n = self.ndim();
        if n < 2 {
            return Err(shape_err(
                "windows",
                self.shape(),
                "needs two spatial axes".into(),
            ));
        }
        // [.., h, w] → [.., kh, oh, w] → [.., kh, oh, kw, ow].
        let x = self
            .window_axis(n - 2, k[0], s[0], d[0])?
            .window_axis(n, k[1], s[1], d[1])?;
        let mut order: Vec<isize> = (0..n as isize - 2).collect();
        let b = n as isize - 2;
        order.extend([b + 1, b + 3, b, b + 2]);
        x.permute(&order)
    }

    /// Zeros (or `value`) around the last two axes: `[top, bottom]`, `[left, right]`.
    fn pad_spatial(
        &self,
        rows: (usize, usize),
        cols: (usize, usize),
        value: f64,
    ) -> Result<Tensor> {
        let n = self.ndim();
        let mut p = vec![(0, 0); n];
        p[n - 2] = rows;
        p[n - 1] = cols;
        let x = self.pad(&p)?;
        if value == 0.0 || p.iter().all(|&(a, b)| a == 0 && b == 0) {
            return Ok(x);
        }
        let inside = Tensor::full(&self.shape(), 1.0, DType::Bool, &self.device()).pad(&p)?;
        inside.where_(&x, &Tensor::full(&[], value, x.dtype(), &x.device()))
    }

    fn reshape_to(&self, shape: &[usize]) -> Result<Tensor> {
        let s: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
        self.reshape(&s)
    }

    /// Checks an `[n, c, h, w]` input.
    fn nchw(&self, op: &'static str) -> Result<[usize; 4]> {
        let s = self.shape();
        match s.as_slice() {
            &[n, c, h, w] => Ok([n, c, h, w]),
            _ => Err(shape_err(
                op,
                s,
                "the input must be [batch, channels, height, width]".into(),
            )),
        }
    }

    /// 2-D convolution (cross-correlation, as PyTorch's `conv2d`) of `[n, c_in, h, w]` with
    /// `weight` `[c_out, c_in / groups, kh, kw]` and an optional `bias` `[c_out]`: `[n,
    /// c_out, oh, ow]` with `oh = (h + 2·padding − dilation·(kh − 1) − 1) / stride + 1`.
    pub fn conv2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        opts: ConvOptions,
    ) -> Result<Tensor> {
        let [n, cin, _, _] = self.nchw("conv2d")?;
        let ws = weight.shape();
        let g = opts.groups;
        let &[cout, cig, kh, kw] = ws.as_slice() else {
            return Err(shape_err(
                "conv2d",
                ws,
                "the weight must be [out channels, in channels / groups, kh, kw]".into(),
            ));
        };
        if g == 0 || cin % g != 0 || cout % g != 0 || cig * g != cin {
            return Err(shape_err(
                "conv2d",
                self.shape(),
                format!(
                    "{cin} input channels, weight {ws:?} and {g} groups do not fit \
                     (the weight's second axis must be in channels / groups, and groups \
                     must divide both channel counts)"
                ),
            ));
        }
        if let Some(b) = bias
            && b.shape() != [cout]
        {
            return Err(shape_err(
                "conv2d",
                b.shape(),
                format!("the bias must be [{cout}], one per output channel"),
            ));
        }
        let [ph, pw] = opts.padding;
        let x = self.pad_spatial((ph, ph), (pw, pw), 0.0)?;
        let win = x
            .windows([kh, kw], opts.stride, opts.dilation)
            .map_err(|_| {
                shape_err(
                    "conv2d",
                    self.shape(),
                    format!(
                        "a {kh}×{kw} kernel dilated by {:?} does not fit the input padded by {:?}",
                        opts.dilation, opts.padding
                    ),
                )
            })?;
        let ws = win.shape();
        let (oh, ow) = (ws[2], ws[3]);
        let cog = cout / g;
        // [n, g, 1, cig, oh, ow, kh, kw] against [1, g, cog, 1, 1, 1, kh, kw] would put the
        // reduced axes apart; they go last: [n, g, cog, oh, ow, cig, kh, kw].
        let win = win
            .reshape_to(&[n, g, 1, cig, oh, ow, kh, kw])?
            .expand(&[n, g, cog, cig, oh, ow, kh, kw])?
            .permute(&[0, 1, 2, 4, 5, 3, 6, 7])?;
        let w = weight.reshape_to(&[1, g, cog, 1, 1, cig, kh, kw])?;
        let out = win
            .mul(&w)?
            .sum(&[-3, -2, -1], false)?
            .reshape_to(&[n, cout, oh, ow])?;
        match bias {
            Some(b) => out.add(&b.reshape_to(&[1, cout, 1, 1])?),
            None => Ok(out),
        }
    }

    /// Transposed 2-D convolution (PyTorch's `conv_transpose2d`, the gradient of `conv2d`
    /// with respect to its input) of `[n, c_in, h, w]` with `weight` `[c_in, c_out /
    /// groups, kh, kw]`: `[n, c_out, oh, ow]` with `oh = (h − 1)·stride − 2·padding +
    /// dilation·(kh − 1) + output_padding + 1`.
    pub fn conv_transpose2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        opts: ConvOptions,
    ) -> Result<Tensor> {
        let [n, cin, h, w] = self.nchw("conv_transpose2d")?;
        let ws = weight.shape();
        let g = opts.groups;
        let &[wcin, cog, kh, kw] = ws.as_slice() else {
            return Err(shape_err(
                "conv_transpose2d",
                ws,
                "the weight must be [in channels, out channels / groups, kh, kw]".into(),
            ));
        };
        if g == 0 || wcin != cin || cin % g != 0 {
            return Err(shape_err(
                "conv_transpose2d",
                self.shape(),
                format!("{cin} input channels do not fit weight {ws:?} in {g} groups"),
            ));
        }
        let ([sh, sw], [dh, dw], [ph, pw], [oph, opw]) = (
            opts.stride,
            opts.dilation,
            opts.padding,
            opts.output_padding,
        );
        if sh == 0 || sw == 0 || dh == 0 || dw == 0 || kh == 0 || kw == 0 {
            return Err(shape_err(
                "conv_transpose2d",
                self.shape(),
                "stride, dilation and kernel sizes must be at least 1".into(),
            ));
        }
        if oph >= sh.max(dh) || opw >= sw.max(dw) {
            return Err(shape_err(
                "conv_transpose2d",
                self.shape(),
                format!(
                    "output padding {:?} must be below the stride {:?} or the dilation {:?}",
                    opts.output_padding, opts.stride, opts.dilation
                ),
            ));
        }
        let (oh, ow) = (
            ((h - 1) * sh + dh * (kh - 1) + oph + 1).checked_sub(2 * ph),
            ((w - 1) * sw + dw * (kw - 1) + opw + 1).checked_sub(2 * pw),
        );
        if !matches!((oh, ow), (Some(a), Some(b)) if a > 0 && b > 0) {
            return Err(shape_err(
                "conv_transpose2d",
                self.shape(),
                format!("padding {:?} leaves no output", opts.padding),
            ));
        }
        // The input spread `stride` apart (zeros between), padded so that a convolution with
        // the flipped kernel visits every output: (k − 1)·d − p on each side, which is a
        // crop where it is negative.
        let cig = cin / g;
        let mut x = self
            .reshape_to(&[n, cin, h, 1, w, 1])?
            .pad(&[(0, 0), (0, 0), (0, 0), (0, sh - 1), (0, 0), (0, sw - 1)])?
            .reshape_to(&[n, cin, h * sh, w * sw])?
            .shrink(&[
                (0, n),
                (0, cin),
                (0, (h - 1) * sh + 1),
                (0, (w - 1) * sw + 1),
            ])?;
        let edge = |k: usize, d: usize, p: usize, extra: usize| -> (i64, i64) {
            let e = ((k - 1) * d) as i64 - p as i64;
            (e, e + extra as i64)
        };
        x = x.pad_or_crop(edge(kh, dh, ph, oph), edge(kw, dw, pw, opw))?;
        let wt = weight
            .reshape_to(&[g, cig, cog, kh, kw])?
            .permute(&[0, 2, 1, 3, 4])?
            .flip(&[3, 4])?
            .reshape_to(&[g * cog, cig, kh, kw])?;
        let conv = ConvOptions {
            dilation: opts.dilation,
            groups: g,
            ..ConvOptions::default()
        };
        x.conv2d(&wt, bias, conv)
    }

    /// The last two axes padded with zeros (positive amounts) or cropped (negative), given
    /// `(before, after)` for rows and for columns.
    fn pad_or_crop(&self, rows: (i64, i64), cols: (i64, i64)) -> Result<Tensor> {
        let pos = |v: i64| v.max(0) as usize;
        let neg = |v: i64| (-v).max(0) as usize;
        let x = self.pad_spatial((pos(rows.0), pos(rows.1)), (pos(cols.0), pos(cols.1)), 0.0)?;
        let s = x.shape();
        let nd = s.len();
        let mut r: Vec<(usize, usize)> = s.iter().map(|&d| (0, d)).collect();
        r[nd - 2] = (neg(rows.0), s[nd - 2] - neg(rows.1));
        r[nd - 1] = (neg(cols.0), s[nd - 1] - neg(cols.1));
        x.shrink(&r)
    }

    fn pool_input(&self, op: &'static str, kernel: [usize; 2], padding: [usize; 2]) -> Result<()> {
        self.nchw(op)?;
        if padding[0] * 2 > kernel[0] || padding[1] * 2 > kernel[1] {
            return Err(shape_err(
                op,
                self.shape(),
                format!(
                    "padding {padding:?} is more than half the kernel {kernel:?} (a window \
                     could hold only padding)"
                ),
            ));
        }
        Ok(())
    }

    /// The maximum of each `kernel` window of `[n, c, h, w]`, windows `stride` apart, the
    /// input padded with −∞ by `padding` (PyTorch's `max_pool2d`). Tied maxima share the
    /// gradient.
    pub fn max_pool2d(
        &self,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> Result<Tensor> {
        self.pool_input("max_pool2d", kernel, padding)?;
        let [ph, pw] = padding;
        let x = self.pad_spatial((ph, ph), (pw, pw), f64::NEG_INFINITY)?;
        x.windows(kernel, stride, [1, 1])
            .map_err(|e| retag("max_pool2d", e))?
            .max(&[-2, -1], false)
    }

    /// The mean of each `kernel` window of `[n, c, h, w]`, windows `stride` apart, the
    /// input padded with zeros by `padding` that count in the mean (PyTorch's `avg_pool2d`
    /// with `count_include_pad`).
    pub fn avg_pool2d(
        &self,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> Result<Tensor> {
        self.pool_input("avg_pool2d", kernel, padding)?;
        let [ph, pw] = padding;
        let x = self.pad_spatial((ph, ph), (pw, pw), 0.0)?;
        x.windows(kernel, stride, [1, 1])
            .map_err(|e| retag("avg_pool2d", e))?
            .mean(&[-2, -1], false)
    }

    /// Checks batch-normalisation parameters of `[channels]` and returns the shape they
    /// broadcast as (`[1, c, 1, …]`).
    fn channel_shape(&self, op: &'static str, params: &[Option<&Tensor>]) -> Result<Vec<usize>> {
        let s = self.shape();
        if s.len() < 2 {
            return Err(shape_err(
                op,
                s,
                "the input must be [batch, channels, …]".into(),
            ));
        }
        let c = s[1];
        for p in params.iter().flatten() {
            if p.shape() != [c] {
                return Err(shape_err(
                    op,
                    p.shape(),
                    format!("weight, bias and statistics must be [{c}], one per channel"),
                ));
            }
        }
        let mut b = vec![1; s.len()];
        b[1] = c;
        Ok(b)
    }

    fn scale_shift(
        &self,
        y: Tensor,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        bshape: &[usize],
    ) -> Result<Tensor> {
        let y = match weight {
            Some(w) => y.mul(&w.reshape_to(bshape)?)?,
            None => y,
        };
        match bias {
            Some(b) => y.add(&b.reshape_to(bshape)?),
            None => Ok(y),
        }
    }

    /// Batch normalisation in training: each channel (axis 1) of `[n, c, …]` normalised by
    /// the mean and the (biased) variance of the batch over every other axis, then scaled by
    /// `weight` and shifted by `bias` (`[c]` each, optional). With `running` (mean and
    /// variance, `[c]`), they are assigned `(1 − momentum)·running + momentum·batch` (the
    /// variance unbiased, as PyTorch does) — computed when they are realized, which a
    /// training step must do with its loss.
    pub fn batch_norm(
        &self,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        running: Option<(&Tensor, &Tensor)>,
        momentum: f64,
        eps: f64,
    ) -> Result<Tensor> {
        let (rm, rv) = running.unzip();
        let bshape = self.channel_shape("batch_norm", &[weight, bias, rm, rv])?;
        let s = self.shape();
        let axes: Vec<isize> = (0..s.len() as isize).filter(|&a| a != 1).collect();
        let count: usize = s
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 1)
            .map(|(_, d)| d)
            .product();
        let x = self.cast(self.dtype().to_float());
        let mean = x.mean(&axes, true)?;
        let centred = x.sub(&mean)?;
        let var = centred.square().mean(&axes, true)?;
        let y = centred.mul(&var.add(eps)?.rsqrt())?;
        if let Some((rm, rv)) = running {
            no_grad(|| -> Result<()> {
                let c = s[1] as isize;
                let bm = mean.detach().reshape(&[c])?;
                let unbiased = count as f64 / count.saturating_sub(1).max(1) as f64;
                let bv = var.detach().reshape(&[c])?.mul(unbiased)?;
                rm.assign(&rm.mul(1.0 - momentum)?.add(&bm.mul(momentum)?)?)?;
                rv.assign(&rv.mul(1.0 - momentum)?.add(&bv.mul(momentum)?)?)
            })?;
        }
        self.scale_shift(y, weight, bias, &bshape)
    }

    /// Batch normalisation in inference: each channel (axis 1) normalised by the given
    /// `mean` and `var` (`[c]`, typically the running statistics of training), then scaled
    /// and shifted.
    pub fn batch_norm_inference(
        &self,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        mean: &Tensor,
        var: &Tensor,
        eps: f64,
    ) -> Result<Tensor> {
        let bshape = self.channel_shape(
            "batch_norm_inference",
            &[weight, bias, Some(mean), Some(var)],
        )?;
        let x = self.cast(self.dtype().to_float());
        let inv = var.reshape_to(&bshape)?.add(eps)?.rsqrt();
        let y = x.sub(&mean.reshape_to(&bshape)?)?.mul(&inv)?;
        self.scale_shift(y, weight, bias, &bshape)
    }

    /// SiLU (swish): `x · sigmoid(x)`.
    pub fn silu(&self) -> Tensor {
        let x = self.cast(self.dtype().to_float());
        let s = x.sigmoid();
        // Same shape and dtype: the product cannot fail.
        Tensor::from_node(Node::new(
            Op::Binary(BinaryOp::Mul, x.node(), s.node()),
            x.shape(),
            x.dtype(),
            x.device(),
        ))
    }

    /// Both operands of an integer operation as i32 tensors of one shape.
    fn int_operands(&self, op: &'static str, rhs: Operand<'_>) -> Result<(Arc<Node>, Arc<Node>)> {
        let int = |t: &Tensor| -> Result<Tensor> {
            match t.dtype() {
                DType::I32 => Ok(t.clone()),
                DType::Bool => Ok(t.cast(DType::I32)),
                d => Err(Error::DType {
                    op,
                    dtype: d,
                    reason: "integer division takes integers (div divides floats)".into(),
                }),
            }
        };
        let a = int(self)?;
        let b = match rhs {
            Operand::Tensor(t) => {
                if t.device() != a.device() {
                    return Err(Error::DeviceMismatch {
                        op,
                        a: a.device().name().into(),
                        b: t.device().name().into(),
                    });
                }
                int(t)?
            }
            Operand::Int(x) => {
                let v = i32::try_from(x).map_err(|_| Error::DType {
                    op,
                    dtype: DType::I32,
                    reason: format!("the divisor {x} is not an i32"),
                })?;
                Tensor::full(&[], f64::from(v), DType::I32, &a.device())
            }
            Operand::Bool(x) => Tensor::full(&[], f64::from(u8::from(x)), DType::I32, &a.device()),
            Operand::Float(x) => {
                return Err(Error::DType {
                    op,
                    dtype: a.dtype(),
                    reason: format!("the divisor {x} is a float; integer division takes integers"),
                });
            }
        };
        let shape = broadcast_shape(op, &a.shape(), &b.shape())?;
        Ok((a.expand(&shape)?.node(), b.expand(&shape)?.node()))
    }

    /// Integer division rounding toward zero, as C does (`-7 / 2 = -3`), of i32 (or bool)
    /// tensors, broadcasting; `x / 0` is 0 (and `i32::MIN / -1` is `i32::MIN`). [`Tensor::div`]
    /// divides integers as floats.
    pub fn idiv<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
        let (a, b) = self.int_operands("idiv", rhs.into())?;
        let shape = a.shape.clone();
        Ok(Tensor::from_node(Node::new(
            Op::Binary(BinaryOp::Div, a, b),
            shape,
            DType::I32,
            self.device(),
        )))
    }

    /// The remainder of [`Tensor::idiv`], with the dividend's sign as in C (`-7 % 2 = -1`):
    /// `x = idiv(x, y)·y + rem(x, y)` always holds, so `x % 0` is `x`.
    pub fn rem<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
        let (a, b) = self.int_operands("rem", rhs.into())?;
        let (a, b) = (Tensor::from_node(a), Tensor::from_node(b));
        a.sub(&a.idiv(&b)?.mul(&b)?)
    }
}

/// An error of a helper renamed to the operation the user called.
fn retag(op: &'static str, e: Error) -> Error {
    match e {
        Error::Shape { shape, reason, .. } => Error::Shape { op, shape, reason },
        e => e,
    }
}
