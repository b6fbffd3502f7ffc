//! One kernel of the schedule as compiler IR: every work-item computes one element of the
//! kernel's output by evaluating the fused expression at that element's index. Loads of
//! realized tensors go through the index arithmetic of the views between (reshapes,
//! permutes, expands, pads, shrinks, flips: no kernel of their own); reductions fused into
//! the kernel become loops with a private accumulator.

use std::collections::HashMap;
use std::sync::Arc;

use am_compiler::shapes::{DeviceInfo, launch_1d};
use am_compiler::{BinOp, CmpOp, DType as IrType, Dim, Kernel, KernelBuilder, UnOp, Value};

use crate::node::{BinaryOp, Node, Op, ReduceOp, UnaryOp};
use crate::symbolic::{Atom, Lin, flatten, reshape_index};
use crate::{DType, Error, Result};

/// Where a kernel parameter's value comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ParamSrc {
    /// Output `k` of the kernel (the memory of its `k`-th root).
    Output(usize),
    /// The memory of a node of the schedule's graph (by index).
    Input(usize),
    /// A seed of random numbers.
    Seed(u32),
}

/// Why a kernel cannot be generated as asked.
pub(crate) enum GenError {
    /// A root of a multi-output kernel is read by another at an element other than its
    /// own: the roots need kernels of their own.
    Split,
    /// Anything else.
    Fail(Error),
}

impl From<Error> for GenError {
    fn from(e: Error) -> GenError {
        GenError::Fail(e)
    }
}

/// A kernel and what its parameters are.
pub(crate) struct Plan {
    pub(crate) kernel: Kernel,
    pub(crate) params: Vec<ParamSrc>,
    /// For each input parameter: every load reads the element the work-item writes.
    pub(crate) identity: Vec<bool>,
    pub(crate) groups: u32,
    pub(crate) info: String,
}

/// A condition `lo ≤ lin < hi` a pad puts on its source's elements.
type Valid = Vec<(Lin, i64, i64)>;

#[derive(Default)]
struct Scope {
    values: HashMap<(usize, Vec<Lin>, Valid), Value>,
    lins: HashMap<Lin, Value>,
}

struct Gen<'a> {
    b: KernelBuilder,
    nodes: &'a [Arc<Node>],
    index: &'a HashMap<u64, usize>,
    load: &'a dyn Fn(usize) -> bool,
    roots: &'a [usize],
    params: Vec<ParamSrc>,
    pvals: Vec<Value>,
    identity: Vec<bool>,
    scopes: Vec<Scope>,
    gid: Value,
    n: i64,
    loops: HashMap<u32, Value>,
    next_loop: u32,
    reduces: Vec<usize>,
    error: Option<GenError>,
}

fn ir(d: DType) -> IrType {
    IrType::scalar(d.scalar())
}

