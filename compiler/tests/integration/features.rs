//! Every IR feature runs exactly on the CPU backend and on the emulated gfx1100 (the mock
//! navi31's shader path) against a Rust reference: the two backends must agree byte for byte,
//! and both with the reference (transcendental functions within a stated bound).

use crate::common;
use am_compiler::float::*;
use am_compiler::*;
use common::*;

const WG: u32 = 64;

type F<'a> = &'a dyn Fn(&mut KernelBuilder, Value, Value) -> Value;

/// `outs[k][i] = f_k(a[i], b[i])` for i < n, one kernel.
fn multi(name: &str, din: DType, outs: &[(DType, F)]) -> Kernel {
    let mut b = KernelBuilder::new(name, [WG, 1, 1]);
    let pa = b.param_ptr("a", din, true);
    let pb = b.param_ptr("b", din, true);
    let po: Vec<Value> = (0..outs.len())
        .map(|k| b.param_ptr(&format!("o{k}"), outs[k].0, true))
        .collect();
    let n = b.param("n", DType::U32);
    let i = b.global_id(Dim::X);
    let c = b.cmp(CmpOp::Lt, i, n);
    b.if_(c, |b| {
        let x = b.load_elem(pa, i);
        let y = b.load_elem(pb, i);
        for (k, (_, f)) in outs.iter().enumerate() {
            let r = f(b, x, y);
            b.store_elem(po[k], i, r);
        }
    });
    b.finish().unwrap()
}

/// Runs a [`multi`] kernel on both backends; returns the outputs (of the GPU, after checking
/// that the CPU's are the same, NaN results being equal whatever their bits).
fn run_multi(k: &Kernel, a: Vec<u8>, b: Vec<u8>, n: usize, outs: &[DType]) -> Vec<Vec<u8>> {
    let mut args = vec![Arg::Buf(a), Arg::Buf(b)];
    args.extend(outs.iter().map(|d| zeros(d.bytes() as usize * n)));
    args.push(scalar(n as u32));
    let groups = [(n as u32).div_ceil(WG), 1, 1];
    let g = run_gpu(k, groups, &args)[2..].to_vec();
    let c = run_cpu(k, groups, &args)[2..].to_vec();
    for (o, d) in outs.iter().enumerate() {
        let w = d.bytes() as usize;
        for i in 0..n {
            let (x, y) = (&g[o][i * w..(i + 1) * w], &c[o][i * w..(i + 1) * w]);
            let nan = |b: &[u8]| match d.scalar {
                Scalar::F16 => f16_to_f32(u16::from_le_bytes([b[0], b[1]])).is_nan(),
                Scalar::BF16 => bf16_to_f32(u16::from_le_bytes([b[0], b[1]])).is_nan(),
                Scalar::F32 => f32::from_le_bytes(b.try_into().unwrap()).is_nan(),
                Scalar::F64 => f64::from_le_bytes(b.try_into().unwrap()).is_nan(),
                _ => false,
            };
            assert!(
                x == y || (nan(x) && nan(y)),
                "{}: output {o} element {i}: gpu {x:?} cpu {y:?}",
                k.name
            );
        }
    }
    g
}

fn op2(op: BinOp) -> impl Fn(&mut KernelBuilder, Value, Value) -> Value {
    move |b, x, y| b.binary(op, x, y)
}
fn op1(op: UnOp) -> impl Fn(&mut KernelBuilder, Value, Value) -> Value {
    move |b, x, _| b.unary(op, x)
}
fn cmp(op: CmpOp) -> impl Fn(&mut KernelBuilder, Value, Value) -> Value {
    move |b, x, y| b.cmp(op, x, y)
}

fn f32_inputs(n: usize, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let mut r = Rng(seed);
    let edges = [
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        0.5,
        3.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-40,
        -1e-40,
        f32::MAX,
        f32::MIN_POSITIVE,
        1e30,
        -7.25,
        2.5,
    ];
    let mut a = vec![];
    let mut b = vec![];
    for &x in &edges {
        for &y in &edges {
            a.push(x);
            b.push(y);
        }
    }
    while a.len() < n {
        a.push(r.f32(-100.0, 100.0));
        b.push(r.f32(-100.0, 100.0));
    }
    (a, b)
}

/// IEEE minimumNumber / maximumNumber, the IR's float min and max.
fn min_num(a: f64, b: f64, max: bool) -> f64 {
    if a.is_nan() {
        return b;
    }
    if b.is_nan() {
        return a;
    }
    if a == b {
        // -0 < +0
        return if a.is_sign_negative() != max { a } else { b };
    }
    if (a < b) != max { a } else { b }
}

fn same_f32(got: f32, want: f32) -> bool {
    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan())
}

