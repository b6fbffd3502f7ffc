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
//! with AVX, 4 with SSE or NEON), plus a two-kernel full reduction ([`split_cpu`]) whose
//! order depends only on the number of elements and the vector width. Everything is off when a device's
//! optimiser is switched off ([`crate::Device::set_optimize`]).

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
/// (4 where that does not divide it) and, when reducing, 8 (or 4) along the axis whose loads
/// the first axis's lanes share most, as on GPUs: a matrix product's work-item keeps 8 rows
/// × 8 columns in 8 AVX registers, one vector load of B and 8 broadcasts of A per step.
fn choose_cpu(shape: &Shape<'_>) -> Opts {
    let lanes = (am_compiler::host_vector_bytes() as usize / 4).max(4);
    let mut upcast = Vec::new();
    let mut items: usize = shape.out.iter().product();
    let fits = |d: usize, f: usize, items: usize| {
        d > 1 && d.is_multiple_of(f) && items / f >= CPU_MIN_ITEMS
    };
    if let Some((a, &d)) = shape.out.iter().enumerate().rev().find(|(_, d)| **d != 1)
        && let Some(f) = [lanes, 4].into_iter().find(|&f| fits(d, f, items))
    {
        upcast.push((a, f));
        items /= f;
    }
    if let Some(a) = second_axis(shape, &upcast, |d| fits(d, 4, items)) {
        let f = if fits(shape.out[a], 8, items) { 8 } else { 4 };
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

    #[test]
    fn shapes_that_do_not_tile_by_16_keep_the_plain_loop() {
        assert_eq!(tiles(&[40, 64], 32), None);
        assert_eq!(tiles(&[64, 40], 32), None);
        assert_eq!(tiles(&[64, 64], 24), None);
        assert_eq!(tiles(&[64], 32), None);
    }
}
