//! Kernel shapes on the emulated gfx1100 and the CPU: the LDS reduction, the tiled matmul
//! (and its wave-instructions per output against the naive loop), launch choices; and the
//! property test: random elementwise and reduction kernels give the same results on the CPU
//! backend, on the emulated GPU and by direct evaluation.

use crate::common;
use am_compiler::shapes::*;
use am_compiler::*;
use common::*;
use proptest::prelude::*;

#[test]
fn lds_reduction_sums_each_workgroup() {
    let k = reduce_sum(256);
    let n = 256 * 3 + 100;
    let x: Vec<f32> = (0..n).map(|i| ((i * 37) % 101) as f32 - 50.0).collect();
    let groups = (n as u32).div_ceil(256);
    let out = run_both(
        &k,
        [groups, 1, 1],
        &[buf(&x), zeros(4 * groups as usize), scalar(n as u32)],
    );
    let o: Vec<f32> = from_bytes(&out[1]);
    for g in 0..groups as usize {
        // Small integers: every order of summation is exact.
        let want: f32 = x[g * 256..((g + 1) * 256).min(n)].iter().sum();
        assert_eq!(o[g], want, "workgroup {g}");
    }
}

#[test]
fn tiled_matmul_equals_naive_and_reference() {
    let (t, n) = (8u32, 32usize);
    let mut r = Rng(17);
    let a: Vec<f32> = (0..n * n).map(|_| r.f32(-1.0, 1.0)).collect();
    let b: Vec<f32> = (0..n * n).map(|_| r.f32(-1.0, 1.0)).collect();
    let groups = [n as u32 / t, n as u32 / t, 1];
    let args = [buf(&a), buf(&b), zeros(4 * n * n), scalar(n as u32)];
    let mut want = vec![0f32; n * n];
    for i in 0..n {
        for j in 0..n {
            let mut s = 0f32;
            for k in 0..n {
                s = a[i * n + k].mul_add(b[k * n + j], s);
            }
            want[i * n + j] = s;
        }
    }
    let mut counts = vec![];
    for k in [matmul_tiled(t), matmul_naive(t)] {
        let c = compiler()
            .compile(&k, Target::Gpu(GfxTarget::Gfx1100))
            .unwrap();
        let (out, instructions) = run_code_object(&c.bytes, &k, groups, &args);
        let got: Vec<f32> = from_bytes(&out[2]);
        assert_eq!(got, want, "{} on the emulated gfx1100", k.name);
        let cpu: Vec<f32> = from_bytes(&run_cpu(&k, groups, &args)[2]);
        assert_eq!(cpu, want, "{} on the cpu", k.name);
        counts.push(instructions);
    }
    // Not a speed assertion: the instruction counts are printed for docs/BENCHMARKS.md by
    // `am bench compile`; here only that both ran.
    assert!(counts.iter().all(|&c| c > 0));
}

#[test]
fn launch_sizes_follow_wave_size_and_compute_units() {
    let navi = DeviceInfo {
        target: Target::Gpu(GfxTarget::Gfx1100),
        compute_units: 96,
    };
    let mi300 = DeviceInfo {
        target: Target::Gpu(GfxTarget::Gfx942),
        compute_units: 304,
    };
    assert_eq!(launch_1d(1 << 20, &navi), (256, 4096));
    assert_eq!(
        launch_1d(1000, &navi),
        (32, 32),
        "small n: one wave per CU first"
    );
    assert_eq!(launch_1d(1000, &mi300), (64, 16), "wave64 minimum");
    assert_eq!(launch_1d(1 << 20, &mi300), (256, 4096));
    let cpu = DeviceInfo {
        target: Target::Cpu,
        compute_units: 2,
    };
    assert_eq!(launch_1d(100, &cpu), (50, 2));
    assert_eq!(launch_1d(1 << 20, &cpu), (64, 16384));
}

/// A random expression over two f32 inputs and i32 data, from ops that are exact on every
/// backend (no transcendental functions).
#[derive(Clone, Debug)]
enum E {
    A,
    B,
    C(f32),
    Bin(u8, Box<E>, Box<E>),
    Un(u8, Box<E>),
    Where(Box<E>, Box<E>, Box<E>),
}

fn expr() -> impl Strategy<Value = E> {
    let leaf = prop_oneof![
        Just(E::A),
        Just(E::B),
        (-8i32..8).prop_map(|c| E::C(c as f32 * 0.75))
    ];
    leaf.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            (0u8..6, inner.clone(), inner.clone()).prop_map(|(o, x, y)| E::Bin(
                o,
                Box::new(x),
                Box::new(y)
            )),
            (0u8..4, inner.clone()).prop_map(|(o, x)| E::Un(o, Box::new(x))),
            (inner.clone(), inner.clone(), inner).prop_map(|(c, x, y)| E::Where(
                Box::new(c),
                Box::new(x),
                Box::new(y)
            )),
        ]
    })
}

const BINS: [BinOp; 6] = [
    BinOp::Add,
    BinOp::Sub,
    BinOp::Mul,
    BinOp::Div,
    BinOp::Min,
    BinOp::Max,
];
const UNS: [UnOp; 4] = [UnOp::Neg, UnOp::Abs, UnOp::Sqrt, UnOp::Trunc];

