//! [`Tensor`]: a handle on a node of the lazy graph, with the operations users call.
//!
//! Operations check shapes, dtypes and devices when they are called and return errors
//! naming what does not fit; the work happens when a tensor is realized ([`Tensor::realize`],
//! [`Tensor::to_vec`]). A tensor handle is shared by clones: [`Tensor::assign`] changes what
//! every clone sees (parameters are updated that way).

use std::sync::{Arc, Mutex, RwLock};

use am_compiler::CmpOp;
use am_isa::sync::lock;

use crate::device::Device;
use crate::node::{BinaryOp, Node, Op, ReduceOp, UnaryOp};
use crate::{DType, Element, Error, Result};

/// A tensor: shape, dtype, device and a lazily computed value.
#[derive(Clone)]
pub struct Tensor(pub(crate) Arc<TensorInner>);

pub(crate) struct TensorInner {
    pub(crate) node: RwLock<Arc<Node>>,
    pub(crate) grad: Mutex<Option<Tensor>>,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.node();
        write!(
            f,
            "Tensor({:?}, {}, {}{})",
            n.shape,
            n.dtype,
            n.device,
            if n.is_realized() { "" } else { ", lazy" }
        )
    }
}

/// The right-hand side of a binary operation: a tensor or a number.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    /// A tensor (broadcast against the left side).
    Tensor(&'a Tensor),
    /// A float; the result keeps a float tensor's dtype (else f32).
    Float(f64),
    /// An integer; the result keeps the tensor's dtype (bool becomes i32).
    Int(i64),
    /// A truth value.
    Bool(bool),
}

impl<'a> From<&'a Tensor> for Operand<'a> {
    fn from(t: &'a Tensor) -> Operand<'a> {
        Operand::Tensor(t)
    }
}
impl From<f64> for Operand<'_> {
    fn from(x: f64) -> Self {
        Operand::Float(x)
    }
}
impl From<f32> for Operand<'_> {
    fn from(x: f32) -> Self {
        Operand::Float(f64::from(x))
    }
}
impl From<i32> for Operand<'_> {
    fn from(x: i32) -> Self {
        Operand::Int(i64::from(x))
    }
}
impl From<bool> for Operand<'_> {
    fn from(x: bool) -> Self {
        Operand::Bool(x)
    }
}

/// Normalises an axis (negative counts from the end).
pub(crate) fn axis(op: &'static str, shape: &[usize], a: isize) -> Result<usize> {
    let n = shape.len() as isize;
    let r = if a < 0 { a + n } else { a };
    if r < 0 || r >= n {
        return Err(Error::Shape {
            op,
            shape: shape.to_vec(),
            reason: format!("axis {a} is out of range for {n} dimensions"),
        });
    }
    Ok(r as usize)
}

/// The shape both operands broadcast to.
pub(crate) fn broadcast_shape(op: &'static str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for (i, o) in out.iter_mut().enumerate() {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        *o = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(Error::Broadcast {
                op,
                a: a.to_vec(),
                b: b.to_vec(),
            });
        };
    }
    Ok(out)
}

fn node_cast(n: &Arc<Node>, dtype: DType) -> Arc<Node> {
    if n.dtype == dtype {
        return n.clone();
    }
    Node::new(
        Op::Cast(n.clone()),
        n.shape.clone(),
        dtype,
        n.device.clone(),
    )
}

fn node_reshape(n: &Arc<Node>, shape: Vec<usize>) -> Arc<Node> {
    if n.shape == shape {
        return n.clone();
    }
    Node::new(Op::Reshape(n.clone()), shape, n.dtype, n.device.clone())
}

/// `n` broadcast to `shape` (which it must broadcast to).
fn node_broadcast(n: &Arc<Node>, shape: &[usize]) -> Arc<Node> {
    if n.shape == shape {
        return n.clone();
    }
    let mut padded = vec![1; shape.len() - n.shape.len()];
    padded.extend_from_slice(&n.shape);
    let r = node_reshape(n, padded);
    if r.shape == shape {
        return r;
    }
    Node::new(
        Op::Expand(r.clone()),
        shape.to_vec(),
        r.dtype,
        r.device.clone(),
    )
}

impl Tensor {
    pub(crate) fn from_node(node: Arc<Node>) -> Tensor {
        Tensor(Arc::new(TensorInner {
            node: RwLock::new(node),
            grad: Mutex::new(None),
        }))
    }

