//! Tensors spread over several devices: [`Sharded`] holds one tensor per device, either
//! pieces of one tensor along an axis or replicas of it, and the collectives between them.
//!
//! Everything here is built from the graph's own operations: a part moves to another device
//! with [`Tensor::to`] (a copy node) and is combined there with `add` or `maximum`. So a
//! collective is lazy like any other operation, its gradient comes from the copies' and the
//! sums' own (`to` sends the gradient back). A step captured on one device (`Jit::new`) does
//! not replay a collective; one captured across a hive's members (`Jit::spanning`) replays
//! its kernels and copies as one runtime graph over every device's queues. Copies between
//! two `am` devices take the transport the runtime picks for the pair
//! ([`am_runtime::Device::link_to`]): XGMI inside a hive, PCIe through the source's BAR0
//! between large-BAR devices outside one, host memory otherwise.
//!
//! All-reduce has three algorithms, picked by size and devices ([`Algorithm::Auto`]):
//! - **direct** (one XGMI hive, as RCCL does on a fully connected MI300X hive): device `i`
//!   reduces chunk `i` of every part in one kernel that reads the other devices' chunks
//!   where they lie, through peer mappings (no copy), then every reduced chunk is copied
//!   to every other device. One kernel per device instead of `n − 1`, and every step's
//!   work on all devices at once; each device still receives `2 (n − 1) / n` of the bytes.
//!   Between devices that cannot map each other's memory the chunks are copied instead.
//! - **ring**: the flattened parts cut into one chunk per device; `n − 1` steps in which
//!   every device sends one chunk to the next and the next adds it to its own (each device
//!   ends with one chunk reduced over all), then `n − 1` steps passing the reduced chunks
//!   round (all-gather). Each device sends and receives `2 (n − 1) / n` of the bytes: the
//!   bandwidth-optimal algorithm for large tensors.
//! - **tree**: pairs reduce into the lower index (`⌈log₂ n⌉` levels), device 0 holds the
//!   result, and it is copied back down the same tree. `2 ⌈log₂ n⌉` dependent steps instead
//!   of `2 (n − 1)`: fewer round trips for small tensors, but the whole tensor crosses
//!   each link used.
//!
//! Every device ends with the same bits: each reduced chunk is computed once, on one
//! device, and copied to the others.

use std::sync::Arc;

use am_isa::sync::lock;

use crate::device::{Buffer, Device, Storage};
use crate::node::{Landing, Node, Op};
use crate::tensor::axis;
use crate::{Error, Result, Tensor};

/// Bytes per part from which [`Algorithm::Auto`] takes the ring (below, the tree). Chosen,
/// not measured on hardware: about where NCCL's tuning moves large all-reduces to rings.
pub const RING_MIN_BYTES: usize = 256 << 10;

/// How a reduction combines the devices' values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// The sum.
    Sum,
    /// The maximum.
    Max,
}

/// Which all-reduce algorithm to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// The tree below [`RING_MIN_BYTES`] per part; from there on the direct algorithm when
    /// every device is an `am` device of one XGMI hive, else the ring.
    Auto,
    /// Each device reduces its chunk of every part in one kernel, reading the other
    /// devices' chunks in place through peer mappings (copies where the devices cannot map
    /// each other's memory), then copies its reduced chunk to every other device.
    Direct,
    /// Reduce-scatter then all-gather around the ring of devices.
    Ring,
    /// Reduce up a binary tree to the first device, then copy back down it.
    Tree,
}

/// One tensor over several devices: the parts, one per device, are either pieces of the
/// whole along one axis (`axis` is `Some`) or replicas of it (`None`).
#[derive(Clone, Debug)]
pub struct Sharded {
    parts: Vec<Tensor>,
    axis: Option<usize>,
}

fn layout_error(op: &'static str, shape: Vec<usize>, reason: String) -> Error {
    Error::Shape { op, shape, reason }
}

impl Tensor {
    /// This tensor cut along `axis` into one piece per device (the first `size % n` pieces
    /// one element longer than the others), each piece copied to its device. Gradients of
    /// the pieces flow back into this tensor.
    pub fn shard(&self, devices: &[Device], axis_: isize) -> Result<Sharded> {
        let shape = self.shape();
        let a = axis("shard", &shape, axis_)?;
        let n = devices.len();
        if n == 0 {
            return Err(layout_error("shard", shape, "no devices".into()));
        }
        if shape[a] < n {
            return Err(layout_error(
                "shard",
                shape.clone(),
                format!(
                    "axis {a} has {} elements for {n} devices: every device needs at least one",
                    shape[a]
                ),
            ));
        }
        let mut parts = Vec::with_capacity(n);
        let mut start = 0;
        for (i, d) in devices.iter().enumerate() {
            let len = shape[a] / n + usize::from(i < shape[a] % n);
            parts.push(self.narrow(a as isize, start, len)?.to(d));
            start += len;
        }
        Ok(Sharded {
            parts,
            axis: Some(a),
        })
    }

    /// This tensor copied to every device (a broadcast from its own device). Gradients of
    /// the replicas add up in this tensor's.
    pub fn replicate(&self, devices: &[Device]) -> Result<Sharded> {
        if devices.is_empty() {
            return Err(layout_error("replicate", self.shape(), "no devices".into()));
        }
        Ok(Sharded {
            parts: devices.iter().map(|d| self.to(d)).collect(),
            axis: None,
        })
    }
}

