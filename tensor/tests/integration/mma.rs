//! Matrix products on the matrix instructions: f16 and bf16 on `v_wmma` (gfx1100, gfx1201)
//! and `v_mfma` (gfx942), f32 on gfx942's `v_mfma_f32_16x16x4_f32`. Products whose rows,
//! columns and inner dimension tile by 16 — plain, batched, with a transposed operand, fused
//! with a bias — against the `cpu` device (f16 and bf16 bit for bit, f32 within the
//! rounding of another order of sums) and an f64 reference; shapes that do not tile take the
//! plain loop; and the matrix instructions are what the emulator ran (its decoder names
//! them from the code object LLVM produced).

use am_tensor::{DType, Device, Tensor};

use crate::common::{Nd, Rng, compiler, cpu};

/// A product of f16 operands of the given shapes: on a device, and on the host.
type Case = (
    &'static str,
    [Vec<usize>; 2],
    fn(&Tensor, &Tensor) -> Tensor,
    fn(&Nd, &Nd) -> Nd,
);

fn cases() -> Vec<Case> {
    vec![
        (
            "matmul",
            [vec![64, 48], vec![48, 32]],
            |a, b| a.matmul(b).unwrap(),
            mm,
        ),
        (
            "matmul of one tile",
            [vec![16, 16], vec![16, 16]],
            |a, b| a.matmul(b).unwrap(),
            mm,
        ),
        (
            "batched matmul",
            [vec![3, 32, 64], vec![3, 64, 48]],
            |a, b| a.matmul(b).unwrap(),
            mm,
        ),
        // Blocks of 8 × 2 and 4 × 4 tiles per wave (16 waves each).
        (
            "batched matmul of 8 x 2 tiles per wave",
            [vec![4, 128, 32], vec![4, 32, 128]],
            |a, b| a.matmul(b).unwrap(),
            mm,
        ),
        (
            "batched matmul of 4 x 4 tiles per wave",
            [vec![4, 64, 16], vec![4, 16, 256]],
            |a, b| a.matmul(b).unwrap(),
            mm,
        ),
        (
            "batch times one matrix",
            [vec![2, 48, 32], vec![32, 64]],
            |a, b| a.matmul(b).unwrap(),
            mm,
        ),
        (
            "matmul by a transpose",
            [vec![32, 80], vec![48, 80]],
            |a, b| a.matmul(&b.t().unwrap()).unwrap(),
            |a, b| mm(a, &b.permute(&[1, 0])),
        ),
        (
            "transposed left operand",
            [vec![64, 32], vec![64, 16]],
            |a, b| a.t().unwrap().matmul(b).unwrap(),
            |a, b| mm(&a.permute(&[1, 0]), b),
        ),
        (
            "matmul with a bias and relu",
            [vec![128, 32], vec![32, 128]],
            |a, b| a.matmul(b).unwrap().add(1.0).unwrap().relu(),
            |a, b| mm(a, b).map(|x| (x + 1.0).max(0.0)),
        ),
        // These do not tile: the plain loop (the names say so, for `check`).
        (
            "rows not a multiple of 16",
            [vec![40, 32], vec![32, 16]],
            |a, b| a.matmul(b).unwrap(),
            mm,
        ),
        (
            "inner dimension 24",
            [vec![32, 24], vec![24, 32]],
            |a, b| a.matmul(b).unwrap(),
            mm,
        ),
        (
            "a matrix times a vector",
            [vec![32, 48], vec![48]],
            |a, b| a.matmul(b).unwrap(),
            mm,
        ),
    ]
}

/// The operands: f32 values in [-2, 2) cast to `dtype` on the device.
fn operands(dev: &Device, shapes: &[Vec<usize>; 2], seed: u64, dtype: DType) -> (Tensor, Tensor) {
    let mut rng = Rng(seed);
    let mut t = shapes.iter().map(|s| {
        let v = rng.values(s.iter().product(), -2.0, 2.0);
        let t = Tensor::from_slice(&v, s, dev).unwrap();
        if dtype == DType::F32 {
            t
        } else {
            t.cast(dtype)
        }
    });
    let a = t.next().unwrap();
    let b = t.next().unwrap();
    (a, b)
}

