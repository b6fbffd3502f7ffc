//! One kernel of the schedule as compiler IR: every work-item computes one element of the
//! kernel's output — or a small tile of them ([`crate::opt`]) — by evaluating the fused
//! expression at that element's index. Loads of realized tensors go through the index
//! arithmetic of the views between (reshapes, permutes, expands, pads, shrinks, flips: no
//! kernel of their own); reductions fused into the kernel become loops with a private
//! accumulator, or a workgroup's strided loops combined through local memory.
//!
//! A tile's elements are "lanes": each lane is evaluated in turn with the lane's position
//! as a constant, and index expressions keep the position as a symbol ([`Atom::Loop`] of a
//! lane), so a load whose lanes read consecutive aligned elements becomes one vector load.

use std::collections::HashMap;
use std::sync::Arc;

use am_compiler::shapes::{DeviceInfo, launch_1d};
use am_compiler::{BinOp, CmpOp, DType as IrType, Dim, Kernel, KernelBuilder, UnOp, Value};

use crate::node::{BinaryOp, Node, Op, ReduceOp, UnaryOp};
use crate::opt::{self, Opts};
use crate::symbolic::{Atom, Lin, flatten, reshape_index};
use crate::{DType, Error, Result};
use am_isa::Family;

/// Where a kernel parameter's value comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
#[derive(Clone)]
pub(crate) struct Plan {
    /// Shared: a plan found in the device's cache is cloned on every schedule.
    pub(crate) kernel: Arc<Kernel>,
    pub(crate) params: Vec<ParamSrc>,
    /// For each input parameter: every load reads the element the work-item writes.
    pub(crate) identity: Vec<bool>,
    pub(crate) groups: u32,
    pub(crate) info: String,
    /// The optimiser's choices the kernel was made with.
    pub(crate) opts: Opts,
    /// What they were chosen from (the kernel search makes its candidates from it).
    pub(crate) space: opt::Space,
}

/// A condition `lo ≤ lin < hi` a pad puts on its source's elements.
type Valid = Vec<(Lin, i64, i64)>;

/// The key of a value computed for every output lane at once (a reduction): the node, its
/// index and conditions, and the positions of the unrolled steps it is inside.
type MultiKey = (usize, Vec<Lin>, Valid, Vec<(u32, u32)>);

/// The key of a vector load: the parameter, its first element's index, the positions of
/// the lanes that index depends on, and the conditions it is loaded under.
type VectorKey = (usize, Lin, Vec<(u32, u32)>, Valid);

#[derive(Default)]
struct Scope {
    values: HashMap<(usize, Vec<Lin>, Valid), Value>,
    lins: HashMap<Lin, Value>,
    /// A scope of one lane: what it caches holds for that lane only.
    lane: bool,
    /// Vector loads, by parameter, first element's index and the lanes that index depends on.
    vectors: HashMap<VectorKey, Value>,
    /// Reductions computed for every output lane.
    multi: HashMap<MultiKey, Vec<Value>>,
    /// Conditions of pads, by their expressions with the lanes' positions put in.
    conds: HashMap<Valid, Value>,
    /// Loads of one element, by parameter, index and conditions with the lanes' positions
    /// put in: lanes and unrolled steps that read the same element share the load (a
    /// convolution's neighbouring outputs and taps).
    loads: HashMap<(Value, Lin, Valid), Value>,
    /// Selections already made, by condition and operands.
    wheres: HashMap<(Value, Value, Value), Value>,
}

/// The register layouts of the matrix instructions (as `am_emu`'s `interp::wmma` and MFMA
/// describe them, after AMD's Matrix Instruction Calculator; bf16 operands sit as f16 ones,
/// and CDNA's f32 operands on 16×16 tiles as its f16 ones with element `e` in the `e`-th of
/// four `v_mfma_f32_16x16x4_f32`): where a work-item's elements of A, B and C/D are, by its
/// lane's group `q` (of 16 lanes, 32 for [`Layout::Cdna32`]) and position in it `x`. A row
/// (B column) `x` of the tile is always the work-item's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// gfx11 `v_wmma_f32_16x16x16_f16`, wave32: all 16 k of the row (lanes 16–31 hold copies
    /// of 0–15); element `i` of C/D is row `2i + q`.
    Gfx11,
    /// gfx12 `v_wmma_f32_16x16x16_f16`, wave32: k in chunks of 4 alternating between the
    /// lane groups (`8·(e / 4) + 4q + e mod 4`); element `i` of C/D is row `8q + i`.
    Gfx12,
    /// CDNA `v_mfma_f32_16x16x16f16`, wave64: k `4q + e`; element `i` of C/D is row `4q + i`.
    Cdna,
    /// CDNA f32 on 32×32 tiles, wave64: eight `v_mfma_f32_32x32x2_f32` per step of 16
    /// along k, the `e`-th taking element `e` of A and B, k `8q + e` (q = lane / 32);
    /// element `i` of C/D is row `8·(i / 4) + 4q + i mod 4` (the calculator's
    /// `(8·⌊GPR / 4⌋ mod 32) + 4·⌊lane / 32⌋ + GPR mod 4`).
    Cdna32,
}

impl Layout {
    /// Elements of C/D per work-item.
    fn cd(self) -> u32 {
        match self {
            Layout::Gfx11 | Layout::Gfx12 => 8,
            Layout::Cdna => 4,
            Layout::Cdna32 => 16,
        }
    }

    /// A tile's side.
    fn side(self) -> usize {
        if self == Layout::Cdna32 { 32 } else { 16 }
    }

    /// The C/D element as two lane atoms' counts (high, low): the element is
    /// `high digit · low count + low digit`.
    fn cd_split(self) -> (u32, u32) {
        if self == Layout::Cdna32 {
            (4, 4)
        } else {
            (1, self.cd())
        }
    }
}

/// A kernel whose matrix product runs on the matrix instructions: each wave computes a block
/// of `tiles` tiles (16×16, or 32×32) of the output, each work-item its C/D elements of
/// every tile.
#[derive(Clone)]
struct MmaPlan {
    layout: Layout,
    tiles: (usize, usize),
    /// Output lane atoms: the tile's row in the block, the C/D element's high and low parts
    /// ([`Layout::cd_split`]), the tile's column.
    lane_ids: [u32; 4],
    /// The block's first row and first column.
    row0: Lin,
    col0: Lin,
    /// The work-item's group of lanes and its position in it.
    q: Lin,
    x: Lin,
    /// The product's index (`[.., row, 0, column]`) of the output element being computed.
    at: Vec<Lin>,
}