impl Sharded {
    /// Parts made elsewhere: pieces along `axis` (`Some`), or values of one shape, one per
    /// device (`None`: replicas, or the per-device contributions an all-reduce combines).
    /// Refused when two parts are on one device, or when their shapes do not fit the layout.
    pub fn from_parts(parts: Vec<Tensor>, axis_: Option<usize>) -> Result<Sharded> {
        let first = parts
            .first()
            .ok_or_else(|| layout_error("from_parts", vec![], "no parts".into()))?;
        let shape = first.shape();
        for (i, p) in parts.iter().enumerate() {
            if parts[..i].iter().any(|q| q.device() == p.device()) {
                return Err(Error::Device {
                    device: p.device().name().into(),
                    reason: "holds two parts of one sharded tensor".into(),
                });
            }
            let s = p.shape();
            let fits = match axis_ {
                None => s == shape,
                Some(a) => {
                    a < shape.len()
                        && s.len() == shape.len()
                        && s.iter()
                            .zip(&shape)
                            .enumerate()
                            .all(|(k, (x, y))| k == a || x == y)
                }
            };
            if !fits || p.dtype() != first.dtype() {
                return Err(layout_error(
                    "from_parts",
                    s,
                    format!(
                        "part {i} ({}) does not fit part 0 ({:?}, {}) sharded on {axis_:?}",
                        p.dtype(),
                        shape,
                        first.dtype()
                    ),
                ));
            }
        }
        Ok(Sharded { parts, axis: axis_ })
    }

    /// The parts, in device order.
    pub fn parts(&self) -> &[Tensor] {
        &self.parts
    }

    /// The devices, in order.
    pub fn devices(&self) -> Vec<Device> {
        self.parts.iter().map(|p| p.device()).collect()
    }

    /// The axis the parts split (`None`: every part is the whole tensor).
    pub fn axis(&self) -> Option<usize> {
        self.axis
    }

    /// The whole tensor's shape.
    pub fn shape(&self) -> Vec<usize> {
        let mut s = self.parts[0].shape();
        if let Some(a) = self.axis {
            s[a] = self.parts.iter().map(|p| p.shape()[a]).sum();
        }
        s
    }

    /// The dtype.
    pub fn dtype(&self) -> crate::DType {
        self.parts[0].dtype()
    }

    /// Computes every part; then asks every `am` device whether it reported a fault meanwhile,
    /// so one that faulted fails the whole computation with an error naming it.
    pub fn realize(&self) -> Result<&Sharded> {
        let refs: Vec<&Tensor> = self.parts.iter().collect();
        Tensor::realize_all(&refs)?;
        check_faults(&self.devices(), "realizing a sharded tensor")?;
        Ok(self)
    }

    /// The whole tensor on `dev` (pieces joined along the axis; a replica copied).
    pub fn gather(&self, dev: &Device) -> Result<Tensor> {
        match self.axis {
            None => Ok(self.parts[0].to(dev)),
            Some(a) => {
                let moved: Vec<Tensor> = self.parts.iter().map(|p| p.to(dev)).collect();
                let refs: Vec<&Tensor> = moved.iter().collect();
                Tensor::cat(&refs, a as isize)
            }
        }
    }

    /// The whole tensor's elements as f32, gathered on the first device.
    pub fn to_vec_f32(&self) -> Result<Vec<f32>> {
        self.realize()?;
        self.gather(&self.parts[0].device())?.to_vec_f32()
    }

    /// `f` applied to every part on its device; the result keeps the layout. For
    /// operations that leave the sharded axis where it is with the same length (elementwise
    /// ones, reductions over other axes with `keepdim`); the shapes are checked.
    pub fn map(&self, f: impl Fn(&Tensor) -> Result<Tensor>) -> Result<Sharded> {
        let parts = self.parts.iter().map(f).collect::<Result<Vec<_>>>()?;
        for (p, q) in parts.iter().zip(&self.parts) {
            let keeps = match self.axis {
                None => true,
                Some(a) => p.ndim() == q.ndim() && p.shape()[a] == q.shape()[a],
            };
            if !keeps {
                return Err(layout_error(
                    "map",
                    q.shape(),
                    format!(
                        "the result {:?} moves or resizes the sharded axis {:?}",
                        p.shape(),
                        self.axis
                    ),
                ));
            }
        }
        Sharded::from_parts(parts, self.axis)
    }

    fn same_devices(&self, op: &'static str, other: &Sharded) -> Result<()> {
        if self.parts.len() != other.parts.len() {
            return Err(layout_error(
                op,
                self.shape(),
                format!(
                    "{} devices against {} of the other operand",
                    self.parts.len(),
                    other.parts.len()
                ),
            ));
        }
        for (a, b) in self.parts.iter().zip(&other.parts) {
            if a.device() != b.device() {
                return Err(Error::DeviceMismatch {
                    op,
                    a: a.device().name().into(),
                    b: b.device().name().into(),
                });
            }
        }
        Ok(())
    }

