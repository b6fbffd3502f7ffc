//! The kernel optimiser's choices: how a kernel of the schedule maps onto work-items, from
//! per-target heuristics (no search yet).
//!
//! - **Upcast**: a work-item computes a small tile of outputs: 4 along the last output axis
//!   (8 in kernels that reduce, when an 8 × 8 tile leaves enough work-items) and, in kernels
//!   that reduce, 4 or 8 along a second axis — the one along which the
//!   loads the first axis's lanes do not share are broadcast (a matrix product's rows, a
//!   convolution's output channels). Loads shared by the tile are made once, contiguous loads and stores
//!   along the last axis become one vector access, and a reduction loop's overhead is paid
//!   once for the tile.
//! - **Unroll**: the innermost loop of a reduction runs 4 steps per iteration; contiguous
//!   loads along it become one vector access. The innermost loops of at most
//!   [`FULL_UNROLL`] steps together (a convolution's taps) are unrolled completely, so
//!   that taps and output lanes reading the same element share one load. The steps still
//!   accumulate in order, so the results are those of the plain loop.
//! - **Group**: a reduction to fewer outputs than a wave has lanes gets a workgroup per
//!   output; its work-items each reduce a strided slice, and the partial results combine
//!   through local memory (LDS) in a tree.
//! - **Matrix instructions**: a matrix product of f16 or bf16 operands whose rows, columns
//!   and inner dimension are multiples of 16 runs on the target's 16×16×16 matrix
//!   multiply-accumulate (`v_wmma_f32_16x16x16_{f16,bf16}` on RDNA3 and RDNA4,
//!   `v_mfma_f32_16x16x16_{f16,bf16}` on CDNA), exact products summed in f32; on CDNA an f32
//!   product does too: on 32×32 tiles where rows and columns are multiples of 32, eight
//!   `v_mfma_f32_32x32x2_f32` per step of 16 along k (2,048 multiply-adds an instruction),
//!   else on 16×16 tiles, four `v_mfma_f32_16x16x4_f32` (1,024); RDNA has no f32 matrix
//!   instruction. A wave computes a block of such tiles, each work-item its part of every
//!   tile. The instructions sum in their own order (the emulator's: f16 and bf16 in
//!   increasing k, as the plain loop, so their bits are the plain loop's there; f32 on CDNA
//!   each instruction of a step takes its own k of every lane group in turn), so an f32
//!   product on CDNA is not the plain loop's bits: it is within the rounding of a different
//!   order of f32 sums.
//!
//! On the CPU only the choices that keep every output's order of operations apply (upcast
//! and unroll; the `cpu` device is the reference the GPU kernels are checked against), with
//! tiles as wide as the host's vector registers ([`am_compiler::host_vector_bytes`]: 8 f32
//! with AVX, 4 with SSE or NEON; two registers by 4 rows in kernels that reduce), plus a two-kernel full reduction ([`split_cpu`]) whose
//! order depends only on the number of elements and the vector width, and large matrix
//! products whose right operand a kernel of its own packs into panels of the tile's width,
//! padded to the tile ([`pack_cpu`]). Everything is off when a device's
//! optimiser is switched off ([`crate::Device::set_optimize`]).
//!
//! With `AM_BEAM=N` the heuristics' choice is only the start of a search
//! ([`crate::beam`]): [`neighbours`] gives the candidates around a choice.

use am_compiler::shapes::DeviceInfo;
use am_isa::Family;

use crate::DType;

/// What the code generator does with one kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Opts {
    /// Output axes computed several at a time by one work-item, as (axis, factor); each
    /// factor divides its axis.
    pub(crate) upcast: Vec<(usize, usize)>,
    /// Steps per iteration of a reduction's innermost loop (1: plain).
    pub(crate) unroll: usize,
    /// The innermost loops of a reduction are unrolled completely while their steps
    /// together are at most this (0: never).
    pub(crate) unroll_full: usize,
    /// Work-items per workgroup of a grouped reduction (one workgroup per output).
    pub(crate) group: Option<u32>,
    /// A matrix product on the matrix instructions.
    pub(crate) mma: Option<Mma>,
}

/// How a matrix product maps onto the matrix instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mma {
    /// Tiles per wave along the rows and the columns of the output.
    pub(crate) tiles: (usize, usize),
    /// A tile's side: 16, or 32 for f32 on CDNA's `v_mfma_f32_32x32x2_f32`.
    pub(crate) side: usize,
}