impl MmaPlan {
    /// The plan for the items `parts` (`[.., block row, block column, q, x]`) and the output
    /// index and lanes it gives the kernel.
    fn new(
        layout: Layout,
        tiles: (usize, usize),
        parts: Vec<Lin>,
        next_loop: &mut u32,
    ) -> (MmaPlan, Vec<Lin>, Vec<(u32, u32)>) {
        let (tm, tn) = tiles;
        let side = layout.side() as i64;
        let r = parts.len();
        let (q, x) = (parts[r - 2].clone(), parts[r - 1].clone());
        let row0 = parts[r - 4].mul(side * tm as i64);
        let col0 = parts[r - 3].mul(side * tn as i64);
        let ids = [*next_loop, *next_loop + 1, *next_loop + 2, *next_loop + 3];
        *next_loop += 4;
        let lane = |k: usize, n: usize| Lin::atom(Atom::Loop(ids[k], n as i64));
        let (hi, lo) = layout.cd_split();
        let elem = lane(2, lo as usize);
        let in_tile = match layout {
            Layout::Gfx11 => elem.mul(2).add(&q),
            Layout::Gfx12 => q.mul(8).add(&elem),
            Layout::Cdna => q.mul(4).add(&elem),
            Layout::Cdna32 => lane(1, hi as usize).mul(8).add(&q.mul(4)).add(&elem),
        };
        let mut row = row0.add(&in_tile);
        let mut col = col0.add(&x);
        // Lanes of one position are no lanes.
        let mut lanes = Vec::with_capacity(4);
        if tm > 1 {
            row = row.add(&lane(0, tm).mul(side));
            lanes.push((ids[0], tm as u32));
        }
        if hi > 1 {
            lanes.push((ids[1], hi));
        }
        lanes.push((ids[2], lo));
        if tn > 1 {
            col = col.add(&lane(3, tn).mul(side));
            lanes.push((ids[3], tn as u32));
        }
        let mut idx: Vec<Lin> = parts[..r - 4].to_vec();
        idx.extend([row.clone(), col.clone()]);
        let mut at: Vec<Lin> = parts[..r - 4].to_vec();
        at.extend([row, Lin::konst(0), col]);
        let plan = MmaPlan {
            layout,
            tiles,
            lane_ids: ids,
            row0,
            col0,
            q,
            x,
            at,
        };
        (plan, idx, lanes)
    }
}

/// A grouped reduction's workgroup.
#[derive(Clone, Copy)]
struct Group {
    size: u32,
    lid: Value,
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
    /// The output element being computed (its row-major index, lanes as symbols).
    out_lin: Lin,
    loops: HashMap<u32, Value>,
    next_loop: u32,
    reduces: Vec<usize>,
    error: Option<GenError>,
    opts: Opts,
    /// The output lanes (atom id, count), last fastest.
    lanes: Vec<(u32, u32)>,
    /// The position of every lane atom being evaluated (output lanes, unrolled steps).
    digits: HashMap<u32, u32>,
    /// Ranges the code being generated is inside.
    depth: u32,
    group: Option<Group>,
    /// Where a matrix product runs on the matrix instructions.
    mma: Option<MmaPlan>,
    /// Whether one did.
    mma_used: bool,
    /// Bytes of the widest vector access: 128-bit loads on GPUs, the host's vector
    /// registers on the CPU.
    vector_bytes: usize,
}

fn ir(d: DType) -> IrType {
    IrType::scalar(d.scalar())
}

/// Element types loaded and stored as vectors.
fn vectorizable(d: DType) -> bool {
    matches!(d, DType::F32 | DType::I32 | DType::F16 | DType::BF16)
}

/// The kernel computing nodes `roots` of `nodes` (a schedule's graph, operands first), all
/// of one shape, each work-item computing one element of each (or a tile, with `optimize`);
/// `load(i)` says whether node `i` is read from memory rather than computed. Roots read by
/// other roots are computed once, inline; every value is computed before any is stored, so
/// a root written in place is read before it is overwritten. `given` replaces the
/// heuristics' choices (the kernel search's candidates, [`opt::neighbours`]); matrix
/// instructions are dropped where the target has none.
pub(crate) fn generate(
    nodes: &[Arc<Node>],
    index: &HashMap<u64, usize>,
    load: &dyn Fn(usize) -> bool,
    roots: &[usize],
    dev: DeviceInfo,
    optimize: bool,
    given: Option<&Opts>,
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
    let (sizes, groupable, matmul) = scan(nodes, index, load, roots);
    let loads = if (optimize || given.is_some()) && !sizes.is_empty() {
        load_axes(nodes, index, load, roots[0])
    } else {
        vec![]
    };
    let space = opt::Space {
        out: out.shape.clone(),
        reduces: sizes.clone(),
        groupable,
        matmul,
        loads,
    };
    let mut opts = match given {
        Some(o) => o.clone(),
        None => opt::choose(&dev, &space.shape(), optimize),
    };
    let layout = match (dev.target.gpu().map(|g| g.family()), opts.mma) {
        (Some(Family::Rdna3), _) => Some(Layout::Gfx11),
        (Some(Family::Rdna4), _) => Some(Layout::Gfx12),
        (Some(Family::Cdna3 | Family::Cdna4), Some(m)) if m.side == 32 => Some(Layout::Cdna32),
        (Some(Family::Cdna3 | Family::Cdna4), _) => Some(Layout::Cdna),
        (None, _) => None,
    };
    if layout.is_none() {
        opts.mma = None;
    }
    // The tile of outputs a work-item computes: the items are the output with the upcast
    // axes divided.
    let mut item_shape = out.shape.clone();
    for &(a, f) in &opts.upcast {
        item_shape[a] /= f;
    }
    if let Some(opt::Mma {
        tiles: (tm, tn),
        side,
    }) = opts.mma
    {
        // A wave per block of tm × tn tiles of side × side, its lanes in groups of side.
        let r = item_shape.len();
        let wave = dev.target.wave_size() as usize;
        item_shape.truncate(r - 2);
        item_shape.extend([
            out.shape[r - 2] / (side * tm),
            out.shape[r - 1] / (side * tn),
            wave / side,
            side,
        ]);
    }
    let items = item_shape.iter().product::<usize>() as i64;
    // On the CPU a launch of several workgroups starts threads (tens of µs, more on a busy
    // host): up to 1024 work-items with at most 2^21 steps of work in all (outputs times
    // the elements each reduces; a 1M sum's first kernel) run as one workgroup on the
    // calling thread.
    let work = sizes
        .iter()
        .fold(n.max(1) as usize, |w, &s| w.saturating_mul(s.max(1)));
    let (wg, groups) = if let Some(w) = opts.group {
        (w, n.max(1) as u32)
    } else if opts.mma.is_some() {
        // Whole waves and no work-item past the end: every one must reach the matrix
        // instructions.
        let wave = dev.target.wave_size() as i64;
        let mut wg = wave;
        while wg * 2 <= 256 && (items % (wg * 2)) == 0 {
            wg *= 2;
        }
        (wg as u32, (items / wg) as u32)
    } else if dev.target == am_compiler::Target::Cpu && items <= 1024 && work <= 1 << 21 {
        (items.max(1) as u32, 1)
    } else {
        launch_1d(items as u64, &dev)
    };
    let mut b = KernelBuilder::new("k", [wg, 1, 1]);
    let mut params = Vec::with_capacity(roots.len() + 4);
    let mut pvals = Vec::with_capacity(roots.len() + 4);
    for (k, &r) in roots.iter().enumerate() {
        params.push(ParamSrc::Output(k));
        let v = b.param_ptr(&format!("v{k}"), ir(nodes[r].dtype), false);
        if below_4gib(&nodes[r]) {
            b.set_offset32(v);
        }
        pvals.push(v);
    }
    let (gid, group) = match opts.group {
        Some(size) => {
            let g = b.group_id(Dim::X);
            let lid = b.local_id(Dim::X);
            (g, Some(Group { size, lid }))
        }
        None => (b.global_id(Dim::X), None),
    };
    let mut idx = crate::symbolic::unflatten(&Lin::gid(items), &item_shape);
    let mut lanes = Vec::with_capacity(opts.upcast.len());
    let mut next_loop = 0;
    let mma = match (opts.mma, layout) {
        (Some(m), Some(layout)) => {
            let (plan, out_idx, out_lanes) = MmaPlan::new(layout, m.tiles, idx, &mut next_loop);
            idx = out_idx;
            lanes = out_lanes;
            Some(plan)
        }
        _ => None,
    };
    // Upcast axes in axis order, so that lanes run row-major with the last axis fastest.
    let mut upcast = opts.upcast.clone();
    upcast.sort_unstable();
    for &(a, f) in &upcast {
        let id = next_loop;
        next_loop += 1;
        idx[a] = idx[a]
            .mul(f as i64)
            .add(&Lin::atom(Atom::Loop(id, f as i64)));
        lanes.push((id, f as u32));
    }
    let out_lin = flatten(&idx, &out.shape);
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
        out_lin,
        loops: HashMap::new(),
        next_loop,
        reduces: vec![],
        error: None,
        opts,
        lanes,
        digits: HashMap::new(),
        depth: 0,
        group,
        mma,
        mma_used: false,
        vector_bytes: match dev.target {
            am_compiler::Target::Cpu => am_compiler::host_vector_bytes() as usize,
            _ => 16,
        },
    };
    let body = |g: &mut Gen<'_>| {
        let lanes = g.lanes.clone();
        let values: Vec<Vec<Value>> = g.per_lane(&lanes, |g, _| {
            roots.iter().map(|&r| g.eval(r, &idx, &vec![])).collect()
        });
        g.store_roots(&values);
    };
    if g.group.is_some() || g.mma.is_some() {
        // One workgroup per output: every work-item takes part in the reductions (their
        // barriers), the first stores. Matrix products: the launch has no work-item past
        // the end.
        body(&mut g);
    } else {
        let nv = g.b.const_u32(items as u32);
        let inside = g.b.cmp(CmpOp::Lt, gid, nv);
        g.in_if(inside, body);
    }
    let Gen {
        b,
        params,
        identity,
        reduces,
        error,
        opts,
        mma,
        mma_used,
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
    let mut tags = String::new();
    for (a, f) in &opts.upcast {
        tags.push_str(&format!(" up{a}:{f}"));
    }
    if let Some(w) = opts.group {
        tags.push_str(&format!(" group:{w}"));
    }
    if let (Some(p), true) = (&mma, mma_used) {
        let (tm, tn) = p.tiles;
        let side = p.layout.side();
        tags.push_str(&format!(" mma:{tm}x{tn}"));
        if side != 16 {
            tags.push_str(&format!("@{side}"));
        }
    }
    let (name, info) = if reduces.is_empty() {
        (
            format!("E_{dims}"),
            format!("{:?} {}{outputs}{tags}", out.shape, out.dtype),
        )
    } else {
        let r: Vec<String> = reduces.iter().map(|d| d.to_string()).collect();
        (
            format!("R_{dims}__{}", r.join("_")),
            format!(
                "{:?} {}{outputs} reduce {:?}{tags}",
                out.shape, out.dtype, reduces
            ),
        )
    };
    // Accumulators and local arrays were declared where their reductions are; the IR wants
    // them at the top level (they take no operands, so moving them up changes nothing else).
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
        kernel: Arc::new(kernel),
        params,
        identity,
        groups,
        info,
        opts,
        space,
    })
}