    /// A binary operation part by part, broadcasting like NumPy: both operands sharded
    /// along the same axis of the result (with pieces of the same lengths), or one
    /// replicated and of length 1 (or absent) along the other's sharded axis, or both
    /// replicated.
    fn binary(
        &self,
        op: &'static str,
        rhs: &Sharded,
        f: impl Fn(&Tensor, &Tensor) -> Result<Tensor>,
    ) -> Result<Sharded> {
        self.same_devices(op, rhs)?;
        let (na, nb) = (self.parts[0].ndim(), rhs.parts[0].ndim());
        let n = na.max(nb);
        let out_axis = |s: &Sharded, nd: usize| s.axis.map(|a| a + n - nd);
        let (aa, ab) = (out_axis(self, na), out_axis(rhs, nb));
        let axis_ = match (aa, ab) {
            (None, None) => None,
            (Some(a), Some(b)) if a == b => {
                let lens = |s: &Sharded, k: usize| -> Vec<usize> {
                    s.parts.iter().map(|p| p.shape()[k]).collect()
                };
                if lens(self, a + na - n) != lens(rhs, b + nb - n) {
                    return Err(layout_error(
                        op,
                        self.shape(),
                        format!(
                            "pieces of other lengths than the other operand's ({:?})",
                            rhs.shape()
                        ),
                    ));
                }
                Some(a)
            }
            (Some(a), None) | (None, Some(a)) => {
                let (rep, nr) = if aa.is_none() { (self, na) } else { (rhs, nb) };
                let len = if a + nr >= n {
                    rep.parts[0].shape()[a + nr - n]
                } else {
                    1
                };
                if len != 1 {
                    return Err(layout_error(
                        op,
                        rep.shape(),
                        format!(
                            "a replicated operand must have length 1 along the other's \
                             sharded axis {a} (it has {len}); shard it too"
                        ),
                    ));
                }
                Some(a)
            }
            (Some(a), Some(b)) => {
                return Err(layout_error(
                    op,
                    self.shape(),
                    format!("sharded along axis {a} of the result, the other along {b}"),
                ));
            }
        };
        let parts = self
            .parts
            .iter()
            .zip(&rhs.parts)
            .map(|(a, b)| f(a, b))
            .collect::<Result<Vec<_>>>()?;
        Sharded::from_parts(parts, axis_)
    }

    /// Element-wise sum.
    pub fn add(&self, rhs: &Sharded) -> Result<Sharded> {
        self.binary("add", rhs, |a, b| a.add(b))
    }

    /// Element-wise difference.
    pub fn sub(&self, rhs: &Sharded) -> Result<Sharded> {
        self.binary("sub", rhs, |a, b| a.sub(b))
    }

    /// Element-wise product.
    pub fn mul(&self, rhs: &Sharded) -> Result<Sharded> {
        self.binary("mul", rhs, |a, b| a.mul(b))
    }

    /// Element-wise quotient.
    pub fn div(&self, rhs: &Sharded) -> Result<Sharded> {
        self.binary("div", rhs, |a, b| a.div(b))
    }

    /// Element-wise maximum.
    pub fn maximum(&self, rhs: &Sharded) -> Result<Sharded> {
        self.binary("maximum", rhs, |a, b| a.maximum(b))
    }

    /// Matrix product, part by part where the layouts allow it:
    /// - the left sharded along a row or batch axis, the right replicated: sharded the same;
    /// - the left replicated, the right sharded along its columns (last axis): sharded
    ///   along the result's last axis;
    /// - the left sharded along its last axis and the right along its rows (the summed
    ///   axis): each device's partial product, then an all-reduce: replicated;
    /// - both replicated: replicated.
    pub fn matmul(&self, rhs: &Sharded) -> Result<Sharded> {
        self.same_devices("matmul", rhs)?;
        let (na, nb) = (self.parts[0].ndim(), rhs.parts[0].ndim());
        let mul = || -> Result<Vec<Tensor>> {
            self.parts
                .iter()
                .zip(&rhs.parts)
                .map(|(a, b)| a.matmul(b))
                .collect()
        };
        match (self.axis, rhs.axis) {
            (None, None) => Sharded::from_parts(mul()?, None),
            (Some(a), None) if a + 1 < na => {
                let parts = mul()?;
                let n = parts[0].ndim();
                Sharded::from_parts(parts, Some(a + n - na))
            }
            (None, Some(b)) if nb >= 2 && b + 1 == nb => {
                let parts = mul()?;
                let n = parts[0].ndim();
                Sharded::from_parts(parts, Some(n - 1))
            }
            (Some(a), Some(b)) if a + 1 == na && nb >= 2 && b + 2 == nb => {
                Sharded::from_parts(mul()?, None)?.all_reduce(ReduceOp::Sum)
            }
            (a, b) => Err(layout_error(
                "matmul",
                self.shape(),
                format!(
                    "left sharded on {a:?}, right ({:?}) on {b:?}: no per-device product \
                     for these layouts (replicate one, or shard the left by rows)",
                    rhs.shape()
                ),
            )),
        }
    }

    /// Sum over `axes` (all when empty). Over the sharded axis: each device sums its piece,
    /// then an all-reduce adds the devices' sums (the result is replicated).
    pub fn sum(&self, axes: &[isize], keepdim: bool) -> Result<Sharded> {
        self.reduce("sum", ReduceOp::Sum, axes, keepdim)
    }

