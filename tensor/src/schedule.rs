//! The scheduler: the lazy graph below the tensors to realize becomes a list of kernels.
//!
//! - Elementwise operations and views get no kernel of their own: they are computed inside
//!   the kernel that needs them (recomputed if several do) — except a float chain of at least
//!   three elementwise operations that a reduction reads through an expand of at least four
//!   copies (a matrix product's operand, a weight gradient's backward chain), which a kernel
//!   stores once instead of every copy computing it again.
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
use crate::device::{Buffer, CompiledKernel, Device, Launch, LaunchArg};
use crate::node::{Landing, Node, Op, toposort};
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
    // Copies between devices and joins first, level by level (see `realize_moves`).
    let moves = toposort(&pending, &|n| {
        n.is_realized() || matches!(n.op, Op::Copy(_) | Op::Join(_))
    })
    .iter()
    .any(|n| matches!(n.op, Op::Copy(_) | Op::Join(_)) && !n.is_realized());
    if moves {
        realize_moves(&pending)?;
    }
    run_schedules(by_device(
        pending.iter().filter(|p| !p.is_realized()).cloned(),
    ))
}

/// `nodes` grouped by device, in the order the devices first appear.
fn by_device(nodes: impl Iterator<Item = Arc<Node>>) -> Vec<(Device, Vec<Arc<Node>>)> {
    let mut groups: Vec<(Device, Vec<Arc<Node>>)> = Vec::new();
    for n in nodes {
        match groups.iter_mut().find(|(d, _)| *d == n.device) {
            Some((_, g)) => {
                if !g.iter().any(|m| m.id == n.id) {
                    g.push(n);
                }
            }
            None => groups.push((n.device.clone(), vec![n])),
        }
    }
    groups
}

