//! The scheduler: the lazy graph below the tensors to realize becomes a list of kernels.
//!
//! - Elementwise operations and views never get a kernel of their own: they are computed
//!   inside the kernel that needs them (recomputed if several do).
//! - A reduction is computed inside its one consumer's kernel when that consumer reads each
//!   of its elements once (no expand between them); otherwise, or when several consumers
//!   need it, it gets a kernel and its result goes to memory.
//! - Targets and assignments get kernels; a target that is only a reshape of memory shares
//!   that memory.
//! - An assignment writes into its target's memory in place when the kernel reads the
//!   target only at the element it writes and every other reader of the old value can run
//!   before it; otherwise it computes into fresh memory and a copy kernel at the end writes
//!   the target.
//! - Memory of intermediate results nobody else holds goes to later kernels of the same
//!   schedule once its last reader has run.

use std::collections::HashMap;
use std::sync::Arc;

use am_compiler::shapes::DeviceInfo;
use am_compiler::{Dim, KernelBuilder};
use am_isa::sync::lock;

use crate::codegen::{self, GenError, ParamSrc, Plan};
use crate::device::{Buffer, Device, Launch, LaunchArg};
use crate::node::{Node, Op, toposort};
use crate::{Error, Result, Tensor};

/// Realizes tensors together; assignments among them then become plain memory (their
/// history is dropped).
pub(crate) fn realize_tensors(tensors: &[&Tensor]) -> Result<()> {
    let nodes: Vec<Arc<Node>> = tensors.iter().map(|t| t.node()).collect();
    realize_nodes(&nodes)?;
    for (t, n) in tensors.iter().zip(&nodes) {
        if let Op::Assign(..) = n.op
            && let Some(b) = n.buffer()
        {
            t.set_node(Node::leaf(
                b,
                n.shape.clone(),
                n.dtype,
                n.device.clone(),
                n.owner.clone(),
            ));
        }
    }
    Ok(())
}

/// Computes every node of `targets` that is not computed yet.
pub(crate) fn realize_nodes(targets: &[Arc<Node>]) -> Result<()> {
    let mut pending: Vec<Arc<Node>> = Vec::new();
    for t in targets {
        if !t.is_realized() && !pending.iter().any(|p| p.id == t.id) {
            pending.push(t.clone());
        }
    }
    if pending.is_empty() {
        return Ok(());
    }
    // Copies between devices first: each realizes its source on the source's device.
    let copies: Vec<Arc<Node>> = toposort(&pending, &|n| {
        n.is_realized() || matches!(n.op, Op::Copy(_))
    })
    .into_iter()
    .filter(|n| matches!(n.op, Op::Copy(_)) && !n.is_realized())
    .collect();
    for c in &copies {
        if let Op::Copy(src) = &c.op {
            copy_node(c, src)?;
        }
    }
    drop(copies);
    let mut devices: Vec<Device> = Vec::new();
    for p in &pending {
        if !devices.contains(&p.device) {
            devices.push(p.device.clone());
        }
    }
    for d in devices {
        let mine: Vec<Arc<Node>> = pending
            .iter()
            .filter(|p| p.device == d && !p.is_realized())
            .cloned()
            .collect();
        schedule(&d, &mine)?;
    }
    Ok(())
}

fn copy_node(dst: &Arc<Node>, src: &Arc<Node>) -> Result<()> {
    realize_nodes(std::slice::from_ref(src))?;
    let b = src.buffer().ok_or_else(|| Error::Device {
        device: src.device.name().into(),
        reason: "a realized tensor has no memory".into(),
    })?;
    let mut bytes = vec![0u8; src.numel() * src.dtype.size()];
    src.device.read(&b, &mut bytes)?;
    let out = dst.device.alloc(bytes.len())?;
    dst.device.write(&out, &bytes)?;
    *lock(&dst.buffer) = Some(out);
    Ok(())
}