/// The kernel computing nodes `roots` of `nodes` (a schedule's graph, operands first), all
/// of one shape, each work-item computing one element of each; `load(i)` says whether node
/// `i` is read from memory rather than computed. Roots read by other roots are computed
/// once, inline; every value is computed before any is stored, so a root written in place
/// is read before it is overwritten.
pub(crate) fn generate(
    nodes: &[Arc<Node>],
    index: &HashMap<u64, usize>,
    load: &dyn Fn(usize) -> bool,
    roots: &[usize],
    dev: DeviceInfo,
) -> Result<Plan, GenError> {
    let out = &nodes[roots[0]];
    let n = out.numel() as i64;
    if n > i64::from(u32::MAX / 2) {
        return Err(GenError::Fail(Error::Shape {
            op: "realize",
            shape: out.shape.clone(),
            reason: "more elements than a kernel indexes (2^31)".into(),
        }));
    }
    // On the CPU a launch of several workgroups starts threads: up to 1024 elements run as
    // one workgroup on the calling thread.
    let (wg, groups) = if dev.target == am_compiler::Target::Cpu && n <= 1024 {
        (n.max(1) as u32, 1)
    } else {
        launch_1d(n as u64, &dev)
    };
    let mut b = KernelBuilder::new("k", [wg, 1, 1]);
    let mut params = Vec::with_capacity(roots.len() + 4);
    let mut pvals = Vec::with_capacity(roots.len() + 4);
    for (k, &r) in roots.iter().enumerate() {
        params.push(ParamSrc::Output(k));
        pvals.push(b.param_ptr(&format!("v{k}"), ir(nodes[r].dtype), false));
    }
    let gid = b.global_id(Dim::X);
    let mut g = Gen {
        b,
        nodes,
        index,
        load,
        roots,
        identity: vec![true; params.len()],
        params,
        pvals,
        scopes: vec![Scope::default()],
        gid,
        n,
        loops: HashMap::new(),
        next_loop: 0,
        reduces: vec![],
        error: None,
    };
    let nv = g.b.const_u32(n as u32);
    let inside = g.b.cmp(CmpOp::Lt, gid, nv);
    g.in_if(inside, |g| {
        let idx = crate::symbolic::unflatten(&Lin::gid(n), &out.shape);
        let values: Vec<Value> = roots.iter().map(|&r| g.eval(r, &idx, &vec![])).collect();
        for (k, v) in values.into_iter().enumerate() {
            let p = g.pvals[k];
            g.b.store_elem(p, gid, v);
        }
    });
    let Gen {
        b,
        params,
        identity,
        reduces,
        error,
        ..
    } = g;
    if let Some(e) = error {
        return Err(e);
    }
    let dims: Vec<String> = out.shape.iter().map(|d| d.to_string()).collect();
    let dims = if dims.is_empty() {
        "1".to_string()
    } else {
        dims.join("_")
    };
    let outputs = if roots.len() > 1 {
        format!(" ×{}", roots.len())
    } else {
        String::new()
    };
    let (name, info) = if reduces.is_empty() {
        (
            format!("E_{dims}"),
            format!("{:?} {}{outputs}", out.shape, out.dtype),
        )
    } else {
        let r: Vec<String> = reduces.iter().map(|d| d.to_string()).collect();
        (
            format!("R_{dims}__{}", r.join("_")),
            format!(
                "{:?} {}{outputs} reduce {:?}",
                out.shape, out.dtype, reduces
            ),
        )
    };
    // Accumulators were declared where their reductions are; the IR wants private arrays
    // at the top level (they take no operands, so moving them up changes nothing else).
    let mut kernel = b.finish_unverified();
    let mut hoisted = Vec::new();
    hoist_private(&mut kernel.body, &mut hoisted, true);
    hoisted.append(&mut kernel.body);
    kernel.body = hoisted;
    kernel.name = name.clone();
    am_compiler::verify::verify(&kernel).map_err(|source| {
        GenError::Fail(Error::Compile {
            device: out.device.name().into(),
            kernel: name,
            source: Box::new(source),
        })
    })?;
    Ok(Plan {
        kernel,
        params,
        identity,
        groups,
        info,
    })
}

/// Moves the private arrays declared in nested bodies of `body` into `out`.
fn hoist_private(body: &mut Vec<am_compiler::Inst>, out: &mut Vec<am_compiler::Inst>, top: bool) {
    let mut kept = Vec::with_capacity(body.len());
    for mut inst in body.drain(..) {
        match &mut inst.op {
            am_compiler::Op::Private { .. } if !top => out.push(inst),
            am_compiler::Op::Range { body, .. } | am_compiler::Op::If { body, .. } => {
                hoist_private(body, out, false);
                kept.push(inst);
            }
            _ => kept.push(inst),
        }
    }
    *body = kept;
}