impl Opts {
    /// The choices as one line of text (`up=1:8,0:8 unroll=4 full=16 group=- mma=-`), the
    /// form the kernel search keeps on disk; [`Opts::parse`] reads it back.
    pub(crate) fn text(&self) -> String {
        let up: Vec<String> = self
            .upcast
            .iter()
            .map(|(a, f)| format!("{a}:{f}"))
            .collect();
        let up = if up.is_empty() {
            "-".to_string()
        } else {
            up.join(",")
        };
        let group = self.group.map_or("-".to_string(), |w| w.to_string());
        let mma = self.mma.map_or("-".to_string(), |m| {
            format!("{}x{}/{}", m.tiles.0, m.tiles.1, m.side)
        });
        format!(
            "up={up} unroll={} full={} group={group} mma={mma}",
            self.unroll, self.unroll_full
        )
    }

    /// Reads [`Opts::text`] (`None` for anything else).
    pub(crate) fn parse(text: &str) -> Option<Opts> {
        let mut o = Opts::default();
        let mut seen = 0;
        for field in text.split_whitespace() {
            let (k, v) = field.split_once('=')?;
            let num = |x: &str| x.parse::<usize>().ok();
            match k {
                "up" if v != "-" => {
                    for p in v.split(',') {
                        let (a, f) = p.split_once(':')?;
                        o.upcast.push((num(a)?, num(f)?));
                    }
                }
                "up" => {}
                "unroll" => o.unroll = num(v)?,
                "full" => o.unroll_full = num(v)?,
                "group" if v != "-" => o.group = Some(v.parse().ok()?),
                "group" => {}
                "mma" if v != "-" => {
                    let (tiles, side) = v.split_once('/')?;
                    let (m, n) = tiles.split_once('x')?;
                    o.mma = Some(Mma {
                        tiles: (num(m)?, num(n)?),
                        side: num(side)?,
                    });
                }
                "mma" => {}
                _ => return None,
            }
            seen += 1;
        }
        (seen == 5 && o.unroll >= 1).then_some(o)
    }
}

/// What the heuristics look at, owned: kept with a plan, for the kernel search.
#[derive(Clone, Debug, Default)]
pub(crate) struct Space {
    pub(crate) out: Vec<usize>,
    pub(crate) reduces: Vec<usize>,
    pub(crate) groupable: bool,
    pub(crate) matmul: Option<(usize, DType)>,
    pub(crate) loads: Vec<Vec<bool>>,
}

impl Space {
    pub(crate) fn shape(&self) -> Shape<'_> {
        Shape {
            out: &self.out,
            reduces: &self.reduces,
            groupable: self.groupable,
            matmul: self.matmul,
            loads: &self.loads,
        }
    }
}

/// What the heuristics look at: the kernel's output shape and its reductions.
pub(crate) struct Shape<'a> {
    /// The output shape.
    pub(crate) out: &'a [usize],
    /// Elements reduced per output by each reduction outside any loop.
    pub(crate) reduces: &'a [usize],
    /// Whether every such reduction can be grouped (its accumulator is f32 or i32).
    pub(crate) groupable: bool,
    /// The inner dimension and the operands' type, when the kernel's one reduction is a
    /// matrix product of f16, bf16 or f32 operands whose output is the kernel's (`[.., m, n]`).
    pub(crate) matmul: Option<(usize, DType)>,
    /// For each load of the kernel, which output axes its element depends on (empty when
    /// unknown).
    pub(crate) loads: &'a [Vec<bool>],
}

/// Work-items below which upcasting would leave a GPU's compute units idle.
const MIN_ITEMS: usize = 1024;

/// Steps of a reduction's innermost loops unrolled completely.
pub(crate) const FULL_UNROLL: usize = 16;

/// Work-items below which upcasting would leave the host's cores idle (and below which a
/// kernel is small anyway).
const CPU_MIN_ITEMS: usize = 64;

/// Waves below which a matrix product's waves take no more tiles each.
const MIN_MMA_WAVES: usize = 16;

