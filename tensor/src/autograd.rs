//! Reverse-mode gradients over the lazy graph. Every primitive node has its vector–Jacobian
//! product here; composite operations (`relu`, `softmax`, `matmul`, `cross_entropy`, …)
//! get theirs from the primitives they are built of. Gradients are lazy tensors like any
//! other, built with tracking off.

use std::collections::HashMap;
use std::f64::consts::LN_2;
use std::sync::Arc;

use crate::node::{BinaryOp, Node, Op, ReduceOp, UnaryOp, no_grad, toposort};
use crate::{Error, Result, Tensor};

impl Tensor {
    /// Gradients of this one-element tensor with respect to every leaf that requires them
    /// ([`Tensor::set_requires_grad`]), added to the leaves' [`Tensor::grad`].
    pub fn backward(&self) -> Result<()> {
        if self.numel() != 1 {
            return Err(Error::Autograd(format!(
                "backward of a tensor of shape {:?} needs a gradient for it (backward_with)",
                self.shape()
            )));
        }
        self.backward_with(&self.ones_like())
    }

    /// Gradients given the gradient `grad` of this tensor (same shape).
    pub fn backward_with(&self, grad: &Tensor) -> Result<()> {
        let root = self.node();
        if !root.requires_grad {
            return Err(Error::Autograd(
                "the tensor does not depend on any tensor that requires gradients".into(),
            ));
        }
        if grad.shape() != root.shape {
            return Err(Error::Autograd(format!(
                "the gradient has shape {:?}, the tensor {:?}",
                grad.shape(),
                root.shape
            )));
        }
        no_grad(|| {
            let order = toposort(std::slice::from_ref(&root), &|n| {
                !n.requires_grad || n.owner.is_some()
            });
            let mut grads: HashMap<u64, Tensor> = HashMap::new();
            grads.insert(root.id, grad.cast(root.dtype));
            for n in order.iter().rev() {
                let Some(g) = grads.remove(&n.id) else {
                    continue;
                };
                if let Some(owner) = &n.owner {
                    if let Some(inner) = owner.upgrade() {
                        Tensor(inner).accumulate_grad(g)?;
                    }
                    continue;
                }
                if !n.requires_grad || !n.dtype.is_float() {
                    continue;
                }
                for (src, gs) in vjp(n, &g)? {
                    if !src.requires_grad || !src.dtype.is_float() {
                        continue;
                    }
                    let gs = gs.cast(src.dtype);
                    let acc = match grads.remove(&src.id) {
                        Some(prev) => prev.add(&gs)?,
                        None => gs,
                    };
                    grads.insert(src.id, acc);
                }
            }
            Ok(())
        })
    }
}

fn t(n: &Arc<Node>) -> Tensor {
    Tensor::from_node(n.clone())
}

fn isize_axes(axes: impl IntoIterator<Item = usize>) -> Vec<isize> {
    axes.into_iter().map(|a| a as isize).collect()
}