/// Whether a case's product tiles by 16.
fn tiles(case: &Case) -> bool {
    !matches!(
        case.0,
        "rows not a multiple of 16" | "inner dimension 24" | "a matrix times a vector"
    )
}

fn run(dev: &Device, case: &Case, seed: u64, dtype: DType) -> Vec<f32> {
    let (a, b) = operands(dev, &case.1, seed, dtype);
    let c = (case.2)(&a, &b);
    assert_eq!(c.dtype(), dtype, "{}", case.0);
    c.to_vec_f32().unwrap()
}

/// The cases the bf16 and f32 products run (fewer than f16's, for time): plain (32 × 48 by
/// 48 × 64 among them), batched, by a transpose, with a bias, and two that do not tile.
fn some_cases() -> Vec<Case> {
    let mut cases = cases();
    cases.retain(|c| {
        matches!(
            c.0,
            "matmul"
                | "batched matmul"
                | "matmul by a transpose"
                | "transposed left operand"
                | "matmul with a bias and relu"
                | "rows not a multiple of 16"
                | "inner dimension 24"
        )
    });
    cases.push((
        "matmul 32 x 48 x 64",
        [vec![32, 48], vec![48, 64]],
        |a, b| a.matmul(b).unwrap(),
        mm,
    ));
    cases
}

/// Every case on `dev` against the `cpu` device: f16 and bf16 bit for bit — both add the
/// exact f32 products in increasing k, one f32 rounding per step (the emulator's documented
/// order of `v_wmma` and `v_mfma`, and the plain loop's), then round once to f16 or bf16.
/// f32 (on CDNA) within twice the bound below: the four `v_mfma_f32_16x16x4_f32` of a step
/// sum k in another order than the plain loop. And against the exact product (f64), within
/// what any order of f32 sums allows: k roundings of at most 2⁻²⁴ of the sum of |products|
/// `s` each, the product's rounding to f16 or bf16 (2⁻¹¹ or 2⁻⁸ of at most `s`; none for
/// f32) and, with a bias, the sum's rounding in the result type (2⁻¹¹, 2⁻⁸ or 2⁻²⁴ of the
/// result; `s` counts the bias too).
/// The products that tile run the matrix instructions (`pattern` among the mnemonics the
/// emulator executed), the others none. `profile:index` is a mock of this test's own, so that
/// no other test's kernels are counted.
fn check(profile: &str, index: u32, pattern: &str, dtype: DType, cases: &[Case]) {
    let (gpu, dev) = own_mock(profile, index);
    let half = match dtype {
        DType::F16 => 2f64.powi(-11),
        DType::BF16 => 2f64.powi(-8),
        _ => 2f64.powi(-24),
    };
    for (i, case) in cases.iter().enumerate() {
        let seed = 37_000 + i as u64;
        let (a, b) = operands(&dev, &case.1, seed, dtype);
        a.realize().unwrap();
        b.realize().unwrap();
        gpu.reset_shader_statistics();
        gpu.set_shader_statistics(true);
        let c = (case.2)(&a, &b);
        c.realize().unwrap();
        gpu.set_shader_statistics(false);
        assert_eq!(c.dtype(), dtype, "{}", case.0);
        let got = c.to_vec_f32().unwrap();
        let want = run(&cpu(), case, seed, dtype);
        let what = format!("{dtype} {} {:?} on {}", case.0, case.1, dev.name());
        let runs = executed(&gpu, pattern);
        if tiles(case) {
            assert!(runs > 0, "{what}: no {pattern} executed");
        } else {
            assert_eq!(runs, 0, "{what}: {pattern} executed");
        }
        assert_eq!(got.len(), want.len(), "{what}: lengths");
        // The exact product of the operands and its sums of |products|, on the host.
        let c = cpu();
        let (a, b) = operands(&c, &case.1, seed, dtype);
        let nd = |t: &Tensor| Nd::from_f32(&t.shape(), &t.to_vec_f32().unwrap());
        let (a, b) = (nd(&a), nd(&b));
        let exact = (case.3)(&a, &b);
        let mag = (case.3)(&a.map(f64::abs), &b.map(f64::abs));
        // At least the inner dimension.
        let k = case.1.iter().flatten().max().copied().unwrap_or(1);
        let tol = |e: f64, s: f64| {
            let product = if dtype == DType::F32 { 0.0 } else { s * half };
            e.abs() * half + product + k as f64 * s * 2f64.powi(-24)
        };
        for (j, (g, w)) in got.iter().zip(&want).enumerate() {
            if dtype == DType::F32 {
                let t = 2.0 * tol(exact.data[j], mag.data[j]);
                assert!(
                    (f64::from(*g) - f64::from(*w)).abs() <= t,
                    "{what}: element {j}: {g} against {w} (tolerance {t})"
                );
            } else {
                assert_eq!(
                    g.to_bits(),
                    w.to_bits(),
                    "{what}: element {j}: {g} against {w}"
                );
            }
        }
        for (j, (g, (e, s))) in got.iter().zip(exact.data.iter().zip(&mag.data)).enumerate() {
            let t = tol(*e, *s);
            assert!(
                (f64::from(*g) - e).abs() <= t,
                "{what}: element {j}: {g} against exact {e} (tolerance {t})"
            );
        }
    }
}