/// The choices for a kernel of `shape` on `dev`, or none when `enabled` is false.
pub(crate) fn choose(dev: &DeviceInfo, shape: &Shape<'_>, enabled: bool) -> Opts {
    let plain = Opts {
        upcast: vec![],
        unroll: 1,
        unroll_full: 0,
        group: None,
        mma: None,
    };
    if !enabled {
        return plain;
    }
    if !dev.target.is_gpu() {
        return choose_cpu(shape);
    }
    if let Some(mma) = mma_choice(dev, shape) {
        return Opts {
            mma: Some(mma),
            ..plain
        };
    }
    let wave = dev.target.wave_size() as usize;
    let n: usize = shape.out.iter().product();
    let biggest = shape.reduces.iter().copied().max().unwrap_or(0);
    if !shape.reduces.is_empty() && shape.groupable && n < wave && biggest >= 4 * wave {
        // Enough work per work-item to pay for the tree: 8 elements each, up to 256 of them.
        let w = (biggest / 8).next_power_of_two().clamp(wave, 256);
        return Opts {
            group: Some(w as u32),
            ..plain
        };
    }
    let mut upcast = Vec::new();
    let mut items = n;
    let fits = |d: usize, items: usize| d > 1 && d.is_multiple_of(4) && items / 4 >= MIN_ITEMS;
    // The last axis first (it gives vector accesses); 8 lanes in a kernel that reduces
    // when 8 × 8 still leave enough work-items: per step of the reduction its 8 + 8 loads
    // then feed 64 FMAs, which LLVM pairs into dual-issue instructions on gfx11 and gfx12.
    if let Some((a, &d)) = shape.out.iter().enumerate().rev().find(|(_, d)| **d != 1)
        && fits(d, items)
    {
        let f = if !shape.reduces.is_empty() && d.is_multiple_of(8) && items / 64 >= MIN_ITEMS {
            8
        } else {
            4
        };
        upcast.push((a, f));
        items /= f;
    }
    // When reducing, a second axis ([`second_axis`]), 8 lanes where they fit: each load
    // along the first axis then feeds 8 FMAs.
    if let Some(a) = second_axis(shape, &upcast, |d| fits(d, items)) {
        let d = shape.out[a];
        let f = if d.is_multiple_of(8) && items / 8 >= MIN_ITEMS {
            8
        } else {
            4
        };
        upcast.push((a, f));
    }
    Opts {
        upcast,
        unroll: 4,
        unroll_full: FULL_UNROLL,
        group: None,
        mma: None,
    }
}

/// When reducing, the second axis of a tile (whose loads are shared along both): the one
/// along which most of the loads that the first axis's lanes do not share are broadcast
/// (the output channels of a convolution, the rows of a matrix product), else the axis
/// before; only an axis that `fits` (4 lanes at least).
fn second_axis(
    shape: &Shape<'_>,
    upcast: &[(usize, usize)],
    fits: impl Fn(usize) -> bool,
) -> Option<usize> {
    let &(first, _) = upcast.first()?;
    if shape.reduces.is_empty() {
        return None;
    }
    let gain = |a: usize| {
        shape
            .loads
            .iter()
            .filter(|l| l.get(first) == Some(&true) && l.get(a) == Some(&false))
            .count()
    };
    let best = (0..first)
        .rev()
        .filter(|&a| fits(shape.out[a]))
        .max_by_key(|&a| (gain(a), a));
    match best {
        Some(a) if gain(a) > 0 => Some(a),
        _ => (0..first)
            .rev()
            .find(|&a| shape.out[a] != 1)
            .filter(|&a| fits(shape.out[a])),
    }
}

