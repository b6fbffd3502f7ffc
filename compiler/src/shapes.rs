//! Kernel shapes that matter on these GPUs, built with the IR: elementwise kernels with
//! launch sizes chosen per device, workgroup reductions through local memory (LDS), and
//! matrix multiplication tiled through local memory (with the naive loop to compare).

use crate::Target;
use crate::builder::KernelBuilder;
use crate::ir::*;

/// What launch choices depend on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The target (its wave size).
    pub target: Target,
    /// Compute units (CPU: cores).
    pub compute_units: u32,
}

/// Workgroup size and workgroup count for `n` independent work-items on `dev`: whole waves
/// of up to 256 work-items (four waves of 64 or eight of 32, enough to hide memory latency on
/// a CU); for small `n`, smaller workgroups so that every CU gets one before any gets two; on
/// the CPU, 64 work-items per call chain and at least one workgroup per core.
pub fn launch_1d(n: u64, dev: &DeviceInfo) -> (u32, u32) {
    let n = n.max(1);
    let cus = u64::from(dev.compute_units.max(1));
    let wave = u64::from(dev.target.wave_size());
    let wg = if dev.target.is_gpu() {
        let per_cu = n.div_ceil(cus).next_multiple_of(wave);
        per_cu.clamp(wave, 256)
    } else {
        n.div_ceil(cus).clamp(1, 64)
    };
    let groups = n.div_ceil(wg);
    (wg as u32, u32::try_from(groups).unwrap_or(u32::MAX))
}

/// `c[i] = a[i] + b[i]` for `i < n` (`a, b, c: ptr<global, dtype>`, `n: u32`).
pub fn elementwise_add(dtype: DType, workgroup: u32) -> Kernel {
    let mut b = KernelBuilder::new("add", [workgroup, 1, 1]);
    let pa = b.param_ptr("a", dtype, true);
    let pb = b.param_ptr("b", dtype, true);
    let pc = b.param_ptr("c", dtype, true);
    let n = b.param("n", DType::U32);
    let i = b.global_id(Dim::X);
    let inside = b.cmp(CmpOp::Lt, i, n);
    b.if_(inside, |b| {
        let x = b.load_elem(pa, i);
        let y = b.load_elem(pb, i);
        let s = b.add(x, y);
        b.store_elem(pc, i, s);
    });
    finish(b)
}

fn finish(b: KernelBuilder) -> Kernel {
    // The shapes are fixed programs that the tests verify; should one be invalid, the
    // compiler's verifier reports it again when it is compiled.
    let k = b.finish_unverified();
    if let Err(e) = crate::verify::verify(&k) {
        tracing::error!("shape kernel is invalid: {e}");
    }
    k
}

/// `out[g] = Σ x[g·W + l]` over the `W` (a power of two) work-items of each workgroup `g`,
/// missing elements (`≥ n`) counting 0: each work-item puts its element in local memory,
/// then `log2 W` halving steps with a barrier after each.
pub fn reduce_sum(workgroup: u32) -> Kernel {
    let w = workgroup.next_power_of_two();
    let mut b = KernelBuilder::new("reduce_sum", [w, 1, 1]);
    let px = b.param_ptr("x", DType::F32, true);
    let po = b.param_ptr("out", DType::F32, true);
    let n = b.param("n", DType::U32);
    let lds = b.local(DType::F32, w);
    let l = b.local_id(Dim::X);
    let i = b.global_id(Dim::X);
    let zero = b.const_f32(0.0);
    b.store_elem(lds, l, zero);
    let inside = b.cmp(CmpOp::Lt, i, n);
    b.if_(inside, |b| {
        let x = b.load_elem(px, i);
        b.store_elem(lds, l, x);
    });
    b.barrier();
    let mut s = w / 2;
    while s >= 1 {
        let sv = b.const_u32(s);
        let active = b.cmp(CmpOp::Lt, l, sv);
        b.if_(active, |b| {
            let other = b.add(l, sv);
            let x = b.load_elem(lds, l);
            let y = b.load_elem(lds, other);
            let t = b.add(x, y);
            b.store_elem(lds, l, t);
        });
        b.barrier();
        s /= 2;
    }
    let z = b.const_u32(0);
    let first = b.cmp(CmpOp::Eq, l, z);
    b.if_(first, |b| {
        let g = b.group_id(Dim::X);
        let r = b.load_elem(lds, z);
        b.store_elem(po, g, r);
    });
    finish(b)
}