    pub(crate) fn node(&self) -> Arc<Node> {
        self.0
            .node
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn set_node(&self, n: Arc<Node>) {
        *self.0.node.write().unwrap_or_else(|p| p.into_inner()) = n;
    }

    fn make(&self, op: Op, shape: Vec<usize>, dtype: DType) -> Tensor {
        Tensor::from_node(Node::new(op, shape, dtype, self.device()))
    }

    // ---- what a tensor is ------------------------------------------------------------

    /// The shape.
    pub fn shape(&self) -> Vec<usize> {
        self.node().shape.clone()
    }

    /// Dimensions.
    pub fn ndim(&self) -> usize {
        self.node().shape.len()
    }

    /// Elements.
    pub fn numel(&self) -> usize {
        self.node().numel()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.node().dtype
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.node().device.clone()
    }

    /// Whether the value has been computed.
    pub fn is_realized(&self) -> bool {
        self.node().is_realized()
    }

    // ---- creation --------------------------------------------------------------------

    /// A tensor of `shape` holding `data` (row-major), copied to `dev` now.
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize], dev: &Device) -> Result<Tensor> {
        let numel: usize = shape.iter().product();
        if data.len() != numel {
            return Err(Error::Data {
                op: "from_slice",
                len: data.len(),
                shape: shape.to_vec(),
                numel,
            });
        }
        let mut bytes = Vec::with_capacity(numel * T::DTYPE.size());
        for &x in data {
            x.put(&mut bytes);
        }
        Tensor::from_bytes(&bytes, shape, T::DTYPE, dev)
    }

    /// A tensor of `shape` and `dtype` from its little-endian element bytes.
    pub fn from_bytes(bytes: &[u8], shape: &[usize], dtype: DType, dev: &Device) -> Result<Tensor> {
        let numel: usize = shape.iter().product();
        if bytes.len() != numel * dtype.size() {
            return Err(Error::Data {
                op: "from_bytes",
                len: bytes.len() / dtype.size(),
                shape: shape.to_vec(),
                numel,
            });
        }
        let buf = dev.alloc(bytes.len())?;
        dev.write(&buf, bytes)?;
        Ok(Tensor::from_node(Node::leaf(
            buf,
            shape.to_vec(),
            dtype,
            dev.clone(),
            None,
        )))
    }

    /// A tensor of `shape` whose every element is `value` (no memory until realized).
    pub fn full(shape: &[usize], value: f64, dtype: DType, dev: &Device) -> Tensor {
        Tensor::from_node(Node::new(
            Op::Const(value),
            shape.to_vec(),
            dtype,
            dev.clone(),
        ))
    }

    /// Zeros.
    pub fn zeros(shape: &[usize], dtype: DType, dev: &Device) -> Tensor {
        Tensor::full(shape, 0.0, dtype, dev)
    }

    /// Ones.
    pub fn ones(shape: &[usize], dtype: DType, dev: &Device) -> Tensor {
        Tensor::full(shape, 1.0, dtype, dev)
    }

    /// A tensor like this one (shape, dtype, device) filled with `value`.
    pub fn full_like(&self, value: f64) -> Tensor {
        let n = self.node();
        Tensor::full(&n.shape, value, n.dtype, &n.device)
    }

    /// Zeros like this tensor.
    pub fn zeros_like(&self) -> Tensor {
        self.full_like(0.0)
    }

    /// Ones like this tensor.
    pub fn ones_like(&self) -> Tensor {
        self.full_like(1.0)
    }

    /// `start, start + step, …` below `end` (above it for a negative step), as i32.
    pub fn arange(start: i32, end: i32, step: i32, dev: &Device) -> Result<Tensor> {
        if step == 0 {
            return Err(Error::Shape {
                op: "arange",
                shape: vec![],
                reason: "step is 0".into(),
            });
        }
        let span = i64::from(end) - i64::from(start);
        let n = if (span > 0) == (step > 0) && span != 0 {
            (span.abs() + i64::from(step).abs() - 1) / i64::from(step).abs()
        } else {
            0
        } as usize;
        let i = Tensor::from_node(Node::new(Op::Index(0), vec![n], DType::I32, dev.clone()));
        if start == 0 && step == 1 {
            return Ok(i);
        }
        i.mul(step)?.add(start)
    }

    /// The `n × n` identity matrix.
    pub fn eye(n: usize, dtype: DType, dev: &Device) -> Result<Tensor> {
        let r = Tensor::from_node(Node::new(Op::Index(0), vec![n, n], DType::I32, dev.clone()));
        let c = Tensor::from_node(Node::new(Op::Index(1), vec![n, n], DType::I32, dev.clone()));
        Ok(r.eq(&c)?.cast(dtype))
    }

    /// Uniform values in `[0, 1)` (f32), computed on the device from `seed` and each
    /// element's index: the same seed gives the same values on every device.
    pub fn rand(shape: &[usize], seed: u32, dev: &Device) -> Tensor {
        Tensor::from_node(Node::new(
            Op::Rand(seed),
            shape.to_vec(),
            DType::F32,
            dev.clone(),
        ))
    }

    /// Uniform values in `[lo, hi)` (f32).
    pub fn uniform(shape: &[usize], lo: f64, hi: f64, seed: u32, dev: &Device) -> Result<Tensor> {
        Tensor::rand(shape, seed, dev).mul(hi - lo)?.add(lo)
    }

    /// Standard normal values (f32), by the Box–Muller transform of two uniform draws.
    pub fn randn(shape: &[usize], seed: u32, dev: &Device) -> Result<Tensor> {
        let u1 = Tensor::rand(shape, seed, dev);
        let u2 = Tensor::rand(shape, seed ^ 0x5bd1_e995, dev);
        // 1 - u is in (0, 1]: its logarithm is finite.
        let r = u1.neg().add(1.0)?.log().mul(-2.0)?.sqrt();
        let theta = u2.mul(std::f64::consts::TAU)?;
        r.mul(&theta.cos())
    }

    // ---- elementwise -----------------------------------------------------------------

    fn unary(&self, op: UnaryOp) -> Tensor {
        let n = self.node();
        let (src, dtype) = match op {
            UnaryOp::Not => (node_cast(&n, DType::Bool), DType::Bool),
            UnaryOp::Neg | UnaryOp::Abs => (n.clone(), n.dtype),
            _ => {
                let d = n.dtype.to_float();
                (node_cast(&n, d), d)
            }
        };
        self.make(Op::Unary(op, src), n.shape.clone(), dtype)
    }

    /// The other operand as a tensor of the shape and dtype to combine with, and the dtype.
    fn operands(
        &self,
        op: &'static str,
        rhs: Operand<'_>,
    ) -> Result<(Arc<Node>, Arc<Node>, DType)> {
        let a = self.node();
        let scalar =
            |x: f64, d: DType| Node::new(Op::Const(x), a.shape.clone(), d, a.device.clone());
        let (b, dtype) = match rhs {
            Operand::Tensor(t) => {
                let b = t.node();
                if a.device != b.device {
                    return Err(Error::DeviceMismatch {
                        op,
                        a: a.device.name().into(),
                        b: b.device.name().into(),
                    });
                }
                let d = DType::promote(a.dtype, b.dtype);
                let shape = broadcast_shape(op, &a.shape, &b.shape)?;
                let a2 = node_broadcast(&node_cast(&a, d), &shape);
                let b2 = node_broadcast(&node_cast(&b, d), &shape);
                return Ok((a2, b2, d));
            }
            Operand::Float(x) => {
                let d = a.dtype.to_float();
                (scalar(x, d), d)
            }
            Operand::Int(x) => {
                let d = if a.dtype == DType::Bool {
                    DType::I32
                } else {
                    a.dtype
                };
                (scalar(x as f64, d), d)
            }
            Operand::Bool(x) => (scalar(f64::from(u8::from(x)), a.dtype), a.dtype),
        };
        Ok((node_cast(&a, dtype), b, dtype))
    }

    fn binary(&self, op: BinaryOp, name: &'static str, rhs: Operand<'_>) -> Result<Tensor> {
        let (a, b, dtype) = self.operands(name, rhs)?;
        let shape = a.shape.clone();
        let out = if let BinaryOp::Cmp(_) = op {
            DType::Bool
        } else {
            dtype
        };
        Ok(self.make(Op::Binary(op, a, b), shape, out))
    }

    /// `self + rhs` (broadcasting).
    pub fn add<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.binary(BinaryOp::Add, "add", rhs.into())
    }

    /// `self - rhs`.
    pub fn sub<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.binary(BinaryOp::Sub, "sub", rhs.into())
    }

    /// `self · rhs`.
    pub fn mul<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.binary(BinaryOp::Mul, "mul", rhs.into())
    }

    /// `self / rhs` (true division: integers become f32).
    pub fn div<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
        let rhs = rhs.into();
        let a = if self.dtype().is_float() {
            self.clone()
        } else {
            self.cast(DType::F32)
        };
        a.binary(BinaryOp::Div, "div", rhs)
    }

    /// Elementwise maximum.
    pub fn maximum<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.binary(BinaryOp::Max, "maximum", rhs.into())
    }

    /// Elementwise minimum.
    pub fn minimum<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.binary(BinaryOp::Min, "minimum", rhs.into())
    }

    /// `self < rhs` (bool).
    pub fn lt<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.binary(BinaryOp::Cmp(CmpOp::Lt), "lt", rhs.into())
    }

    /// `self ≤ rhs`.
    pub fn le<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.binary(BinaryOp::Cmp(CmpOp::Le), "le", rhs.into())
    }

    /// `self > rhs`.
    pub fn gt<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.binary(BinaryOp::Cmp(CmpOp::Gt), "gt", rhs.into())
    }

    /// `self ≥ rhs`.
    pub fn ge<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.binary(BinaryOp::Cmp(CmpOp::Ge), "ge", rhs.into())
    }

    /// `self = rhs`.
    pub fn eq<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.binary(BinaryOp::Cmp(CmpOp::Eq), "eq", rhs.into())
    }

    /// `self ≠ rhs`.
    pub fn ne<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.binary(BinaryOp::Cmp(CmpOp::Ne), "ne", rhs.into())
    }

    /// Logical and (operands as bool).
    pub fn logical_and(&self, rhs: &Tensor) -> Result<Tensor> {
        self.cast(DType::Bool).binary(
            BinaryOp::And,
            "logical_and",
            Operand::Tensor(&rhs.cast(DType::Bool)),
        )
    }

    /// Logical or (operands as bool).
    pub fn logical_or(&self, rhs: &Tensor) -> Result<Tensor> {
        self.cast(DType::Bool).binary(
            BinaryOp::Or,
            "logical_or",
            Operand::Tensor(&rhs.cast(DType::Bool)),
        )
    }

    /// Logical not (as bool).
    pub fn logical_not(&self) -> Tensor {
        self.unary(UnaryOp::Not)
    }

    /// `cond ? a : b` elementwise, `cond` (self) as bool, all three broadcast together.
    pub fn where_<'a, 'b>(
        &self,
        a: impl Into<Operand<'a>>,
        b: impl Into<Operand<'b>>,
    ) -> Result<Tensor> {
        let c = self.cast(DType::Bool);
        let dev = self.device();
        let (a, b) = (a.into(), b.into());
        let dtype_of = |o: &Operand<'_>| match o {
            Operand::Tensor(t) => Some(t.dtype()),
            _ => None,
        };
        let as_tensor = |o: Operand<'_>, other: Option<DType>| -> Tensor {
            match o {
                Operand::Tensor(t) => t.clone(),
                Operand::Float(x) => {
                    let d = other.filter(|d| d.is_float()).unwrap_or(DType::F32);
                    Tensor::full(&[], x, d, &dev)
                }
                Operand::Int(x) => {
                    let d = other
                        .map(|d| if d == DType::Bool { DType::I32 } else { d })
                        .unwrap_or(DType::I32);
                    Tensor::full(&[], x as f64, d, &dev)
                }
                Operand::Bool(x) => {
                    let d = other.unwrap_or(DType::Bool);
                    Tensor::full(&[], f64::from(u8::from(x)), d, &dev)
                }
            }
        };
        let (da, db) = (dtype_of(&a), dtype_of(&b));
        let ta = as_tensor(a, db);
        let tb = as_tensor(b, da);
        let (cn, an, bn) = (c.node(), ta.node(), tb.node());
        for n in [&an, &bn] {
            if n.device != cn.device {
                return Err(Error::DeviceMismatch {
                    op: "where",
                    a: cn.device.name().into(),
                    b: n.device.name().into(),
                });
            }
        }
        let d = DType::promote(an.dtype, bn.dtype);
        let s = broadcast_shape("where", &cn.shape, &an.shape)?;
        let s = broadcast_shape("where", &s, &bn.shape)?;
        let cn = node_broadcast(&cn, &s);
        let an = node_broadcast(&node_cast(&an, d), &s);
        let bn = node_broadcast(&node_cast(&bn, d), &s);
        Ok(self.make(Op::Where(cn, an, bn), s, d))
    }

    /// The elements converted to `dtype` (floats to integers truncate and saturate, NaN
    /// gives 0; to bool: `x ≠ 0`).
    pub fn cast(&self, dtype: DType) -> Tensor {
        Tensor::from_node(node_cast(&self.node(), dtype))
    }

    /// `-self`.
    pub fn neg(&self) -> Tensor {
        self.unary(UnaryOp::Neg)
    }

    /// `|self|`.
    pub fn abs(&self) -> Tensor {
        self.unary(UnaryOp::Abs)
    }

    /// `2^self`.
    pub fn exp2(&self) -> Tensor {
        self.unary(UnaryOp::Exp2)
    }

    /// `log2 self`.
    pub fn log2(&self) -> Tensor {
        self.unary(UnaryOp::Log2)
    }

    /// `self ∘ x` for a number `x`, computed in `dtype` (this tensor cast to it).
    fn scalar_op(&self, op: BinaryOp, x: f64, dtype: DType) -> Tensor {
        let n = node_cast(&self.node(), dtype);
        let c = Node::new(Op::Const(x), n.shape.clone(), dtype, n.device.clone());
        let out = if let BinaryOp::Cmp(_) = op {
            DType::Bool
        } else {
            dtype
        };
        self.make(Op::Binary(op, n.clone(), c), n.shape.clone(), out)
    }

    fn float_dtype(&self) -> DType {
        self.dtype().to_float()
    }

    /// `e^self`.
    pub fn exp(&self) -> Tensor {
        self.scalar_op(BinaryOp::Mul, std::f64::consts::LOG2_E, self.float_dtype())
            .exp2()
    }

    /// `ln self`.
    pub fn log(&self) -> Tensor {
        let l = self.log2();
        l.scalar_op(BinaryOp::Mul, std::f64::consts::LN_2, l.dtype())
    }

    /// `√self`.
    pub fn sqrt(&self) -> Tensor {
        self.unary(UnaryOp::Sqrt)
    }

    /// `1 / √self`.
    pub fn rsqrt(&self) -> Tensor {
        self.sqrt().recip()
    }

    /// `1 / self`.
    pub fn recip(&self) -> Tensor {
        self.unary(UnaryOp::Recip)
    }

    /// `sin self`.
    pub fn sin(&self) -> Tensor {
        self.unary(UnaryOp::Sin)
    }

    /// `cos self` (as `sin(π/2 − self)`).
    pub fn cos(&self) -> Tensor {
        let d = self.float_dtype();
        self.scalar_op(BinaryOp::Mul, -1.0, d)
            .scalar_op(BinaryOp::Add, std::f64::consts::FRAC_PI_2, d)
            .sin()
    }

    /// `self²`.
    pub fn square(&self) -> Tensor {
        let n = self.node();
        self.make(
            Op::Binary(BinaryOp::Mul, n.clone(), n.clone()),
            n.shape.clone(),
            n.dtype,
        )
    }

    fn to_float_tensor(&self) -> Tensor {
        self.cast(self.float_dtype())
    }

    /// `max(self, 0)`.
    pub fn relu(&self) -> Tensor {
        let d = if self.dtype() == DType::Bool {
            DType::I32
        } else {
            self.dtype()
        };
        self.scalar_op(BinaryOp::Max, 0.0, d)
    }

    /// `1 / (1 + e^−self)`.
    pub fn sigmoid(&self) -> Tensor {
        let d = self.float_dtype();
        self.scalar_op(BinaryOp::Mul, -1.0, d)
            .exp()
            .scalar_op(BinaryOp::Add, 1.0, d)
            .recip()
    }

    /// `tanh self` (as `2·sigmoid(2·self) − 1`).
    pub fn tanh(&self) -> Tensor {
        let d = self.float_dtype();
        self.scalar_op(BinaryOp::Mul, 2.0, d)
            .sigmoid()
            .scalar_op(BinaryOp::Mul, 2.0, d)
            .scalar_op(BinaryOp::Sub, 1.0, d)
    }

    /// GELU with the tanh approximation: `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
    pub fn gelu(&self) -> Tensor {
        let d = self.float_dtype();
        let x = self.to_float_tensor();
        let (xn, k) = (x.node(), (2.0 / std::f64::consts::PI).sqrt());
        let mul = |a: &Tensor, b: &Tensor| {
            x.make(
                Op::Binary(BinaryOp::Mul, a.node(), b.node()),
                xn.shape.clone(),
                d,
            )
        };
        let add = |a: &Tensor, b: &Tensor| {
            x.make(
                Op::Binary(BinaryOp::Add, a.node(), b.node()),
                xn.shape.clone(),
                d,
            )
        };
        let x3 = mul(&x.square(), &x);
        let inner = add(&x3.scalar_op(BinaryOp::Mul, 0.044715, d), &x)
            .scalar_op(BinaryOp::Mul, k, d)
            .tanh()
            .scalar_op(BinaryOp::Add, 1.0, d);
        mul(&inner, &x).scalar_op(BinaryOp::Mul, 0.5, d)
    }

    /// `min(max(self, lo), hi)`.
    pub fn clamp(&self, lo: f64, hi: f64) -> Result<Tensor> {
        self.maximum(lo)?.minimum(hi)
    }

    // ---- reductions ------------------------------------------------------------------

    fn reduce_axes(&self, op: &'static str, axes: &[isize]) -> Result<Vec<usize>> {
        let shape = self.shape();
        if axes.is_empty() {
            return Ok((0..shape.len()).collect());
        }
        let mut v = Vec::with_capacity(axes.len());
        for &a in axes {
            let r = axis(op, &shape, a)?;
            if v.contains(&r) {
                return Err(Error::Shape {
                    op,
                    shape,
                    reason: format!("axis {a} given twice"),
                });
            }
            v.push(r);
        }
        v.sort_unstable();
        Ok(v)
    }

    fn reduce(
        &self,
        op: ReduceOp,
        name: &'static str,
        axes: &[isize],
        keepdim: bool,
    ) -> Result<Tensor> {
        let axes = self.reduce_axes(name, axes)?;
        let n = self.node();
        let src = match (op, n.dtype) {
            (ReduceOp::Sum, DType::Bool) => node_cast(&n, DType::I32),
            _ => n.clone(),
        };
        let mut kept = n.shape.clone();
        for &a in &axes {
            kept[a] = 1;
        }
        // Over nothing: a sum is 0 (its identity), a maximum has no value (numpy and PyTorch
        // refuse it too). The kernels' loops cannot say this: they read an axis of size 0
        // as one of size 1, which is memory the tensor does not have.
        let r = if let Some(&empty) = axes.iter().find(|&&a| n.shape[a] == 0) {
            match op {
                ReduceOp::Sum => Tensor::zeros(&kept, src.dtype, &self.device()),
                _ => {
                    return Err(Error::Shape {
                        op: name,
                        shape: n.shape.clone(),
                        reason: format!(
                            "axis {empty} has size 0: a {name} of no elements has no value"
                        ),
                    });
                }
            }
        } else {
            self.reduce_nonempty(op, &src, axes.clone(), kept.clone())
        };
        if keepdim {
            return Ok(r);
        }
        let squeezed: Vec<usize> = n
            .shape
            .iter()
            .enumerate()
            .filter(|(i, _)| !axes.contains(i))
            .map(|(_, &d)| d)
            .collect();
        Ok(Tensor::from_node(node_reshape(&r.node(), squeezed)))
    }

    /// The reduction of `src` (this tensor, or its i32 count for a bool sum) over `axes`,
    /// none of size 0, to `kept`.
    fn reduce_nonempty(
        &self,
        op: ReduceOp,
        src: &Arc<Node>,
        axes: Vec<usize>,
        kept: Vec<usize>,
    ) -> Tensor {
        let numel = src.numel();
        let whole = kept.iter().all(|&d| d == 1);
        match crate::opt::split(&self.device(), numel).filter(|_| whole) {
            // Many elements to one: a first kernel reduces the columns of a [numel / g, g]
            // view (its work-items read consecutive elements), a second the g results.
            Some(g) => {
                let dev = self.device();
                let rows = node_reshape(src, vec![numel / g, g]);
                let part = Node::new(Op::Reduce(op, rows, vec![0]), vec![1, g], src.dtype, dev);
                let one = Node::new(
                    Op::Reduce(op, part, vec![1]),
                    vec![1, 1],
                    src.dtype,
                    self.device(),
                );
                Tensor::from_node(node_reshape(&one, kept.clone()))
            }
            None => match crate::opt::split_cpu(&self.device(), numel).filter(|_| whole) {
                // The cpu: each of `chunks` contiguous pieces reduced to a vector register's
                // lanes, then those.
                Some((chunks, lanes)) => {
                    let dev = self.device();
                    let rows = node_reshape(src, vec![chunks, numel / (chunks * lanes), lanes]);
                    let shape = vec![chunks, 1, lanes];
                    let part = Node::new(Op::Reduce(op, rows, vec![1]), shape, src.dtype, dev);
                    let one = Node::new(
                        Op::Reduce(op, part, vec![0, 1, 2]),
                        vec![1, 1, 1],
                        src.dtype,
                        self.device(),
                    );
                    Tensor::from_node(node_reshape(&one, kept.clone()))
                }
                None => self.make(Op::Reduce(op, src.clone(), axes), kept, src.dtype),
            },
        }
    }

    /// Sum over `axes` (all axes when empty); `keepdim` keeps them with size 1. Bool sums
    /// count (i32).
    pub fn sum(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Sum, "sum", axes, keepdim)
    }

    /// Maximum over `axes` (all when empty).
    pub fn max(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Max, "max", axes, keepdim)
    }

    /// Minimum over `axes` (all when empty).
    pub fn min(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        Ok(self.neg().max(axes, keepdim)?.neg())
    }

    /// Mean over `axes` (all when empty); integers give f32.
    pub fn mean(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        let shape = self.shape();
        let count: usize = self
            .reduce_axes("mean", axes)?
            .iter()
            .map(|&a| shape[a])
            .product();
        // Over nothing the mean is 0 / 0: NaN, as numpy and PyTorch give.
        let scale = if count == 0 {
            f64::NAN
        } else {
            1.0 / count as f64
        };
        self.to_float_tensor().sum(axes, keepdim)?.mul(scale)
    }

    /// The index of the first maximum along `axis` (i32).
    pub fn argmax(&self, axis_: isize, keepdim: bool) -> Result<Tensor> {
        let shape = self.shape();
        let a = axis("argmax", &shape, axis_)?;
        let n = shape[a];
        let x = self.detach();
        let m = x.max(&[a as isize], true)?;
        let hit = x.eq(&m)?;
        // n − i along the axis: the first maximum has the largest.
        let mut along = vec![1usize; shape.len()];
        along[a] = n;
        let rev = Tensor::arange(n as i32, 0, -1, &self.device())?.reshape_usize(&along)?;
        let best = hit.where_(&rev, 0)?.max(&[a as isize], keepdim)?;
        best.neg().add(n as i32)
    }

    // ---- movement --------------------------------------------------------------------

    fn reshape_usize(&self, shape: &[usize]) -> Result<Tensor> {
        let s: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
        self.reshape(&s)
    }

    /// The same elements in `shape` (one dimension may be −1: inferred).
    pub fn reshape(&self, shape: &[isize]) -> Result<Tensor> {
        let n = self.node();
        let numel = n.numel();
        let bad = |reason: String| Error::Shape {
            op: "reshape",
            shape: n.shape.clone(),
            reason,
        };
        let known: usize = shape
            .iter()
            .filter(|&&d| d >= 0)
            .map(|&d| d as usize)
            .product();
        let inferred = shape.iter().filter(|&&d| d == -1).count();
        if inferred > 1 || shape.iter().any(|&d| d < -1) {
            return Err(bad(format!("{shape:?} is not a shape")));
        }
        let out: Vec<usize> = shape
            .iter()
            .map(|&d| {
                if d == -1 {
                    numel.checked_div(known).unwrap_or(0)
                } else {
                    d as usize
                }
            })
            .collect();
        if out.iter().product::<usize>() != numel {
            return Err(bad(format!("{shape:?} does not hold {numel} elements")));
        }
        Ok(Tensor::from_node(node_reshape(&n, out)))
    }

    /// Axes in a new order: axis `i` of the result is axis `order[i]` of this tensor.
    pub fn permute(&self, order: &[isize]) -> Result<Tensor> {
        let n = self.node();
        if order.len() != n.shape.len() {
            return Err(Error::Shape {
                op: "permute",
                shape: n.shape.clone(),
                reason: format!("{order:?} does not order {} axes", n.shape.len()),
            });
        }
        let mut p = Vec::with_capacity(order.len());
        for &o in order {
            let a = axis("permute", &n.shape, o)?;
            if p.contains(&a) {
                return Err(Error::Shape {
                    op: "permute",
                    shape: n.shape.clone(),
                    reason: format!("{order:?} repeats axis {a}"),
                });
            }
            p.push(a);
        }
        if p.iter().enumerate().all(|(i, &a)| i == a) {
            return Ok(self.clone());
        }
        let shape = p.iter().map(|&a| n.shape[a]).collect();
        Ok(self.make(Op::Permute(n.clone(), p), shape, n.dtype))
    }

    /// Axes `a` and `b` swapped.
    pub fn transpose(&self, a: isize, b: isize) -> Result<Tensor> {
        let shape = self.shape();
        let (a, b) = (axis("transpose", &shape, a)?, axis("transpose", &shape, b)?);
        let mut order: Vec<isize> = (0..shape.len() as isize).collect();
        order.swap(a, b);
        self.permute(&order)
    }

    /// The transpose of a matrix (the last two axes swapped).
    pub fn t(&self) -> Result<Tensor> {
        self.transpose(-2, -1)
    }

    /// Axes of size 1 repeated (and new leading axes added) to `shape`.
    pub fn expand(&self, shape: &[usize]) -> Result<Tensor> {
        let n = self.node();
        let ok = shape.len() >= n.shape.len()
            && n.shape
                .iter()
                .zip(&shape[shape.len() - n.shape.len()..])
                .all(|(&s, &t)| s == t || s == 1);
        if !ok {
            return Err(Error::Broadcast {
                op: "expand",
                a: n.shape.clone(),
                b: shape.to_vec(),
            });
        }
        Ok(Tensor::from_node(node_broadcast(&n, shape)))
    }

    /// A new axis of size 1 at `at` (−1: last).
    pub fn unsqueeze(&self, at: isize) -> Result<Tensor> {
        let mut shape = self.shape();
        let n = shape.len() as isize + 1;
        let a = if at < 0 { at + n } else { at };
        if a < 0 || a >= n {
            return Err(Error::Shape {
                op: "unsqueeze",
                shape,
                reason: format!("position {at} is out of range"),
            });
        }
        shape.insert(a as usize, 1);
        self.reshape_usize(&shape)
    }

    /// Axis `at` (of size 1) removed.
    pub fn squeeze(&self, at: isize) -> Result<Tensor> {
        let mut shape = self.shape();
        let a = axis("squeeze", &shape, at)?;
        if shape[a] != 1 {
            return Err(Error::Shape {
                op: "squeeze",
                shape,
                reason: format!("axis {at} has size {}, not 1", self.shape()[a]),
            });
        }
        shape.remove(a);
        self.reshape_usize(&shape)
    }

    /// All elements in one axis.
    pub fn flatten(&self) -> Result<Tensor> {
        self.reshape(&[-1])
    }

    /// `before` zeros in front of and `after` zeros behind each axis: `(before, after)` per
    /// axis.
    pub fn pad(&self, padding: &[(usize, usize)]) -> Result<Tensor> {
        let n = self.node();
        if padding.len() != n.shape.len() {
            return Err(Error::Shape {
                op: "pad",
                shape: n.shape.clone(),
                reason: format!("{} paddings for {} axes", padding.len(), n.shape.len()),
            });
        }
        if padding.iter().all(|&(a, b)| a == 0 && b == 0) {
            return Ok(self.clone());
        }
        let shape = n
            .shape
            .iter()
            .zip(padding)
            .map(|(&d, &(a, b))| d + a + b)
            .collect();
        Ok(self.make(Op::Pad(n.clone(), padding.to_vec()), shape, n.dtype))
    }

    /// The range `[lo, hi)` of each axis.
    pub fn shrink(&self, ranges: &[(usize, usize)]) -> Result<Tensor> {
        let n = self.node();
        let bad = ranges.len() != n.shape.len()
            || ranges
                .iter()
                .zip(&n.shape)
                .any(|(&(lo, hi), &d)| lo > hi || hi > d);
        if bad {
            return Err(Error::Shape {
                op: "shrink",
                shape: n.shape.clone(),
                reason: format!("{ranges:?} are not ranges of its axes"),
            });
        }
        if ranges
            .iter()
            .zip(&n.shape)
            .all(|(&(lo, hi), &d)| lo == 0 && hi == d)
        {
            return Ok(self.clone());
        }
        let shape = ranges.iter().map(|&(lo, hi)| hi - lo).collect();
        Ok(self.make(Op::Shrink(n.clone(), ranges.to_vec()), shape, n.dtype))
    }

    /// `len` elements from `start` along `axis`.
    pub fn narrow(&self, axis_: isize, start: usize, len: usize) -> Result<Tensor> {
        let shape = self.shape();
        let a = axis("narrow", &shape, axis_)?;
        let mut r: Vec<(usize, usize)> = shape.iter().map(|&d| (0, d)).collect();
        r[a] = (start, start + len);
        self.shrink(&r)
    }

    /// The order of elements reversed along `axes`.
    pub fn flip(&self, axes: &[isize]) -> Result<Tensor> {
        let n = self.node();
        let mut f = vec![false; n.shape.len()];
        for &a in axes {
            let a = axis("flip", &n.shape, a)?;
            f[a] = !f[a];
        }
        if !f.iter().any(|&x| x) {
            return Ok(self.clone());
        }
        Ok(self.make(Op::Flip(n.clone(), f), n.shape.clone(), n.dtype))
    }

    /// Tensors joined along `axis` (the other axes must agree).
    pub fn cat(tensors: &[&Tensor], axis_: isize) -> Result<Tensor> {
        let first = tensors.first().ok_or_else(|| Error::Shape {
            op: "cat",
            shape: vec![],
            reason: "no tensors to join".into(),
        })?;
        let shape = first.shape();
        let a = axis("cat", &shape, axis_)?;
        let mut total = 0;
        for t in tensors {
            let s = t.shape();
            let same = s.len() == shape.len()
                && s.iter()
                    .zip(&shape)
                    .enumerate()
                    .all(|(i, (x, y))| i == a || x == y);
            if !same {
                return Err(Error::Shape {
                    op: "cat",
                    shape: s,
                    reason: format!("does not join {shape:?} along axis {a}"),
                });
            }
            total += s[a];
        }
        let mut acc: Option<Tensor> = None;
        let mut at = 0;
        for t in tensors {
            let len = t.shape()[a];
            let mut p = vec![(0, 0); shape.len()];
            p[a] = (at, total - at - len);
            at += len;
            let padded = t.pad(&p)?;
            acc = Some(match acc {
                None => padded,
                Some(x) => x.add(&padded)?,
            });
        }
        acc.ok_or_else(|| Error::Shape {
            op: "cat",
            shape,
            reason: "no tensors to join".into(),
        })
    }

    // ---- networks --------------------------------------------------------------------

    /// Matrix product over the last two axes (leading axes broadcast): `[…, m, k] ·
    /// […, k, n] → […, m, n]`; a vector operand is a matrix of one row (left) or column.
    pub fn matmul(&self, rhs: &Tensor) -> Result<Tensor> {
        let (sa, sb) = (self.shape(), rhs.shape());
        if sa.is_empty() || sb.is_empty() {
            return Err(Error::Shape {
                op: "matmul",
                shape: if sa.is_empty() { sa } else { sb },
                reason: "a scalar is not a matrix".into(),
            });
        }
        let a = if sa.len() == 1 {
            self.unsqueeze(0)?
        } else {
            self.clone()
        };
        let b = if sb.len() == 1 {
            rhs.unsqueeze(1)?
        } else {
            rhs.clone()
        };
        let (ka, kb) = (a.shape()[a.ndim() - 1], b.shape()[b.ndim() - 2]);
        if ka != kb {
            return Err(Error::Shape {
                op: "matmul",
                shape: sa,
                reason: format!("inner dimensions differ: {ka} against {kb} of {sb:?}"),
            });
        }
        let (m, n) = (a.shape()[a.ndim() - 2], b.shape()[b.ndim() - 1]);
        let pack = crate::opt::pack_cpu(&self.device(), m, ka, n, b.dtype());
        let (a, b) = match pack {
            Some((w, rows)) => (a.pad_rows(rows)?, b.packed(w)?),
            None => (a, b),
        };
        // [.., m, k, 1] · [.., 1, k, n], summed over k.
        let prod = a.unsqueeze(-1)?.mul(&b.unsqueeze(-3)?)?;
        let mut out = prod.sum(&[-2], false)?;
        let s = out.shape();
        if s[s.len() - 2..] != [m, n] {
            // The padded product in a kernel of its own (read through the shrink, its tiles
            // would not divide the output).
            out = out.contiguous();
            let mut keep: Vec<(usize, usize)> = s.iter().map(|&d| (0, d)).collect();
            let r = keep.len();
            keep[r - 2] = (0, m);
            keep[r - 1] = (0, n);
            out = out.shrink(&keep)?;
        }
        if sb.len() == 1 {
            out = out.squeeze(-1)?;
        }
        if sa.len() == 1 {
            out = out.squeeze(-2)?;
        }
        Ok(out)
    }

    /// The value, computed by a kernel of its own into memory laid out row-major.
    fn contiguous(&self) -> Tensor {
        let n = self.node();
        self.make(Op::Contiguous(n.clone()), n.shape.clone(), n.dtype)
    }

    /// A matrix `[.., m, k]` with zero rows after the last up to a multiple of `rows`, in
    /// memory of its own (itself when `m` is one).
    fn pad_rows(&self, rows: usize) -> Result<Tensor> {
        let s = self.shape();
        let r = s.len();
        if s[r - 2].is_multiple_of(rows) {
            return Ok(self.clone());
        }
        let mut pad = vec![(0, 0); r];
        pad[r - 2] = (0, s[r - 2].next_multiple_of(rows) - s[r - 2]);
        Ok(self.pad(&pad)?.contiguous())
    }

    /// A matrix `[.., k, n]` with zero columns after the last up to a multiple of `w`,
    /// stored in panels of `w` columns (`[.., n / w, k, w]` in memory) and viewed as
    /// `[.., k, n]` again: a tile of `w` columns reads its panel contiguously.
    fn packed(&self, w: usize) -> Result<Tensor> {
        let s = self.shape();
        let r = s.len();
        let (k, n) = (s[r - 2], s[r - 1].next_multiple_of(w));
        let mut pad = vec![(0, 0); r];
        pad[r - 1] = (0, n - s[r - 1]);
        let lead: Vec<isize> = s[..r - 2].iter().map(|&d| d as isize).collect();
        let split: Vec<isize> = lead
            .iter()
            .copied()
            .chain([k as isize, (n / w) as isize, w as isize])
            .collect();
        let mut order: Vec<isize> = (0..r as isize - 2).collect();
        let ri = r as isize;
        order.extend([ri - 1, ri - 2, ri]);
        let panels = self
            .pad(&pad)?
            .reshape(&split)?
            .permute(&order)?
            .contiguous();
        let full: Vec<isize> = lead.into_iter().chain([k as isize, n as isize]).collect();
        panels.permute(&order)?.reshape(&full)
    }

    /// `e^x / Σ e^x` along `axis`.
    pub fn softmax(&self, axis_: isize) -> Result<Tensor> {
        let x = self.to_float_tensor();
        let m = x.detach().max(&[axis_], true)?;
        let e = x.sub(&m)?.exp();
        // One reciprocal per row, then a multiply per element (a division is several
        // instructions on a GPU).
        let s = e.sum(&[axis_], true)?.recip();
        e.mul(&s)
    }

    /// `x − log Σ e^x` along `axis`.
    pub fn log_softmax(&self, axis_: isize) -> Result<Tensor> {
        let x = self.to_float_tensor();
        let m = x.detach().max(&[axis_], true)?;
        let y = x.sub(&m)?;
        let lse = y.exp().sum(&[axis_], true)?.log();
        y.sub(&lse)
    }

    /// Mean cross-entropy of logits `[batch, classes]` (self) against class indices
    /// `[batch]` (i32).
    pub fn cross_entropy(&self, labels: &Tensor) -> Result<Tensor> {
        let (s, l) = (self.shape(), labels.shape());
        if s.len() != 2 || l.len() != 1 || l[0] != s[0] {
            return Err(Error::Shape {
                op: "cross_entropy",
                shape: s,
                reason: format!(
                    "logits must be [batch, classes] and labels [batch]; labels are {l:?}"
                ),
            });
        }
        let onehot = labels.one_hot(s[1])?.cast(self.dtype().to_float());
        let picked = self.log_softmax(-1)?.mul(&onehot)?.sum(&[], false)?;
        picked.mul(-1.0 / s[0].max(1) as f64)
    }

    /// Integer class indices (self) as one-hot rows of `classes` (i32), a new last axis.
    pub fn one_hot(&self, classes: usize) -> Result<Tensor> {
        if self.dtype() != DType::I32 {
            return Err(Error::DType {
                op: "one_hot",
                dtype: self.dtype(),
                reason: "class indices must be i32".into(),
            });
        }
        let mut shape = self.shape();
        shape.push(classes);
        let idx = Tensor::from_node(Node::new(
            Op::Index(shape.len() - 1),
            shape,
            DType::I32,
            self.device(),
        ));
        Ok(self.unsqueeze(-1)?.eq(&idx)?.cast(DType::I32))
    }

    /// `out[…, j, …] = self[…, index[…, j, …], …]` along `axis`: `index` (i32) has this
    /// tensor's shape except along `axis`.
    pub fn gather(&self, axis_: isize, index: &Tensor) -> Result<Tensor> {
        let shape = self.shape();
        let a = axis("gather", &shape, axis_)?;
        let is = index.shape();
        let fits = is.len() == shape.len()
            && is
                .iter()
                .zip(&shape)
                .enumerate()
                .all(|(i, (x, y))| i == a || x == y);
        if !fits || index.dtype() != DType::I32 {
            return Err(Error::Shape {
                op: "gather",
                shape,
                reason: format!(
                    "index of shape {is:?} ({}) must be i32 with the same shape except along axis {a}",
                    index.dtype()
                ),
            });
        }
        let last = shape.len() as isize - 1;
        let n = shape[a];
        // With the axis moved last: x [.., n], idx [.., m]; pick by comparing with 0..n.
        let x = self.transpose(a as isize, last)?;
        let idx = index.transpose(a as isize, last)?;
        let mut along = vec![1usize; shape.len() + 1];
        along[shape.len()] = n;
        let range = Tensor::arange(0, n as i32, 1, &self.device())?.reshape_usize(&along)?;
        let hit = idx.unsqueeze(-1)?.eq(&range)?;
        let picked = hit.where_(&x.unsqueeze(-2)?, 0)?.sum(&[-1], false)?;
        picked.transpose(a as isize, last)
    }

    // ---- gradients -------------------------------------------------------------------

    /// A tensor with this value that gradients do not flow through.
    pub fn detach(&self) -> Tensor {
        let n = self.node();
        if !n.requires_grad {
            return self.clone();
        }
        self.make(Op::Detach(n.clone()), n.shape.clone(), n.dtype)
    }

    /// Marks this tensor as a leaf whose gradient [`Tensor::backward`] computes (or not).
    pub fn set_requires_grad(&self, on: bool) -> &Tensor {
        let n = self.node();
        let owner = on.then(|| Arc::downgrade(&self.0));
        self.set_node(n.with_owner(owner));
        self
    }

    /// Whether gradients flow to this tensor.
    pub fn requires_grad(&self) -> bool {
        self.node().requires_grad
    }

    /// The gradient [`Tensor::backward`] left for this leaf (lazy until realized).
    pub fn grad(&self) -> Option<Tensor> {
        lock(&self.0.grad).clone()
    }

    /// Sets the gradient an optimizer will read, as [`Tensor::backward`] would have left it:
    /// a gradient computed elsewhere (a captured backward's output, a collective's sum).
    pub fn set_grad(&self, g: &Tensor) -> Result<()> {
        if g.shape() != self.shape() || g.device() != self.device() {
            return Err(Error::Autograd(format!(
                "a gradient of shape {:?} on {} for a tensor of shape {:?} on {}",
                g.shape(),
                g.device(),
                self.shape(),
                self.device()
            )));
        }
        *lock(&self.0.grad) = Some(g.detach());
        Ok(())
    }

    /// Forgets the gradient.
    pub fn zero_grad(&self) {
        *lock(&self.0.grad) = None;
    }

    pub(crate) fn accumulate_grad(&self, g: Tensor) -> Result<()> {
        let mut slot = lock(&self.0.grad);
        let new = match slot.take() {
            Some(old) => old.add(&g)?,
            None => g,
        };
        *slot = Some(new);
        Ok(())
    }

    /// Replaces this tensor's value with `value` (cast to this dtype; same shape and device).
    /// Realizing it writes the new value into this tensor's memory in place, so a captured
    /// step updates parameters where they are.
    pub fn assign(&self, value: &Tensor) -> Result<()> {
        let n = self.node();
        let v = value.node();
        if v.shape != n.shape {
            return Err(Error::Shape {
                op: "assign",
                shape: n.shape.clone(),
                reason: format!("the value has shape {:?}", v.shape),
            });
        }
        if v.device != n.device {
            return Err(Error::DeviceMismatch {
                op: "assign",
                a: n.device.name().into(),
                b: v.device.name().into(),
            });
        }
        let v = node_cast(&v, n.dtype);
        let owner = n.owner.clone();
        let requires = n.requires_grad;
        let node = Arc::new(Node {
            id: crate::node::next_id(),
            op: Op::Assign(n.clone(), v),
            shape: n.shape.clone(),
            dtype: n.dtype,
            device: n.device.clone(),
            requires_grad: requires,
            owner,
            buffer: Mutex::new(None),
            landing: Mutex::new(None),
        });
        self.set_node(node);
        Ok(())
    }

    // ---- devices and data ------------------------------------------------------------

    /// This tensor on `dev` (copied when realized; gradients flow back).
    pub fn to(&self, dev: &Device) -> Tensor {
        let n = self.node();
        if &n.device == dev {
            return self.clone();
        }
        Tensor::from_node(Node::new(
            Op::Copy(n.clone()),
            n.shape.clone(),
            n.dtype,
            dev.clone(),
        ))
    }

    /// Computes the value (and any assignment this tensor is).
    pub fn realize(&self) -> Result<&Tensor> {
        Tensor::realize_all(&[self])?;
        Ok(self)
    }

    /// Computes several tensors together: one schedule, so work they share is done once.
    pub fn realize_all(tensors: &[&Tensor]) -> Result<()> {
        crate::schedule::realize_tensors(tensors)
    }

    /// The elements as little-endian bytes of the dtype (computing them first).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        self.realize()?;
        let n = self.node();
        let buf = n.buffer().ok_or_else(|| Error::Device {
            device: n.device.name().into(),
            reason: "a realized tensor has no memory".into(),
        })?;
        let mut out = vec![0u8; n.numel() * n.dtype.size()];
        n.device.read(&buf, &mut out)?;
        Ok(out)
    }

    /// The elements (computing them first); `T` must be the dtype's host type.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let d = self.dtype();
        if d != T::DTYPE {
            return Err(Error::DType {
                op: "to_vec",
                dtype: d,
                reason: format!("read as {}; cast first or use to_vec_f32", T::DTYPE),
            });
        }
        let bytes = self.to_bytes()?;
        Ok(bytes.chunks(d.size()).map(T::get).collect())
    }

    /// The elements as f32 whatever the dtype (bool as 0 and 1).
    pub fn to_vec_f32(&self) -> Result<Vec<f32>> {
        let d = self.dtype();
        let bytes = self.to_bytes()?;
        Ok((0..self.numel())
            .map(|i| d.read_f64(&bytes, i) as f32)
            .collect())
    }

    /// The single element of a one-element tensor, as f32.
    pub fn item(&self) -> Result<f32> {
        if self.numel() != 1 {
            return Err(Error::Shape {
                op: "item",
                shape: self.shape(),
                reason: "it does not have exactly one element".into(),
            });
        }
        Ok(self.to_vec_f32()?[0])
    }
}