/// The gradients of `n`'s operands given `n`'s gradient `g`.
fn vjp(n: &Arc<Node>, g: &Tensor) -> Result<Vec<(Arc<Node>, Tensor)>> {
    let out = t(n);
    Ok(match &n.op {
        Op::Buffer | Op::Const(_) | Op::Index(_) | Op::Rand(_) | Op::RandAt(..) | Op::Detach(_) => {
            vec![]
        }
        Op::Assign(..) => vec![],
        Op::Unary(op, a) => {
            let x = t(a);
            let ga = match op {
                UnaryOp::Neg => g.neg(),
                UnaryOp::Exp2 => g.mul(&out)?.mul(LN_2)?,
                UnaryOp::Log2 => g.div(&x.mul(LN_2)?)?,
                UnaryOp::Sqrt => g.div(&out.mul(2.0)?)?,
                UnaryOp::Sin => g.mul(&x.cos())?,
                UnaryOp::Recip => g.mul(&out.square())?.neg(),
                UnaryOp::Abs => {
                    let sign = x.gt(0.0)?.where_(1.0, &x.lt(0.0)?.where_(-1.0, 0.0)?)?;
                    g.mul(&sign)?
                }
                UnaryOp::Not => return Ok(vec![]),
            };
            vec![(a.clone(), ga)]
        }
        Op::Binary(op, a, b) => {
            let (x, y) = (t(a), t(b));
            match op {
                BinaryOp::Add => vec![(a.clone(), g.clone()), (b.clone(), g.clone())],
                BinaryOp::Sub => vec![(a.clone(), g.clone()), (b.clone(), g.neg())],
                BinaryOp::Mul => vec![(a.clone(), g.mul(&y)?), (b.clone(), g.mul(&x)?)],
                BinaryOp::Div => vec![
                    (a.clone(), g.div(&y)?),
                    (b.clone(), g.mul(&out)?.div(&y)?.neg()),
                ],
                BinaryOp::Max | BinaryOp::Min => {
                    // The winner takes the gradient, a tie halves it: masks of 1, ½, 0,
                    // so the gradient is read once per operand.
                    let tie = x.eq(&y)?.where_(0.5, 0.0)?;
                    let (wins_a, wins_b) = if *op == BinaryOp::Max {
                        (x.gt(&y)?, y.gt(&x)?)
                    } else {
                        (x.lt(&y)?, y.lt(&x)?)
                    };
                    vec![
                        (a.clone(), g.mul(&wins_a.where_(1.0, &tie)?)?),
                        (b.clone(), g.mul(&wins_b.where_(1.0, &tie)?)?),
                    ]
                }
                BinaryOp::And | BinaryOp::Or | BinaryOp::Cmp(_) => vec![],
            }
        }
        Op::Where(c, a, b) => {
            let c = t(c);
            vec![
                (a.clone(), c.where_(g, 0.0)?),
                (b.clone(), c.where_(0.0, g)?),
            ]
        }
        Op::Cast(a) => vec![(a.clone(), g.clone())],
        Op::Contiguous(a) => vec![(a.clone(), g.clone())],
        Op::Reduce(ReduceOp::Sum, a, _) => vec![(a.clone(), g.expand(&a.shape)?)],
        Op::Reduce(ReduceOp::Max, a, axes) => {
            let x = t(a);
            let hit = x.eq(&out.expand(&a.shape)?)?.cast(g.dtype());
            let count = hit.sum(&isize_axes(axes.iter().copied()), true)?;
            vec![(a.clone(), hit.mul(&g.div(&count)?.expand(&a.shape)?)?)]
        }
        Op::Reshape(a) => {
            let s: Vec<isize> = a.shape.iter().map(|&d| d as isize).collect();
            vec![(a.clone(), g.reshape(&s)?)]
        }
        Op::Permute(a, p) => {
            let mut inv = vec![0isize; p.len()];
            for (i, &axis) in p.iter().enumerate() {
                inv[axis] = i as isize;
            }
            vec![(a.clone(), g.permute(&inv)?)]
        }
        Op::Expand(a) => {
            let axes: Vec<usize> = (0..a.shape.len())
                .filter(|&d| a.shape[d] == 1 && n.shape[d] != 1)
                .collect();
            if axes.is_empty() {
                vec![(a.clone(), g.clone())]
            } else {
                vec![(a.clone(), g.sum(&isize_axes(axes), true)?)]
            }
        }
        Op::Pad(a, p) => {
            let r: Vec<(usize, usize)> = p
                .iter()
                .zip(&a.shape)
                .map(|(&(before, _), &d)| (before, before + d))
                .collect();
            vec![(a.clone(), g.shrink(&r)?)]
        }
        Op::Shrink(a, r) => {
            let p: Vec<(usize, usize)> = r
                .iter()
                .zip(&a.shape)
                .map(|(&(lo, hi), &d)| (lo, d - hi))
                .collect();
            vec![(a.clone(), g.pad(&p)?)]
        }
        Op::Flip(a, f) => {
            let axes = isize_axes(f.iter().enumerate().filter(|(_, x)| **x).map(|(i, _)| i));
            vec![(a.clone(), g.flip(&axes)?)]
        }
        Op::Copy(a) => vec![(a.clone(), g.to(&a.device))],
        Op::Join(parts) => {
            let mut at = 0;
            let mut out = Vec::with_capacity(parts.len());
            for a in parts {
                let len = a.numel();
                out.push((a.clone(), g.narrow(0, at, len)?.to(&a.device)));
                at += len;
            }
            out
        }
    })
}