/// The sizes of the reductions `roots` compute outside any loop, whether all of them
/// accumulate in a type local memory combines (f32, i32), and the inner dimension and the
/// operands' type when the only one is a matrix product ([`matmul_operands`]) whose output
/// is the kernel's.
fn scan(
    nodes: &[Arc<Node>],
    index: &HashMap<u64, usize>,
    load: &dyn Fn(usize) -> bool,
    roots: &[usize],
) -> (Vec<usize>, bool, Option<(usize, DType)>) {
    let mut sizes = Vec::new();
    let mut reductions = Vec::new();
    let mut groupable = true;
    let mut seen = vec![false; nodes.len()];
    let mut stack: Vec<usize> = roots.to_vec();
    while let Some(i) = stack.pop() {
        if seen[i] {
            continue;
        }
        seen[i] = true;
        let node = &nodes[i];
        if !roots.contains(&i) && load(i) {
            continue;
        }
        if let Op::Reduce(_, a, axes) = &node.op {
            // The loop's own body is inside the loop: not looked into.
            let src = index.get(&a.id).copied();
            let shape = src.map(|s| nodes[s].shape.clone()).unwrap_or_default();
            let size: usize = axes
                .iter()
                .map(|&x| shape.get(x).copied().unwrap_or(1))
                .product();
            if size > 1 {
                sizes.push(size);
                reductions.push(i);
                let acc = src.map(|s| nodes[s].dtype);
                groupable &= matches!(
                    acc,
                    Some(DType::F32 | DType::F16 | DType::BF16 | DType::I32)
                );
            }
            continue;
        }
        for s in node.op.sources() {
            if let Some(&j) = index.get(&s.id) {
                stack.push(j);
            }
        }
    }
    let out = &nodes[roots[0]].shape;
    let matmul = match reductions[..] {
        [i] => matmul_operands(nodes, index, load, i).and_then(|(a, _, k)| {
            // The product's output `[.., m, 1, n]` is the kernel's `[.., m, n]`.
            let s = &nodes[i].shape;
            let r = s.len();
            let fits = r == out.len() + 1
                && s[r - 2] == 1
                && s[..r - 2] == out[..r - 2]
                && s[r - 1] == out[r - 2];
            fits.then_some((k, nodes[a].dtype))
        }),
        _ => None,
    };
    (sizes, groupable, matmul)
}

/// The index of a movement op's source (reshape, permute, expand, shrink or flip; `shape`
/// the op's own) that holds what `idx` names in the op; `None` for any other op. Pad is not
/// here: its callers also need the bounds it checks.
fn movement_source_index(op: &Op, shape: &[usize], idx: &[Lin]) -> Option<Vec<Lin>> {
    Some(match op {
        Op::Reshape(a) => reshape_index(idx, shape, &a.shape),
        Op::Permute(_, p) => {
            let mut m = vec![Lin::konst(0); p.len()];
            for (k, &axis) in p.iter().enumerate() {
                m[axis] = idx[k].clone();
            }
            m
        }
        Op::Expand(a) => a
            .shape
            .iter()
            .zip(idx)
            .map(|(&d, l)| if d == 1 { Lin::konst(0) } else { l.clone() })
            .collect(),
        Op::Shrink(_, rg) => idx
            .iter()
            .zip(rg)
            .map(|(l, &(lo, _))| l.add_const(lo as i64))
            .collect(),
        Op::Flip(_, f) => idx
            .iter()
            .zip(f)
            .zip(shape)
            .map(|((l, &flip), &d)| {
                if flip {
                    l.mul(-1).add_const(d as i64 - 1)
                } else {
                    l.clone()
                }
            })
            .collect(),
        _ => return None,
    })
}