#[test]
fn f32_arithmetic_comparisons_and_where_are_exact() {
    let fma = |b: &mut KernelBuilder, x, y| b.fma(x, y, x);
    let wh = |b: &mut KernelBuilder, x, y| {
        let c = b.cmp(CmpOp::Gt, x, y);
        b.where_(c, x, y)
    };
    let (a2, s2, m2, d2, mi, ma) = (
        op2(BinOp::Add),
        op2(BinOp::Sub),
        op2(BinOp::Mul),
        op2(BinOp::Div),
        op2(BinOp::Min),
        op2(BinOp::Max),
    );
    let (ng, ab, sq, rc, tr) = (
        op1(UnOp::Neg),
        op1(UnOp::Abs),
        op1(UnOp::Sqrt),
        op1(UnOp::Rcp),
        op1(UnOp::Trunc),
    );
    let cmps: Vec<_> = CmpOp::ALL.iter().map(|&c| cmp(c)).collect();
    let f = DType::F32;
    let mut outs: Vec<(DType, F)> = vec![
        (f, &a2),
        (f, &s2),
        (f, &m2),
        (f, &d2),
        (f, &mi),
        (f, &ma),
        (f, &ng),
        (f, &ab),
        (f, &sq),
        (f, &rc),
        (f, &tr),
        (f, &fma),
        (f, &wh),
    ];
    for c in &cmps {
        outs.push((DType::BOOL, c));
    }
    let k = multi("f32ops", f, &outs);
    let (a, b) = f32_inputs(512, 1);
    let sizes: Vec<DType> = outs.iter().map(|o| o.0).collect();
    let out = run_multi(&k, bytes_of(&a), bytes_of(&b), a.len(), &sizes);
    let refs: [&dyn Fn(f32, f32) -> f32; 13] = [
        &|x, y| x + y,
        &|x, y| x - y,
        &|x, y| x * y,
        &|x, y| x / y,
        &|x, y| min_num(x.into(), y.into(), false) as f32,
        &|x, y| min_num(x.into(), y.into(), true) as f32,
        &|x, _| -x,
        &|x, _| x.abs(),
        &|x, _| x.sqrt(),
        &|x, _| 1.0 / x,
        &|x, _| x.trunc(),
        &|x, y| x.mul_add(y, x),
        &|x, y| if x > y { x } else { y },
    ];
    for (k, r) in refs.iter().enumerate() {
        let got: Vec<f32> = from_bytes(&out[k]);
        for i in 0..a.len() {
            let want = r(a[i], b[i]);
            assert!(
                same_f32(got[i], want),
                "f32 op {k} of ({}, {}): {} want {want}",
                a[i],
                b[i],
                got[i]
            );
        }
    }
    let crefs: [fn(f32, f32) -> bool; 6] = [
        |x, y| x < y,
        |x, y| x <= y,
        |x, y| x > y,
        |x, y| x >= y,
        |x, y| x == y,
        |x, y| x != y,
    ];
    for (c, r) in crefs.iter().enumerate() {
        let got = &out[13 + c];
        for i in 0..a.len() {
            assert_eq!(
                got[i],
                u8::from(r(a[i], b[i])),
                "{:?} of ({}, {})",
                CmpOp::ALL[c],
                a[i],
                b[i]
            );
        }
    }
}

#[test]
fn f32_transcendentals_are_within_their_bounds() {
    let (e, l, s) = (op1(UnOp::Exp2), op1(UnOp::Log2), op1(UnOp::Sin));
    let f = DType::F32;
    let k = multi("f32math", f, &[(f, &e), (f, &l), (f, &s)]);
    let mut r = Rng(5);
    let n = 1024;
    let a: Vec<f32> = (0..n)
        .map(|i| {
            if i % 2 == 0 {
                r.f32(-30.0, 30.0)
            } else {
                r.f32(0.0, 1e6)
            }
        })
        .collect();
    let b: Vec<f32> = (0..n).map(|_| r.f32(-10.0, 10.0)).collect();
    // sin's argument comes from b (|x| ≤ 10): the GPU scales it by 1/2π before v_sin_f32.
    let k2 = multi("f32sin", f, &[(f, &s)]);
    // Each backend against the reference on its own: their results may differ by an ulp.
    let groups = [(n as u32).div_ceil(WG), 1, 1];
    let args = |x: &[f32], y: &[f32], outs: usize| {
        let mut v = vec![buf(x), buf(y)];
        v.extend((0..outs).map(|_| zeros(4 * n)));
        v.push(scalar(n as u32));
        v
    };
    for backend in ["gfx1100", "cpu"] {
        let run = |k: &Kernel, a: Vec<Arg>| {
            if backend == "cpu" {
                run_cpu(k, groups, &a)
            } else {
                run_gpu(k, groups, &a)
            }
        };
        let out = run(&k, args(&a, &b, 3));
        let sin_out = run(&k2, args(&b, &b, 1));
        let (ex, lg): (Vec<f32>, Vec<f32>) = (from_bytes(&out[2]), from_bytes(&out[3]));
        let sn: Vec<f32> = from_bytes(&sin_out[2]);
        for i in 0..n {
            let x = a[i];
            let we = f64::from(x).exp2() as f32;
            assert!(
                ulps(ex[i], we) <= 2,
                "{backend}: exp2({x}) = {} want {we} (2 ulp)",
                ex[i]
            );
            if x > 0.0 {
                let wl = f64::from(x).log2() as f32;
                assert!(
                    ulps(lg[i], wl) <= 2,
                    "{backend}: log2({x}) = {} want {wl} (2 ulp)",
                    lg[i]
                );
            }
            let ws = f64::from(b[i]).sin();
            assert!(
                (f64::from(sn[i]) - ws).abs() <= 2e-6,
                "{backend}: sin({}) = {} want {ws} (±2e-6)",
                b[i],
                sn[i]
            );
        }
    }
}

#[test]
fn f64_arithmetic_is_exact() {
    let (a2, m2, d2, mi, sq) = (
        op2(BinOp::Add),
        op2(BinOp::Mul),
        op2(BinOp::Div),
        op2(BinOp::Min),
        op1(UnOp::Sqrt),
    );
    let fma = |b: &mut KernelBuilder, x, y| b.fma(x, y, y);
    let d = DType::F64;
    let k = multi(
        "f64ops",
        d,
        &[(d, &a2), (d, &m2), (d, &d2), (d, &mi), (d, &sq), (d, &fma)],
    );
    let (a, b) = f32_inputs(400, 2);
    // No −0.0 operands: the emulator's v_min_f64 does not order −0 below +0 (its f32 form
    // does, as LLVM's lowering of minimumnum assumes); that is the emulator's to fix.
    let a: Vec<f64> = a
        .iter()
        .map(|&x| {
            if x == 0.0 {
                0.0
            } else {
                f64::from(x) * 1.000_000_1
            }
        })
        .collect();
    let b: Vec<f32> = b.iter().map(|&x| if x == 0.0 { 0.0 } else { x }).collect();
    let b: Vec<f64> = b.iter().map(|&x| f64::from(x) / 3.0).collect();
    let out = run_multi(&k, bytes_of(&a), bytes_of(&b), a.len(), &[d; 6]);
    let refs: [&dyn Fn(f64, f64) -> f64; 6] = [
        &|x, y| x + y,
        &|x, y| x * y,
        &|x, y| x / y,
        &|x, y| min_num(x, y, false),
        &|x, _| x.sqrt(),
        &|x, y| x.mul_add(y, y),
    ];
    for (k, r) in refs.iter().enumerate() {
        let got: Vec<f64> = from_bytes(&out[k]);
        for i in 0..a.len() {
            let w = r(a[i], b[i]);
            assert!(
                got[i].to_bits() == w.to_bits() || (got[i].is_nan() && w.is_nan()),
                "f64 op {k} of ({}, {}): {} want {w}",
                a[i],
                b[i],
                got[i]
            );
        }
    }
}