/// Shared start of the two matmuls: parameters, row and column of this work-item, and a
/// private accumulator set to 0.
fn matmul_start(name: &str, t: u32) -> (KernelBuilder, [Value; 4], Value, Value, Value) {
    let mut b = KernelBuilder::new(name, [t, t, 1]);
    let pa = b.param_ptr("a", DType::F32, true);
    let pb = b.param_ptr("b", DType::F32, true);
    let pc = b.param_ptr("c", DType::F32, true);
    let n = b.param("n", DType::U32);
    let acc = b.private(DType::F32, 1);
    let row = b.global_id(Dim::Y);
    let col = b.global_id(Dim::X);
    let z = b.const_u32(0);
    let zero = b.const_f32(0.0);
    b.store_elem(acc, z, zero);
    (b, [pa, pb, pc, n], acc, row, col)
}

fn matmul_end(
    mut b: KernelBuilder,
    pc: Value,
    n: Value,
    acc: Value,
    row: Value,
    col: Value,
) -> Kernel {
    let z = b.const_u32(0);
    let r = b.load_elem(acc, z);
    let rn = b.mul(row, n);
    let at = b.add(rn, col);
    b.store_elem(pc, at, r);
    finish(b)
}

/// `c = a · b` for `n × n` row-major f32 matrices, `n` a multiple of `t`: one work-item per
/// output in `t × t` workgroups that stage `t × t` tiles of `a` and `b` in local memory, so
/// each global element is read `n / t` times instead of `n`. Sums are fused multiply-adds
/// in increasing `k`, as in [`matmul_naive`], so the two give identical results.
pub fn matmul_tiled(t: u32) -> Kernel {
    let (mut b, [pa, pb, pc, n], acc, row, col) = matmul_start("matmul_tiled", t);
    let ta = b.local(DType::F32, t * t);
    let tb = b.local(DType::F32, t * t);
    let lx = b.local_id(Dim::X);
    let ly = b.local_id(Dim::Y);
    let tv = b.const_u32(t);
    let z = b.const_u32(0);
    let lyt = b.mul(ly, tv);
    let slot = b.add(lyt, lx);
    let rn = b.mul(row, n);
    b.range(z, n, t, |b, k0| {
        let ka = b.add(k0, lx);
        let ia = b.add(rn, ka);
        let va = b.load_elem(pa, ia);
        b.store_elem(ta, slot, va);
        let kb = b.add(k0, ly);
        let kbn = b.mul(kb, n);
        let ib = b.add(kbn, col);
        let vb = b.load_elem(pb, ib);
        b.store_elem(tb, slot, vb);
        b.barrier();
        b.range(z, tv, 1, |b, kk| {
            let ja = b.add(lyt, kk);
            let kkt = b.mul(kk, tv);
            let jb = b.add(kkt, lx);
            let x = b.load_elem(ta, ja);
            let y = b.load_elem(tb, jb);
            let s = b.load_elem(acc, z);
            let f = b.fma(x, y, s);
            b.store_elem(acc, z, f);
        });
        b.barrier();
    });
    matmul_end(b, pc, n, acc, row, col)
}

/// The naive loop: `c[row][col] = Σ_k a[row][k] · b[k][col]` read straight from global memory.
pub fn matmul_naive(t: u32) -> Kernel {
    let (mut b, [pa, pb, pc, n], acc, row, col) = matmul_start("matmul_naive", t);
    let z = b.const_u32(0);
    let rn = b.mul(row, n);
    b.range(z, n, 1, |b, k| {
        let ia = b.add(rn, k);
        let kn = b.mul(k, n);
        let ib = b.add(kn, col);
        let x = b.load_elem(pa, ia);
        let y = b.load_elem(pb, ib);
        let s = b.load_elem(acc, z);
        let f = b.fma(x, y, s);
        b.store_elem(acc, z, f);
    });
    matmul_end(b, pc, n, acc, row, col)
}