    /// Maximum over `axes` (all when empty), across devices like [`Sharded::sum`].
    pub fn max(&self, axes: &[isize], keepdim: bool) -> Result<Sharded> {
        self.reduce("max", ReduceOp::Max, axes, keepdim)
    }

    /// Mean over `axes` (all when empty).
    pub fn mean(&self, axes: &[isize], keepdim: bool) -> Result<Sharded> {
        let shape = self.shape();
        let all: Vec<usize> = if axes.is_empty() {
            (0..shape.len()).collect()
        } else {
            axes.iter()
                .map(|&a| axis("mean", &shape, a))
                .collect::<Result<_>>()?
        };
        let count: usize = all.iter().map(|&a| shape[a]).product();
        self.sum(axes, keepdim)?.map(|t| t.div(count.max(1) as f64))
    }

    fn reduce(
        &self,
        op: &'static str,
        how: ReduceOp,
        axes: &[isize],
        keepdim: bool,
    ) -> Result<Sharded> {
        let shape = self.shape();
        let mut reduced: Vec<usize> = if axes.is_empty() {
            (0..shape.len()).collect()
        } else {
            axes.iter()
                .map(|&a| axis(op, &shape, a))
                .collect::<Result<_>>()?
        };
        reduced.sort_unstable();
        reduced.dedup();
        let ax: Vec<isize> = reduced.iter().map(|&a| a as isize).collect();
        let parts = self
            .parts
            .iter()
            .map(|p| match how {
                ReduceOp::Sum => p.sum(&ax, keepdim),
                ReduceOp::Max => p.max(&ax, keepdim),
            })
            .collect::<Result<Vec<_>>>()?;
        match self.axis {
            Some(a) if reduced.contains(&a) => Sharded::from_parts(parts, None)?.all_reduce(how),
            Some(a) => {
                let at = if keepdim {
                    a
                } else {
                    a - reduced.iter().filter(|&&r| r < a).count()
                };
                Sharded::from_parts(parts, Some(at))
            }
            None => Sharded::from_parts(parts, None),
        }
    }

    /// Every device gets the reduction of all the parts (which must be of one shape): a
    /// replicated result, the algorithm picked by size.
    pub fn all_reduce(&self, op: ReduceOp) -> Result<Sharded> {
        self.all_reduce_with(op, Algorithm::Auto)
    }

    /// The shape every part has, for `op`, which combines parts of one shape.
    fn part_shape(&self, op: &'static str) -> Result<Vec<usize>> {
        let shape = self.parts[0].shape();
        if self.parts.iter().any(|p| p.shape() != shape) {
            return Err(layout_error(
                op,
                self.shape(),
                format!("the parts have different shapes; {op} combines parts of one shape"),
            ));
        }
        Ok(shape)
    }

    /// [`Sharded::all_reduce`] with the algorithm given.
    pub fn all_reduce_with(&self, op: ReduceOp, algorithm: Algorithm) -> Result<Sharded> {
        let shape = self.part_shape("all_reduce")?;
        let n = self.parts.len();
        if n == 1 {
            return Sharded::from_parts(self.parts.clone(), None);
        }
        let numel: usize = shape.iter().product();
        let bytes = numel * self.dtype().size();
        let chunked = match algorithm {
            Algorithm::Ring | Algorithm::Direct => numel >= n,
            Algorithm::Tree => false,
            Algorithm::Auto => numel >= n && bytes >= RING_MIN_BYTES,
        };
        let direct = match algorithm {
            Algorithm::Direct => true,
            Algorithm::Auto => chunked && one_hive(&self.devices())?,
            _ => false,
        };
        let outs = if chunked {
            let flat: Vec<Tensor> = self
                .parts
                .iter()
                .map(|p| p.reshape(&[-1]))
                .collect::<Result<_>>()?;
            let chunks = split(&flat, 0)?;
            let everything = if direct {
                let mine = direct_reduce_scatter(&chunks, op)?;
                direct_all_gather(&mine)
            } else {
                let mine = ring_reduce_scatter(&chunks, op)?;
                ring_all_gather(&mine, &self.devices())?
            };
            let dims: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
            everything
                .iter()
                .map(|c| join(c, true)?.reshape(&dims))
                .collect::<Result<Vec<_>>>()?
        } else {
            tree_all_reduce(&self.parts, op)?
        };
        Sharded::from_parts(outs, None)
    }