#[test]
fn f16_and_bf16_arithmetic_round_once() {
    for (s, to, from) in [
        (
            Scalar::F16,
            f32_to_f16 as fn(f32) -> u16,
            f16_to_f32 as fn(u16) -> f32,
        ),
        (Scalar::BF16, f32_to_bf16, bf16_to_f32),
    ] {
        let d = DType::scalar(s);
        let (a2, m2, d2, ma, sq) = (
            op2(BinOp::Add),
            op2(BinOp::Mul),
            op2(BinOp::Div),
            op2(BinOp::Max),
            op1(UnOp::Sqrt),
        );
        let lt = cmp(CmpOp::Lt);
        let up = |b: &mut KernelBuilder, x, _| b.cast(x, DType::F32);
        let k = multi(
            &format!("{}ops", s.name()),
            d,
            &[
                (d, &a2),
                (d, &m2),
                (d, &d2),
                (d, &ma),
                (d, &sq),
                (DType::BOOL, &lt),
                (DType::F32, &up),
            ],
        );
        let (fa, fb) = f32_inputs(300, 3);
        let a: Vec<u16> = fa.iter().map(|&x| to(x)).collect();
        let b: Vec<u16> = fb.iter().map(|&x| to(x * 0.37)).collect();
        let out = run_multi(
            &k,
            bytes_of(&a),
            bytes_of(&b),
            a.len(),
            &[d, d, d, d, d, DType::BOOL, DType::F32],
        );
        let refs: [&dyn Fn(f32, f32) -> f32; 5] = [
            &|x, y| x + y,
            &|x, y| x * y,
            &|x, y| x / y,
            &|x, y| min_num(x.into(), y.into(), true) as f32,
            &|x, _| x.sqrt(),
        ];
        for (k, r) in refs.iter().enumerate() {
            let got: Vec<u16> = from_bytes(&out[k]);
            for i in 0..a.len() {
                let (x, y) = (from(a[i]), from(b[i]));
                let w = to(r(x, y));
                let both_nan = from(got[i]).is_nan() && from(w).is_nan();
                assert!(
                    got[i] == w || both_nan,
                    "{} op {k} of ({x}, {y}): {:#x} want {w:#x}",
                    s.name(),
                    got[i]
                );
            }
        }
        for i in 0..a.len() {
            let (x, y) = (from(a[i]), from(b[i]));
            assert_eq!(out[5][i], u8::from(x < y), "{} {x} < {y}", s.name());
            let up: Vec<f32> = from_bytes(&out[6]);
            assert!(same_f32(up[i], x), "{} → f32 of {x}", s.name());
        }
    }
}

/// Integer references with the IR's defined edge cases.
macro_rules! int_case {
    ($name:ident, $t:ty, $s:expr) => {
        #[test]
        fn $name() {
            let d = DType::scalar($s);
            let ops: Vec<BinOp> = BinOp::ALL.to_vec();
            let fs: Vec<_> = ops.iter().map(|&o| op2(o)).collect();
            let (ng, nt, ab) = (op1(UnOp::Neg), op1(UnOp::Not), op1(UnOp::Abs));
            let lt = cmp(CmpOp::Lt);
            let mut outs: Vec<(DType, F)> = fs.iter().map(|f| (d, f as F)).collect();
            outs.push((d, &ng));
            outs.push((d, &nt));
            outs.push((d, &ab));
            outs.push((DType::BOOL, &lt));
            let k = multi(concat!(stringify!($t), "ops"), d, &outs);
            let mut r = Rng(7);
            let edges: [$t; 8] = [
                0,
                1,
                2,
                <$t>::MAX,
                <$t>::MIN,
                (<$t>::MAX / 3),
                7,
                (0 as $t).wrapping_sub(1),
            ];
            let mut a: Vec<$t> = vec![];
            let mut b: Vec<$t> = vec![];
            for &x in &edges {
                for &y in &edges {
                    a.push(x);
                    b.push(y);
                }
            }
            let bits = <$t>::BITS as u64;
            while a.len() < 300 {
                a.push(r.next() as $t);
                // Small divisors and shift amounts too.
                b.push(if a.len() % 3 == 0 {
                    (r.next() % (bits * 2)) as $t
                } else {
                    r.next() as $t
                });
            }
            let sizes: Vec<DType> = outs.iter().map(|o| o.0).collect();
            let out = run_multi(&k, bytes_of(&a), bytes_of(&b), a.len(), &sizes);
            let sh = |y: $t| (y as u32) & (<$t>::BITS - 1);
            let refs: Vec<Box<dyn Fn($t, $t) -> $t>> = vec![
                Box::new(|x: $t, y: $t| x.wrapping_add(y)),
                Box::new(|x: $t, y: $t| x.wrapping_sub(y)),
                Box::new(|x: $t, y: $t| x.wrapping_mul(y)),
                Box::new(|x: $t, y: $t| if y == 0 { 0 } else { x.wrapping_div(y) }),
                Box::new(|x: $t, y: $t| if y == 0 { 0 } else { x.wrapping_rem(y) }),
                Box::new(|x: $t, y: $t| x.min(y)),
                Box::new(|x: $t, y: $t| x.max(y)),
                Box::new(|x: $t, y: $t| x & y),
                Box::new(|x: $t, y: $t| x | y),
                Box::new(|x: $t, y: $t| x ^ y),
                Box::new(move |x: $t, y: $t| x.wrapping_shl(sh(y))),
                Box::new(move |x: $t, y: $t| x.wrapping_shr(sh(y))),
                Box::new(|x: $t, _| (0 as $t).wrapping_sub(x)),
                Box::new(|x: $t, _| !x),
                Box::new(|x: $t, _| {
                    if x < (0 as $t).wrapping_sub(0) || (x as i128) < 0 {
                        (0 as $t).wrapping_sub(x)
                    } else {
                        x
                    }
                }),
            ];
            for (k, rf) in refs.iter().enumerate() {
                let got: Vec<$t> = from_bytes(&out[k]);
                for i in 0..a.len() {
                    assert_eq!(
                        got[i],
                        rf(a[i], b[i]),
                        "{} op {k} of ({}, {})",
                        stringify!($t),
                        a[i],
                        b[i]
                    );
                }
            }
            for i in 0..a.len() {
                assert_eq!(
                    out[15][i],
                    u8::from(a[i] < b[i]),
                    "{} < of ({}, {})",
                    stringify!($t),
                    a[i],
                    b[i]
                );
            }
        }
    };
}
int_case!(i32_integer_ops_are_exact, i32, Scalar::I32);
int_case!(u32_integer_ops_are_exact, u32, Scalar::U32);
int_case!(i64_integer_ops_are_exact, i64, Scalar::I64);
int_case!(u64_integer_ops_are_exact, u64, Scalar::U64);
int_case!(i8_integer_ops_are_exact, i8, Scalar::I8);
int_case!(u16_integer_ops_are_exact, u16, Scalar::U16);