/// One schedule per device, every device's kernels submitted before any is waited for, so
/// the devices compute at once; the first error is returned once every submitted schedule
/// has ended (their memory is in use until then).
fn run_schedules(groups: Vec<(Device, Vec<Arc<Node>>)>) -> Result<()> {
    let mut started = Vec::with_capacity(groups.len());
    let mut first = None;
    for (d, nodes) in groups {
        match schedule_start(&d, &nodes) {
            Ok(s) => started.push(s),
            Err(e) => {
                first = Some(e);
                break;
            }
        }
    }
    for s in started {
        if let Err(e) = s.finish()
            && first.is_none()
        {
            first = Some(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// Realizes the copies between devices and the joins below `pending`, level by level: a
/// copy or join of level `L` needs only nodes that need copies and joins of levels below
/// `L`. For each level, the sources the copies and joins read are computed first (one
/// schedule per device, all devices at once; a reduced chunk a join wants is computed into
/// its place there), then every copy is started (each on its destination's copy queue, or
/// mapped in place) before any is waited for, then the joins copy into place, the same way,
/// the parts that did not land there. The steps of a collective thus run on all devices at
/// once instead of one device after another.
fn realize_moves(pending: &[Arc<Node>]) -> Result<()> {
    let order = toposort(pending, &|n| n.is_realized());
    // Copy-and-join levels a node needs done before it can be computed.
    let mut need: HashMap<u64, usize> = HashMap::new();
    let mut levels: Vec<Vec<Arc<Node>>> = Vec::new();
    for n in &order {
        if n.is_realized() {
            continue;
        }
        let below =
            n.op.sources()
                .iter()
                .map(|s| need.get(&s.id).copied().unwrap_or(0))
                .max()
                .unwrap_or(0);
        if matches!(n.op, Op::Copy(_) | Op::Join(_)) {
            if levels.len() <= below {
                levels.resize_with(below + 1, Vec::new);
            }
            levels[below].push(n.clone());
            need.insert(n.id, below + 1);
        } else {
            need.insert(n.id, below);
        }
    }
    drop(order);
    for level in levels {
        // What the copies read: a piece of memory already computed is read where it lies;
        // a piece of a node not computed yet gets that node computed first (then read in
        // place); anything else is computed itself.
        let mut bases = Vec::new();
        let mut parts = Vec::new();
        for n in &level {
            match &n.op {
                Op::Copy(src) if slice_of(src).is_none() && !src.is_realized() => {
                    match view_base(src) {
                        Some(b) if !b.is_realized() => bases.push(b),
                        _ => parts.push(src.clone()),
                    }
                }
                Op::Join(ps) => parts.extend(ps.iter().filter(|p| !p.is_realized()).cloned()),
                _ => {}
            }
        }
        run_schedules(by_device(bases.into_iter()))?;
        let rest = level.iter().filter_map(|n| match &n.op {
            Op::Copy(src) if slice_of(src).is_none() && !src.is_realized() => Some(src.clone()),
            _ => None,
        });
        run_schedules(by_device(parts.into_iter().chain(rest)))?;
        let copies: Vec<&Arc<Node>> = level
            .iter()
            .filter(|n| matches!(n.op, Op::Copy(_)))
            .collect();
        let mut moving = Vec::with_capacity(copies.len());
        let mut first = None;
        for c in &copies {
            let Op::Copy(src) = &c.op else { continue };
            match copy_start(c, src) {
                Ok(m) => moving.push(m),
                Err(e) => {
                    first = Some(e);
                    break;
                }
            }
        }
        let mut touched: Vec<Device> = Vec::new();
        for m in moving {
            for d in [&m.from, &m.node.device] {
                if !touched.contains(d) {
                    touched.push(d.clone());
                }
            }
            if let Err(e) = m.finish()
                && first.is_none()
            {
                first = Some(e);
            }
        }
        if let Some(e) = first {
            return Err(e);
        }
        crate::shard::check_faults(&touched, "a copy between devices")?;
        let mut joining = Vec::new();
        for j in level.iter().filter(|n| matches!(n.op, Op::Join(_))) {
            let Op::Join(ps) = &j.op else { continue };
            match join_start(j, ps) {
                Ok(r) => joining.push(r),
                Err(e) => {
                    first = Some(e);
                    break;
                }
            }
        }
        for (j, out, fences) in joining {
            let mut r = Ok(());
            for f in fences {
                let w = f.wait().map_err(|e| j.device.runtime_error(e));
                if r.is_ok() {
                    r = w;
                }
            }
            match r {
                Ok(()) => {
                    *lock(&j.landing) = None;
                    *lock(&j.buffer) = Some(out);
                }
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first {
            return Err(e);
        }
    }
    Ok(())
}

/// The node whose memory `n` would be a piece of ([`slice_of`]): below its reshapes,
/// detaches and shrinks.
fn view_base(n: &Arc<Node>) -> Option<Arc<Node>> {
    let mut c = n;
    loop {
        match &c.op {
            Op::Reshape(a) | Op::Detach(a) | Op::Shrink(a, _) if !c.is_realized() => c = a,
            _ => break,
        }
    }
    (!Arc::ptr_eq(c, n)).then(|| c.clone())
}

/// A copy under way ([`copy_start`]).
struct Moving {
    node: Arc<Node>,
    from: Device,
    /// Its memory, set as the node's once the copy is done.
    out: Buffer,
    /// The source's memory, held until then.
    _src: Buffer,
    fence: Option<am_runtime::Fence>,
}

impl Moving {
    fn finish(self) -> Result<()> {
        if let Some(f) = self.fence {
            f.wait().map_err(|e| self.node.device.runtime_error(e))?;
        }
        *lock(&self.node.buffer) = Some(self.out);
        Ok(())
    }
}

/// Starts the copy `dst` of `src` (computed, or a piece of computed memory): a copy that
/// may read in place ([`Landing::InPlace`]) gets a view of the source's memory through a
/// peer mapping when the destination reaches the source's VRAM (a member of its XGMI hive,
/// or a large-BAR device over PCIe: `am_runtime::Device::peer_view`), and moves nothing.
fn copy_start(dst: &Arc<Node>, src: &Arc<Node>) -> Result<Moving> {
    let len = src.numel() * src.dtype.size();
    let from = match slice_of(src) {
        Some(b) => b,
        None => src.buffer().ok_or_else(|| Error::Device {
            device: src.device.name().into(),
            reason: "a realized tensor has no memory".into(),
        })?,
    };
    let in_place = matches!(&*lock(&dst.landing), Some(Landing::InPlace));
    if in_place && let Some(view) = dst.device.peer_view(&src.device, &from)? {
        return Ok(Moving {
            node: dst.clone(),
            from: src.device.clone(),
            out: view,
            _src: from,
            fence: None,
        });
    }
    let out = match landing_for(dst, len)? {
        Some(view) => view,
        None => dst.device.alloc(len)?,
    };
    let fence = crate::shard::copy_buffer_start(&src.device, &from, &dst.device, &out, len)?;
    Ok(Moving {
        node: dst.clone(),
        from: src.device.clone(),
        out,
        _src: from,
        fence,
    })
}

/// The memory a realized node's elements lie in when `n` is a contiguous piece of them
/// (reshapes and a shrink that keeps whole trailing axes), as a view of that memory: a copy
/// then reads it in place instead of a kernel copying it out first. `None` for anything
/// else, and where views do not exist (host memory) or the piece does not start on a
/// buffer's alignment.
fn slice_of(n: &Arc<Node>) -> Option<Buffer> {
    fn walk(n: &Arc<Node>) -> Option<(Buffer, usize)> {
        if let Some(b) = n.buffer() {
            return Some((b, 0));
        }
        match &n.op {
            Op::Reshape(a) | Op::Detach(a) => walk(a),
            Op::Shrink(a, ranges) => {
                let (b, at) = walk(a)?;
                let shape = &a.shape;
                // The axes before the first one cut must keep one element, and those after
                // it all of theirs: then the piece is one run of memory.
                let cut = ranges
                    .iter()
                    .zip(shape)
                    .position(|(&(lo, hi), &d)| lo != 0 || hi != d)
                    .unwrap_or(shape.len());
                let whole_after = ranges
                    .iter()
                    .zip(shape)
                    .skip(cut + 1)
                    .all(|(&(lo, hi), &d)| lo == 0 && hi == d);
                let single_before = ranges[..cut].iter().all(|&(lo, hi)| hi - lo == 1);
                if !whole_after || !single_before {
                    return None;
                }
                let mut first = 0usize;
                let mut stride = 1usize;
                for (k, &(lo, _)) in ranges.iter().enumerate().rev() {
                    first += lo * stride;
                    stride *= shape[k];
                }
                Some((b, at + first * a.dtype.size()))
            }
            _ => None,
        }
    }
    if n.is_realized() {
        return n.buffer();
    }
    let (b, at) = walk(n)?;
    b.view(at, n.numel() * n.dtype.size())
}

/// The view of a join's memory a copy (or a kernel's result) is to land in
/// ([`Landing::Into`]), allocating the join's memory if no part has landed yet; `None` when
/// the node has no landing, its join is gone or done, or the memory cannot be viewed (host
/// memory, an unaligned place).
fn landing_for(dst: &Arc<Node>, len: usize) -> Result<Option<Buffer>> {
    let (join, at) = match &*lock(&dst.landing) {
        Some(Landing::Into(j, at)) => match j.upgrade() {
            Some(j) => (j, *at),
            None => return Ok(None),
        },
        _ => return Ok(None),
    };
    if join.is_realized() || join.device != dst.device {
        return Ok(None);
    }
    Ok(join_memory(&join)?.view(at, len))
}

/// A join's memory: the one its first landed part allocated, or fresh.
fn join_memory(join: &Arc<Node>) -> Result<Buffer> {
    let mut landing = lock(&join.landing);
    if let Some(Landing::Out(b)) = &*landing {
        return Ok(b.clone());
    }
    let b = join.device.alloc(join.numel() * join.dtype.size())?;
    *landing = Some(Landing::Out(b.clone()));
    Ok(b)
}

/// Starts copying each part of a join (all computed) into its place of one buffer on the
/// join's device: copies, where joining with a kernel would read every element again. Parts
/// that are copies from other devices have landed there already ([`Landing`]). Returns the
/// join, its memory and the copies to wait for.
#[allow(clippy::type_complexity)]
fn join_start(
    dst: &Arc<Node>,
    parts: &[Arc<Node>],
) -> Result<(Arc<Node>, Buffer, Vec<am_runtime::Fence>)> {
    let size = dst.dtype.size();
    let out = join_memory(dst)?;
    let mut at = 0;
    let mut fences = Vec::new();
    for p in parts {
        let b = p.buffer().ok_or_else(|| Error::Device {
            device: p.device.name().into(),
            reason: "a realized tensor has no memory".into(),
        })?;
        let len = p.numel() * size;
        if !b.is_view_of(&out, at) {
            // Started copies must end before their memory may go: wait for them on error.
            match dst.device.copy_into_start(&b, &out, at, len) {
                Ok(Some(f)) => fences.push((f, b)),
                Ok(None) => {}
                Err(e) => {
                    for (f, _) in fences {
                        let _ = f.wait();
                    }
                    return Err(e);
                }
            }
        }
        at += len;
    }
    // The parts' memory is held by the parts (nodes of the join) until the fences pass.
    let fences = fences.into_iter().map(|(f, _)| f).collect();
    Ok((dst.clone(), out, fences))
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

/// Elements of a reduction read by another reduction from which it gets a kernel of its
/// own (the first of the optimiser's two kernels of a large reduction has more).
const SPLIT_MIN_OUTPUTS: usize = 256;

/// Elementwise operations an expanded value must take to compute before a reduction reads
/// it from memory instead ([`Graph::add_expanded_chain_kernels`]).
const CHAIN_MIN_OPS: usize = 3;

/// Copies of each element an expand must make for that ([`CHAIN_MIN_OPS`]).
const CHAIN_MIN_COPIES: usize = 4;

/// A kernel of the schedule.
struct Item {
    /// The nodes it computes (one, or assignments computed together).
    roots: Vec<usize>,
    plan: Plan,
    /// The program, when the plan came from the device's cache of plans.
    program: Option<Arc<CompiledKernel>>,
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

/// A schedule whose kernels are submitted ([`schedule_start`]).
struct Started {
    graph: Graph,
    /// The schedule's memory, in use until the kernels end.
    memory: Memory,
    running: Option<crate::device::Running>,
}

impl Started {
    /// Waits for the kernels, then gives the targets their memory.
    fn finish(self) -> Result<()> {
        if let Some(r) = self.running {
            r.wait()?;
        }
        self.graph.store_results(&self.memory);
        Ok(())
    }
}

/// Schedules `targets` (nodes of `dev`) and submits their kernels without waiting.
fn schedule_start(dev: &Device, targets: &[Arc<Node>]) -> Result<Started> {
    dev.beam()?;
    dev.count_schedule();
    let mut graph = Graph::new(targets);
    graph.group_assignments();
    graph.add_reduction_kernels();
    graph.add_expanded_chain_kernels();
    graph.alias_reshapes();
    let info = DeviceInfo {
        target: dev.target(),
        compute_units: dev.compute_units(),
    };
    let (items, deps) = graph.kernels(dev, info)?;
    let placement = graph.place_assignments(dev, &items, deps)?;
    let mut memory = graph.memory(&items, &placement.run_order);
    let mut launches = graph.launch_kernels(dev, &items, &placement, &mut memory)?;
    launches.extend(graph.copy_back(dev, info, &placement.copy_back, &mut memory)?);
    let running = dev.start(&launches)?;
    Ok(Started {
        graph,
        memory,
        running,
    })
}

/// The graph below one schedule's targets, operands first, and what the scheduler decides
/// about its nodes (every vector is indexed by position in `order`).
struct Graph {
    order: Vec<Arc<Node>>,
    index: HashMap<u64, usize>,
    /// In memory already: read, never computed.
    realized: Vec<bool>,
    /// The operands of each node that are in the graph.
    sources: Vec<Vec<usize>>,
    /// The readers of each node, each once.
    consumers: Vec<Vec<usize>>,
    /// Held outside this graph (by a tensor, or by a node not scheduled now): its result is
    /// kept.
    external: Vec<bool>,
    /// Operations that read their operands at the element they compute.
    elementwise: Vec<bool>,
    /// Computed by a kernel into memory.
    kernel: Vec<bool>,
    /// Union-find forest of the assignments computed in one kernel.
    parent: Vec<usize>,
    /// Kernel nodes that are reshapes of memory: the node whose memory they share.
    alias: Vec<Option<usize>>,
}

/// Where a schedule's assignments write and the order its kernels run in.
struct Placement {
    /// Positions in the schedule's list of kernels.
    run_order: Vec<usize>,
    /// Assignments written into their target's memory.
    in_place: HashMap<usize, Buffer>,
    /// Assignments computed into fresh memory, copied into their target at the end.
    copy_back: Vec<(usize, Buffer)>,
}

/// The memory of a schedule's nodes while its kernels are launched.
struct Memory {
    bufs: Vec<Option<Buffer>>,
    /// Results later kernels of the schedule may not reuse.
    keep: Vec<bool>,
    /// For each node read from memory, the position in the run order of its last reader.
    last_use: HashMap<usize, usize>,
    /// Memory of intermediates whose last reader has been launched.
    free: Vec<Buffer>,
}

impl Graph {
    /// Orders the graph below `targets` and finds its edges; targets and assignments get
    /// kernels.
    fn new(targets: &[Arc<Node>]) -> Graph {
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
        // The `order` vector holds one reference.
        let external: Vec<bool> = (0..count)
            .map(|i| is_target[i] || Arc::strong_count(&order[i]) > edges[i] + 1)
            .collect();
        let elementwise: Vec<bool> = order
            .iter()
            .map(|n| {
                matches!(
                    n.op,
                    Op::Unary(..)
                        | Op::RandAt(..)
                        | Op::Binary(..)
                        | Op::Where(..)
                        | Op::Cast(_)
                        | Op::Detach(_)
                        | Op::Assign(..)
                )
            })
            .collect();
        let kernel: Vec<bool> = (0..count)
            .map(|i| {
                !realized[i]
                    && (is_target[i] || matches!(order[i].op, Op::Assign(..) | Op::Contiguous(_)))
            })
            .collect();
        Graph {
            order,
            index,
            realized,
            sources,
            consumers,
            external,
            elementwise,
            kernel,
            parent: (0..count).collect(),
            alias: vec![None; count],
        }
    }

    /// An assignment whose value reads another assignment of its shape through elementwise
    /// operations is computed in the same kernel (an optimizer's state and parameter).
    fn group_assignments(&mut self) {
        for y in 0..self.order.len() {
            let Op::Assign(_, value) = &self.order[y].op else {
                continue;
            };
            if self.realized[y] {
                continue;
            }
            let Some(&start) = self.index.get(&value.id) else {
                continue;
            };
            let mut stack = vec![start];
            let mut seen = vec![start];
            while let Some(j) = stack.pop() {
                if self.realized[j] {
                    continue;
                }
                if self.kernel[j] {
                    if j != y
                        && matches!(self.order[j].op, Op::Assign(..))
                        && self.order[j].shape == self.order[y].shape
                    {
                        let (a, b) = (find(&mut self.parent, j), find(&mut self.parent, y));
                        self.parent[a] = b;
                    }
                    continue;
                }
                if !self.elementwise[j] {
                    continue;
                }
                for &k in &self.sources[j] {
                    if !seen.contains(&k) {
                        seen.push(k);
                        stack.push(k);
                    }
                }
            }
        }
    }

    /// Reductions that would otherwise be computed more than once get kernels, one at a
    /// time, deepest first.
    fn add_reduction_kernels(&mut self) {
        loop {
            let red = self.reads_reduction();
            let dest = self.destinations();
            match self.next_reduction_kernel(&red, &dest) {
                Some(m) => self.kernel[m] = true,
                None => break,
            }
        }
    }

    /// Nodes outside kernels that are reductions or read one.
    fn reads_reduction(&self) -> Vec<bool> {
        let count = self.order.len();
        let mut red = vec![false; count];
        for i in 0..count {
            if self.realized[i] || self.kernel[i] {
                continue;
            }
            red[i] = matches!(self.order[i].op, Op::Reduce(..))
                || self.sources[i].iter().any(|&j| red[j]);
        }
        red
    }

    /// Where the value of each node outside kernels goes.
    fn destinations(&mut self) -> Vec<Dest> {
        let count = self.order.len();
        let mut dest = vec![Dest::Unused; count];
        for i in (0..count).rev() {
            if self.realized[i] || self.kernel[i] {
                continue;
            }
            let mut d = Dest::Unused;
            for &c in &self.consumers[i] {
                let via = if self.kernel[c] {
                    Dest::One(find(&mut self.parent, c), self.elementwise[c])
                } else {
                    match dest[c] {
                        Dest::One(g, id) => Dest::One(g, id && self.elementwise[c]),
                        other => other,
                    }
                };
                d = d.join(via);
            }
            dest[i] = d;
        }
        dest
    }

    /// The deepest reduction that would be computed more than once without a kernel.
    fn next_reduction_kernel(&self, red: &[bool], dest: &[Dest]) -> Option<usize> {
        let mut candidate: Option<usize> = None;
        for i in 0..self.order.len() {
            if self.realized[i] {
                continue;
            }
            let mut want = None;
            // Several readers that are not one kernel reading the same element.
            if !self.kernel[i]
                && red[i]
                && self.consumers[i].len() >= 2
                && !matches!(dest[i], Dest::One(_, true))
            {
                want = Some(base(&self.order, &self.index, i));
            }
            // A reduction of many elements read by another reduction: inside the other's
            // loop, one work-item would compute all of it.
            if let Op::Reduce(_, a, _) = &self.order[i].op
                && let Some(&j) = self.index.get(&a.id)
                && !self.realized[j]
            {
                let b = base(&self.order, &self.index, j);
                if matches!(self.order[b].op, Op::Reduce(..))
                    && self.order[b].numel() >= SPLIT_MIN_OUTPUTS
                {
                    want = Some(b);
                }
            }
            // A broadcast of a reduction would compute it once per copy.
            if let Op::Expand(_) = self.order[i].op
                && let Some(&j) = self.sources[i].first()
                && red[j]
            {
                want = Some(base(&self.order, &self.index, j));
            }
            if let Some(m) = want.filter(|&m| !self.realized[m] && !self.kernel[m]) {
                candidate = Some(candidate.map_or(m, |c: usize| c.min(m)));
            }
        }
        candidate
    }

    /// Long elementwise chains that a reduction reads through an expand get kernels:
    /// inside the reduction's loop, every copy of an element would compute the chain again
    /// (a matrix product's operand is one copy per output column; a weight's gradient reads
    /// the backward pass's chain of layer norms and activations once per output element of
    /// the other side). Stored once, each copy is a load. The chain computes the same
    /// operations in the same order either way (the same bits on the `cpu` device: the
    /// fusion tests).
    fn add_expanded_chain_kernels(&mut self) {
        let count = self.order.len();
        let red = self.reads_reduction();
        // Nodes outside kernels whose value flows into a reduction's loop without passing
        // through memory.
        let mut into_reduce = vec![false; count];
        for i in (0..count).rev() {
            if self.realized[i] || self.kernel[i] {
                continue;
            }
            into_reduce[i] = self.consumers[i].iter().any(|&c| {
                matches!(self.order[c].op, Op::Reduce(..))
                    || (!self.kernel[c]
                        && (self.elementwise[c] || self.order[c].op.is_movement())
                        && into_reduce[c])
            });
        }
        for (i, &flows) in into_reduce.iter().enumerate() {
            let Op::Expand(_) = self.order[i].op else {
                continue;
            };
            let Some(&j) = self.sources[i].first() else {
                continue;
            };
            if self.realized[i]
                || self.kernel[i]
                || red[j]
                || !flows
                || self.order[i].numel() < CHAIN_MIN_COPIES * self.order[j].numel().max(1)
            {
                continue;
            }
            let b = base(&self.order, &self.index, j);
            // Float chains only: masks and indices are a few cheap integer operations. (A bool
            // mask stored this way once came out wrong on the mock Navi31: that was the
            // emulator misreading a true16 compare, since fixed. Storing masks would add a
            // kernel to causal attention and `cumsum`, not yet measured.)
            if self.realized[b]
                || self.kernel[b]
                || !self.elementwise[b]
                || !self.order[b].dtype.is_float()
            {
                continue;
            }
            if self.chain_ops(b) >= CHAIN_MIN_OPS {
                self.kernel[b] = true;
            }
        }
    }

    /// Elementwise operations computed inside a kernel that reads node `b` (up to memory).
    fn chain_ops(&self, b: usize) -> usize {
        let mut seen = vec![false; self.order.len()];
        seen[b] = true;
        let (mut stack, mut ops) = (vec![b], 0);
        while let Some(j) = stack.pop() {
            if self.realized[j] || (self.kernel[j] && j != b) {
                continue;
            }
            ops += usize::from(self.elementwise[j]);
            for &k in &self.sources[j] {
                if !seen[k] {
                    seen[k] = true;
                    stack.push(k);
                }
            }
        }
        ops
    }

    /// Targets that are reshapes of memory share it.
    fn alias_reshapes(&mut self) {
        for i in 0..self.order.len() {
            if !self.kernel[i] || !matches!(self.order[i].op, Op::Reshape(_) | Op::Detach(_)) {
                continue;
            }
            let mut j = i;
            while let Op::Reshape(a) | Op::Detach(a) = &self.order[j].op {
                match self.index.get(&a.id) {
                    Some(&k) => j = k,
                    None => break,
                }
                if self.realized[j] || self.kernel[j] {
                    break;
                }
            }
            if j != i && (self.realized[j] || self.kernel[j]) {
                self.alias[i] = Some(self.alias[j].unwrap_or(j));
            }
        }
    }

    /// The node whose memory holds node `j`'s value.
    fn resolve(&self, j: usize) -> usize {
        self.alias[j].unwrap_or(j)
    }

    /// The nodes an item reads from memory.
    fn inputs(&self, it: &Item) -> Vec<usize> {
        it.plan
            .params
            .iter()
            .filter_map(|p| match p {
                ParamSrc::Input(j) => Some(self.resolve(*j)),
                _ => None,
            })
            .collect()
    }

    /// The kernels, operands first, and the kernels each one reads. A group that cannot be
    /// one kernel is split; when the groups make the kernels depend on each other in a
    /// cycle, every assignment gets its own kernel.
    fn kernels(&mut self, dev: &Device, info: DeviceInfo) -> Result<(Vec<Item>, Vec<Vec<usize>>)> {
        let mut grouped = true;
        loop {
            let mut items: Vec<Item> = Vec::new();
            for roots in self.groups(grouped) {
                items.extend(self.plan_group(dev, info, roots)?);
            }
            let deps = self.dependencies(&items);
            if acyclic(&deps) || !grouped {
                return Ok((items, deps));
            }
            grouped = false;
        }
    }

    /// The nodes each kernel computes: one each, or (`grouped`) the assignments grouped
    /// together.
    fn groups(&mut self, grouped: bool) -> Vec<Vec<usize>> {
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut leader: HashMap<usize, usize> = HashMap::new();
        for i in 0..self.order.len() {
            if self.kernel[i] && self.alias[i].is_none() {
                let g = if grouped {
                    find(&mut self.parent, i)
                } else {
                    i
                };
                match leader.get(&g) {
                    Some(&k) => groups[k].push(i),
                    None => {
                        leader.insert(g, groups.len());
                        groups.push(vec![i]);
                    }
                }
            }
        }
        groups
    }

    /// The kernel computing `roots`, or one kernel per root when they cannot be one.
    fn plan_group(&self, dev: &Device, info: DeviceInfo, roots: Vec<usize>) -> Result<Vec<Item>> {
        let load = |i: usize| self.realized[i] || self.kernel[i];
        let beam = if dev.optimize() { dev.beam()? } else { 0 };
        // The same computation on memory of the same shapes as before: the kernel and its
        // program again, without generating and printing it (a matrix product's tiles are
        // thousands of instructions).
        let key = plan_key(
            &self.order,
            &self.index,
            &load,
            &roots,
            info,
            dev.optimize(),
            beam,
        );
        if let Some(cached) = dev.cached_plan(&key.0) {
            let mut plan = cached.0.clone();
            for p in &mut plan.params {
                if let ParamSrc::Input(pos) = p {
                    *pos = key.1[*pos];
                }
            }
            return Ok(vec![Item {
                roots,
                plan,
                program: Some(cached.1.clone()),
            }]);
        }
        let generated = codegen::generate(
            &self.order,
            &self.index,
            &load,
            &roots,
            info,
            dev.optimize(),
            None,
        );
        let generated = match generated {
            Ok(plan) if beam > 0 => {
                let regen = |o: &crate::opt::Opts| {
                    codegen::generate(&self.order, &self.index, &load, &roots, info, true, Some(o))
                        .ok()
                };
                let param = |p: &ParamSrc| {
                    let n = match p {
                        ParamSrc::Output(k) => &self.order[*roots.get(*k)?],
                        ParamSrc::Input(j) => &self.order[*j],
                        ParamSrc::Seed(_) => return None,
                    };
                    Some((n.numel() * n.dtype.size(), n.dtype))
                };
                crate::beam::search(dev, plan, beam, &regen, &param).map(Ok)?
            }
            other => other,
        };
        match generated {
            Ok(plan) => {
                // Parameters by their place among the loaded nodes of the key.
                let params: Option<Vec<ParamSrc>> = plan
                    .params
                    .iter()
                    .map(|p| match p {
                        ParamSrc::Input(i) => {
                            key.1.iter().position(|j| j == i).map(ParamSrc::Input)
                        }
                        other => Some(other.clone()),
                    })
                    .collect();
                let mut program = None;
                if let Some(params) = params {
                    let compiled = dev.program(&plan.kernel)?;
                    let general = Plan {
                        params,
                        ..plan.clone()
                    };
                    dev.cache_plan(key.0, Arc::new((general, compiled.clone())));
                    program = Some(compiled);
                }
                Ok(vec![Item {
                    roots,
                    plan,
                    program,
                }])
            }
            Err(GenError::Split) => {
                let mut items = Vec::with_capacity(roots.len());
                for r in roots {
                    let plan = codegen::generate(
                        &self.order,
                        &self.index,
                        &load,
                        &[r],
                        info,
                        dev.optimize(),
                        None,
                    )
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
                        program: None,
                    });
                }
                Ok(items)
            }
            Err(GenError::Fail(e)) => Err(e),
        }
    }

    /// For each kernel, the kernels whose results it reads.
    fn dependencies(&self, items: &[Item]) -> Vec<Vec<usize>> {
        let kernel_of: HashMap<usize, usize> = items
            .iter()
            .enumerate()
            .flat_map(|(k, it)| it.roots.iter().map(move |&r| (r, k)))
            .collect();
        items
            .iter()
            .map(|it| {
                self.inputs(it)
                    .into_iter()
                    .filter_map(|j| kernel_of.get(&j).copied())
                    .collect()
            })
            .collect()
    }

    /// Assignments in place: every other reader of the target's memory runs first. Then the
    /// order the kernels run in.
    fn place_assignments(
        &self,
        dev: &Device,
        items: &[Item],
        mut deps: Vec<Vec<usize>>,
    ) -> Result<Placement> {
        let mut in_place: HashMap<usize, Buffer> = HashMap::new();
        let mut copy_back: Vec<(usize, Buffer)> = Vec::new();
        for (k, it) in items.iter().enumerate() {
            for &root in &it.roots {
                let Op::Assign(target, _) = &self.order[root].op else {
                    continue;
                };
                let Some(tb) = target.buffer() else { continue };
                let shares = |j: usize| {
                    self.realized[j] && self.order[j].buffer().is_some_and(|b| b.same(&tb))
                };
                let own_ok = it
                    .plan
                    .params
                    .iter()
                    .zip(&it.plan.identity)
                    .all(|(p, &id)| match p {
                        ParamSrc::Input(j) => !shares(self.resolve(*j)) || id,
                        _ => true,
                    });
                let readers: Vec<usize> = items
                    .iter()
                    .enumerate()
                    .filter(|&(r, other)| r != k && self.inputs(other).into_iter().any(shares))
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
        Ok(Placement {
            run_order,
            in_place,
            copy_back,
        })
    }

    /// Memory: in place, reused, or fresh; intermediates nobody keeps are reused once read.
    fn memory(&self, items: &[Item], run_order: &[usize]) -> Memory {
        let mut keep: Vec<bool> = (0..self.order.len())
            .map(|i| self.external[i] || matches!(self.order[i].op, Op::Assign(..)))
            .collect();
        for b in self.alias.iter().flatten() {
            keep[*b] = true;
        }
        let mut last_use: HashMap<usize, usize> = HashMap::new();
        for (pos, &k) in run_order.iter().enumerate() {
            for j in self.inputs(&items[k]) {
                last_use.insert(j, pos);
            }
        }
        Memory {
            bufs: self.order.iter().map(|n| n.buffer()).collect(),
            keep,
            last_use,
            free: Vec::new(),
        }
    }

    /// The kernels' launches in run order, each with its memory.
    fn launch_kernels(
        &self,
        dev: &Device,
        items: &[Item],
        placement: &Placement,
        mem: &mut Memory,
    ) -> Result<Vec<Launch>> {
        let mut launches: Vec<Launch> = Vec::with_capacity(items.len() + placement.copy_back.len());
        for (pos, &k) in placement.run_order.iter().enumerate() {
            let it = &items[k];
            let outs = self.outputs(dev, it, &placement.in_place, mem)?;
            let args = self.arguments(dev, it, &outs, &mem.bufs)?;
            let program = match &it.program {
                Some(p) => p.clone(),
                None => dev.program(&it.plan.kernel)?,
            };
            launches.push(Launch {
                kernel: program,
                args,
                groups: it.plan.groups,
                info: it.plan.info.clone(),
            });
            self.release_inputs(it, pos, mem);
        }
        Ok(launches)
    }

    /// Memory for the results of a kernel: the target's of an assignment in place, else
    /// the place of a join's memory a kept result is to land in ([`Landing::Into`]: a
    /// collective's reduced chunk), else freed memory of the same size, else fresh.
    fn outputs(
        &self,
        dev: &Device,
        it: &Item,
        in_place: &HashMap<usize, Buffer>,
        mem: &mut Memory,
    ) -> Result<Vec<Buffer>> {
        let mut outs = Vec::with_capacity(it.roots.len());
        for &i in &it.roots {
            let n = &self.order[i];
            let bytes = (n.numel() * n.dtype.size()).max(1);
            // Only a result this schedule keeps: an intermediate's memory goes to later
            // kernels once read, and must not be a piece of a join's.
            let landing = match in_place.get(&i) {
                None if mem.keep[i] => landing_for(n, bytes)?,
                _ => None,
            };
            let out = match (in_place.get(&i), landing) {
                (Some(tb), _) => tb.clone(),
                (None, Some(view)) => view,
                (None, None) => {
                    let want = bytes.next_multiple_of(256);
                    match mem.free.iter().position(|b| b.size() == want) {
                        Some(f) => mem.free.swap_remove(f),
                        None => dev.alloc(bytes)?,
                    }
                }
            };
            mem.bufs[i] = Some(out.clone());
            outs.push(out);
        }
        Ok(outs)
    }

    /// A kernel's arguments in the order of its parameters.
    fn arguments(
        &self,
        dev: &Device,
        it: &Item,
        outs: &[Buffer],
        bufs: &[Option<Buffer>],
    ) -> Result<Vec<LaunchArg>> {
        let mut args = Vec::with_capacity(it.plan.params.len());
        for p in &it.plan.params {
            args.push(match p {
                ParamSrc::Output(o) => LaunchArg::Buf(outs[*o].clone()),
                ParamSrc::Input(j) => {
                    let b = bufs[self.resolve(*j)]
                        .clone()
                        .ok_or_else(|| Error::Device {
                            device: dev.name().into(),
                            reason: format!(
                                "kernel {} reads a {} result that is not computed",
                                it.plan.kernel.name,
                                self.order[*j].op.name()
                            ),
                        })?;
                    LaunchArg::Buf(b)
                }
                ParamSrc::Seed(s) => LaunchArg::U32(*s),
            });
        }
        Ok(args)
    }

    /// Intermediates the kernel at `pos` of the run order read last become free memory.
    fn release_inputs(&self, it: &Item, pos: usize, mem: &mut Memory) {
        for j in self.inputs(it) {
            if mem.last_use.get(&j) == Some(&pos)
                && !self.realized[j]
                && !mem.keep[j]
                && let Some(b) = mem.bufs[j].clone()
            {
                mem.free.push(b);
            }
        }
    }

    /// Assignments that could not be done in place: copied into their targets last.
    fn copy_back(
        &self,
        dev: &Device,
        info: DeviceInfo,
        copy_back: &[(usize, Buffer)],
        mem: &mut Memory,
    ) -> Result<Vec<Launch>> {
        let mut launches = Vec::with_capacity(copy_back.len());
        for (i, tb) in copy_back {
            let n = &self.order[*i];
            let src = mem.bufs[*i].clone().ok_or_else(|| Error::Device {
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
            mem.bufs[*i] = Some(tb.clone());
        }
        Ok(launches)
    }

    /// The computed nodes that are kept (or share kept memory) hold their memory from now
    /// on.
    fn store_results(&self, mem: &Memory) {
        for i in 0..self.order.len() {
            if self.realized[i] {
                continue;
            }
            let b = match self.alias[i] {
                Some(j) => mem.bufs[j].clone(),
                None if self.kernel[i] && mem.keep[i] => mem.bufs[i].clone(),
                None => None,
            };
            if let Some(b) = b {
                *lock(&self.order[i].buffer) = Some(b);
            }
        }
    }
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

/// What [`codegen::generate`] reads to make the kernel of `roots`, as text — the device, the
/// optimiser's switch and search width, and every node from the roots down to the nodes read from memory
/// (operation with its parameters, shape, dtype, operands by their place in the walk) —
/// and the nodes read from memory in the order the walk met them. Two schedules with the
/// same text get the same kernel, with parameters of those nodes in the same places.
fn plan_key(
    nodes: &[Arc<Node>],
    index: &HashMap<u64, usize>,
    load: &dyn Fn(usize) -> bool,
    roots: &[usize],
    info: DeviceInfo,
    optimize: bool,
    beam: u32,
) -> (String, Vec<usize>) {
    use std::fmt::Write;
    let mut key = format!(
        "{:?} {} {optimize} {beam}|",
        info.target, info.compute_units
    );
    let mut place: HashMap<usize, usize> = HashMap::new();
    let mut loaded = Vec::new();
    let mut todo: Vec<usize> = Vec::new();
    for &r in roots {
        let n = place.len();
        place.entry(r).or_insert(n);
        todo.push(r);
    }
    let mut next = 0;
    while next < todo.len() {
        let i = todo[next];
        next += 1;
        let node = &nodes[i];
        let _ = write!(key, "{}:{:?}{:?}", place[&i], node.shape, node.dtype);
        if !roots.contains(&i) && load(i) {
            loaded.push(i);
            key.push_str("L;");
            continue;
        }
        let _ = match &node.op {
            Op::Buffer => write!(key, "B"),
            Op::Const(c) => write!(key, "C{:x}", c.to_bits()),
            Op::Index(a) => write!(key, "I{a}"),
            Op::Rand(s) => write!(key, "R{s}"),
            Op::RandAt(s, _) => write!(key, "RA{s}"),
            Op::Unary(u, _) => write!(key, "U{u:?}"),
            Op::Binary(b, _, _) => write!(key, "Bi{b:?}"),
            Op::Where(..) => write!(key, "W"),
            Op::Cast(_) => write!(key, "Ca"),
            Op::Reduce(r, _, axes) => write!(key, "Re{r:?}{axes:?}"),
            Op::Reshape(_) => write!(key, "Rs"),
            Op::Permute(_, p) => write!(key, "P{p:?}"),
            Op::Expand(_) => write!(key, "E"),
            Op::Pad(_, p) => write!(key, "Pa{p:?}"),
            Op::Shrink(_, s) => write!(key, "S{s:?}"),
            Op::Flip(_, f) => write!(key, "F{f:?}"),
            Op::Detach(_) => write!(key, "D"),
            Op::Contiguous(_) => write!(key, "Ct"),
            Op::Copy(_) => write!(key, "Co"),
            Op::Join(_) => write!(key, "J"),
            Op::Assign(..) => write!(key, "A"),
        };
        key.push('(');
        for s in node.op.sources() {
            match index.get(&s.id) {
                Some(&j) => {
                    let n = place.len();
                    let p = *place.entry(j).or_insert_with(|| {
                        todo.push(j);
                        n
                    });
                    let _ = write!(key, "{p},");
                }
                None => key.push_str("?,"),
            }
        }
        key.push_str(");");
    }
    (key, loaded)
}
