//! The lazy graph: every tensor operation makes a [`Node`]; nothing runs until a tensor is
//! realized. Nodes are the primitive operations the scheduler fuses into kernels and the
//! autograd differentiates; everything else (`relu`, `softmax`, `matmul`, …) is built from
//! them.

pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use am_compiler::CmpOp;
use am_isa::sync::lock;

use crate::DType;
use crate::device::{Buffer, Device};
use crate::tensor::TensorInner;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Operations of one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum UnaryOp {
    Neg,
    Exp2,
    Log2,
    Sqrt,
    Sin,
    Recip,
    Not,
    Abs,
}

/// Operations of two operands of one dtype and shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
    And,
    Or,
    /// A comparison (bool result).
    Cmp(CmpOp),
}

/// Reductions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ReduceOp {
    Sum,
    Max,
}

/// What a node computes.
pub(crate) enum Op {
    /// Elements in device memory (the node's buffer).
    Buffer,
    /// Every element is this value.
    Const(f64),
    /// The element's index along this axis (i32).
    Index(usize),
    /// Uniform values in [0, 1) from a hash of the element's index and a seed (f32).
    Rand(u32),
    /// Like [`Op::Rand`], the seed mixed with a counter read from device memory (an i32
    /// node broadcast to this shape), so a captured step that advances the counter draws
    /// new numbers on every replay.
    RandAt(u32, Arc<Node>),
    Unary(UnaryOp, Arc<Node>),
    Binary(BinaryOp, Arc<Node>, Arc<Node>),
    Where(Arc<Node>, Arc<Node>, Arc<Node>),
    Cast(Arc<Node>),
    /// Reduction over axes; the reduced axes stay with size 1.
    Reduce(ReduceOp, Arc<Node>, Vec<usize>),
    Reshape(Arc<Node>),
    Permute(Arc<Node>, Vec<usize>),
    /// Axes of size 1 repeated to the node's shape.
    Expand(Arc<Node>),
    /// Zeros before and after each axis.
    Pad(Arc<Node>, Vec<(usize, usize)>),
    /// The range `[lo, hi)` of each axis.
    Shrink(Arc<Node>, Vec<(usize, usize)>),
    /// Reversal of the marked axes.
    Flip(Arc<Node>, Vec<bool>),
    /// The source's value, without gradient.
    Detach(Arc<Node>),
    /// The source, copied from another device.
    Copy(Arc<Node>),
    /// The source's value computed into memory of its own by a kernel of its own, in
    /// row-major order: a layout its readers load faster (the `cpu` device's packed
    /// matrix-product operands, [`crate::opt::pack_cpu`]).
    Contiguous(Arc<Node>),
    /// One-dimensional sources of this node's device and dtype laid end to end: each is
    /// computed, then copied into its place of this node's memory (no kernel reads them).
    Join(Vec<Arc<Node>>),
    /// The value (second) written into the target's memory (first) when realized.
    Assign(Arc<Node>, Arc<Node>),
}

impl Op {
    /// The operands.
    pub(crate) fn sources(&self) -> Vec<&Arc<Node>> {
        match self {
            Op::Buffer | Op::Const(_) | Op::Index(_) | Op::Rand(_) => vec![],
            Op::Unary(_, a)
            | Op::RandAt(_, a)
            | Op::Cast(a)
            | Op::Reduce(_, a, _)
            | Op::Reshape(a)
            | Op::Permute(a, _)
            | Op::Expand(a)
            | Op::Pad(a, _)
            | Op::Shrink(a, _)
            | Op::Flip(a, _)
            | Op::Detach(a)
            | Op::Contiguous(a)
            | Op::Copy(a) => vec![a],
            Op::Binary(_, a, b) | Op::Assign(a, b) => vec![a, b],
            Op::Where(c, a, b) => vec![c, a, b],
            Op::Join(parts) => parts.iter().collect(),
        }
    }