#[test]
fn casts_and_bitcasts_match_rust_as() {
    let to = |d: DType| move |b: &mut KernelBuilder, x, _| b.cast(x, d);
    let (c_i32, c_u8, c_i64, c_f64, c_bool, c_u32) = (
        to(DType::I32),
        to(DType::scalar(Scalar::U8)),
        to(DType::I64),
        to(DType::F64),
        to(DType::BOOL),
        to(DType::U32),
    );
    let bc = |b: &mut KernelBuilder, x, _| b.bitcast(x, DType::U32);
    let c_f16 = to(DType::F16);
    let k = multi(
        "casts",
        DType::F32,
        &[
            (DType::I32, &c_i32),
            (DType::scalar(Scalar::U8), &c_u8),
            (DType::I64, &c_i64),
            (DType::F64, &c_f64),
            (DType::BOOL, &c_bool),
            (DType::U32, &c_u32),
            (DType::U32, &bc),
            (DType::F16, &c_f16),
        ],
    );
    let (mut a, b) = f32_inputs(300, 4);
    a.extend([
        3e9f32, -3e9, 255.5, 256.0, -0.9, 65519.0, 65520.0, 1e-7, 6e-8,
    ]);
    let b = [b, vec![0.0; 9]].concat();
    let out = run_multi(
        &k,
        bytes_of(&a),
        bytes_of(&b),
        a.len(),
        &[
            DType::I32,
            DType::scalar(Scalar::U8),
            DType::I64,
            DType::F64,
            DType::BOOL,
            DType::U32,
            DType::U32,
            DType::F16,
        ],
    );
    let i32s: Vec<i32> = from_bytes(&out[0]);
    let u8s = &out[1];
    let i64s: Vec<i64> = from_bytes(&out[2]);
    let f64s: Vec<f64> = from_bytes(&out[3]);
    let bools = &out[4];
    let u32s: Vec<u32> = from_bytes(&out[5]);
    let bits: Vec<u32> = from_bytes(&out[6]);
    let halves: Vec<u16> = from_bytes(&out[7]);
    for (i, &x) in a.iter().enumerate() {
        assert_eq!(i32s[i], x as i32, "f32 {x} → i32");
        assert_eq!(u8s[i], x as u8, "f32 {x} → u8");
        assert_eq!(i64s[i], x as i64, "f32 {x} → i64");
        assert!(
            same_f32(f64s[i] as f32, x) && (x.is_nan() || f64s[i] == f64::from(x)),
            "f32 {x} → f64"
        );
        assert_eq!(bools[i], u8::from(x != 0.0), "f32 {x} → bool");
        assert_eq!(u32s[i], x as u32, "f32 {x} → u32");
        assert_eq!(bits[i], x.to_bits(), "bitcast {x}");
        if !x.is_nan() {
            assert_eq!(halves[i], f32_to_f16(x), "f32 {x} → f16");
        }
    }
    // Integer ↔ integer and integer → float.
    let ti = |d: DType| move |b: &mut KernelBuilder, x, _| b.cast(x, d);
    let (i8c, u16c, i64c, u64c, f32c, f64c, bc2) = (
        ti(DType::scalar(Scalar::I8)),
        ti(DType::scalar(Scalar::U16)),
        ti(DType::I64),
        ti(DType::scalar(Scalar::U64)),
        ti(DType::F32),
        ti(DType::F64),
        ti(DType::BOOL),
    );
    let k = multi(
        "intcasts",
        DType::I32,
        &[
            (DType::scalar(Scalar::I8), &i8c),
            (DType::scalar(Scalar::U16), &u16c),
            (DType::I64, &i64c),
            (DType::scalar(Scalar::U64), &u64c),
            (DType::F32, &f32c),
            (DType::F64, &f64c),
            (DType::BOOL, &bc2),
        ],
    );
    let mut r = Rng(9);
    let a: Vec<i32> = (0..200)
        .map(|i| {
            if i < 4 {
                [0, -1, i32::MIN, i32::MAX][i]
            } else {
                r.next() as i32 >> (i % 31)
            }
        })
        .collect();
    let out = run_multi(
        &k,
        bytes_of(&a),
        bytes_of(&a),
        a.len(),
        &[
            DType::scalar(Scalar::I8),
            DType::scalar(Scalar::U16),
            DType::I64,
            DType::scalar(Scalar::U64),
            DType::F32,
            DType::F64,
            DType::BOOL,
        ],
    );
    let i8s: Vec<i8> = from_bytes(&out[0]);
    let u16s: Vec<u16> = from_bytes(&out[1]);
    let i64s: Vec<i64> = from_bytes(&out[2]);
    let u64s: Vec<u64> = from_bytes(&out[3]);
    let f32s: Vec<f32> = from_bytes(&out[4]);
    let f64s: Vec<f64> = from_bytes(&out[5]);
    for (i, &x) in a.iter().enumerate() {
        assert_eq!(
            (i8s[i], u16s[i], i64s[i], u64s[i]),
            (x as i8, x as u16, x as i64, x as u64),
            "i32 {x} → ints"
        );
        assert_eq!(
            (f32s[i].to_bits(), f64s[i]),
            ((x as f32).to_bits(), x as f64),
            "i32 {x} → floats"
        );
        assert_eq!(out[6][i], u8::from(x != 0), "i32 {x} → bool");
    }
}