/// Follows views (and detaches) down to the node they look at.
fn base(order: &[Arc<Node>], index: &HashMap<u64, usize>, mut i: usize) -> usize {
    loop {
        let n = &order[i];
        let next = match &n.op {
            op if op.is_movement() => op.sources()[0],
            Op::Detach(a) => a,
            _ => return i,
        };
        match index.get(&next.id) {
            Some(&j) => i = j,
            None => return i,
        }
    }
}

/// A kernel of the schedule.
struct Item {
    /// The nodes it computes (one, or assignments computed together).
    roots: Vec<usize>,
    plan: Plan,
}

/// Where a node's value goes: nowhere yet, into the kernels of one group (all at the
/// element being computed, or not), or into kernels of several groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dest {
    Unused,
    One(usize, bool),
    Many,
}

impl Dest {
    fn join(self, other: Dest) -> Dest {
        match (self, other) {
            (Dest::Unused, x) | (x, Dest::Unused) => x,
            (Dest::One(g, a), Dest::One(h, b)) if g == h => Dest::One(g, a && b),
            _ => Dest::Many,
        }
    }
}

fn find(parent: &mut [usize], mut i: usize) -> usize {
    while parent[i] != i {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    i
}

fn schedule(dev: &Device, targets: &[Arc<Node>]) -> Result<()> {
    dev.count_schedule();
    let order = toposort(targets, &|n| n.is_realized());
    let count = order.len();
    let index: HashMap<u64, usize> = order.iter().enumerate().map(|(i, n)| (n.id, i)).collect();
    let realized: Vec<bool> = order.iter().map(|n| n.is_realized()).collect();
    let sources: Vec<Vec<usize>> = order
        .iter()
        .enumerate()
        .map(|(i, n)| {
            if realized[i] {
                return vec![];
            }
            n.op.sources()
                .iter()
                .filter_map(|s| index.get(&s.id).copied())
                .collect()
        })
        .collect();
    let mut edges = vec![0usize; count];
    let mut consumers: Vec<Vec<usize>> = vec![vec![]; count];
    for (i, srcs) in sources.iter().enumerate() {
        for &j in srcs {
            edges[j] += 1;
            if !consumers[j].contains(&i) {
                consumers[j].push(i);
            }
        }
    }
    let is_target: Vec<bool> = order
        .iter()
        .map(|n| targets.iter().any(|t| t.id == n.id))
        .collect();
    // Held outside this graph (by a tensor, or by a node not scheduled now): its result is
    // kept. The `order` vector holds one reference.
    let external: Vec<bool> = (0..count)
        .map(|i| is_target[i] || Arc::strong_count(&order[i]) > edges[i] + 1)
        .collect();
    // Operations that read their operands at the element they compute.
    let elementwise: Vec<bool> = order
        .iter()
        .map(|n| {
            matches!(
                n.op,
                Op::Unary(..)
                    | Op::Binary(..)
                    | Op::Where(..)
                    | Op::Cast(_)
                    | Op::Detach(_)
                    | Op::Assign(..)
            )
        })
        .collect();

    // Which nodes get kernels: targets and assignments, then (one at a time, deepest
    // first) reductions that would otherwise be computed more than once.
    let mut kernel: Vec<bool> = (0..count)
        .map(|i| !realized[i] && (is_target[i] || matches!(order[i].op, Op::Assign(..))))
        .collect();
    // An assignment whose value reads another assignment of its shape through elementwise
    // operations is computed in the same kernel (an optimizer's state and parameter).
    let mut parent: Vec<usize> = (0..count).collect();
    for y in 0..count {
        let Op::Assign(_, value) = &order[y].op else {
            continue;
        };
        if realized[y] {
            continue;
        }
        let Some(&start) = index.get(&value.id) else {
            continue;
        };
        let mut stack = vec![start];
        let mut seen = vec![start];
        while let Some(j) = stack.pop() {
            if realized[j] {
                continue;
            }
            if kernel[j] {
                if j != y
                    && matches!(order[j].op, Op::Assign(..))
                    && order[j].shape == order[y].shape
                {
                    let (a, b) = (find(&mut parent, j), find(&mut parent, y));
                    parent[a] = b;
                }
                continue;
            }
            if !elementwise[j] {
                continue;
            }
            for &k in &sources[j] {
                if !seen.contains(&k) {
                    seen.push(k);
                    stack.push(k);
                }
            }
        }
    }
    loop {
        let mut red = vec![false; count];
        for i in 0..count {
            if realized[i] || kernel[i] {
                continue;
            }
            red[i] = matches!(order[i].op, Op::Reduce(..)) || sources[i].iter().any(|&j| red[j]);
        }
        let mut dest = vec![Dest::Unused; count];
        for i in (0..count).rev() {
            if realized[i] || kernel[i] {
                continue;
            }
            let mut d = Dest::Unused;
            for &c in &consumers[i] {
                let via = if kernel[c] {
                    Dest::One(find(&mut parent, c), elementwise[c])
                } else {
                    match dest[c] {
                        Dest::One(g, id) => Dest::One(g, id && elementwise[c]),
                        other => other,
                    }
                };
                d = d.join(via);
            }
            dest[i] = d;
        }
        let mut candidate: Option<usize> = None;
        for i in 0..count {
            if realized[i] {
                continue;
            }
            let mut want = None;
            // Several readers that are not one kernel reading the same element.
            if !kernel[i]
                && red[i]
                && consumers[i].len() >= 2
                && !matches!(dest[i], Dest::One(_, true))
            {
                want = Some(base(&order, &index, i));
            }
            // A broadcast of a reduction would compute it once per copy.
            if let Op::Expand(_) = order[i].op
                && let Some(&j) = sources[i].first()
                && red[j]
            {
                want = Some(base(&order, &index, j));
            }
            if let Some(m) = want.filter(|&m| !realized[m] && !kernel[m]) {
                candidate = Some(candidate.map_or(m, |c: usize| c.min(m)));
            }
        }
        match candidate {
            Some(m) => kernel[m] = true,
            None => break,
        }
    }

    // Targets that are reshapes of memory share it.
    let mut alias: Vec<Option<usize>> = vec![None; count];
    for i in 0..count {
        if !kernel[i] || !matches!(order[i].op, Op::Reshape(_) | Op::Detach(_)) {
            continue;
        }
        let mut j = i;
        while let Op::Reshape(a) | Op::Detach(a) = &order[j].op {
            match index.get(&a.id) {
                Some(&k) => j = k,
                None => break,
            }
            if realized[j] || kernel[j] {
                break;
            }
        }
        if j != i && (realized[j] || kernel[j]) {
            alias[i] = Some(alias[j].unwrap_or(j));
        }
    }
    let resolve = |j: usize| alias[j].unwrap_or(j);

    // Kernels, operands first; groups that cannot be one kernel are split.
    let info = DeviceInfo {
        target: dev.target(),
        compute_units: dev.compute_units(),
    };
    let load = |i: usize| realized[i] || kernel[i];
    let mut grouped = true;
    let (items, deps) =
        loop {
            let mut groups: Vec<Vec<usize>> = Vec::new();
            let mut leader: HashMap<usize, usize> = HashMap::new();
            for i in 0..count {
                if kernel[i] && alias[i].is_none() {
                    let g = if grouped { find(&mut parent, i) } else { i };
                    match leader.get(&g) {
                        Some(&k) => groups[k].push(i),
                        None => {
                            leader.insert(g, groups.len());
                            groups.push(vec![i]);
                        }
                    }
                }
            }
            let mut items: Vec<Item> = Vec::new();
            for roots in groups {
                match codegen::generate(&order, &index, &load, &roots, info) {
                    Ok(plan) => items.push(Item { roots, plan }),
                    Err(GenError::Split) => {
                        for r in roots {
                            let plan = codegen::generate(&order, &index, &load, &[r], info)
                                .map_err(|e| match e {
                                    GenError::Fail(e) => e,
                                    GenError::Split => Error::Device {
                                        device: dev.name().into(),
                                        reason: "a kernel of one output reads itself".into(),
                                    },
                                })?;
                            items.push(Item {
                                roots: vec![r],
                                plan,
                            });
                        }
                    }
                    Err(GenError::Fail(e)) => return Err(e),
                }
            }
            let kernel_of: HashMap<usize, usize> = items
                .iter()
                .enumerate()
                .flat_map(|(k, it)| it.roots.iter().map(move |&r| (r, k)))
                .collect();
            let deps: Vec<Vec<usize>> = items
                .iter()
                .map(|it| {
                    inputs(it, &resolve)
                        .into_iter()
                        .filter_map(|j| kernel_of.get(&j).copied())
                        .collect()
                })
                .collect();
            if acyclic(&deps) || !grouped {
                break (items, deps);
            }
            grouped = false;
        };
    let mut deps = deps;

    // Assignments in place: every other reader of the target's memory runs first.
    let mut in_place: HashMap<usize, Buffer> = HashMap::new();
    let mut copy_back: Vec<(usize, Buffer)> = Vec::new();
    for (k, it) in items.iter().enumerate() {
        for &root in &it.roots {
            let Op::Assign(target, _) = &order[root].op else {
                continue;
            };
            let Some(tb) = target.buffer() else { continue };
            let shares = |j: usize| realized[j] && order[j].buffer().is_some_and(|b| b.same(&tb));
            let own_ok = it
                .plan
                .params
                .iter()
                .zip(&it.plan.identity)
                .all(|(p, &id)| match p {
                    ParamSrc::Input(j) => !shares(resolve(*j)) || id,
                    _ => true,
                });
            let readers: Vec<usize> = items
                .iter()
                .enumerate()
                .filter(|&(r, other)| r != k && inputs(other, &resolve).into_iter().any(shares))
                .map(|(r, _)| r)
                .collect();
            let mut trial = deps.clone();
            trial[k].extend(readers.iter().copied());
            if own_ok && acyclic(&trial) {
                deps = trial;
                in_place.insert(root, tb);
            } else {
                copy_back.push((root, tb));
            }
        }
    }
    let run_order = topological(&deps).ok_or_else(|| Error::Device {
        device: dev.name().into(),
        reason: "the schedule's kernels depend on each other in a cycle".into(),
    })?;

    // Memory: in place, reused, or fresh; intermediates nobody keeps are reused once read.
    let mut keep: Vec<bool> = (0..count)
        .map(|i| external[i] || matches!(order[i].op, Op::Assign(..)))
        .collect();
    for b in alias.iter().flatten() {
        keep[*b] = true;
    }
    let mut last_use: HashMap<usize, usize> = HashMap::new();
    for (pos, &k) in run_order.iter().enumerate() {
        for j in inputs(&items[k], &resolve) {
            last_use.insert(j, pos);
        }
    }
    let mut bufs: Vec<Option<Buffer>> = order.iter().map(|n| n.buffer()).collect();
    let mut free: Vec<Buffer> = Vec::new();
    let mut launches: Vec<Launch> = Vec::with_capacity(items.len() + copy_back.len());
    for (pos, &k) in run_order.iter().enumerate() {
        let it = &items[k];
        let mut outs = Vec::with_capacity(it.roots.len());
        for &i in &it.roots {
            let bytes = (order[i].numel() * order[i].dtype.size()).max(1);
            let out = match in_place.get(&i) {
                Some(tb) => tb.clone(),
                None => {
                    let want = bytes.next_multiple_of(256);
                    match free.iter().position(|b| b.size() == want) {
                        Some(f) => free.swap_remove(f),
                        None => dev.alloc(bytes)?,
                    }
                }
            };
            bufs[i] = Some(out.clone());
            outs.push(out);
        }
        let mut args = Vec::with_capacity(it.plan.params.len());
        for p in &it.plan.params {
            args.push(match p {
                ParamSrc::Output(o) => LaunchArg::Buf(outs[*o].clone()),
                ParamSrc::Input(j) => {
                    let b = bufs[resolve(*j)].clone().ok_or_else(|| Error::Device {
                        device: dev.name().into(),
                        reason: format!(
                            "kernel {} reads a {} result that is not computed",
                            it.plan.kernel.name,
                            order[*j].op.name()
                        ),
                    })?;
                    LaunchArg::Buf(b)
                }
                ParamSrc::Seed(s) => LaunchArg::U32(*s),
            });
        }
        let program = dev.program(&it.plan.kernel)?;
        launches.push(Launch {
            kernel: program,
            args,
            groups: it.plan.groups,
            info: it.plan.info.clone(),
        });
        for j in inputs(it, &resolve) {
            if last_use.get(&j) == Some(&pos)
                && !realized[j]
                && !keep[j]
                && let Some(b) = bufs[j].clone()
            {
                free.push(b);
            }
        }
    }
    // Assignments that could not be done in place: copied into their targets last.
    for (i, tb) in &copy_back {
        let n = &order[*i];
        let src = bufs[*i].clone().ok_or_else(|| Error::Device {
            device: dev.name().into(),
            reason: "an assignment's value was not computed".into(),
        })?;
        let k = copy_kernel(n, info)?;
        launches.push(Launch {
            kernel: dev.program(&k.0)?,
            args: vec![LaunchArg::Buf(tb.clone()), LaunchArg::Buf(src)],
            groups: k.1,
            info: format!("{:?} {} copy", n.shape, n.dtype),
        });
        bufs[*i] = Some(tb.clone());
    }
    dev.run(&launches)?;
    for i in 0..count {
        if realized[i] {
            continue;
        }
        let b = match alias[i] {
            Some(j) => bufs[j].clone(),
            None if kernel[i] && keep[i] => bufs[i].clone(),
            None => None,
        };
        if let Some(b) = b {
            *lock(&order[i].buffer) = Some(b);
        }
    }
    Ok(())
}

/// The nodes an item reads from memory.
fn inputs(it: &Item, resolve: &dyn Fn(usize) -> usize) -> Vec<usize> {
    it.plan
        .params
        .iter()
        .filter_map(|p| match p {
            ParamSrc::Input(j) => Some(resolve(*j)),
            _ => None,
        })
        .collect()
}

/// `out[i] = in[i]` for a node's elements.
fn copy_kernel(n: &Node, info: DeviceInfo) -> Result<(am_compiler::Kernel, u32)> {
    let numel = n.numel() as u64;
    let (wg, groups) = am_compiler::shapes::launch_1d(numel, &info);
    let t = am_compiler::DType::scalar(n.dtype.scalar());
    let mut b = KernelBuilder::new(&format!("C_{numel}"), [wg, 1, 1]);
    let out = b.param_ptr("v0", t, false);
    let src = b.param_ptr("v1", t, false);
    let gid = b.global_id(Dim::X);
    let nv = b.const_u32(numel as u32);
    let inside = b.cmp(am_compiler::CmpOp::Lt, gid, nv);
    b.if_(inside, |b| {
        let v = b.load_elem(src, gid);
        b.store_elem(out, gid, v);
    });
    let k = b.finish().map_err(|source| Error::Compile {
        device: n.device.name().into(),
        kernel: format!("C_{numel}"),
        source: Box::new(source),
    })?;
    Ok((k, groups))
}

/// An order of `0..deps.len()` where each comes after its dependencies, lowest first among
/// the ready ones (`None` on a cycle).
fn topological(deps: &[Vec<usize>]) -> Option<Vec<usize>> {
    let n = deps.len();
    let mut indeg = vec![0usize; n];
    let mut users: Vec<Vec<usize>> = vec![vec![]; n];
    for (k, ds) in deps.iter().enumerate() {
        let mut seen = Vec::new();
        for &d in ds {
            if d != k && !seen.contains(&d) {
                seen.push(d);
                indeg[k] += 1;
                users[d].push(k);
            }
        }
    }
    let mut ready: std::collections::BTreeSet<usize> = (0..n).filter(|&k| indeg[k] == 0).collect();
    let mut out = Vec::with_capacity(n);
    while let Some(k) = ready.pop_first() {
        out.push(k);
        for &u in &users[k] {
            indeg[u] -= 1;
            if indeg[u] == 0 {
                ready.insert(u);
            }
        }
    }
    (out.len() == n).then_some(out)
}

fn acyclic(deps: &[Vec<usize>]) -> bool {
    topological(deps).is_some()
}