    /// A movement: no arithmetic, only a different view of the source's elements.
    pub(crate) fn is_movement(&self) -> bool {
        matches!(
            self,
            Op::Reshape(_)
                | Op::Permute(..)
                | Op::Expand(_)
                | Op::Pad(..)
                | Op::Shrink(..)
                | Op::Flip(..)
        )
    }

    /// A short name for logs and errors.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Op::Buffer => "buffer",
            Op::Const(_) => "const",
            Op::Index(_) => "index",
            Op::Rand(_) => "rand",
            Op::RandAt(..) => "rand_at",
            Op::Unary(..) => "unary",
            Op::Binary(..) => "binary",
            Op::Where(..) => "where",
            Op::Cast(_) => "cast",
            Op::Reduce(..) => "reduce",
            Op::Reshape(_) => "reshape",
            Op::Permute(..) => "permute",
            Op::Expand(_) => "expand",
            Op::Pad(..) => "pad",
            Op::Shrink(..) => "shrink",
            Op::Flip(..) => "flip",
            Op::Detach(_) => "detach",
            Op::Copy(_) => "copy",
            Op::Contiguous(_) => "contiguous",
            Op::Join(_) => "join",
            Op::Assign(..) => "assign",
        }
    }
}

thread_local! {
    static NO_GRAD: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Runs `f` with gradient tracking off: the tensors it makes do not require gradients.
pub fn no_grad<T>(f: impl FnOnce() -> T) -> T {
    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            NO_GRAD.with(|c| c.set(c.get().saturating_sub(1)));
        }
    }
    NO_GRAD.with(|c| c.set(c.get() + 1));
    let _r = Restore;
    f()
}

pub(crate) fn grad_enabled() -> bool {
    NO_GRAD.with(|c| c.get() == 0)
}

/// A node of the lazy graph.
pub(crate) struct Node {
    /// Unique for the process's lifetime.
    pub(crate) id: u64,
    pub(crate) op: Op,
    pub(crate) shape: Vec<usize>,
    pub(crate) dtype: DType,
    pub(crate) device: Device,
    /// Gradients flow through it.
    pub(crate) requires_grad: bool,
    /// The tensor whose gradient this leaf's gradient is.
    pub(crate) owner: Option<Weak<TensorInner>>,
    /// The elements, once computed (always for [`Op::Buffer`]).
    pub(crate) buffer: Mutex<Option<Buffer>>,
    /// Where a copy or a join puts its elements when it is realized ([`Landing`]).
    pub(crate) landing: Mutex<Option<Landing>>,
}

/// Memory chosen for a node before it is realized, so that the bytes of a copy or a kernel
/// land where a join wants them instead of being copied there again.
pub(crate) enum Landing {
    /// A copy's elements, or a kernel's result the schedule keeps (a collective's reduced
    /// chunk), go to this byte of the join's memory (while the join is alive and not yet
    /// realized).
    Into(Weak<Node>, usize),
    /// A join's memory, allocated when the first of its parts landed in it.
    Out(Buffer),
    /// A copy that reads its source where it lies when the devices allow it (a peer
    /// mapping inside an XGMI hive): its memory is a view of the source's, and no bytes
    /// move. Set only where the source is read right away by the copy's one consumer, in
    /// the same realize, before anything could write it again (the direct all-reduce).
    InPlace,
}

impl Node {
    /// A node computing `op`; it requires gradients if an operand does (and tracking is on).
    pub(crate) fn new(op: Op, shape: Vec<usize>, dtype: DType, device: Device) -> Arc<Node> {
        let requires_grad = grad_enabled()
            && !matches!(op, Op::Detach(_))
            && op.sources().iter().any(|s| s.requires_grad);
        Arc::new(Node {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            op,
            shape,
            dtype,
            device,
            requires_grad,
            owner: None,
            buffer: Mutex::new(None),
            landing: Mutex::new(None),
        })
    }