/// The CPU's choices: a tile of a vector register's 32-bit lanes along the last output axis
/// (two registers' in kernels that reduce; 4 where neither divides it) and, when reducing,
/// 4 (8 after a one-register first axis) along the axis whose loads the first axis's lanes
/// share most, as on GPUs: a matrix product's work-item keeps 4 rows × 16 columns in 8 AVX
/// registers, two vector loads of B and 4 broadcasts of A per step (the shape of BLAS's AVX2
/// kernels; 8 × 8 took 9 loads for the same 8 FMAs).
fn choose_cpu(shape: &Shape<'_>) -> Opts {
    let lanes = (am_compiler::host_vector_bytes() as usize / 4).max(4);
    let mut upcast = Vec::new();
    let mut items: usize = shape.out.iter().product();
    let fits = |d: usize, f: usize, items: usize| {
        d > 1 && d.is_multiple_of(f) && items / f >= CPU_MIN_ITEMS
    };
    // In a kernel that reduces, two registers' width along the last axis first, then 4
    // along the second: 8 accumulator registers either way, but per step of a matrix
    // product 2 vector loads of B and 4 broadcasts of A feed 8 FMAs (8 × 8 took 1 + 8).
    let reduces = !shape.reduces.is_empty();
    let wide = if reduces { 2 * lanes } else { lanes };
    if let Some((a, &d)) = shape.out.iter().enumerate().rev().find(|(_, d)| **d != 1)
        && let Some(f) = [wide, lanes, 4].into_iter().find(|&f| fits(d, f, items))
    {
        upcast.push((a, f));
        items /= f;
    }
    if let Some(a) = second_axis(shape, &upcast, |d| fits(d, 4, items)) {
        let f = if upcast[0].1 < 2 * lanes && fits(shape.out[a], 8, items) {
            8
        } else {
            4
        };
        upcast.push((a, f));
    }
    Opts {
        upcast,
        unroll: 4,
        unroll_full: FULL_UNROLL,
        group: None,
        mma: None,
    }
}

/// Tiles per wave along the rows and the columns of a matrix product that fits the matrix
/// instructions of `dev` (f16 and bf16 everywhere, f32 on CDNA), while at least
/// [`MIN_MMA_WAVES`] waves remain: 16 per wave where
/// possible, 8 rows of 2 first. A work-item loads its row of A's tiles in vectors along k
/// (A is usually contiguous there) but, for the usual B contiguous along n, its column of
/// B's tiles element by element: per step of k, 8 × 2 tiles take 8 × 2 + 2 × 16 loads for
/// 16 products, 4 × 4 tiles 4 × 2 + 4 × 16.
fn mma_choice(dev: &DeviceInfo, shape: &Shape<'_>) -> Option<Mma> {
    let (k, dtype) = shape.matmul?;
    let family = dev.target.gpu().map(|g| g.family());
    let cdna = matches!(family, Some(Family::Cdna3 | Family::Cdna4));
    if family.is_none() || !(matches!(dtype, DType::F16 | DType::BF16) || cdna) {
        return None;
    }
    let r = shape.out.len();
    if r < 2 || !k.is_multiple_of(16) {
        return None;
    }
    let (m, n) = (shape.out[r - 2], shape.out[r - 1]);
    if dtype == DType::F32 && m.is_multiple_of(32) && n.is_multiple_of(32) {
        return Some(Mma {
            tiles: mma_tiles(shape, 32, &PREFERRED_32),
            side: 32,
        });
    }
    if !m.is_multiple_of(16) || !n.is_multiple_of(16) {
        return None;
    }
    Some(Mma {
        tiles: mma_tiles(shape, 16, &PREFERRED),
        side: 16,
    })
}

/// Blocks of 16×16 tiles per wave, best first: 8 rows of 2 first.
const PREFERRED: [(usize, usize); 10] = [
    (8, 2),
    (4, 4),
    (4, 2),
    (2, 4),
    (2, 2),
    (4, 1),
    (1, 4),
    (2, 1),
    (1, 2),
    (1, 1),
];

/// Blocks of 32×32 f32 tiles (16 accumulators a tile per work-item), best first: per step of
/// 16 along k, 4 × 1 tiles take 4 × 2 128-bit loads of A and 8 of B for 32 instructions.
const PREFERRED_32: [(usize, usize); 5] = [(4, 1), (2, 2), (2, 1), (1, 2), (1, 1)];

/// The first block of `preferred` that divides the output's tiles of `side` and leaves
/// [`MIN_MMA_WAVES`] waves, else one tile per wave.
fn mma_tiles(shape: &Shape<'_>, side: usize, preferred: &[(usize, usize)]) -> (usize, usize) {
    let r = shape.out.len();
    let (m, n) = (shape.out[r - 2], shape.out[r - 1]);
    let batch: usize = shape.out[..r - 2].iter().product();
    let fits = |&&(tm, tn): &&(usize, usize)| {
        (m / side).is_multiple_of(tm)
            && (n / side).is_multiple_of(tn)
            && batch * (m / side / tm) * (n / side / tn) >= MIN_MMA_WAVES
    };
    preferred.iter().find(fits).copied().unwrap_or((1, 1))
}

/// Upcast factors the kernel search tries.
const SEARCH_FACTORS: [usize; 4] = [2, 4, 8, 16];

