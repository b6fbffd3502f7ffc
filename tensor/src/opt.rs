//! The kernel optimiser's choices: how a kernel of the schedule maps onto work-items, from
//! per-target heuristics (no search yet).
//!
//! - **Upcast**: a work-item computes a small tile of outputs (up to 4 along each of up to
//!   two output axes). Loads shared by the tile are made once, contiguous loads and stores
//!   along the last axis become one vector access, and a reduction loop's overhead is paid
//!   once for the tile.
//! - **Unroll**: the innermost loop of a reduction runs 4 steps per iteration; contiguous
//!   loads along it become one vector access. The steps still accumulate in order, so the
//!   results are those of the plain loop.
//! - **Group**: a reduction to fewer outputs than a wave has lanes gets a workgroup per
//!   output; its work-items each reduce a strided slice, and the partial results combine
//!   through local memory (LDS) in a tree.
//!
//! Everything is off on the CPU (the `cpu` device is the reference the GPU kernels are
//! checked against) and when a device's optimiser is switched off
//! ([`crate::Device::set_optimize`]).

use am_compiler::shapes::DeviceInfo;

/// What the code generator does with one kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Opts {
    /// Output axes computed several at a time by one work-item, as (axis, factor); each
    /// factor divides its axis.
    pub(crate) upcast: Vec<(usize, usize)>,
    /// Steps per iteration of a reduction's innermost loop (1: plain).
    pub(crate) unroll: usize,
    /// Work-items per workgroup of a grouped reduction (one workgroup per output).
    pub(crate) group: Option<u32>,
}

/// What the heuristics look at: the kernel's output shape and its reductions.
pub(crate) struct Shape<'a> {
    /// The output shape.
    pub(crate) out: &'a [usize],
    /// Elements reduced per output by each reduction outside any loop.
    pub(crate) reduces: &'a [usize],
    /// Whether every such reduction can be grouped (its accumulator is f32 or i32).
    pub(crate) groupable: bool,
}

/// Work-items below which upcasting would leave a GPU's compute units idle.
const MIN_ITEMS: usize = 1024;

/// The choices for a kernel of `shape` on `dev`, or none when `enabled` is false.
pub(crate) fn choose(dev: &DeviceInfo, shape: &Shape<'_>, enabled: bool) -> Opts {
    let plain = Opts {
        upcast: vec![],
        unroll: 1,
        group: None,
    };
    if !enabled || !dev.target.is_gpu() {
        return plain;
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
    // The last axes first (the last one gives vector accesses); two axes when reducing (a
    // tile whose loads are shared along both), one when not.
    let axes = if shape.reduces.is_empty() { 1 } else { 2 };
    for (a, &d) in shape.out.iter().enumerate().rev() {
        if upcast.len() == axes {
            break;
        }
        if d == 1 {
            continue;
        }
        if d % 4 != 0 || items / 4 < MIN_ITEMS {
            break;
        }
        upcast.push((a, 4));
        items /= 4;
    }
    Opts {
        upcast,
        unroll: 4,
        group: None,
    }
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