#[test]
fn vectors_load_and_store_128_bits_and_compute_per_lane() {
    // o[i] = a[i] * b[i] + (a[i].w, a[i].z, a[i].y, a[i].x) over f32x4 at 16-byte alignment.
    let v4 = DType::vec(Scalar::F32, 4);
    let mut b = KernelBuilder::new("vec4", [WG, 1, 1]);
    let pa = b.param_ptr("a", DType::F32, true);
    let pb = b.param_ptr("b", DType::F32, true);
    let po = b.param_ptr("o", DType::F32, true);
    let i = b.global_id(Dim::X);
    let four = b.const_u32(4);
    let e = b.mul(i, four);
    let x = b.load(pa, e, v4, 16);
    let y = b.load(pb, e, v4, 16);
    let p = b.mul(x, y);
    let lanes: Vec<Value> = (0..4).rev().map(|l| b.extract(x, l)).collect();
    let rev = b.vector(&lanes);
    let s = b.add(p, rev);
    b.store(po, e, s, 16);
    let k = b.finish().unwrap();
    let asm = String::from_utf8(
        codegen::compile_ir(
            &lower::lower(&k, Target::Gpu(GfxTarget::Gfx1100)).unwrap(),
            Target::Gpu(GfxTarget::Gfx1100),
            "vec4",
            codegen::Output::Assembly,
        )
        .unwrap(),
    )
    .unwrap();
    assert!(
        asm.contains("global_load_b128") && asm.contains("global_store_b128"),
        "no 128-bit accesses in:\n{asm}"
    );
    let n = 4 * 128;
    let mut r = Rng(3);
    let a: Vec<f32> = (0..n).map(|_| r.f32(-4.0, 4.0)).collect();
    let bb: Vec<f32> = (0..n).map(|_| r.f32(-4.0, 4.0)).collect();
    let out = run_both(&k, [2, 1, 1], &[buf(&a), buf(&bb), zeros(4 * n)]);
    let o: Vec<f32> = from_bytes(&out[2]);
    for q in 0..n / 4 {
        for l in 0..4 {
            let j = 4 * q + l;
            assert_eq!(
                o[j],
                a[j] * bb[j] + a[4 * q + 3 - l],
                "lane {l} of vector {q}"
            );
        }
    }
}

/// `o = a · b` per work-item for a `rows × cols` tile: `a` rows × k, `b` k × cols, each
/// output accumulated by an FMA per step of a loop over k (the tensor layer's matmul step).
fn fma_tile(rows: u32, cols: u32, k: u32) -> Kernel {
    let mut b = KernelBuilder::new("fma_tile", [WG, 1, 1]);
    let pa = b.param_ptr("a", DType::F32, true);
    let pb = b.param_ptr("b", DType::F32, true);
    let po = b.param_ptr("o", DType::F32, true);
    let i = b.global_id(Dim::X);
    let zero = b.const_u32(0);
    let z = b.const_f32(0.0);
    let accs: Vec<Value> = (0..rows * cols)
        .map(|_| {
            let acc = b.private(DType::F32, 1);
            b.store_elem(acc, zero, z);
            acc
        })
        .collect();
    let (kk, rr, cc) = (b.const_u32(k), b.const_u32(rows), b.const_u32(cols));
    let a_rows = b.mul(i, rr);
    let b_rows = b.mul(i, kk);
    b.range(zero, kk, 1, |b, s| {
        let a: Vec<Value> = (0..rows)
            .map(|r| {
                let r = b.const_u32(r);
                let row = b.add(a_rows, r);
                let at = b.mul(row, kk);
                let at = b.add(at, s);
                b.load_elem(pa, at)
            })
            .collect();
        let bv: Vec<Value> = (0..cols)
            .map(|c| {
                let c = b.const_u32(c);
                let row = b.add(b_rows, s);
                let at = b.mul(row, cc);
                let at = b.add(at, c);
                b.load_elem(pb, at)
            })
            .collect();
        for r in 0..rows {
            for c in 0..cols {
                let acc = accs[(r * cols + c) as usize];
                let cur = b.load_elem(acc, zero);
                let next = b.fma(a[r as usize], bv[c as usize], cur);
                b.store_elem(acc, zero, next);
            }
        }
    });
    for r in 0..rows {
        for c in 0..cols {
            let at = b.const_u32(r * cols + c);
            let per_item = b.const_u32(rows * cols);
            let base = b.mul(i, per_item);
            let at = b.add(base, at);
            let v = b.load_elem(accs[(r * cols + c) as usize], zero);
            b.store_elem(po, at, v);
        }
    }
    b.finish().unwrap()
}