/// Lanes of one work-item's tile at most, in the search's candidates (the heuristics' 8 × 8).
const SEARCH_MAX_LANES: usize = 64;

/// Unrolls the kernel search tries.
const SEARCH_UNROLLS: [usize; 4] = [1, 2, 4, 8];

/// Outputs at most of a kernel whose reductions the search tries grouped (a workgroup per
/// output).
const SEARCH_MAX_GROUPED: usize = 4096;

/// The kernel search's candidates next to `o` for a kernel of `shape` on `dev`: `o` with one
/// choice changed — an upcast axis's factor (including to none, and an axis not upcast yet),
/// the unroll, complete unrolling on or off, grouping of a reduction and its workgroup size,
/// the block of matrix tiles — each one the code generator supports (factors that divide
/// their axes, at most two upcast axes and [`SEARCH_MAX_LANES`] lanes, groups where
/// [`choose`] could group, matrix tiles that divide the output). On the CPU only upcasts and
/// unrolls, which keep every output's order of operations. In a fixed order, without `o`.
pub(crate) fn neighbours(dev: &DeviceInfo, shape: &Shape<'_>, o: &Opts) -> Vec<Opts> {
    let gpu = dev.target.is_gpu();
    // On a GPU a candidate keeps `o`'s work-items, or at least [`MIN_ITEMS`] (matrix
    // products: [`MIN_MMA_WAVES`] waves): the mock's measure, executed wave-instructions,
    // does not see compute units left idle, and would otherwise favour fewer, longer
    // work-items without end.
    let min = if o.mma.is_some() {
        MIN_MMA_WAVES
    } else {
        MIN_ITEMS
    };
    let keep = parallelism(shape, o).min(min);
    let keeps = |c: &Opts| !gpu || parallelism(shape, c) >= keep;
    let mut out: Vec<Opts> = Vec::new();
    let mut push = |c: Opts| {
        if c != *o && !out.contains(&c) && keeps(&c) {
            out.push(c);
        }
    };
    // Matrix tiles: other blocks only (the rest of the kernel is fixed by them).
    if let Some(Mma {
        tiles: (tm, tn),
        side,
    }) = o.mma
    {
        let r = shape.out.len();
        let (m, n) = (shape.out[r - 2] / side, shape.out[r - 1] / side);
        for b in [1, 2, 4, 8] {
            for (bm, bn) in [(b, tn), (tm, b)] {
                if m.is_multiple_of(bm) && n.is_multiple_of(bn) && bm * bn <= 16 {
                    push(Opts {
                        mma: Some(Mma {
                            tiles: (bm, bn),
                            side,
                        }),
                        ..o.clone()
                    });
                }
            }
        }
        return out;
    }
    let reduces = !shape.reduces.is_empty();
    if o.group.is_none() {
        // Upcasts: each axis's factor changed, or dropped.
        for a in 0..shape.out.len() {
            let d = shape.out[a];
            let cur = o.upcast.iter().find(|(x, _)| *x == a).map(|&(_, f)| f);
            let others: Vec<(usize, usize)> =
                o.upcast.iter().copied().filter(|(x, _)| *x != a).collect();
            let lanes: usize = others.iter().map(|&(_, f)| f).product();
            if cur.is_some() {
                push(Opts {
                    upcast: others.clone(),
                    ..o.clone()
                });
            } else if others.len() >= 2 {
                continue;
            }
            for f in SEARCH_FACTORS {
                if d.is_multiple_of(f) && d > 1 && lanes * f <= SEARCH_MAX_LANES && Some(f) != cur {
                    let mut upcast = others.clone();
                    match o.upcast.iter().position(|(x, _)| *x == a) {
                        Some(p) => upcast.insert(p.min(upcast.len()), (a, f)),
                        None => upcast.push((a, f)),
                    }
                    push(Opts {
                        upcast,
                        ..o.clone()
                    });
                }
            }
        }
    }
    if reduces {
        for u in SEARCH_UNROLLS {
            push(Opts {
                unroll: u,
                ..o.clone()
            });
        }
        push(Opts {
            unroll_full: if o.unroll_full > 1 { 0 } else { FULL_UNROLL },
            ..o.clone()
        });
    }
    let n: usize = shape.out.iter().product();
    if gpu && reduces && shape.groupable && n <= SEARCH_MAX_GROUPED {
        let wave = dev.target.wave_size() as usize;
        let mut w = wave;
        while w <= 256 {
            push(Opts {
                upcast: vec![],
                group: Some(w as u32),
                ..o.clone()
            });
            w *= 2;
        }
        if o.group.is_some() {
            push(Opts {
                group: None,
                ..o.clone()
            });
        }
    }
    out
}