/// `a · b` of host arrays: `[m, k]` or `[batch, m, k]` by `[k, n]`, `[batch, k, n]` or `[k]`.
fn mm(a: &Nd, b: &Nd) -> Nd {
    let (batch, m, k) = match a.shape[..] {
        [m, k] => (1, m, k),
        [bt, m, k] => (bt, m, k),
        _ => panic!("operand shape {:?}", a.shape),
    };
    let n = if b.shape.len() == 1 {
        1
    } else {
        b.shape[b.shape.len() - 1]
    };
    let b_batch = if b.shape.len() == 3 { k * n } else { 0 };
    let mut out = Vec::with_capacity(batch * m * n);
    for bt in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let s = (0..k)
                    .map(|p| a.data[(bt * m + i) * k + p] * b.data[bt * b_batch + p * n + j])
                    .sum();
                out.push(s);
            }
        }
    }
    let mut shape = a.shape[..a.shape.len() - 1].to_vec();
    if b.shape.len() > 1 {
        shape.push(n);
    }
    Nd::new(&shape, out)
}

#[test]
fn f16_matmuls_on_wmma_give_the_cpu_bits_on_gfx1100() {
    check(
        "navi31",
        37,
        "v_wmma_f32_16x16x16_f16",
        DType::F16,
        &cases(),
    );
}

#[test]
fn f16_matmuls_on_wmma_give_the_cpu_bits_on_gfx1201() {
    check(
        "navi48",
        37,
        "v_wmma_f32_16x16x16_f16",
        DType::F16,
        &cases(),
    );
}

#[test]
fn f16_matmuls_on_mfma_give_the_cpu_bits_on_gfx942() {
    check(
        "mi300x",
        37,
        "v_mfma_f32_16x16x16_f16",
        DType::F16,
        &cases(),
    );
}

#[test]
fn bf16_matmuls_on_wmma_give_the_cpu_bits_on_gfx1100() {
    check(
        "navi31",
        39,
        "v_wmma_f32_16x16x16_bf16",
        DType::BF16,
        &some_cases(),
    );
}

#[test]
fn bf16_matmuls_on_wmma_give_the_cpu_bits_on_gfx1201() {
    check(
        "navi48",
        39,
        "v_wmma_f32_16x16x16_bf16",
        DType::BF16,
        &some_cases(),
    );
}

#[test]
fn bf16_matmuls_on_mfma_give_the_cpu_bits_on_gfx942() {
    check(
        "mi300x",
        39,
        "v_mfma_f32_16x16x16_bf16",
        DType::BF16,
        &some_cases(),
    );
}

/// f32 products on gfx942 run `v_mfma_f32_32x32x2_f32` or `v_mfma_f32_16x16x4_f32`, within
/// the bound of the cpu's.
#[test]
fn f32_matmuls_on_mfma_match_the_cpu_on_gfx942() {
    check("mi300x", 40, "v_mfma_f32_", DType::F32, &some_cases());
}