impl Gen<'_> {
    fn fail(&mut self, e: GenError) -> Value {
        if self.error.is_none() {
            self.error = Some(e);
        }
        self.b.const_u32(0)
    }

    fn in_if(&mut self, cond: Value, f: impl FnOnce(&mut Self)) {
        let mut b = std::mem::replace(&mut self.b, KernelBuilder::new("_", [1, 1, 1]));
        b.if_(cond, |inner| {
            std::mem::swap(&mut self.b, inner);
            f(self);
            std::mem::swap(&mut self.b, inner);
        });
        self.b = b;
    }

    fn in_range(&mut self, len: u32, f: impl FnOnce(&mut Self, Value)) {
        let mut b = std::mem::replace(&mut self.b, KernelBuilder::new("_", [1, 1, 1]));
        let lo = b.const_u32(0);
        let hi = b.const_u32(len);
        b.range(lo, hi, 1, |inner, var| {
            std::mem::swap(&mut self.b, inner);
            self.scopes.push(Scope::default());
            f(self, var);
            self.scopes.pop();
            std::mem::swap(&mut self.b, inner);
        });
        self.b = b;
    }

    fn find<T: Clone>(&self, get: impl Fn(&Scope) -> Option<T>) -> Option<T> {
        self.scopes.iter().rev().find_map(get)
    }

    fn const_of(&mut self, d: DType, x: f64) -> Value {
        self.b.constant(ir(d), d.const_bits(x))
    }

    /// The u32 value of an index expression.
    fn lin(&mut self, l: &Lin) -> Value {
        if let Some(v) = self.find(|s| s.lins.get(l).copied()) {
            return v;
        }
        let mut acc: Option<Value> = None;
        for (a, k) in &l.terms {
            let v = match a {
                Atom::Gid(_) => self.gid,
                Atom::Loop(id, _) => self.loops.get(id).copied().unwrap_or(self.gid),
                Atom::Div(x, d) => {
                    let xv = self.lin(x);
                    let dv = self.b.const_u32(*d as u32);
                    self.b.binary(BinOp::Div, xv, dv)
                }
                Atom::Rem(x, d) => {
                    let xv = self.lin(x);
                    let dv = self.b.const_u32(*d as u32);
                    self.b.binary(BinOp::Rem, xv, dv)
                }
            };
            let term = if *k == 1 {
                v
            } else {
                let kv = self.b.const_u32(*k as u32);
                self.b.mul(v, kv)
            };
            acc = Some(match acc {
                None => term,
                Some(s) => self.b.add(s, term),
            });
        }
        let v = match acc {
            None => self.b.const_u32(l.c as u32),
            Some(s) if l.c != 0 => {
                let c = self.b.const_u32(l.c as u32);
                self.b.add(s, c)
            }
            Some(s) => s,
        };
        if let Some(top) = self.scopes.last_mut() {
            top.lins.insert(l.clone(), v);
        }
        v
    }

    fn valid_cond(&mut self, valid: &Valid) -> Option<Value> {
        let mut acc: Option<Value> = None;
        for (l, lo, hi) in valid {
            let v = self.lin(l);
            let mut c = {
                let h = self.b.const_u32(*hi as u32);
                self.b.cmp(CmpOp::Lt, v, h)
            };
            if *lo > 0 {
                let lv = self.b.const_u32(*lo as u32);
                let ge = self.b.cmp(CmpOp::Ge, v, lv);
                c = self.b.binary(BinOp::And, c, ge);
            }
            acc = Some(match acc {
                None => c,
                Some(a) => self.b.binary(BinOp::And, a, c),
            });
        }
        acc
    }

    fn convert(&mut self, v: Value, from: DType, to: DType) -> Value {
        if from == to {
            v
        } else {
            self.b.cast(v, ir(to))
        }
    }

    fn input_param(&mut self, i: usize, identity: bool) -> Value {
        if let Some(p) = self.params.iter().position(|p| *p == ParamSrc::Input(i)) {
            self.identity[p] &= identity;
            return self.pvals[p];
        }
        let name = format!("v{}", self.params.len());
        let v = self.b.param_ptr(&name, ir(self.nodes[i].dtype), false);
        self.params.push(ParamSrc::Input(i));
        self.pvals.push(v);
        self.identity.push(identity);
        v
    }

    fn seed_param(&mut self, seed: u32) -> Value {
        if let Some(p) = self.params.iter().position(|p| *p == ParamSrc::Seed(seed)) {
            return self.pvals[p];
        }
        let name = format!("v{}", self.params.len());
        let v = self.b.param(&name, IrType::U32);
        self.params.push(ParamSrc::Seed(seed));
        self.pvals.push(v);
        self.identity.push(true);
        v
    }

    fn src(&self, n: &Arc<Node>) -> usize {
        self.index.get(&n.id).copied().unwrap_or(self.roots[0])
    }

    /// The value of node `i` at index `idx` (its shape's dimensions), under the pads'
    /// conditions `valid`.
    fn eval(&mut self, i: usize, idx: &[Lin], valid: &Valid) -> Value {
        let key = (i, idx.to_vec(), valid.clone());
        if let Some(v) = self.find(|s| s.values.get(&key).copied()) {
            return v;
        }
        let v = self.compute(i, idx, valid);
        if let Some(top) = self.scopes.last_mut() {
            top.values.insert(key, v);
        }
        v
    }

    fn compute(&mut self, i: usize, idx: &[Lin], valid: &Valid) -> Value {
        let nodes = self.nodes;
        let node = &nodes[i];
        if self.roots.contains(&i) {
            // A root reached from another root must be at the element this work-item
            // computes (and not under a pad): other elements are other work-items'.
            let here =
                valid.is_empty() && (self.n == 1 || flatten(idx, &node.shape) == Lin::gid(self.n));
            if !here {
                return self.fail(GenError::Split);
            }
        } else if (self.load)(i) {
            return self.load_node(i, idx, valid);
        }
        match &node.op {
            Op::Buffer | Op::Copy(_) => self.load_node(i, idx, valid),
            Op::Const(x) => self.const_of(node.dtype, *x),
            Op::Index(axis) => {
                let v = match idx.get(*axis) {
                    Some(l) => self.lin(l),
                    None => self.b.const_u32(0),
                };
                self.b.cast(v, IrType::I32)
            }
            Op::Rand(seed) => {
                let lin = flatten(idx, &node.shape);
                let x = self.lin(&lin);
                let s = self.seed_param(*seed);
                self.rand(x, s)
            }
            Op::Unary(op, a) => {
                let x = self.eval(self.src(a), idx, valid);
                let u = match op {
                    UnaryOp::Neg => UnOp::Neg,
                    UnaryOp::Exp2 => UnOp::Exp2,
                    UnaryOp::Log2 => UnOp::Log2,
                    UnaryOp::Sqrt => UnOp::Sqrt,
                    UnaryOp::Sin => UnOp::Sin,
                    UnaryOp::Recip => UnOp::Rcp,
                    UnaryOp::Not => UnOp::Not,
                    UnaryOp::Abs => UnOp::Abs,
                };
                self.b.unary(u, x)
            }
            Op::Binary(op, a, c) => {
                let x = self.eval(self.src(a), idx, valid);
                let y = self.eval(self.src(c), idx, valid);
                match op {
                    BinaryOp::Cmp(cmp) => self.b.cmp(*cmp, x, y),
                    BinaryOp::Add => self.b.binary(BinOp::Add, x, y),
                    BinaryOp::Sub => self.b.binary(BinOp::Sub, x, y),
                    BinaryOp::Mul => self.b.binary(BinOp::Mul, x, y),
                    BinaryOp::Div => self.b.binary(BinOp::Div, x, y),
                    BinaryOp::Max => self.b.binary(BinOp::Max, x, y),
                    BinaryOp::Min => self.b.binary(BinOp::Min, x, y),
                    BinaryOp::And => self.b.binary(BinOp::And, x, y),
                    BinaryOp::Or => self.b.binary(BinOp::Or, x, y),
                }
            }
            Op::Where(c, a, e) => {
                let cv = self.eval(self.src(c), idx, valid);
                let x = self.eval(self.src(a), idx, valid);
                let y = self.eval(self.src(e), idx, valid);
                self.b.where_(cv, x, y)
            }
            Op::Cast(a) => {
                let s = self.src(a);
                let x = self.eval(s, idx, valid);
                self.convert(x, nodes[s].dtype, node.dtype)
            }
            Op::Reduce(op, a, axes) => self.reduce(*op, node, self.src(a), axes, idx, valid),
            Op::Reshape(a) => {
                let s = self.src(a);
                let m = reshape_index(idx, &node.shape, &nodes[s].shape);
                self.eval(s, &m, valid)
            }
            Op::Permute(a, p) => {
                let s = self.src(a);
                let mut m = vec![Lin::konst(0); p.len()];
                for (k, &axis) in p.iter().enumerate() {
                    m[axis] = idx[k].clone();
                }
                self.eval(s, &m, valid)
            }
            Op::Expand(a) => {
                let s = self.src(a);
                let m: Vec<Lin> = nodes[s]
                    .shape
                    .iter()
                    .zip(idx)
                    .map(|(&d, l)| if d == 1 { Lin::konst(0) } else { l.clone() })
                    .collect();
                self.eval(s, &m, valid)
            }
            Op::Shrink(a, r) => {
                let s = self.src(a);
                let m: Vec<Lin> = idx
                    .iter()
                    .zip(r)
                    .map(|(l, &(lo, _))| l.add_const(lo as i64))
                    .collect();
                self.eval(s, &m, valid)
            }
            Op::Flip(a, f) => {
                let s = self.src(a);
                let m: Vec<Lin> = idx
                    .iter()
                    .zip(f)
                    .zip(&node.shape)
                    .map(|((l, &flip), &d)| {
                        if flip {
                            l.mul(-1).add_const(d as i64 - 1)
                        } else {
                            l.clone()
                        }
                    })
                    .collect();
                self.eval(s, &m, valid)
            }
            Op::Pad(a, p) => {
                let s = self.src(a);
                let mut here: Valid = vec![];
                let mut m = Vec::with_capacity(idx.len());
                for ((l, &(before, _)), &d) in idx.iter().zip(p).zip(&nodes[s].shape) {
                    let (lo, hi) = l.range();
                    let (b, e) = (before as i64, (before + d) as i64);
                    if lo < b || hi >= e {
                        here.push((l.clone(), b, e));
                    }
                    m.push(l.add_const(-b));
                }
                if here.is_empty() {
                    return self.eval(s, &m, valid);
                }
                let mut inner = valid.clone();
                inner.extend(here.iter().cloned());
                let x = self.eval(s, &m, &inner);
                let cond = self.valid_cond(&here);
                let zero = self.const_of(node.dtype, 0.0);
                match cond {
                    Some(c) => self.b.where_(c, x, zero),
                    None => x,
                }
            }
            Op::Detach(a) | Op::Assign(_, a) => {
                let s = self.src(a);
                self.eval(s, idx, valid)
            }
        }
    }

    fn load_node(&mut self, i: usize, idx: &[Lin], valid: &Valid) -> Value {
        let node = &self.nodes[i];
        if self.roots.contains(&i) {
            let e = Error::Device {
                device: node.device.name().into(),
                reason: format!("a kernel reads its own output ({})", node.op.name()),
            };
            return self.fail(GenError::Fail(e));
        }
        let lin = flatten(idx, &node.shape);
        // In a one-element kernel every index is the element written.
        let identity = valid.is_empty() && (lin == Lin::gid(self.n) || self.n == 1);
        let p = self.input_param(i, identity);
        let mut at = self.lin(&lin);
        if let Some(c) = self.valid_cond(valid) {
            let zero = self.b.const_u32(0);
            at = self.b.where_(c, at, zero);
        }
        self.b.load_elem(p, at)
    }

    fn reduce(
        &mut self,
        op: ReduceOp,
        node: &Node,
        src: usize,
        axes: &[usize],
        idx: &[Lin],
        valid: &Valid,
    ) -> Value {
        let in_dtype = self.nodes[src].dtype;
        let acc_dtype = match in_dtype {
            DType::F16 | DType::BF16 => DType::F32,
            d => d,
        };
        let in_shape = self.nodes[src].shape.clone();
        let looped: Vec<usize> = axes.iter().copied().filter(|&a| in_shape[a] > 1).collect();
        let mut base: Vec<Lin> = idx.to_vec();
        for &a in axes {
            base[a] = Lin::konst(0);
        }
        if looped.is_empty() {
            let x = self.eval(src, &base, valid);
            let x = self.convert(x, in_dtype, acc_dtype);
            return self.convert(x, acc_dtype, node.dtype);
        }
        let size: usize = looped.iter().map(|&a| in_shape[a]).product();
        self.reduces.push(size);
        let identity = match (op, acc_dtype) {
            (ReduceOp::Sum, _) => 0.0,
            (ReduceOp::Max, DType::Bool) => 0.0,
            (ReduceOp::Max, DType::I32) => f64::from(i32::MIN),
            (ReduceOp::Max, _) => f64::NEG_INFINITY,
        };
        let acc = self.b.private(ir(acc_dtype), 1);
        let z = self.b.const_u32(0);
        let init = self.const_of(acc_dtype, identity);
        self.b.store_elem(acc, z, init);
        // A sum of products (a matmul) accumulates with fused multiply-adds: one rounding
        // per step on every device, and one instruction. Half-precision operands are widened
        // to f32 first: their product is exact in f32 (11 + 11 significant bits), so each
        // step rounds once, in the accumulator, instead of first rounding the product to
        // the operands' precision.
        let product = match &self.nodes[src].op {
            Op::Binary(BinaryOp::Mul, a, b)
                if op == ReduceOp::Sum
                    && matches!(in_dtype, DType::F32 | DType::F16 | DType::BF16)
                    && !(self.load)(src) =>
            {
                Some((self.src(a), self.src(b)))
            }
            _ => None,
        };
        self.nest(&looped, 0, &in_shape, base, &mut |g, at| {
            let z = g.b.const_u32(0);
            if let Some((a, b)) = product {
                let x = g.eval(a, at, valid);
                let y = g.eval(b, at, valid);
                let x = g.convert(x, in_dtype, acc_dtype);
                let y = g.convert(y, in_dtype, acc_dtype);
                let cur = g.b.load_elem(acc, z);
                let next = g.b.fma(x, y, cur);
                g.b.store_elem(acc, z, next);
                return;
            }
            let x = g.eval(src, at, valid);
            let x = g.convert(x, in_dtype, acc_dtype);
            let cur = g.b.load_elem(acc, z);
            let next = match (op, acc_dtype) {
                (ReduceOp::Sum, DType::Bool) => g.b.binary(BinOp::Or, cur, x),
                (ReduceOp::Sum, _) => g.b.add(cur, x),
                (ReduceOp::Max, DType::Bool) => g.b.binary(BinOp::Or, cur, x),
                (ReduceOp::Max, _) => g.b.binary(BinOp::Max, cur, x),
            };
            g.b.store_elem(acc, z, next);
        });
        let r = self.b.load_elem(acc, z);
        self.convert(r, acc_dtype, node.dtype)
    }

    /// Nested loops over `axes[k..]`, calling `body` with the index of each element.
    fn nest(
        &mut self,
        axes: &[usize],
        k: usize,
        shape: &[usize],
        at: Vec<Lin>,
        body: &mut dyn FnMut(&mut Self, &[Lin]),
    ) {
        let Some(&a) = axes.get(k) else {
            body(self, &at);
            return;
        };
        let len = shape[a];
        let id = self.next_loop;
        self.next_loop += 1;
        self.in_range(len as u32, |g, var| {
            g.loops.insert(id, var);
            let mut at = at.clone();
            at[a] = Lin::atom(Atom::Loop(id, len as i64));
            g.nest(axes, k + 1, shape, at, body);
        });
    }

    /// Uniform f32 in [0, 1) from element index `x` and seed `s`: a 32-bit mix
    /// (multiply-xorshift rounds) whose top 24 bits become the mantissa.
    fn rand(&mut self, x: Value, s: Value) -> Value {
        let c = |g: &mut Self, k: u32| g.b.const_u32(k);
        let k1 = c(self, RAND_K[0]);
        let k2 = c(self, RAND_K[1]);
        let k3 = c(self, RAND_K[2]);
        let xa = self.b.mul(x, k1);
        let sa = self.b.mul(s, k2);
        let h = self.b.add(xa, sa);
        let mut h = self.b.add(h, k3);
        for (shift, mul) in [(15u32, RAND_K[3]), (12, RAND_K[4]), (15, 0)] {
            let sv = c(self, shift);
            let t = self.b.binary(BinOp::Shr, h, sv);
            h = self.b.binary(BinOp::Xor, h, t);
            if mul != 0 {
                let m = c(self, mul);
                h = self.b.mul(h, m);
            }
        }
        let eight = c(self, 8);
        let top = self.b.binary(BinOp::Shr, h, eight);
        let f = self.b.cast(top, IrType::F32);
        let scale = self.b.const_f32(1.0 / 16_777_216.0);
        self.b.mul(f, scale)
    }
}

/// The constants of the random mix.
const RAND_K: [u32; 5] = [
    0x9e37_79b1,
    0x85eb_ca77,
    0x1656_67b1,
    0x2c1b_3c6d,
    0x297a_2d39,
];

/// What the kernels' random mix gives for element `x` and `seed` (the reference the tests
/// check against).
pub fn rand_reference(x: u32, seed: u32) -> f32 {
    let mut h = x
        .wrapping_mul(RAND_K[0])
        .wrapping_add(seed.wrapping_mul(RAND_K[1]))
        .wrapping_add(RAND_K[2]);
    h ^= h >> 15;
    h = h.wrapping_mul(RAND_K[3]);
    h ^= h >> 12;
    h = h.wrapping_mul(RAND_K[4]);
    h ^= h >> 15;
    (h >> 8) as f32 / 16_777_216.0
}