/// The work-items a kernel of `shape` runs with choices `o` (matrix products: waves).
fn parallelism(shape: &Shape<'_>, o: &Opts) -> usize {
    let n: usize = shape.out.iter().product();
    if let Some(Mma {
        tiles: (tm, tn),
        side,
    }) = o.mma
    {
        return n / (side * side * tm * tn).max(1);
    }
    if let Some(w) = o.group {
        return n * w as usize;
    }
    let lanes: usize = o.upcast.iter().map(|&(_, f)| f).product();
    n / lanes.max(1)
}

/// For a reduction of `numel` elements to one on the `cpu` device: `(chunks, lanes)` for a
/// first kernel reducing `[chunks, numel / (chunks · lanes), lanes]` along its middle axis,
/// or `None`. Each work-item then streams through contiguous chunks with a vector
/// register's lanes of partial results per chunk (8 chunks at a time: independent
/// additions), and a second kernel adds the `chunks · lanes` results. The order depends
/// only on `numel` and the host's vector width, not on the threads.
pub(crate) fn split_cpu(dev: &crate::Device, numel: usize) -> Option<(usize, usize)> {
    if !dev.optimize() || dev.target().is_gpu() || numel < 1 << 16 {
        return None;
    }
    let lanes = (am_compiler::host_vector_bytes() as usize / 4).max(4);
    let chunks = ((1usize << numel.trailing_zeros()) / lanes).min(512);
    (chunks >= 64).then_some((chunks, lanes))
}

/// Rows of a matrix product below which the `cpu` device does not pack its right operand
/// (each packed panel is then read by fewer tiles than pay for the copy).
const PACK_MIN_ROWS: usize = 64;

/// Multiply-adds of a matrix product below which the `cpu` device does not pack.
const PACK_MIN_MACS: usize = 1 << 20;

/// How the `cpu` device lays out the operands of a matrix product `[.., m, k] · [.., k, n]`
/// of f32, or `None` to read them where they are: `(w, rows)` for a right operand
/// copied by a kernel of its own into panels `[.., n' / w, k, w]` (`n'` the columns padded
/// with zeros to a multiple of `w`, two vector registers' 32-bit lanes: the tile's width,
/// [`choose_cpu`]) and a left operand padded with zero rows to a multiple of `rows` (the
/// tile's height) when it is not one; the product of the padded operands is then shrunk
/// back to `[.., m, n]`. A tile's loads of B are then contiguous along the whole of k
/// (`w` floats a step, its panel `k · w` floats in a row) whatever B's own layout:
/// row-major B reads 16 floats a row apart, which fall on a few sets of the L1 cache (a
/// 256³ product on AVX2 took ~20 % longer), a transposed B one column element per row
/// (no vector load: 9–15 ms against 0.25 for numpy), and columns that the tile does not
/// divide had no tile at all. Every output sums the same products in the same order, so
/// the bits are the unpacked kernel's. Not for f16 and bf16, whose host kernels convert
/// every element to f32 (5–6 ms at 256³ either way; packed was no faster).
pub(crate) fn pack_cpu(
    dev: &crate::Device,
    m: usize,
    k: usize,
    n: usize,
    dtype: DType,
) -> Option<(usize, usize)> {
    if !dev.optimize() || dev.target().is_gpu() || dtype != DType::F32 {
        return None;
    }
    let w = 2 * (am_compiler::host_vector_bytes() as usize / 4).max(4);
    let macs = m.saturating_mul(k).saturating_mul(n);
    (m >= PACK_MIN_ROWS && n >= w && k > 1 && macs >= PACK_MIN_MACS).then_some((w, 4))
}