/// gfx950 (the MI350X VF) runs the same MFMAs: bf16 products give the cpu's bits, f32 ones
/// are within the bound (fewer cases: the instructions are gfx942's).
#[test]
fn bf16_and_f32_matmuls_on_mfma_on_gfx950() {
    let mut cases = some_cases();
    cases.retain(|c| matches!(c.0, "matmul" | "matmul 32 x 48 x 64" | "inner dimension 24"));
    check(
        "mi350x-vf",
        39,
        "v_mfma_f32_16x16x16_bf16",
        DType::BF16,
        &cases,
    );
    check("mi350x-vf", 40, "v_mfma_f32_", DType::F32, &cases);
}

/// An f32 product whose rows and columns are multiples of 32 takes 32×32 tiles, one
/// `v_mfma_f32_32x32x2_f32` per tile and 2 along k (64 × 64 by k = 32: 4 tiles × 16); one
/// with 48 columns 16×16 tiles, one `v_mfma_f32_16x16x4_f32` per tile and 4 along k
/// (64 × 48: 12 tiles × 8).
#[test]
fn f32_matmuls_take_32_by_32_tiles_where_they_fit_on_gfx942() {
    let (gpu, dev) = own_mock("mi300x", 41);
    for (n, wide, narrow) in [(64, 64, 0), (48, 0, 96)] {
        product_counted(&gpu, &dev, &[vec![64, 32], vec![32, n]], 11, DType::F32);
        assert_eq!(
            executed(&gpu, "v_mfma_f32_32x32x2_f32"),
            wide,
            "64 x 32 x {n}"
        );
        assert_eq!(
            executed(&gpu, "v_mfma_f32_16x16x4_f32"),
            narrow,
            "64 x 32 x {n}"
        );
    }
}

/// gfx11 and gfx12 have no f32 matrix instruction: an f32 product stays on the FMA loop.
#[test]
fn f32_matmuls_take_no_matrix_instruction_on_gfx1100() {
    let (gpu, dev) = own_mock("navi31", 41);
    product_counted(&gpu, &dev, &[vec![32, 48], vec![48, 64]], 9, DType::F32);
    assert_eq!(executed(&gpu, "v_wmma"), 0);
    assert!(executed(&gpu, "fma") > 0);
}

/// A mock device of one test's own (index `index` of `profile`) and its tensor device.
fn own_mock(profile: &str, index: u32) -> (am_mock::MockGpu, Device) {
    am_mock::register();
    let gpu = am_mock::gpu(profile, index).unwrap();
    let dev = Device::open_with(&format!("mock:{profile}:{index}"), compiler()).unwrap();
    (gpu, dev)
}

/// Realizes the product of operands of `shapes` (seed `seed`, type `dtype`) on `dev`, with
/// `gpu`'s shader statistics counting only the product's dispatches.
fn product_counted(
    gpu: &am_mock::MockGpu,
    dev: &Device,
    shapes: &[Vec<usize>; 2],
    seed: u64,
    dtype: DType,
) {
    let (a, b) = operands(dev, shapes, seed, dtype);
    a.realize().unwrap();
    b.realize().unwrap();
    gpu.reset_shader_statistics();
    gpu.set_shader_statistics(true);
    a.matmul(&b).unwrap().realize().unwrap();
    gpu.set_shader_statistics(false);
}

/// Wave-instructions the counted dispatches executed of mnemonics containing `pattern`.
fn executed(gpu: &am_mock::MockGpu, pattern: &str) -> u64 {
    gpu.shader_statistics()
        .histogram
        .mnemonics
        .iter()
        .filter(|(name, _)| name.contains(pattern))
        .map(|(_, count)| count)
        .sum()
}

/// One `v_wmma_f32_16x16x16_f16` per tile and step of 16 along k: a 64 × 64 output with
/// k = 32 is 16 tiles × 2 steps.
#[test]
fn an_f16_matmul_runs_one_wmma_per_tile_and_step_of_k() {
    let (gpu, dev) = own_mock("navi31", 38);
    product_counted(&gpu, &dev, &[vec![64, 32], vec![32, 64]], 7, DType::F16);
    assert_eq!(executed(&gpu, "v_wmma_f32_16x16x16_f16"), 32);
}