/// For each load the expression of root `root` makes (a node read from memory at an index),
/// which of the root's axes its element depends on; empty when the expression is too large
/// to look through. What the optimiser needs to pick the axes whose lanes share loads.
fn load_axes(
    nodes: &[Arc<Node>],
    index: &HashMap<u64, usize>,
    load: &dyn Fn(usize) -> bool,
    root: usize,
) -> Vec<Vec<bool>> {
    /// Visits of (node, index) pairs before giving up.
    const BUDGET: usize = 4096;
    let out = &nodes[root].shape;
    let r = out.len() as u32;
    let axes_of = |l: &Lin| {
        let mut ids = Vec::new();
        lane_atoms(l, &mut ids);
        (0..r).map(|a| ids.contains(&a)).collect::<Vec<bool>>()
    };
    let idx: Vec<Lin> = out
        .iter()
        .enumerate()
        .map(|(a, &d)| Lin::atom(Atom::Loop(a as u32, d as i64)))
        .collect();
    let mut stack = vec![(root, idx)];
    let mut seen = std::collections::HashSet::new();
    let mut found = Vec::new();
    let mut next = r;
    while let Some((i, idx)) = stack.pop() {
        if seen.len() >= BUDGET {
            return vec![];
        }
        if !seen.insert((i, idx.clone())) {
            continue;
        }
        let node = &nodes[i];
        let src = |n: &Arc<Node>| index.get(&n.id).copied();
        if (i != root && load(i)) || matches!(node.op, Op::Buffer | Op::Copy(_)) {
            found.push(axes_of(&flatten(&idx, &node.shape)));
            continue;
        }
        let m: Vec<Lin> = match &node.op {
            Op::Pad(_, p) => idx
                .iter()
                .zip(p)
                .map(|(l, &(b, _))| l.add_const(-(b as i64)))
                .collect(),
            Op::Reduce(_, a, axes) => {
                let Some(s) = src(a) else { continue };
                let mut m = idx.clone();
                for &ax in axes {
                    m[ax] = Lin::atom(Atom::Loop(next, nodes[s].shape[ax] as i64));
                    next += 1;
                }
                m
            }
            op => movement_source_index(op, &node.shape, &idx).unwrap_or_else(|| idx.clone()),
        };
        for a in node.op.sources() {
            if let Some(j) = src(a) {
                stack.push((j, m.clone()));
            }
        }
    }
    found
}

/// The operands of a matrix product of f16, bf16 or f32 values
/// `Σ_k A[.., m, k, n]·B[.., m, k, n]` that reduction node `i` computes — A a broadcast
/// along `n` (its source has 1 there) and B along `m`, both of the product's type, the sum
/// over `k` (the axis before the last) — as (A, B, k's size).
fn matmul_operands(
    nodes: &[Arc<Node>],
    index: &HashMap<u64, usize>,
    load: &dyn Fn(usize) -> bool,
    i: usize,
) -> Option<(usize, usize, usize)> {
    let Op::Reduce(ReduceOp::Sum, a, axes) = &nodes[i].op else {
        return None;
    };
    let src = *index.get(&a.id)?;
    let shape = &nodes[src].shape;
    let r = shape.len();
    let dtype = nodes[src].dtype;
    if r < 3
        || axes[..] != [r - 2]
        || load(src)
        || !matches!(dtype, DType::F16 | DType::BF16 | DType::F32)
    {
        return None;
    }
    let Op::Binary(BinaryOp::Mul, x, y) = &nodes[src].op else {
        return None;
    };
    let (x, y) = (*index.get(&x.id)?, *index.get(&y.id)?);
    // Whether node `j` is a broadcast along `axis`: its value does not depend on it.
    let broadcast = |j: usize, axis: usize| match &nodes[j].op {
        Op::Expand(s) if !load(j) && nodes[j].dtype == dtype => index
            .get(&s.id)
            .is_some_and(|&s| nodes[s].shape.get(axis) == Some(&1)),
        _ => false,
    };
    if broadcast(x, r - 1) && broadcast(y, r - 3) {
        Some((x, y, shape[r - 2]))
    } else if broadcast(y, r - 1) && broadcast(x, r - 3) {
        Some((y, x, shape[r - 2]))
    } else {
        None
    }
}