    /// Every device gets the whole tensor: the pieces joined along the axis (already
    /// replicated: unchanged).
    pub fn all_gather(&self) -> Result<Sharded> {
        let Some(a) = self.axis else {
            return Ok(self.clone());
        };
        let everything = ring_all_gather(&self.parts, &self.devices())?;
        let shape = self.shape();
        // Pieces along an axis with only axes of length 1 before it follow each other in
        // memory: joined by copies, each landing in its place. Otherwise they interleave,
        // and a `cat` kernel lays them out.
        let flat = shape[..a].iter().all(|&d| d == 1);
        let dims: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
        let outs = everything
            .iter()
            .map(|c| {
                if flat {
                    let pieces = c
                        .iter()
                        .map(|p| p.reshape(&[-1]))
                        .collect::<Result<Vec<_>>>()?;
                    join(&pieces, false)?.reshape(&dims)
                } else {
                    let refs: Vec<&Tensor> = c.iter().collect();
                    Tensor::cat(&refs, a as isize)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        Sharded::from_parts(outs, None)
    }

    /// The parts (of one shape) reduced and cut along `axis`: device `i` gets piece `i` of
    /// the reduction of all the parts (the ring's first half).
    pub fn reduce_scatter(&self, op: ReduceOp, axis_: isize) -> Result<Sharded> {
        let shape = self.part_shape("reduce_scatter")?;
        let a = axis("reduce_scatter", &shape, axis_)?;
        if shape[a] < self.parts.len() {
            return Err(layout_error(
                "reduce_scatter",
                shape.clone(),
                format!(
                    "axis {a} has {} elements for {} devices",
                    shape[a],
                    self.parts.len()
                ),
            ));
        }
        let chunks = split(&self.parts, a)?;
        let mine = ring_reduce_scatter(&chunks, op)?;
        Sharded::from_parts(mine, Some(a))
    }

    /// Gradients from a scalar: a replicated one's gradient flows from its first replica
    /// only (the others are copies of the same value, whose gradients would count it `n`
    /// times); a sharded one's from every piece.
    pub fn backward(&self) -> Result<()> {
        match self.axis {
            None => self.parts[0].backward(),
            Some(_) => {
                for p in &self.parts {
                    p.backward()?;
                }
                Ok(())
            }
        }
    }
}

/// Each part cut along `a` into as many chunks as there are parts (the first `len % n`
/// chunks one longer): `chunks[device][chunk]`.
fn split(parts: &[Tensor], a: usize) -> Result<Vec<Vec<Tensor>>> {
    let n = parts.len();
    parts
        .iter()
        .map(|p| {
            let len = p.shape()[a];
            let mut start = 0;
            (0..n)
                .map(|k| {
                    let l = len / n + usize::from(k < len % n);
                    let c = p.narrow(a as isize, start, l);
                    start += l;
                    c
                })
                .collect()
        })
        .collect()
}

/// One device's chunks (one-dimensional, one dtype, all on that device) laid end to end,
/// each copied into its place of one buffer: a `cat` would run a kernel reading them all
/// again, the longest step of a large ring all-reduce on the mock. Chunks copied from other
/// devices land in their place when they are copied; with `computed_in_place`, so is a
/// chunk the collective computed itself (a reduced chunk: a sum or max that nothing outside
/// the collective holds), whose kernel then writes its place of the joined memory.
fn join(chunks: &[Tensor], computed_in_place: bool) -> Result<Tensor> {
    let first = chunks.first().ok_or_else(|| Error::Shape {
        op: "join",
        shape: vec![],
        reason: "no chunks to join".into(),
    })?;
    let (device, dtype) = (first.device(), first.dtype());
    let mut total = 0;
    for c in chunks {
        let shape = c.shape();
        if shape.len() != 1 || c.device() != device || c.dtype() != dtype {
            return Err(Error::Shape {
                op: "join",
                shape,
                reason: format!(
                    "joins one-dimensional {dtype:?} chunks on {device}, not {:?} on {}",
                    c.dtype(),
                    c.device()
                ),
            });
        }
        total += shape[0];
    }
    let nodes: Vec<_> = chunks.iter().map(Tensor::node).collect();
    let joined = Node::new(Op::Join(nodes.clone()), vec![total], dtype, device);
    // Chunks that arrive from other devices land in their place of the joined memory when
    // they are copied, and reduced chunks when they are computed (rather than in memory of
    // their own, copied into place afterwards). Not a chunk someone else may hold: memory
    // shared with the joined result would see that holder's later assignments.
    let mut at = 0;
    for n in &nodes {
        // A copy seen through reshapes (a piece of `all_gather` flattened) has the same bytes.
        let mut c = n;
        while let Op::Reshape(a) = &c.op
            && !c.is_realized()
        {
            c = a;
        }
        let lands = match c.op {
            Op::Copy(_) => true,
            Op::Binary(..) => computed_in_place,
            _ => false,
        };
        if lands && !c.is_realized() {
            let mut landing = lock(&c.landing);
            if landing.is_none() {
                *landing = Some(Landing::Into(Arc::downgrade(&joined), at));
            }
        }
        at += n.numel() * dtype.size();
    }
    Ok(Tensor::from_node(joined))
}

fn combine(op: ReduceOp, mine: &Tensor, received: &Tensor) -> Result<Tensor> {
    match op {
        ReduceOp::Sum => mine.add(received),
        ReduceOp::Max => mine.maximum(received),
    }
}

/// Whether every device is an `am` device and every pair's layout puts them in one XGMI
/// hive ([`am_runtime::Device::hive_layout_with`]): what a step captured across them
/// ([`crate::Jit::spanning`]) needs.
pub fn one_hive(devices: &[Device]) -> Result<bool> {
    let Some(first) = devices.first() else {
        return Ok(false);
    };
    let Some(a) = first.runtime() else {
        return Ok(false);
    };
    for d in &devices[1..] {
        let Some(b) = d.runtime() else {
            return Ok(false);
        };
        if !a.hive_layout_with(b).map_err(|e| d.runtime_error(e))? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `t` on `dev`, read where it lies when the two devices allow it (a copy node marked
/// [`Landing::InPlace`]), else copied.
fn read_in_place(t: &Tensor, dev: &Device) -> Tensor {
    let c = t.to(dev);
    let node = c.node();
    if matches!(node.op, Op::Copy(_)) && !node.is_realized() {
        *lock(&node.landing) = Some(Landing::InPlace);
    }
    c
}

/// The direct reduce-scatter: device `i` combines chunk `i` of every device's part, in
/// device order, in one kernel; the other devices' chunks are read where they lie
/// ([`read_in_place`]). Returns each device's reduced chunk.
fn direct_reduce_scatter(chunks: &[Vec<Tensor>], op: ReduceOp) -> Result<Vec<Tensor>> {
    let n = chunks.len();
    (0..n)
        .map(|i| {
            let dev = chunks[i][i].device();
            let mut acc = read_in_place(&chunks[0][i], &dev);
            for row in &chunks[1..] {
                acc = combine(op, &acc, &read_in_place(&row[i], &dev))?;
            }
            Ok(acc)
        })
        .collect()
}

/// The direct all-gather: every device's chunk copied straight to every other device (one
/// step, all copies at once). Returns every device's `n` chunks in order.
fn direct_all_gather(mine: &[Tensor]) -> Vec<Vec<Tensor>> {
    let devices: Vec<Device> = mine.iter().map(Tensor::device).collect();
    devices
        .iter()
        .map(|d| mine.iter().map(|c| c.to(d)).collect())
        .collect()
}

/// The ring's reduce-scatter: at step `s` device `i` sends its running chunk
/// `(i − 1 − s) mod n` to device `i + 1`, which combines it with its own; after `n − 1`
/// steps device `i` holds chunk `i` reduced over every device.
fn ring_reduce_scatter(chunks: &[Vec<Tensor>], op: ReduceOp) -> Result<Vec<Tensor>> {
    let n = chunks.len();
    let devices: Vec<Device> = chunks.iter().map(|c| c[0].device()).collect();
    let mut acc: Vec<Vec<Tensor>> = chunks.to_vec();
    for s in 0..n - 1 {
        let sent: Vec<(usize, usize, Tensor)> = (0..n)
            .map(|i| {
                let k = (i + 2 * n - 1 - s) % n;
                let j = (i + 1) % n;
                (j, k, acc[i][k].to(&devices[j]))
            })
            .collect();
        for (j, k, t) in sent {
            acc[j][k] = combine(op, &acc[j][k], &t)?;
        }
    }
    Ok(acc
        .into_iter()
        .enumerate()
        .map(|(i, mut c)| c.swap_remove(i))
        .collect())
}

/// The ring's all-gather: device `i` starts with chunk `i`; at step `s` it sends chunk
/// `(i − s) mod n` to device `i + 1`. Returns every device's `n` chunks in order.
fn ring_all_gather(mine: &[Tensor], devices: &[Device]) -> Result<Vec<Vec<Tensor>>> {
    let n = mine.len();
    let mut have: Vec<Vec<Option<Tensor>>> = (0..n)
        .map(|i| {
            let mut row = vec![None; n];
            row[i] = Some(mine[i].clone());
            row
        })
        .collect();
    for s in 0..n - 1 {
        let sent: Vec<(usize, usize, Tensor)> = (0..n)
            .filter_map(|i| {
                let k = (i + n - s) % n;
                let j = (i + 1) % n;
                have[i][k].as_ref().map(|t| (j, k, t.to(&devices[j])))
            })
            .collect();
        for (j, k, t) in sent {
            have[j][k] = Some(t);
        }
    }
    have.into_iter()
        .map(|row| {
            row.into_iter()
                .collect::<Option<Vec<Tensor>>>()
                .ok_or_else(|| Error::Device {
                    device: devices[0].name().into(),
                    reason: "the ring's all-gather left a chunk out".into(),
                })
        })
        .collect()
}

/// Binary-tree reduce to device 0, then the result copied back down the same tree.
fn tree_all_reduce(parts: &[Tensor], op: ReduceOp) -> Result<Vec<Tensor>> {
    let n = parts.len();
    let devices: Vec<Device> = parts.iter().map(|p| p.device()).collect();
    let mut vals: Vec<Tensor> = parts.to_vec();
    let mut step = 1;
    while step < n {
        for i in (0..n).step_by(2 * step) {
            if i + step < n {
                let received = vals[i + step].to(&devices[i]);
                vals[i] = combine(op, &vals[i], &received)?;
            }
        }
        step *= 2;
    }
    let mut outs: Vec<Option<Tensor>> = vec![None; n];
    outs[0] = Some(vals[0].clone());
    while step > 1 {
        step /= 2;
        for i in (0..n).step_by(2 * step) {
            if i + step < n
                && let Some(t) = outs[i].clone()
            {
                outs[i + step] = Some(t.to(&devices[i + step]));
            }
        }
    }
    outs.into_iter()
        .enumerate()
        .map(|(i, o)| {
            o.ok_or_else(|| Error::Device {
                device: devices[i].name().into(),
                reason: "the tree's broadcast left this device out".into(),
            })
        })
        .collect()
}

/// Asks every `am` device among `devices` for faults it reported; the first is the error.
pub(crate) fn check_faults(devices: &[Device], during: &str) -> Result<()> {
    for d in devices {
        if let Some(rt) = d.runtime() {
            rt.check_faults(during).map_err(|e| d.runtime_error(e))?;
        }
    }
    Ok(())
}

/// Every device's parameters' gradients (`replicas[device][parameter]`, the same parameters
/// in the same order on every device) replaced by their all-reduced sum: what data-parallel
/// training does after each device's backward. Every device ends with the same gradient
/// bits, so replicas updated by the same optimizer stay identical. The sums are computed
/// here, before any optimizer updates a parameter they are computed from.
pub fn all_reduce_gradients(replicas: &[Vec<Tensor>]) -> Result<()> {
    let Some(first) = replicas.first() else {
        return Ok(());
    };
    for (d, r) in replicas.iter().enumerate() {
        if r.len() != first.len() {
            return Err(Error::Autograd(format!(
                "device {d} has {} parameters, device 0 has {}",
                r.len(),
                first.len()
            )));
        }
    }
    if first.is_empty() {
        return Ok(());
    }
    let mut summed = Vec::with_capacity(first.len());
    for p in 0..first.len() {
        let grads = replicas
            .iter()
            .map(|r| {
                r[p].grad().ok_or_else(|| {
                    Error::Autograd(format!(
                        "parameter {p} on {} has no gradient: call backward on every device first",
                        r[p].device()
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        summed.push(Sharded::from_parts(grads, None)?.all_reduce(ReduceOp::Sum)?);
    }
    // Computed now, every parameter's parts in one realize: a part left lazy would be
    // computed when its device's optimizer runs, after another device's optimizer has
    // already updated in place the parameters the collective's other parts read. One
    // realize also computes the gradients' shared backward work once (lazy gradients, as
    // in a step captured whole, would otherwise be recomputed for each parameter) and
    // takes every parameter's copies of one level together.
    let parts: Vec<&Tensor> = summed.iter().flat_map(|s| &s.parts).collect();
    Tensor::realize_all(&parts)?;
    check_faults(&summed[0].devices(), "all-reducing the gradients")?;
    for (p, s) in summed.into_iter().enumerate() {
        for (r, g) in replicas.iter().zip(s.parts) {
            r[p].set_grad(&g)?;
        }
    }
    Ok(())
}

/// Starts copying `len` bytes of `src` (memory of `from`) into `dst` (memory of `to`):
/// between two `am` devices with the transport the runtime picks for the pair (XGMI inside
/// a hive: the fence to wait for; else host memory, done on return), with the CPU through
/// host memory. Faults are checked by the caller once its copies are done.
pub(crate) fn copy_buffer_start(
    from: &Device,
    src: &Buffer,
    to: &Device,
    dst: &Buffer,
    len: usize,
) -> Result<Option<am_runtime::Fence>> {
    to.count_copy();
    if let (Some(a), Some(b), Storage::Am(s), Storage::Am(d)) =
        (from.runtime(), to.runtime(), src.storage(), dst.storage())
    {
        let fence = b
            .copy_between_start(d, a, s, len as u64)
            .map_err(|e| to.runtime_error(e))?;
        crate::jit::record(|| match &fence {
            Some(_) => crate::jit::Event::Copy {
                to: to.clone(),
                dst: dst.clone(),
                dst_at: 0,
                from: from.clone(),
                src: src.clone(),
                len,
            },
            None => crate::jit::Event::Host(format!(
                "a copy of {len} bytes from {from} to {to} through host memory"
            )),
        });
        return Ok(fence);
    }
    crate::jit::record(|| {
        crate::jit::Event::Host(format!(
            "a copy of {len} bytes from {from} to {to} by the CPU"
        ))
    });
    let mut bytes = vec![0u8; len];
    from.read(src, &mut bytes)?;
    to.write(dst, &bytes)?;
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ring's chunks from other devices land in their place of each device's joined
    /// memory (views of it), and its own reduced chunk is computed there: the join copies
    /// nothing.
    /// Each part's join, before the reshape each all-reduced part is.
    fn joins_of(r: &Sharded) -> Vec<Arc<Node>> {
        r.parts()
            .iter()
            .map(|p| match &p.node().op {
                Op::Reshape(j) => j.clone(),
                _ => p.node(),
            })
            .collect()
    }

    #[test]
    fn every_chunk_lands_in_the_joined_memory() {
        am_mock::register();
        let devs: Vec<Device> = (48..52)
            .map(|i| Device::open(&format!("mock:mi300x-hive4:{i}")).unwrap())
            .collect();
        let n = devs.len();
        // 1024 f32 per part: chunks of 1 KiB, on the buffers' alignment.
        let parts: Vec<Tensor> = devs
            .iter()
            .enumerate()
            .map(|(i, d)| Tensor::from_slice(&vec![i as f32 + 1.0; 1024], &[1024], d).unwrap())
            .collect();
        let r = Sharded::from_parts(parts, None)
            .unwrap()
            .all_reduce_with(ReduceOp::Sum, Algorithm::Ring)
            .unwrap();
        let joins = joins_of(&r);
        r.realize().unwrap();
        for (d, j) in joins.iter().enumerate() {
            let Op::Join(chunks) = &j.op else {
                panic!("device {d}: the result is not a join");
            };
            let out = j.buffer().unwrap();
            let mut copied = 0;
            for (k, c) in chunks.iter().enumerate() {
                let b = c.buffer().unwrap();
                assert!(
                    b.is_view_of(&out, k * 1024),
                    "device {d}: chunk {k} ({}) landed elsewhere",
                    c.op.name()
                );
                copied += usize::from(matches!(c.op, Op::Copy(_)));
            }
            assert_eq!(
                copied,
                n - 1,
                "device {d}: the other devices' chunks copied"
            );
            assert_eq!(
                r.parts()[d].to_vec_f32().unwrap(),
                vec![10.0; 1024],
                "device {d}: 1 + 2 + 3 + 4"
            );
        }
    }

    /// The direct all-reduce on one hive reads every other member's chunk where it lies:
    /// each of the `n (n − 1)` in-place copies is a peer mapping of the source's memory
    /// (no bytes moved for the reduce-scatter), and every device ends with the same bits,
    /// those of the chunks summed in device order.
    #[test]
    fn the_direct_all_reduce_reads_the_other_members_chunks_in_place() {
        am_mock::register();
        let devs: Vec<Device> = (56..60)
            .map(|i| Device::open(&format!("mock:mi300x-hive4:{i}")).unwrap())
            .collect();
        let n = devs.len();
        let data: Vec<Vec<f32>> = (0..n)
            .map(|d| {
                (0..1024)
                    .map(|k| (d as f32 + 1.0) * 0.1 + k as f32 * 1e-3)
                    .collect()
            })
            .collect();
        let parts: Vec<Tensor> = devs
            .iter()
            .zip(&data)
            .map(|(d, v)| Tensor::from_slice(v, &[1024], d).unwrap())
            .collect();
        let r = Sharded::from_parts(parts, None)
            .unwrap()
            .all_reduce_with(ReduceOp::Sum, Algorithm::Direct)
            .unwrap();
        let roots: Vec<Arc<Node>> = r.parts().iter().map(Tensor::node).collect();
        let in_place: Vec<Arc<Node>> = crate::node::toposort(&roots, &|_| false)
            .into_iter()
            .filter(|c| matches!(&*lock(&c.landing), Some(Landing::InPlace)))
            .collect();
        assert_eq!(
            in_place.len(),
            n * (n - 1),
            "one read per other member and chunk"
        );
        r.realize().unwrap();
        for c in &in_place {
            let b = c.buffer().unwrap();
            let Storage::Am(rb) = b.storage() else {
                panic!("{}: not device memory", c.device);
            };
            assert_eq!(
                rb.kind(),
                am_runtime::MemKind::Peer,
                "{}: a chunk of another member was copied, not read in place",
                c.device
            );
        }
        let want: Vec<u32> = (0..1024)
            .map(|k| {
                data.iter()
                    .skip(1)
                    .fold(data[0][k], |a, v| a + v[k])
                    .to_bits()
            })
            .collect();
        for (d, p) in r.parts().iter().enumerate() {
            let got: Vec<u32> = p
                .to_vec_f32()
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect();
            assert_eq!(got, want, "device {d}: the chunks summed in device order");
        }
    }

    /// The direct all-reduce computes each member's reduced chunk straight into its place
    /// of the member's joined result: the only copies are the `n (n − 1)` chunks sent to
    /// the other members (each landing in place too), none for a join, and the result is
    /// the chunks summed in device order.
    #[test]
    fn the_direct_all_reduce_computes_its_joins_in_place() {
        am_mock::register();
        let devs: Vec<Device> = (80..84)
            .map(|i| Device::open(&format!("mock:mi300x-hive4:{i}")).unwrap())
            .collect();
        let n = devs.len();
        // 1024 f32 per part: chunks of 1 KiB, on the buffers' alignment.
        let parts: Vec<Tensor> = devs
            .iter()
            .enumerate()
            .map(|(d, dev)| {
                let v: Vec<f32> = (0..1024).map(|k| (d * 1024 + k) as f32).collect();
                Tensor::from_slice(&v, &[1024], dev).unwrap()
            })
            .collect();
        let r = Sharded::from_parts(parts, None)
            .unwrap()
            .all_reduce_with(ReduceOp::Sum, Algorithm::Direct)
            .unwrap();
        let joins = joins_of(&r);
        let copies = || devs.iter().map(Device::copies_started).sum::<u64>();
        let before = copies();
        r.realize().unwrap();
        assert_eq!(
            copies() - before,
            (n * (n - 1)) as u64,
            "one copy per reduced chunk and other member, none to put a join together"
        );
        for (d, j) in joins.iter().enumerate() {
            let Op::Join(chunks) = &j.op else {
                panic!("device {d}: the result is not a join");
            };
            let own = chunks[d].buffer().unwrap();
            assert!(
                matches!(chunks[d].op, Op::Binary(..)),
                "device {d}: its own chunk is its sum"
            );
            assert!(
                own.is_view_of(&j.buffer().unwrap(), d * 1024),
                "device {d}: its sum was computed elsewhere than its place in the result"
            );
        }
        let want: Vec<f32> = (0..1024)
            .map(|k| (0..n).map(|d| (d * 1024 + k) as f32).sum())
            .collect();
        for (d, p) in r.parts().iter().enumerate() {
            assert_eq!(p.to_vec_f32().unwrap(), want, "device {d}");
        }
    }
}