    /// A leaf holding `buffer`.
    pub(crate) fn leaf(
        buffer: Buffer,
        shape: Vec<usize>,
        dtype: DType,
        device: Device,
        owner: Option<Weak<TensorInner>>,
    ) -> Arc<Node> {
        Arc::new(Node {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            op: Op::Buffer,
            shape,
            dtype,
            device,
            requires_grad: owner.is_some(),
            owner,
            buffer: Mutex::new(Some(buffer)),
            landing: Mutex::new(None),
        })
    }

    /// The same computation as a leaf for gradients that belong to `owner`.
    pub(crate) fn with_owner(self: &Arc<Node>, owner: Option<Weak<TensorInner>>) -> Arc<Node> {
        // A realized node becomes a buffer leaf; an unrealized one is wrapped so the graph
        // below it still computes its value (gradients stop here either way).
        if let Some(b) = self.buffer() {
            return Node::leaf(
                b,
                self.shape.clone(),
                self.dtype,
                self.device.clone(),
                owner,
            );
        }
        let requires_grad = owner.is_some();
        Arc::new(Node {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            op: Op::Detach(self.clone()),
            shape: self.shape.clone(),
            dtype: self.dtype,
            device: self.device.clone(),
            requires_grad,
            owner,
            buffer: Mutex::new(None),
            landing: Mutex::new(None),
        })
    }

    /// Elements.
    pub(crate) fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The computed elements, if any.
    pub(crate) fn buffer(&self) -> Option<Buffer> {
        lock(&self.buffer).clone()
    }

    pub(crate) fn is_realized(&self) -> bool {
        lock(&self.buffer).is_some()
    }
}

impl Op {
    /// The operands, taken out (the op becomes a buffer).
    fn take_sources(&mut self) -> Vec<Arc<Node>> {
        match std::mem::replace(self, Op::Buffer) {
            Op::Buffer | Op::Const(_) | Op::Index(_) | Op::Rand(_) => vec![],
            Op::Unary(_, a)
            | Op::RandAt(_, a)
            | Op::Cast(a)
            | Op::Reduce(_, a, _)
            | Op::Reshape(a)
            | Op::Permute(a, _)
            | Op::Expand(a)
            | Op::Pad(a, _)
            | Op::Shrink(a, _)
            | Op::Flip(a, _)
            | Op::Detach(a)
            | Op::Contiguous(a)
            | Op::Copy(a) => vec![a],
            Op::Binary(_, a, b) | Op::Assign(a, b) => vec![a, b],
            Op::Where(c, a, b) => vec![c, a, b],
            Op::Join(parts) => parts,
        }
    }
}

impl Drop for Node {
    /// Graphs can be deep (a long chain of operations never realized): the nodes only this
    /// one holds are dropped from a list rather than recursively, so no stack overflows.
    fn drop(&mut self) {
        let mut stack = self.op.take_sources();
        while let Some(n) = stack.pop() {
            if let Ok(mut inner) = Arc::try_unwrap(n) {
                stack.extend(inner.op.take_sources());
            }
        }
    }
}

/// The nodes reachable from `roots` through operands, operands first; `stop` ends the walk
/// at a node (it is included, its operands are not).
pub(crate) fn toposort(roots: &[Arc<Node>], stop: &dyn Fn(&Node) -> bool) -> Vec<Arc<Node>> {
    let mut order = Vec::new();
    let mut seen = std::collections::HashSet::new();
    // Iterative depth-first walk (graphs can be deep).
    let mut stack: Vec<(Arc<Node>, bool)> =
        roots.iter().rev().map(|r| (r.clone(), false)).collect();
    while let Some((n, expanded)) = stack.pop() {
        if expanded {
            order.push(n);
            continue;
        }
        if !seen.insert(n.id) {
            continue;
        }
        stack.push((n.clone(), true));
        if !stop(&n) {
            for s in n.op.sources().into_iter().rev() {
                if !seen.contains(&s.id) {
                    stack.push((s.clone(), false));
                }
            }
        }
    }
    order
}

/// A fresh node id.
pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}