fn build(b: &mut KernelBuilder, e: &E, a: Value, bv: Value) -> Value {
    match e {
        E::A => a,
        E::B => bv,
        E::C(c) => b.const_f32(*c),
        E::Bin(o, x, y) => {
            let (x, y) = (build(b, x, a, bv), build(b, y, a, bv));
            b.binary(BINS[*o as usize], x, y)
        }
        E::Un(o, x) => {
            let x = build(b, x, a, bv);
            b.unary(UNS[*o as usize], x)
        }
        E::Where(c, x, y) => {
            let c = build(b, c, a, bv);
            let z = b.const_f32(0.0);
            let c = b.cmp(CmpOp::Gt, c, z);
            let (x, y) = (build(b, x, a, bv), build(b, y, a, bv));
            b.where_(c, x, y)
        }
    }
}

fn eval(e: &E, a: f32, b: f32) -> f32 {
    match e {
        E::A => a,
        E::B => b,
        E::C(c) => *c,
        E::Bin(o, x, y) => {
            let (x, y) = (eval(x, a, b), eval(y, a, b));
            match o {
                0 => x + y,
                1 => x - y,
                2 => x * y,
                3 => x / y,
                4 | 5 => {
                    let max = *o == 5;
                    if x.is_nan() {
                        y
                    } else if y.is_nan() {
                        x
                    } else if x == y {
                        if x.is_sign_negative() != max { x } else { y }
                    } else if (x < y) != max {
                        x
                    } else {
                        y
                    }
                }
                _ => unreachable!(),
            }
        }
        E::Un(o, x) => {
            let x = eval(x, a, b);
            [-x, x.abs(), x.sqrt(), x.trunc()][*o as usize]
        }
        E::Where(c, x, y) => {
            if eval(c, a, b) > 0.0 {
                eval(x, a, b)
            } else {
                eval(y, a, b)
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// out[i] = e(a[i], b[i]) and sums[g] = Σ e over workgroup g (through LDS): CPU backend
    /// = emulated gfx1100 = direct evaluation (the sums: CPU = GPU, and = the reference for
    /// integer-valued data, where every order of addition is exact).
    #[test]
    fn random_elementwise_and_reduction_kernels_agree(e in expr(), seed in any::<u64>()) {
        let wg = 64u32;
        let mut b = KernelBuilder::new("prop", [wg, 1, 1]);
        let pa = b.param_ptr("a", DType::F32, true);
        let pb = b.param_ptr("b", DType::F32, true);
        let po = b.param_ptr("o", DType::F32, true);
        let ps = b.param_ptr("s", DType::F32, true);
        let lds = b.local(DType::F32, wg);
        let i = b.global_id(Dim::X);
        let l = b.local_id(Dim::X);
        let x = b.load_elem(pa, i);
        let y = b.load_elem(pb, i);
        let r = build(&mut b, &e, x, y);
        b.store_elem(po, i, r);
        // Sums of the integer part only (finite, small): exact in any order.
        let t = b.unary(UnOp::Trunc, r);
        let big = b.const_f32(1000.0);
        let ok = b.cmp(CmpOp::Lt, t, big);
        let nbig = b.const_f32(-1000.0);
        let ok2 = b.cmp(CmpOp::Gt, t, nbig);
        let ok = b.binary(BinOp::And, ok, ok2);
        let zero = b.const_f32(0.0);
        let t = b.where_(ok, t, zero);
        b.store_elem(lds, l, t);
        b.barrier();
        let mut s = wg / 2;
        while s >= 1 {
            let sv = b.const_u32(s);
            let act = b.cmp(CmpOp::Lt, l, sv);
            b.if_(act, |b| {
                let o = b.add(l, sv);
                let p = b.load_elem(lds, l);
                let q = b.load_elem(lds, o);
                let u = b.add(p, q);
                b.store_elem(lds, l, u);
            });
            b.barrier();
            s /= 2;
        }
        let z = b.const_u32(0);
        let first = b.cmp(CmpOp::Eq, l, z);
        b.if_(first, |b| {
            let g = b.group_id(Dim::X);
            let v = b.load_elem(lds, z);
            b.store_elem(ps, g, v);
        });
        let k = b.finish().unwrap();
        let groups = 2u32;
        let n = (groups * wg) as usize;
        let mut rng = Rng(seed | 1);
        let a: Vec<f32> = (0..n).map(|_| (rng.f32(-6.0, 6.0) * 4.0).round() / 4.0).collect();
        let bv: Vec<f32> = (0..n).map(|_| rng.f32(-6.0, 6.0)).collect();
        let args = [buf(&a), buf(&bv), zeros(4 * n), zeros(4 * groups as usize)];
        let gpu = run_gpu(&k, [groups, 1, 1], &args);
        let cpu = run_cpu(&k, [groups, 1, 1], &args);
        let (go, co): (Vec<f32>, Vec<f32>) = (from_bytes(&gpu[2]), from_bytes(&cpu[2]));
        for j in 0..n {
            let w = eval(&e, a[j], bv[j]);
            prop_assert!(go[j].to_bits() == w.to_bits() || (go[j].is_nan() && w.is_nan()), "gpu {} want {w} at {j} for {e:?}", go[j]);
            prop_assert!(co[j].to_bits() == w.to_bits() || (co[j].is_nan() && w.is_nan()), "cpu {} want {w} at {j} for {e:?}", co[j]);
        }
        let (gs, cs): (Vec<f32>, Vec<f32>) = (from_bytes(&gpu[3]), from_bytes(&cpu[3]));
        for g in 0..groups as usize {
            let want: f32 = (0..wg as usize).map(|l| {
                let t = eval(&e, a[g * wg as usize + l], bv[g * wg as usize + l]).trunc();
                if t < 1000.0 && t > -1000.0 { t } else { 0.0 }
            }).sum();
            prop_assert_eq!(gs[g], want, "gpu sum of group {}", g);
            prop_assert_eq!(cs[g], want, "cpu sum of group {}", g);
        }
    }
}