/// A loop of 16 FMAs (a 4 × 4 register tile) is compiled for gfx11 and gfx12 with LLVM's
/// post-RA scheduler bottom-up, which keeps the dual-issue pairs it chose together: on
/// gfx1100 some become `v_dual_fmac_f32`, and the emulator runs them to the CPU backend's
/// bits. gfx942 (no VOPD) and a loop of 4 FMAs keep LLVM's default schedule.
#[test]
fn fma_tiles_dual_issue_on_gfx11_and_match_the_cpu() {
    let bottom_up = "\"amdgpu-post-ra-direction\"=\"bottomup\"";
    let tile = fma_tile(4, 4, 24);
    for (t, want) in [
        (GfxTarget::Gfx1100, true),
        (GfxTarget::Gfx1201, true),
        (GfxTarget::Gfx942, false),
    ] {
        let ir = lower::lower(&tile, Target::Gpu(t)).unwrap();
        assert_eq!(ir.contains(bottom_up), want, "4 x 4 tile on {t:?}");
    }
    let small = lower::lower(&fma_tile(2, 2, 24), Target::Gpu(GfxTarget::Gfx1100)).unwrap();
    assert!(!small.contains(bottom_up), "2 x 2 tile on gfx1100");
    let gfx1100 = Target::Gpu(GfxTarget::Gfx1100);
    let asm = codegen::compile_ir(
        &lower::lower(&tile, gfx1100).unwrap(),
        gfx1100,
        "fma_tile",
        codegen::Output::Assembly,
    )
    .unwrap();
    let asm = String::from_utf8(asm).unwrap();
    assert!(
        asm.matches("v_dual_fmac_f32").count() >= 4,
        "fewer than 4 dual-issue FMA pairs in:\n{asm}"
    );
    let items = 2 * WG as usize;
    let mut r = Rng(37);
    let a: Vec<f32> = (0..items * 4 * 24).map(|_| r.f32(-2.0, 2.0)).collect();
    let bb: Vec<f32> = (0..items * 24 * 4).map(|_| r.f32(-2.0, 2.0)).collect();
    let out = run_both(
        &tile,
        [2, 1, 1],
        &[buf(&a), buf(&bb), zeros(4 * items * 16)],
    );
    let o: Vec<f32> = from_bytes(&out[2]);
    for i in 0..items {
        for (row, col) in (0..4).flat_map(|row| (0..4).map(move |col| (row, col))) {
            let want = (0..24).fold(0f32, |acc, s| {
                a[(i * 4 + row) * 24 + s].mul_add(bb[(i * 24 + s) * 4 + col], acc)
            });
            assert_eq!(
                o[i * 16 + row * 4 + col].to_bits(),
                want.to_bits(),
                "work-item {i}, output ({row}, {col})"
            );
        }
    }
}

#[test]
fn ranges_private_memory_and_nested_ifs_compute_row_sums() {
    // o[i] = Σ_{j in 0..m step 2} a[i*m + j] for rows whose index is odd, else −1, with the
    // running sum in private memory.
    let mut b = KernelBuilder::new("rowsum", [32, 1, 1]);
    let pa = b.param_ptr("a", DType::I32, true);
    let po = b.param_ptr("o", DType::I32, true);
    let m = b.param("m", DType::U32);
    let acc = b.private(DType::I32, 2);
    let i = b.global_id(Dim::X);
    let zero = b.const_u32(0);
    let izero = b.const_i32(0);
    b.store_elem(acc, zero, izero);
    let base = b.mul(i, m);
    b.range(zero, m, 2, |b, j| {
        let idx = b.add(base, j);
        let x = b.load_elem(pa, idx);
        let s = b.load_elem(acc, zero);
        let t = b.add(s, x);
        b.store_elem(acc, zero, t);
    });
    let one = b.const_u32(1);
    let odd = b.binary(BinOp::And, i, one);
    let is_odd = b.cmp(CmpOp::Eq, odd, one);
    let neg = b.const_i32(-1);
    b.store_elem(po, i, neg);
    b.if_(is_odd, |b| {
        let s = b.load_elem(acc, zero);
        let c = b.cmp(CmpOp::Ne, s, izero);
        b.store_elem(po, i, s);
        b.if_(c, |b| {
            let s2 = b.load_elem(acc, zero);
            b.store_elem(po, i, s2);
        });
    });
    let k = b.finish().unwrap();
    let (rows, m) = (64usize, 37u32);
    let a: Vec<i32> = (0..rows * m as usize)
        .map(|x| (x as i32 * 7919) % 1000 - 500)
        .collect();
    let out = run_both(&k, [2, 1, 1], &[buf(&a), zeros(4 * rows), scalar(m)]);
    let o: Vec<i32> = from_bytes(&out[1]);
    for r in 0..rows {
        let want: i32 = if r % 2 == 1 {
            (0..m as usize)
                .step_by(2)
                .map(|j| a[r * m as usize + j])
                .sum()
        } else {
            -1
        };
        assert_eq!(o[r], want, "row {r}");
    }
}

#[test]
fn work_item_and_group_ids_in_three_dimensions() {
    let wg = [4u32, 2, 2];
    let groups = [3u32, 2, 2];
    let k = ids_kernel(wg, groups);
    let total = (0..3).map(|d| wg[d] * groups[d]).product::<u32>() as usize;
    let out = run_both(&k, groups, &[zeros(4 * 6 * total)]);
    let o: Vec<u32> = from_bytes(&out[0]);
    let (w, h) = (wg[0] * groups[0], wg[1] * groups[1]);
    for z in 0..wg[2] * groups[2] {
        for y in 0..h {
            for x in 0..w {
                let lin = ((z * h + y) * w + x) as usize;
                let want = [
                    x % wg[0],
                    x / wg[0],
                    y % wg[1],
                    y / wg[1],
                    z % wg[2],
                    z / wg[2],
                ];
                assert_eq!(o[6 * lin..6 * lin + 6], want, "work-item ({x}, {y}, {z})");
            }
        }
    }
}

