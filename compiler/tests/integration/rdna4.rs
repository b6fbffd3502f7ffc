//! The RDNA4 targets (gfx1200, gfx1201): kernels compiled for them run on the emulator and
//! give byte for byte what the CPU backend gives.

use crate::common;
use am_compiler::*;
use common::*;

const RDNA4: [Target; 2] = [
    Target::Gpu(GfxTarget::Gfx1200),
    Target::Gpu(GfxTarget::Gfx1201),
];

#[test]
fn rdna4_targets_are_wave32_and_parse_by_name() {
    for t in RDNA4 {
        assert_eq!(t.wave_size(), 32, "{t}");
        assert_eq!(t.name().parse::<Target>().unwrap(), t);
        assert!(t.is_gpu());
    }
}

/// Group ids come from gfx12's architected SGPRs (TTMP9, TTMP7), local ids from v0.
#[test]
fn rdna4_work_item_and_group_ids_in_three_dimensions_match_the_cpu() {
    let wg = [4u32, 2, 2];
    let groups = [3u32, 2, 3];
    let k = ids_kernel(wg, groups);
    let total = (0..3).map(|d| wg[d] * groups[d]).product::<u32>() as usize;
    let args = [zeros(4 * 6 * total)];
    let want = run_cpu(&k, groups, &args);
    for t in RDNA4 {
        let got = run_gpu_on(t, &k, groups, &args);
        assert!(got == want, "{t}: ids differ from the cpu");
    }
}

/// f32 arithmetic with a division, square root and fused multiply-add, a loop over private
/// memory and divergent branches.
#[test]
fn rdna4_float_math_loops_and_branches_match_the_cpu() {
    let mut b = KernelBuilder::new("mix", [64, 1, 1]);
    let pa = b.param_ptr("a", DType::F32, true);
    let pb = b.param_ptr("b", DType::F32, true);
    let po = b.param_ptr("o", DType::F32, true);
    let m = b.param("m", DType::U32);
    let acc = b.private(DType::F32, 1);
    let i = b.global_id(Dim::X);
    let zero = b.const_u32(0);
    let fzero = b.const_f32(0.0);
    b.store_elem(acc, zero, fzero);
    let x = b.load_elem(pa, i);
    let y = b.load_elem(pb, i);
    b.range(zero, m, 1, |b, _| {
        let s = b.load_elem(acc, zero);
        let q = b.binary(BinOp::Div, x, y);
        let t = b.fma(q, x, s);
        b.store_elem(acc, zero, t);
    });
    let s = b.load_elem(acc, zero);
    let r = b.unary(UnOp::Sqrt, y);
    let big = b.cmp(CmpOp::Gt, x, y);
    let v = b.where_(big, s, r);
    b.store_elem(po, i, v);
    let k = b.finish().unwrap();
    let n = 256usize;
    let mut rng = Rng(12);
    let a: Vec<f32> = (0..n).map(|_| rng.f32(-10.0, 10.0)).collect();
    let bb: Vec<f32> = (0..n).map(|_| rng.f32(0.1, 10.0)).collect();
    let args = [buf(&a), buf(&bb), zeros(4 * n), scalar(5u32)];
    let want = run_cpu(&k, [4, 1, 1], &args);
    for t in RDNA4 {
        let got = run_gpu_on(t, &k, [4, 1, 1], &args);
        assert!(got == want, "{t}: results differ from the cpu");
    }
}