/// For a reduction of `numel` elements to one on `dev`: the number of partial results of a
/// first kernel, or `None` for one kernel. A power of two dividing `numel`, up to 4096:
/// enough work-items to fill a GPU, few enough for one workgroup to combine.
pub(crate) fn split(dev: &crate::Device, numel: usize) -> Option<usize> {
    if !dev.optimize() || !dev.target().is_gpu() || numel < 1 << 16 {
        return None;
    }
    let g = (1usize << numel.trailing_zeros()).min(4096);
    (g >= 256).then_some(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(target: am_compiler::GfxTarget) -> DeviceInfo {
        DeviceInfo {
            target: am_compiler::Target::Gpu(target),
            compute_units: 48,
        }
    }

    fn choice(dev: &DeviceInfo, out: &[usize], k: usize, dtype: DType) -> Option<Mma> {
        mma_choice(
            dev,
            &Shape {
                out,
                reduces: &[k],
                groupable: true,
                matmul: Some((k, dtype)),
                loads: &[],
            },
        )
    }

    fn tiles_of(dev: &DeviceInfo, out: &[usize], k: usize, dtype: DType) -> Option<(usize, usize)> {
        choice(dev, out, k, dtype).map(|c| c.tiles)
    }

    fn tiles(out: &[usize], k: usize) -> Option<(usize, usize)> {
        tiles_of(&gpu(am_compiler::GfxTarget::Gfx1100), out, k, DType::F16)
    }

    #[test]
    fn f32_products_take_the_matrix_instructions_on_cdna_only() {
        use am_compiler::GfxTarget::*;
        for t in [Gfx942, Gfx950] {
            // Multiples of 32: 32×32 tiles, 4 × 1 per wave (16 waves).
            let c = choice(&gpu(t), &[256, 256], 64, DType::F32);
            assert_eq!(
                c,
                Some(Mma {
                    tiles: (4, 1),
                    side: 32
                })
            );
            // Columns a multiple of 16 only: 16×16 tiles.
            let c = choice(&gpu(t), &[256, 48], 64, DType::F32);
            assert_eq!(
                c,
                Some(Mma {
                    tiles: (2, 1),
                    side: 16
                })
            );
            // f16 stays on 16×16 tiles.
            let c = choice(&gpu(t), &[256, 256], 64, DType::F16);
            assert_eq!(
                c,
                Some(Mma {
                    tiles: (8, 2),
                    side: 16
                })
            );
        }
        for t in [Gfx1100, Gfx1201] {
            assert_eq!(tiles_of(&gpu(t), &[256, 256], 64, DType::F32), None);
            assert_eq!(
                tiles_of(&gpu(t), &[256, 256], 64, DType::BF16),
                Some((8, 2))
            );
        }
        let cpu = DeviceInfo {
            target: am_compiler::Target::Cpu,
            compute_units: 8,
        };
        assert_eq!(tiles_of(&cpu, &[256, 256], 64, DType::F16), None);
    }

    #[test]
    fn matrix_products_take_the_largest_block_that_leaves_16_waves() {
        // 16 × 16 tiles: 8 × 2 per wave leaves 2 × 8 = 16 waves.
        assert_eq!(tiles(&[256, 256], 256), Some((8, 2)));
        // 4 × 16 tiles in each of 4 matrices: 8 rows of tiles do not divide 4.
        assert_eq!(tiles(&[4, 64, 256], 16), Some((4, 4)));
        // 4 × 4 tiles: no block leaves 16 waves; one tile per wave.
        assert_eq!(tiles(&[64, 64], 32), Some((1, 1)));
    }

    /// The choices for a reduction to `out` whose loads are a matrix product's: A's along
    /// the rows (axis `r - 2`), B's along the columns.
    fn matmul_choice(out: &[usize]) -> Opts {
        let r = out.len();
        let along = |axis: usize| (0..r).map(|a| a == axis).collect::<Vec<bool>>();
        let dev = DeviceInfo {
            target: am_compiler::Target::Gpu(am_compiler::GfxTarget::Gfx1100),
            compute_units: 48,
        };
        choose(
            &dev,
            &Shape {
                out,
                reduces: &[64],
                groupable: true,
                matmul: None,
                loads: &[along(r - 2), along(r - 1)],
            },
            true,
        )
    }

    #[test]
    fn matrix_products_take_8_by_8_tiles_while_1024_work_items_remain() {
        // 65,536 outputs: 8 × 8 leaves 1024 work-items.
        assert_eq!(matmul_choice(&[256, 256]).upcast, vec![(1, 8), (0, 8)]);
        assert_eq!(matmul_choice(&[2, 128, 256]).upcast, vec![(2, 8), (1, 8)]);
        // Fewer outputs: 4 columns, 8 rows (as before the 8-column tiles).
        assert_eq!(matmul_choice(&[128, 256]).upcast, vec![(1, 4), (0, 8)]);
        // Columns not a multiple of 8.
        assert_eq!(matmul_choice(&[256, 260]).upcast, vec![(1, 4), (0, 8)]);
    }

    fn cpu_choice(out: &[usize], reduces: &[usize]) -> Opts {
        let cpu = DeviceInfo {
            target: am_compiler::Target::Cpu,
            compute_units: 2,
        };
        let loads = [vec![true, false], vec![false, true]];
        let shape = Shape {
            out,
            reduces,
            groupable: true,
            matmul: None,
            loads: &loads,
        };
        choose(&cpu, &shape, true)
    }

    #[test]
    fn cpu_matrix_products_take_two_registers_by_4_rows() {
        let lanes = (am_compiler::host_vector_bytes() as usize / 4).max(4);
        // 8 accumulator registers: 2 of the last axis's lanes by 4 rows.
        let o = cpu_choice(&[256, 256], &[64]);
        assert_eq!(o.upcast, vec![(1, 2 * lanes), (0, 4)]);
        // Columns that one register's lanes divide, two's do not: 8 rows, as before.
        let o = cpu_choice(&[256, 9 * lanes], &[64]);
        assert_eq!(o.upcast, vec![(1, lanes), (0, 8)]);
        // No reduction: one register's lanes.
        assert_eq!(cpu_choice(&[256, 256], &[]).upcast, vec![(1, lanes)]);
    }

    #[test]
    fn search_candidates_are_ones_the_generator_supports() {
        let gpu = DeviceInfo {
            target: am_compiler::Target::Gpu(am_compiler::GfxTarget::Gfx1100),
            compute_units: 48,
        };
        let cpu = DeviceInfo {
            target: am_compiler::Target::Cpu,
            compute_units: 2,
        };
        let along = |axis: usize| (0..2).map(|a| a == axis).collect::<Vec<bool>>();
        let loads = [along(0), along(1)];
        for out in [[256usize, 256], [48, 48], [2, 4096]] {
            let shape = Shape {
                out: &out,
                reduces: &[64],
                groupable: true,
                matmul: None,
                loads: &loads,
            };
            for dev in [gpu, cpu] {
                let o = choose(&dev, &shape, true);
                let next = neighbours(&dev, &shape, &o);
                assert!(!next.is_empty() && !next.contains(&o), "{out:?}");
                for c in &next {
                    let lanes: usize = c.upcast.iter().map(|&(_, f)| f).product();
                    assert!(c.upcast.len() <= 2 && lanes <= SEARCH_MAX_LANES, "{c:?}");
                    assert!(c.upcast.iter().all(|&(a, f)| out[a].is_multiple_of(f)));
                    assert!(c.unroll >= 1 && c.mma.is_none());
                    if dev.target.is_gpu() {
                        // The heuristics' work-items, or 1024.
                        let floor = parallelism(&shape, &o).min(MIN_ITEMS);
                        assert!(parallelism(&shape, c) >= floor, "{out:?}: {c:?}");
                    } else {
                        assert!(c.group.is_none(), "the cpu keeps the order of operations");
                    }
                }
            }
        }
        // Matrix tiles: other blocks that divide the output, no fewer than 16 waves.
        let shape = Shape {
            out: &[256, 256],
            reduces: &[256],
            groupable: true,
            matmul: Some((256, DType::F16)),
            loads: &[],
        };
        let o = choose(&gpu, &shape, true);
        assert_eq!(
            o.mma,
            Some(Mma {
                tiles: (8, 2),
                side: 16
            })
        );
        let next = neighbours(&gpu, &shape, &o);
        assert!(!next.is_empty());
        for c in next {
            let (tm, tn) = c.mma.unwrap().tiles;
            assert!(16usize.is_multiple_of(tm) && 16usize.is_multiple_of(tn));
            assert!((256 / 16 / tm) * (256 / 16 / tn) >= MIN_MMA_WAVES, "{c:?}");
        }
    }

    #[test]
    fn shapes_that_do_not_tile_by_16_keep_the_plain_loop() {
        assert_eq!(tiles(&[40, 64], 32), None);
        assert_eq!(tiles(&[64, 40], 32), None);
        assert_eq!(tiles(&[64, 64], 24), None);
        assert_eq!(tiles(&[64], 32), None);
    }
}