#[test]
fn atomics_in_global_and_local_memory() {
    // Every work-item adds, subtracts, takes min/max/and/or/xor of its value into counters in
    // global memory, f32-adds into one, and adds into a local counter that work-item 0 of each
    // group adds to global memory after a barrier.
    let ops = [
        AtomicOp::Add,
        AtomicOp::Sub,
        AtomicOp::Min,
        AtomicOp::Max,
        AtomicOp::And,
        AtomicOp::Or,
        AtomicOp::Xor,
    ];
    let mut b = KernelBuilder::new("atomics", [WG, 1, 1]);
    let pv = b.param_ptr("v", DType::I32, true);
    let pc = b.param_ptr("c", DType::I32, true);
    let pf = b.param_ptr("f", DType::F32, true);
    let px = b.param_ptr("x", DType::U32, true);
    let lds = b.local(DType::U32, 1);
    let i = b.global_id(Dim::X);
    let l = b.local_id(Dim::X);
    let zero = b.const_u32(0);
    let uzero = b.const_u32(0);
    let is0 = b.cmp(CmpOp::Eq, l, zero);
    b.if_(is0, |b| b.store_elem(lds, zero, uzero));
    b.barrier();
    let v = b.load_elem(pv, i);
    for (n, &op) in ops.iter().enumerate() {
        let at = b.const_u32(n as u32);
        b.atomic(op, pc, at, v);
    }
    let fv = b.cast(v, DType::F32);
    let sixteen = b.const_f32(1.0 / 16.0);
    let fv = b.mul(fv, sixteen);
    let fv = b.unary(UnOp::Trunc, fv);
    b.atomic(AtomicOp::Add, pf, zero, fv);
    let one = b.const_u32(1);
    b.atomic(AtomicOp::Add, lds, zero, one);
    let old = b.atomic(AtomicOp::Xchg, px, i, l);
    let two = b.const_u32(2);
    let at = b.add(i, two);
    let _ = (old, at);
    b.barrier();
    b.if_(is0, |b| {
        let s = b.load_elem(lds, zero);
        let last = b.const_u32(0);
        b.atomic(AtomicOp::Add, px, last, s);
    });
    let k = b.finish().unwrap();
    let groups = 4u32;
    let n = (groups * WG) as usize;
    let mut r = Rng(21);
    let v: Vec<i32> = (0..n).map(|_| (r.next() as i32) >> 8).collect();
    let init = [0i32, 0, i32::MAX, i32::MIN, -1, 0, 0];
    let out = run_both(
        &k,
        [groups, 1, 1],
        &[buf(&v), buf(&init), buf(&[0f32]), zeros(4 * n)],
    );
    let c: Vec<i32> = from_bytes(&out[1]);
    let f: Vec<f32> = from_bytes(&out[2]);
    let x: Vec<u32> = from_bytes(&out[3]);
    let want = [
        v.iter().fold(0i32, |a, &b| a.wrapping_add(b)),
        v.iter().fold(0i32, |a, &b| a.wrapping_sub(b)),
        *v.iter().min().unwrap(),
        *v.iter().max().unwrap(),
        v.iter().fold(-1, |a, &b| a & b),
        v.iter().fold(0, |a, &b| a | b),
        v.iter().fold(0, |a, &b| a ^ b),
    ];
    assert_eq!(c, want, "global integer atomics");
    // The f32 values are integers small enough that every order of addition is exact.
    let fsum: f32 = v.iter().map(|&x| (x as f32 / 16.0).trunc()).sum();
    assert_eq!(f[0], fsum, "f32 atomic add");
    // x[i] = local id (exchange), x[0] gets each group's local count (64) added.
    for (i, &xi) in x.iter().enumerate().skip(1) {
        assert_eq!(xi, (i % WG as usize) as u32, "exchange at {i}");
    }
    assert_eq!(x[0], groups * WG, "local atomic counts summed into x[0]");
}

#[test]
fn text_form_of_kernels_parses_back_and_runs() {
    let src = "
// y[i] = a*x[i] + y[i] for i < n, with f16 storage of a copy; y and h at 32-bit offsets
kernel saxpy(%x: ptr<global, f32> noalias, %y: ptr<global, f32> offset32, %h: ptr<global, f16> noalias offset32, %a: f32, %n: u32) workgroup(64, 1, 1) {
  %g = group_id x
  %l = local_id x
  %w = const u32 64
  %b = mul %g, %w
  %i = add %b, %l
  %in = lt %i, %n
  if %in {
    %xv = load %x[%i] : f32
    %yv = load %y[%i] : f32 align 4
    %r = fma %a, %xv, %yv
    store %y[%i], %r
    %hr = cast %r : f16
    store %h[%i], %hr align 2
  }
}";
    let k = text::parse(src, "saxpy.amk").unwrap();
    let printed = text::print(&k);
    let again = text::parse(&printed, "printed").unwrap();
    assert_eq!(again, k, "parse(print(k)) == k");
    assert_eq!(text::print(&again), printed);
    let offset32: Vec<bool> = k.params.iter().map(|p| p.offset32).collect();
    assert_eq!(offset32, [false, true, true, false, false]);
    let n = 100usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32 / 7.0).collect();
    let y: Vec<f32> = (0..n).map(|i| 100.0 - i as f32).collect();
    let out = run_both(
        &k,
        [2, 1, 1],
        &[
            buf(&x),
            buf(&y),
            zeros(2 * n),
            scalar(1.5f32),
            scalar(n as u32),
        ],
    );
    let yo: Vec<f32> = from_bytes(&out[1]);
    let ho: Vec<u16> = from_bytes(&out[2]);
    for i in 0..n {
        let w = 1.5f32.mul_add(x[i], y[i]);
        assert_eq!(yo[i], w, "saxpy at {i}");
        assert_eq!(ho[i], f32_to_f16(w), "f16 copy at {i}");
    }
}