/// Moves the private and local arrays declared in nested bodies of `body` into `out`.
fn hoist_private(body: &mut Vec<am_compiler::Inst>, out: &mut Vec<am_compiler::Inst>, top: bool) {
    let mut kept = Vec::with_capacity(body.len());
    for mut inst in body.drain(..) {
        match &mut inst.op {
            am_compiler::Op::Private { .. } | am_compiler::Op::Local { .. } if !top => {
                out.push(inst)
            }
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

    /// A range `start..end` by `step` whose body gets a scope of its own.
    fn in_range_from(
        &mut self,
        start: Value,
        end: u32,
        step: u32,
        f: impl FnOnce(&mut Self, Value),
    ) {
        let mut b = std::mem::replace(&mut self.b, KernelBuilder::new("_", [1, 1, 1]));
        let hi = b.const_u32(end);
        b.range(start, hi, step, |inner, var| {
            std::mem::swap(&mut self.b, inner);
            self.scopes.push(Scope::default());
            self.depth += 1;
            f(self, var);
            self.depth -= 1;
            self.scopes.pop();
            std::mem::swap(&mut self.b, inner);
        });
        self.b = b;
    }

    fn in_range(&mut self, len: u32, f: impl FnOnce(&mut Self, Value)) {
        let lo = self.b.const_u32(0);
        self.in_range_from(lo, len, 1, f);
    }

    /// Calls `f` once per combination of the lanes of `atoms` (row-major, the last fastest),
    /// each in a scope of its own with the lanes' positions as constants.
    fn per_lane<T>(
        &mut self,
        atoms: &[(u32, u32)],
        mut f: impl FnMut(&mut Self, usize) -> T,
    ) -> Vec<T> {
        let count: u32 = atoms.iter().map(|&(_, n)| n).product();
        let saved: Vec<(u32, Option<u32>, Option<Value>)> = atoms
            .iter()
            .map(|&(id, _)| {
                (
                    id,
                    self.digits.get(&id).copied(),
                    self.loops.get(&id).copied(),
                )
            })
            .collect();
        let mut out = Vec::with_capacity(count as usize);
        for k in 0..count {
            let mut rest = k;
            for &(id, n) in atoms.iter().rev() {
                let d = rest % n;
                rest /= n;
                self.digits.insert(id, d);
                let v = self.b.const_u32(d);
                self.loops.insert(id, v);
            }
            self.scopes.push(Scope {
                lane: true,
                ..Scope::default()
            });
            out.push(f(self, k as usize));
            self.scopes.pop();
        }
        for (id, d, v) in saved {
            match d {
                Some(d) => self.digits.insert(id, d),
                None => self.digits.remove(&id),
            };
            match v {
                Some(v) => self.loops.insert(id, v),
                None => self.loops.remove(&id),
            };
        }
        out
    }

    /// The scope of the code being generated that is not one lane's.
    fn body_scope(&mut self) -> Option<&mut Scope> {
        self.scopes.iter_mut().rev().find(|s| !s.lane)
    }

    /// The output lane being evaluated (row-major over `lanes`).
    fn out_lane(&self) -> usize {
        self.lanes.iter().fold(0usize, |acc, &(id, n)| {
            acc * n as usize + self.digits.get(&id).copied().unwrap_or(0) as usize
        })
    }

    /// The positions of the lane atoms that are not output lanes (unrolled steps).
    fn step_digits(&self) -> Vec<(u32, u32)> {
        let mut v: Vec<(u32, u32)> = self
            .digits
            .iter()
            .filter(|(id, _)| !self.lanes.iter().any(|(l, _)| l == *id))
            .map(|(&id, &d)| (id, d))
            .collect();
        v.sort_unstable();
        v
    }

    /// Stores every root's value of every lane: as vectors along the last axis where its
    /// lanes are consecutive elements, else one by one; in a grouped kernel, by its first
    /// work-item.
    fn store_roots(&mut self, values: &[Vec<Value>]) {
        if self.mma.is_some() {
            self.store_tiles(values);
            return;
        }
        let store = |g: &mut Self| {
            let lanes = g.lanes.clone();
            let last = lanes.last().copied();
            let along_last = last.is_some_and(|(id, f)| {
                let rest = g
                    .out_lin
                    .add(&Lin::atom(Atom::Loop(id, i64::from(f))).mul(-1));
                g.out_lin.terms.contains(&(Atom::Loop(id, i64::from(f)), 1))
                    && rest.terms.iter().all(|(_, k)| k % i64::from(f) == 0)
                    && rest.c % i64::from(f) == 0
            });
            for (k, &r) in g.roots.iter().enumerate() {
                let p = g.pvals[k];
                let dtype = g.nodes[r].dtype;
                match last {
                    Some((id, f)) if along_last && vectorizable(dtype) && f > 1 => {
                        let outer = &lanes[..lanes.len() - 1];
                        let rest = g
                            .out_lin
                            .add(&Lin::atom(Atom::Loop(id, i64::from(f))).mul(-1));
                        g.per_lane(outer, |g, o| {
                            let at = g.lin(&rest);
                            let lane_values: Vec<Value> = (0..f as usize)
                                .map(|j| values[o * f as usize + j][k])
                                .collect();
                            let v = g.b.vector(&lane_values);
                            let align = f * dtype.size() as u32;
                            g.b.store(p, at, v, align);
                        });
                    }
                    _ => {
                        let out_lin = g.out_lin.clone();
                        g.per_lane(&lanes, |g, j| {
                            let at = g.lin(&out_lin);
                            g.b.store_elem(p, at, values[j][k]);
                        });
                    }
                }
            }
        };
        match self.group {
            Some(grp) => {
                let z = self.b.const_u32(0);
                let first = self.b.cmp(CmpOp::Eq, grp.lid, z);
                self.in_if(first, store);
            }
            None => store(self),
        }
    }

    /// Stores the roots of a kernel of matrix tiles, element by element: a lane's elements
    /// are at constant distances from its first (rows and tiles apart; the output index is
    /// linear in the lanes, [`MmaPlan::new`]), so the index is a 64-bit base plus a
    /// constant, which the target folds into the store's offset or one addition (a 32-bit
    /// index would be extended and scaled again for every element).
    fn store_tiles(&mut self, values: &[Vec<Value>]) {
        let lanes = self.lanes.clone();
        let is_lane = |a: &Atom| matches!(a, Atom::Loop(id, _) if lanes.iter().any(|l| l.0 == *id));
        let base = Lin {
            terms: self
                .out_lin
                .terms
                .iter()
                .filter(|(a, _)| !is_lane(a))
                .cloned()
                .collect(),
            c: self.out_lin.c,
        };
        let steps: Vec<(u32, i64)> = self
            .out_lin
            .terms
            .iter()
            .filter_map(|(a, k)| match a {
                Atom::Loop(id, _) if is_lane(a) => Some((*id, *k)),
                _ => None,
            })
            .collect();
        let b32 = self.lin(&base);
        let b64 = self.b.cast(b32, IrType::I64);
        for (k, _) in self.roots.iter().enumerate() {
            let p = self.pvals[k];
            self.per_lane(&lanes, |g, j| {
                let off: i64 = steps
                    .iter()
                    .map(|&(id, c)| c * i64::from(g.digits.get(&id).copied().unwrap_or(0)))
                    .sum();
                let c = g.b.constant(IrType::I64, off as u64);
                let at = g.b.add(b64, c);
                g.b.store_elem(p, at, values[j][k]);
            });
        }
    }

    /// The innermost cached answer: from the scopes of the bodies being generated and the
    /// scope of the lane being evaluated (another lane's answers are not this lane's).
    fn find<T: Clone>(&self, get: impl Fn(&Scope) -> Option<T>) -> Option<T> {
        let top = self.scopes.len().saturating_sub(1);
        self.scopes
            .iter()
            .enumerate()
            .rev()
            .filter(|&(k, s)| !s.lane || k == top)
            .find_map(|(_, s)| get(s))
    }

    fn const_of(&mut self, d: DType, x: f64) -> Value {
        self.b.constant(ir(d), d.const_bits(x))
    }

    /// `l` with the positions of the lanes being evaluated put in for their atoms: the same
    /// expression for every lane and step that reaches the same element.
    fn concrete(&self, l: &Lin) -> Lin {
        let mut out = Lin::konst(l.c);
        for (a, k) in &l.terms {
            let t = match a {
                Atom::Loop(id, _) if self.digits.contains_key(id) => {
                    Lin::konst(i64::from(self.digits[id]))
                }
                Atom::Div(x, d) if mentions(x, &self.digits) => self.concrete(x).div(*d),
                Atom::Rem(x, d) if mentions(x, &self.digits) => self.concrete(x).rem(*d),
                _ => Lin::atom(a.clone()),
            };
            out = out.add(&t.mul(*k));
        }
        out
    }

    /// `cond ? x : y`, made once per operands in the code being generated.
    fn select(&mut self, cond: Value, x: Value, y: Value) -> Value {
        let key = (cond, x, y);
        if let Some(v) = self.find(|s| s.wheres.get(&key).copied()) {
            return v;
        }
        let v = self.b.where_(cond, x, y);
        if let Some(s) = self.body_scope() {
            s.wheres.insert(key, v);
        }
        v
    }

    /// The u32 value of an index expression; computed once for every lane that gives it
    /// the same value.
    fn lin(&mut self, l: &Lin) -> Value {
        let l = &self.concrete(l);
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
        if let Some(s) = self.body_scope() {
            s.lins.insert(l.clone(), v);
        }
        v
    }

    fn valid_cond(&mut self, valid: &Valid) -> Option<Value> {
        if valid.is_empty() {
            return None;
        }
        let valid: Valid = valid
            .iter()
            .map(|(l, lo, hi)| (self.concrete(l), *lo, *hi))
            .collect();
        if let Some(v) = self.find(|s| s.conds.get(&valid).copied()) {
            return Some(v);
        }
        let mut acc: Option<Value> = None;
        for (l, lo, hi) in &valid {
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
        if let (Some(v), Some(s)) = (acc, self.body_scope()) {
            s.conds.insert(valid, v);
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
        if below_4gib(&self.nodes[i]) {
            self.b.set_offset32(v);
        }
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
                valid.is_empty() && (self.n == 1 || flatten(idx, &node.shape) == self.out_lin);
            if !here {
                return self.fail(GenError::Split);
            }
        } else if (self.load)(i) {
            return self.load_node(i, idx, valid);
        }
        match &node.op {
            Op::Buffer | Op::Copy(_) | Op::Join(_) => self.load_node(i, idx, valid),
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
            Op::RandAt(seed, counter) => {
                let lin = flatten(idx, &node.shape);
                let x = self.lin(&lin);
                let c = self.eval(self.src(counter), idx, valid);
                let c = self.b.bitcast(c, IrType::U32);
                let k = self.b.const_u32(RAND_COUNTER_K);
                let c = self.b.mul(c, k);
                let s = self.seed_param(*seed);
                let s = self.b.add(s, c);
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
            Op::Reshape(a)
            | Op::Permute(a, _)
            | Op::Expand(a)
            | Op::Shrink(a, _)
            | Op::Flip(a, _) => {
                let s = self.src(a);
                let m = movement_source_index(&node.op, &node.shape, idx)
                    .unwrap_or_else(|| idx.to_vec());
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
                    Some(c) => self.select(c, x, zero),
                    None => x,
                }
            }
            Op::Detach(a) | Op::Assign(_, a) | Op::Contiguous(a) => {
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
        let dtype = node.dtype;
        let lin = flatten(idx, &node.shape);
        // In a one-element kernel every index is the element written.
        let identity = valid.is_empty() && (lin == self.out_lin || self.n == 1);
        let p = self.input_param(i, identity);
        if vectorizable(dtype)
            && let Some(v) = self.vector_load(p, &lin, dtype, valid)
        {
            return v;
        }
        let key = (
            p,
            self.concrete(&lin),
            valid
                .iter()
                .map(|(l, lo, hi)| (self.concrete(l), *lo, *hi))
                .collect::<Valid>(),
        );
        if let Some(v) = self.find(|s| s.loads.get(&key).copied()) {
            return v;
        }
        let at = self.guarded_index(&lin, valid);
        let v = self.b.load_elem(p, at);
        if let Some(s) = self.body_scope() {
            s.loads.insert(key, v);
        }
        v
    }

    /// The index of a load of element `lin` under a pad's conditions `valid`: element 0
    /// where they fail (the pad's value is selected after the load). The conditions do not
    /// change inside a reduction's loop when the pad is of its input's spatial axes (a
    /// convolution's padding): the compiler computes them once, before the loop.
    fn guarded_index(&mut self, lin: &Lin, valid: &Valid) -> Value {
        let at = self.lin(lin);
        match self.valid_cond(valid) {
            Some(c) => {
                let zero = self.b.const_u32(0);
                self.select(c, at, zero)
            }
            None => at,
        }
    }

    /// The element at `lin` of parameter `p` as a lane of a vector load, when `lin` is
    /// `first + lane` for a lane atom whose lanes are consecutive elements and `first` is
    /// a multiple of their count (so aligned); the load is made once for all those lanes.
    /// Under conditions (`valid`, a padding's) only when they hold for all the lanes or for
    /// none (bounds at multiples of the count, as where pieces are joined): the vector is
    /// then loaded from element 0 where they do not hold, as a lone element would be.
    fn vector_load(&mut self, p: Value, lin: &Lin, dtype: DType, valid: &Valid) -> Option<Value> {
        let (atom, f) = lin.terms.iter().find_map(|(a, k)| match a {
            Atom::Loop(id, f) if *k == 1 && self.digits.contains_key(id) => Some((*id, *f)),
            _ => None,
        })?;
        // Lanes wider than the target's vector access load in pieces of its width (8 f32
        // lanes on a GPU: two `b128`s), each aligned to its size.
        let piece = (self.vector_bytes / dtype.size()).clamp(1, f as usize) as i64;
        if !matches!(f, 2 | 4 | 8) || f % piece != 0 {
            return None;
        }
        let lane_term = Lin::atom(Atom::Loop(atom, f));
        let lane_free = |l: &Lin| {
            let mut inner = Vec::new();
            lane_atoms(l, &mut inner);
            !inner.contains(&atom)
        };
        let aligned =
            |l: &Lin| lane_free(l) && l.terms.iter().all(|(_, k)| k % f == 0) && l.c % f == 0;
        let first = lin.add(&lane_term.mul(-1));
        if !aligned(&first) {
            return None;
        }
        // Each condition without the lane: `rest + lane` is in `[lo, hi)` for every lane
        // exactly when `rest` is, `rest`, `lo` and `hi` being multiples of the count.
        let mut uniform: Valid = Vec::with_capacity(valid.len());
        for (l, lo, hi) in valid {
            let k = l
                .terms
                .iter()
                .find(|(a, _)| *a == Atom::Loop(atom, f))
                .map_or(0, |(_, k)| *k);
            match k {
                0 if lane_free(l) => uniform.push((l.clone(), *lo, *hi)),
                1 => {
                    let rest = l.add(&lane_term.mul(-1));
                    if !aligned(&rest) || lo % f != 0 || hi % f != 0 {
                        return None;
                    }
                    uniform.push((rest, *lo, *hi));
                }
                _ => return None,
            }
        }
        let mut inner = Vec::new();
        lane_atoms(&first, &mut inner);
        for (l, _, _) in &uniform {
            lane_atoms(l, &mut inner);
        }
        inner.sort_unstable();
        inner.dedup();
        let key_lanes: Vec<(u32, u32)> = inner
            .iter()
            .filter_map(|id| self.digits.get(id).map(|&d| (*id, d)))
            .collect();
        let param = self.pvals.iter().position(|&v| v == p)?;
        let lane = i64::from(*self.digits.get(&atom)?);
        let start = first.add_const(lane - lane % piece);
        let key = (param, start, key_lanes, uniform);
        let cached = self.find(|s| s.vectors.get(&key).copied());
        let v = match cached {
            Some(v) => v,
            None => {
                let at = self.guarded_index(&key.1, &key.3);
                let t = IrType::vec(dtype.scalar(), piece as u8);
                let v = self.b.load(p, at, t, piece as u32 * dtype.size() as u32);
                if let Some(s) = self.body_scope() {
                    s.vectors.insert(key, v);
                }
                v
            }
        };
        Some(self.b.extract(v, (lane % piece) as u8))
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
        // Computed once for every output lane (one loop for the tile), then each lane takes
        // its own.
        let key: MultiKey = (
            self.index.get(&node.id).copied().unwrap_or(usize::MAX),
            idx.to_vec(),
            valid.clone(),
            self.step_digits(),
        );
        if let Some(vs) = self.find(|s| s.multi.get(&key).cloned()) {
            return vs[self.out_lane()];
        }
        if let Some(results) = self.mma_reduce(node, idx, valid) {
            let mine = results[self.out_lane()];
            if let Some(s) = self.body_scope() {
                s.multi.insert(key, results);
            }
            return mine;
        }
        let size: usize = looped.iter().map(|&a| in_shape[a]).product();
        self.reduces.push(size);
        let identity = match (op, acc_dtype) {
            (ReduceOp::Sum, _) => 0.0,
            (ReduceOp::Max, DType::Bool) => 0.0,
            (ReduceOp::Max, DType::I32) => f64::from(i32::MIN),
            (ReduceOp::Max, _) => f64::NEG_INFINITY,
        };
        let lanes = self.lanes.clone();
        let count: usize = lanes.iter().map(|&(_, n)| n as usize).product();
        let z = self.b.const_u32(0);
        let init = self.const_of(acc_dtype, identity);
        let accs: Vec<Value> = (0..count)
            .map(|_| {
                let acc = self.b.private(ir(acc_dtype), 1);
                self.b.store_elem(acc, z, init);
                acc
            })
            .collect();
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
        // gfx11 and gfx12 pair two FMAs into one dual-issue instruction (VOPD) only when
        // their first operands sit in different register banks (register number mod 4), and
        // so their second operands; LLVM does not swap operands to get there. A tile's rows
        // at one step all read the same bank (their vectors along the reduction are loaded
        // alike), so lanes 2 and 3 of every 4 along the last axis take their operands the
        // other way round: 8 × 8 tiles went from 62 to 103 pairs of 256 FMAs per unrolled
        // step. A product's operands commute exactly: the bits do not change.
        let swapped = |j: usize| {
            lanes
                .last()
                .is_some_and(|&(_, n)| n >= 4 && (j % n as usize) % 4 >= 2)
        };
        let mut step = |g: &mut Self, at: &[Lin]| {
            g.per_lane(&lanes, |g, j| {
                let acc = accs[j];
                let z = g.b.const_u32(0);
                if let Some((a, b)) = product {
                    let x = g.eval(a, at, valid);
                    let y = g.eval(b, at, valid);
                    let x = g.convert(x, in_dtype, acc_dtype);
                    let y = g.convert(y, in_dtype, acc_dtype);
                    let (x, y) = if swapped(j) { (y, x) } else { (x, y) };
                    let cur = g.b.load_elem(acc, z);
                    let next = g.b.fma(x, y, cur);
                    g.b.store_elem(acc, z, next);
                    return;
                }
                let x = g.eval(src, at, valid);
                let x = g.convert(x, in_dtype, acc_dtype);
                let cur = g.b.load_elem(acc, z);
                let next = g.combine(op, acc_dtype, cur, x);
                g.b.store_elem(acc, z, next);
            });
        };
        let grouped = self.group.filter(|_| self.depth == 0);
        match grouped {
            Some(grp) => self.strided(&looped, &in_shape, base, grp, &mut step),
            None => self.nest(&looped, 0, &in_shape, base, &mut step),
        }
        let results: Vec<Value> = match grouped {
            Some(grp) => {
                // Only without output lanes: one accumulator.
                let z = self.b.const_u32(0);
                let part = self.b.load_elem(accs[0], z);
                let r = self.tree(op, acc_dtype, part, grp);
                vec![self.convert(r, acc_dtype, node.dtype)]
            }
            None => self.per_lane(&lanes, |g, j| {
                let z = g.b.const_u32(0);
                let r = g.b.load_elem(accs[j], z);
                g.convert(r, acc_dtype, node.dtype)
            }),
        };
        let mine = results[self.out_lane().min(results.len() - 1)];
        if let Some(s) = self.body_scope() {
            s.multi.insert(key, results);
        }
        mine
    }

    /// A matrix product on the matrix instructions, when the kernel's plan
    /// has one and this reduction (node `node` at `idx`) is the product it was made for:
    /// the results of every output lane, rounded once from the f32 sums to the node's type.
    fn mma_reduce(&mut self, node: &Node, idx: &[Lin], valid: &Valid) -> Option<Vec<Value>> {
        let plan = self.mma.clone()?;
        let i = self.index.get(&node.id).copied()?;
        // Anywhere else (another index, under a pad) the plain loop computes it: the
        // instructions need this work-item's own rows and columns.
        if !valid.is_empty() || idx != plan.at.as_slice() {
            return None;
        }
        let (a, b, k) = matmul_operands(self.nodes, self.index, self.load, i)?;
        if !k.is_multiple_of(16) {
            return None;
        }
        self.mma_used = true;
        self.reduces.push(k);
        let r = plan.at.len();
        let (tm, tn) = plan.tiles;
        let layout = plan.layout;
        let side = layout.side();
        let acc_t = IrType::vec(am_compiler::Scalar::F32, layout.cd() as u8);
        let z = self.b.const_u32(0);
        let zero = self.b.constant(acc_t, 0);
        let accs: Vec<Value> = (0..tm * tn)
            .map(|_| {
                let acc = self.b.private(acc_t, 1);
                self.b.store_elem(acc, z, zero);
                acc
            })
            .collect();
        let kk = self.next_loop;
        let (e1, e0) = (self.next_loop + 1, self.next_loop + 2);
        self.next_loop += 3;
        let steps = k / 16;
        self.in_range(steps as u32, |g, var| {
            g.loops.insert(kk, var);
            let base = Lin::atom(Atom::Loop(kk, steps as i64)).mul(16);
            let step = |id: u32, n: i64| Lin::atom(Atom::Loop(id, n));
            // The k of each element of A and B this work-item holds, and its lane atoms
            // (the element's position in the vector, row-major).
            let (kidx, atoms) = match layout {
                Layout::Gfx11 => (
                    base.add(&step(e1, 2).mul(8)).add(&step(e0, 8)),
                    vec![(e1, 2), (e0, 8)],
                ),
                Layout::Gfx12 => (
                    base.add(&step(e1, 2).mul(8))
                        .add(&plan.q.mul(4))
                        .add(&step(e0, 4)),
                    vec![(e1, 2), (e0, 4)],
                ),
                Layout::Cdna => (base.add(&plan.q.mul(4)).add(&step(e0, 4)), vec![(e0, 4)]),
                Layout::Cdna32 => (base.add(&plan.q.mul(8)).add(&step(e0, 8)), vec![(e0, 8)]),
            };
            let operand = |g: &mut Self, which: usize, line: Lin| {
                let mut at = plan.at.clone();
                at[r - 2] = kidx.clone();
                // A does not depend on the column, B not on the row (their broadcasts).
                if which == a {
                    at[r - 3] = line;
                    at[r - 1] = Lin::konst(0);
                } else {
                    at[r - 3] = Lin::konst(0);
                    at[r - 1] = line;
                }
                let vals = g.per_lane(&atoms, |g, _| g.eval(which, &at, &vec![]));
                g.b.vector(&vals)
            };
            let av: Vec<Value> = (0..tm)
                .map(|t| {
                    let row = plan.row0.add_const((side * t) as i64).add(&plan.x);
                    operand(g, a, row)
                })
                .collect();
            let bv: Vec<Value> = (0..tn)
                .map(|u| {
                    let col = plan.col0.add_const((side * u) as i64).add(&plan.x);
                    operand(g, b, col)
                })
                .collect();
            let z = g.b.const_u32(0);
            for t in 0..tm {
                for u in 0..tn {
                    let acc = accs[t * tn + u];
                    let cur = g.b.load_elem(acc, z);
                    let next = g.b.mma(av[t], bv[u], cur);
                    g.b.store_elem(acc, z, next);
                }
            }
        });
        let sums: Vec<Value> = accs.iter().map(|&acc| self.b.load_elem(acc, z)).collect();
        let lanes = self.lanes.clone();
        let [tid, hid, eid, uid] = plan.lane_ids;
        let (_, lo) = layout.cd_split();
        let results = self.per_lane(&lanes, |g, _| {
            let digit = |id: u32| g.digits.get(&id).copied().unwrap_or(0) as usize;
            let e = digit(hid) * lo as usize + digit(eid);
            let (t, u) = (digit(tid), digit(uid));
            let v = g.b.extract(sums[t * tn + u], e as u8);
            g.convert(v, DType::F32, node.dtype)
        });
        Some(results)
    }

    /// `op` of an accumulator and a value.
    fn combine(&mut self, op: ReduceOp, acc: DType, cur: Value, x: Value) -> Value {
        match (op, acc) {
            (ReduceOp::Sum, DType::Bool) => self.b.binary(BinOp::Or, cur, x),
            (ReduceOp::Sum, _) => self.b.add(cur, x),
            (ReduceOp::Max, DType::Bool) => self.b.binary(BinOp::Or, cur, x),
            (ReduceOp::Max, _) => self.b.binary(BinOp::Max, cur, x),
        }
    }

    /// A workgroup's partial results combined through local memory: halving steps with a
    /// barrier after each; every work-item gets the result.
    fn tree(&mut self, op: ReduceOp, acc: DType, part: Value, grp: Group) -> Value {
        let lds = self.b.local(ir(acc), grp.size);
        self.b.store_elem(lds, grp.lid, part);
        self.b.barrier();
        let mut s = grp.size / 2;
        while s >= 1 {
            let sv = self.b.const_u32(s);
            let active = self.b.cmp(CmpOp::Lt, grp.lid, sv);
            self.in_if(active, |g| {
                let other = g.b.add(grp.lid, sv);
                let x = g.b.load_elem(lds, grp.lid);
                let y = g.b.load_elem(lds, other);
                let t = g.combine(op, acc, x, y);
                g.b.store_elem(lds, grp.lid, t);
            });
            self.b.barrier();
            s /= 2;
        }
        let z = self.b.const_u32(0);
        self.b.load_elem(lds, z)
    }

    /// One loop over all the elements of `axes` (flattened), from this work-item's index in
    /// the workgroup by the workgroup's size.
    fn strided(
        &mut self,
        axes: &[usize],
        shape: &[usize],
        at: Vec<Lin>,
        grp: Group,
        body: &mut dyn FnMut(&mut Self, &[Lin]),
    ) {
        let dims: Vec<usize> = axes.iter().map(|&a| shape[a]).collect();
        let len: usize = dims.iter().product();
        let id = self.next_loop;
        self.next_loop += 1;
        self.in_range_from(grp.lid, len as u32, grp.size, |g, var| {
            g.loops.insert(id, var);
            let mut at = at.clone();
            let flat = Lin::atom(Atom::Loop(id, len as i64));
            for (&a, l) in axes.iter().zip(crate::symbolic::unflatten(&flat, &dims)) {
                at[a] = l;
            }
            body(g, &at);
        });
    }

    /// Nested loops over `axes[k..]`, calling `body` with the index of each element; the
    /// innermost loop unrolled when the optimiser asks and its length allows.
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
        let tail: usize = axes[k..].iter().map(|&x| shape[x]).product();
        if self.opts.unroll_full > 1 && tail <= self.opts.unroll_full {
            // Every remaining step unrolled: each axis a lane atom (the last in fours where
            // it divides, so that loads along it stay vector loads), row-major as the loops.
            let mut at = at;
            let mut steps = Vec::new();
            for (j, &x) in axes[k..].iter().enumerate() {
                let len = shape[x];
                let mut atom = |n: usize| {
                    let id = self.next_loop;
                    self.next_loop += 1;
                    steps.push((id, n as u32));
                    Lin::atom(Atom::Loop(id, n as i64))
                };
                at[x] = if k + j + 1 == axes.len() && len > 4 && len.is_multiple_of(4) {
                    atom(len / 4).mul(4).add(&atom(4))
                } else {
                    atom(len)
                };
            }
            self.per_lane(&steps, |g, _| body(g, &at));
            return;
        }
        let len = shape[a];
        let id = self.next_loop;
        self.next_loop += 1;
        let u = self.opts.unroll;
        if k + 1 == axes.len() && u > 1 && len.is_multiple_of(u) && len > u {
            let step = self.next_loop;
            self.next_loop += 1;
            self.in_range((len / u) as u32, |g, var| {
                g.loops.insert(id, var);
                let mut at = at.clone();
                at[a] = Lin::atom(Atom::Loop(id, (len / u) as i64))
                    .mul(u as i64)
                    .add(&Lin::atom(Atom::Loop(step, u as i64)));
                g.per_lane(&[(step, u as u32)], |g, _| body(g, &at));
            });
            return;
        }
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

/// Whether node `n`'s elements take less than 4 GiB: a kernel reaches them at 32-bit byte
/// offsets from its pointer.
fn below_4gib(n: &Node) -> bool {
    (n.numel() as u64).saturating_mul(n.dtype.size() as u64) < 1 << 32
}

/// Whether `l` mentions an atom of `digits`, nested ones included.
fn mentions(l: &Lin, digits: &HashMap<u32, u32>) -> bool {
    let mut ids = Vec::new();
    lane_atoms(l, &mut ids);
    ids.iter().any(|id| digits.contains_key(id))
}

/// The lane and loop atoms `l` mentions, nested ones included.
fn lane_atoms(l: &Lin, out: &mut Vec<u32>) {
    for (a, _) in &l.terms {
        match a {
            Atom::Loop(id, _) => out.push(*id),
            Atom::Div(x, _) | Atom::Rem(x, _) => lane_atoms(x, out),
            Atom::Gid(_) => {}
        }
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

/// What a counter in device memory ([`crate::Rng`]) adds to the seed per step: odd, so
/// 2³² counters give 2³² seeds.
pub(crate) const RAND_COUNTER_K: u32 = 0x632b_e5ab;

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