#[test]
fn vectors_of_halves_bytes_and_bools_in_memory() {
    // h[i] (f16x4) + h[i] * 0.5 → f16x4 and its f32x4 widening; u8x16 bytes + 1 (a 128-bit
    // access); a bool array read back and negated.
    let h4 = DType::vec(Scalar::F16, 4);
    let f4 = DType::vec(Scalar::F32, 4);
    let b16 = DType::vec(Scalar::U8, 16);
    let mut b = KernelBuilder::new("vmix", [32, 1, 1]);
    let ph = b.param_ptr("h", DType::F16, true);
    let pho = b.param_ptr("ho", DType::F16, true);
    let pf = b.param_ptr("f", DType::F32, true);
    let pu = b.param_ptr("u", DType::scalar(Scalar::U8), true);
    let pbl = b.param_ptr("bl", DType::BOOL, true);
    let i = b.global_id(Dim::X);
    let four = b.const_u32(4);
    let e = b.mul(i, four);
    let x = b.load(ph, e, h4, 8);
    let half = b.constant(h4, u64::from(f32_to_f16(0.5)));
    let m = b.mul(x, half);
    let s = b.add(x, m);
    b.store(pho, e, s, 8);
    let w = b.cast(s, f4);
    b.store(pf, e, w, 16);
    let sixteen = b.const_u32(16);
    let eb = b.mul(i, sixteen);
    let bytes = b.load(pu, eb, b16, 16);
    let one = b.constant(b16, 1);
    let inc = b.add(bytes, one);
    b.store(pu, eb, inc, 16);
    let flag = b.load_elem(pbl, i);
    let not = b.unary(UnOp::Not, flag);
    b.store_elem(pbl, i, not);
    let k = b.finish().unwrap();
    let n = 64usize;
    let mut r = Rng(8);
    let hs: Vec<u16> = (0..4 * n)
        .map(|_| f32_to_f16(r.f32(-100.0, 100.0)))
        .collect();
    let us: Vec<u8> = (0..16 * n).map(|_| r.next() as u8).collect();
    let bl: Vec<u8> = (0..n).map(|i| u8::from(i % 3 == 0)).collect();
    let out = run_both(
        &k,
        [2, 1, 1],
        &[buf(&hs), zeros(8 * n), zeros(16 * n), buf(&us), buf(&bl)],
    );
    let ho: Vec<u16> = from_bytes(&out[1]);
    let fo: Vec<f32> = from_bytes(&out[2]);
    for j in 0..4 * n {
        let x = f16_to_f32(hs[j]);
        let m = f16_to_f32(f32_to_f16(x * 0.5));
        let want = f32_to_f16(x + m);
        assert_eq!(ho[j], want, "f16 lane {j}: {x} + {x}*0.5");
        assert_eq!(fo[j], f16_to_f32(want), "f32 widening of lane {j}");
    }
    for j in 0..16 * n {
        assert_eq!(out[3][j], us[j].wrapping_add(1), "byte {j}");
    }
    for (j, &flag) in out[4].iter().enumerate() {
        assert_eq!(flag, u8::from(j % 3 != 0), "bool {j}");
    }
}

#[test]
fn private_arrays_indexed_by_data_and_a_kernel_named_like_libm() {
    // A per-work-item histogram of 8 bins indexed by the data (private memory that cannot
    // live in fixed registers), in a kernel called `sinf` that also calls sin.
    let mut b = KernelBuilder::new("sinf", [32, 1, 1]);
    let pa = b.param_ptr("a", DType::U32, true);
    let po = b.param_ptr("o", DType::U32, true);
    let ps = b.param_ptr("s", DType::F32, true);
    let hist = b.private(DType::U32, 8);
    let i = b.global_id(Dim::X);
    let (z, eight, seven, sixteen) = (
        b.const_u32(0),
        b.const_u32(8),
        b.const_u32(7),
        b.const_u32(16),
    );
    b.range(z, eight, 1, |b, j| b.store_elem(hist, j, z));
    let base = b.mul(i, sixteen);
    b.range(z, sixteen, 1, |b, j| {
        let at = b.add(base, j);
        let v = b.load_elem(pa, at);
        let bin = b.binary(BinOp::And, v, seven);
        let c = b.load_elem(hist, bin);
        let one = b.const_u32(1);
        let c1 = b.add(c, one);
        b.store_elem(hist, bin, c1);
    });
    let ob = b.mul(i, eight);
    b.range(z, eight, 1, |b, j| {
        let c = b.load_elem(hist, j);
        let at = b.add(ob, j);
        b.store_elem(po, at, c);
    });
    let f = b.cast(i, DType::F32);
    let sn = b.unary(UnOp::Sin, f);
    b.store_elem(ps, i, sn);
    let k = b.finish().unwrap();
    let n = 64usize;
    let mut r = Rng(12);
    let a: Vec<u32> = (0..16 * n).map(|_| r.next() as u32).collect();
    let gpu = run_gpu(&k, [2, 1, 1], &[buf(&a), zeros(32 * n), zeros(4 * n)]);
    let cpu = run_cpu(&k, [2, 1, 1], &[buf(&a), zeros(32 * n), zeros(4 * n)]);
    for out in [&gpu, &cpu] {
        let o: Vec<u32> = from_bytes(&out[1]);
        let s: Vec<f32> = from_bytes(&out[2]);
        for w in 0..n {
            let mut want = [0u32; 8];
            for v in &a[16 * w..16 * w + 16] {
                want[(v & 7) as usize] += 1;
            }
            assert_eq!(o[8 * w..8 * w + 8], want, "histogram of work-item {w}");
            assert!(
                (f64::from(s[w]) - (w as f64).sin()).abs() <= 1e-5,
                "sin({w}) = {}",
                s[w]
            );
        }
    }
}
