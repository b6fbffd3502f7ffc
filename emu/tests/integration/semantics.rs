//! Per-instruction semantics: each instruction is placed in a kernel with inline assembly
//! (compiled by clang-22), run on 64 lanes of edge-case inputs, and compared bit for bit with
//! a Rust reference written from the RDNA3 ISA description (or within a stated ulp bound).

#![allow(clippy::neg_cmp_op_on_partial_ord)] // `nge` references are negated comparisons on purpose

use crate::common;
use am_emu::float::{f16_to_f32, f32_to_f16, f64_to_f16};
use am_emu::{CodeObject, HostMemory, Isa, Program};
use common::*;

type Ref = fn(u32, u32, u32, usize) -> u32;

/// (kernel name, instruction with %0 = dst, %1..%3 = sources, reference, max ulps (f32 result))
const CASES32: &[(&str, &str, Ref, u32)] = &[
    (
        "add_f32",
        "v_add_f32 %0, %1, %2",
        |a, b, _, _| (f(a) + f(b)).to_bits(),
        0,
    ),
    (
        "mul_f32",
        "v_mul_f32 %0, %1, %2",
        |a, b, _, _| (f(a) * f(b)).to_bits(),
        0,
    ),
    (
        "fma_f32",
        "v_fma_f32 %0, %1, %2, %3",
        |a, b, c, _| f(a).mul_add(f(b), f(c)).to_bits(),
        0,
    ),
    (
        "fma_neg_abs",
        "v_fma_f32 %0, -%1, |%2|, %3",
        |a, b, c, _| (-f(a)).mul_add(f(b).abs(), f(c)).to_bits(),
        0,
    ),
    (
        "max_f32",
        "v_max_f32 %0, %1, %2",
        |a, b, _, _| maxnum(f(a), f(b)).to_bits(),
        0,
    ),
    (
        "canonicalize",
        "v_max_f32 %0, %1, %1",
        |a, _, _, _| if f(a).is_nan() { a | 0x40_0000 } else { a },
        0,
    ),
    (
        "min_f32",
        "v_min_f32 %0, %1, %2",
        |a, b, _, _| minnum(f(a), f(b)).to_bits(),
        0,
    ),
    (
        "med3_f32",
        "v_med3_f32 %0, %1, %2, %3",
        |a, b, c, _| med3(f(a), f(b), f(c)).to_bits(),
        0,
    ),
    (
        "add_clamp",
        "v_add_f32 %0, %1, %2 clamp",
        |a, b, _, _| {
            let r = f(a) + f(b);
            (if r.is_nan() { 0.0 } else { r.clamp(0.0, 1.0) }).to_bits()
        },
        0,
    ),
    (
        "add_nc_u32_clamp",
        "v_add_nc_u32 %0, %1, %2 clamp",
        |a, b, _, _| a.saturating_add(b),
        0,
    ),
    (
        "sub_nc_u32_clamp",
        "v_sub_nc_u32 %0, %1, %2 clamp",
        |a, b, _, _| a.saturating_sub(b),
        0,
    ),
    (
        "subrev_nc_u32_clamp",
        "v_subrev_nc_u32 %0, %1, %2 clamp",
        |a, b, _, _| b.saturating_sub(a),
        0,
    ),
    (
        "add_nc_i32_clamp",
        "v_add_nc_i32 %0, %1, %2 clamp",
        |a, b, _, _| (a as i32).saturating_add(b as i32) as u32,
        0,
    ),
    (
        "sub_nc_i32_clamp",
        "v_sub_nc_i32 %0, %1, %2 clamp",
        |a, b, _, _| (a as i32).saturating_sub(b as i32) as u32,
        0,
    ),
    (
        "add_co_u32_clamp",
        "v_add_co_u32 %0, vcc_lo, %1, %2 clamp",
        |a, b, _, _| a.saturating_add(b),
        0,
    ),
    (
        "pk_sub_u16_clamp",
        "v_pk_sub_u16 %0, %1, %2 clamp",
        |a, b, _, _| {
            let h = |x: u32, k: u32| (x >> (16 * k)) as u16;
            (0..2)
                .map(|k| (h(a, k).saturating_sub(h(b, k)) as u32) << (16 * k))
                .sum()
        },
        0,
    ),
    (
        "pk_add_i16_clamp",
        "v_pk_add_i16 %0, %1, %2 clamp",
        |a, b, _, _| {
            let h = |x: u32, k: u32| (x >> (16 * k)) as i16;
            (0..2)
                .map(|k| (h(a, k).saturating_add(h(b, k)) as u16 as u32) << (16 * k))
                .sum()
        },
        0,
    ),
    (
        "mul_omod2",
        "v_mul_f32 %0, %1, %2 mul:2",
        |a, b, _, _| (f(a) * f(b) * 2.0).to_bits(),
        0,
    ),
    (
        "sqrt_f32",
        "v_sqrt_f32 %0, %1",
        |a, _, _, _| f(a).sqrt().to_bits(),
        1,
    ),
    (
        "rcp_f32",
        "v_rcp_f32 %0, %1",
        |a, _, _, _| (1.0 / f(a)).to_bits(),
        1,
    ),
    (
        "rsq_f32",
        "v_rsq_f32 %0, %1",
        |a, _, _, _| (1.0 / (f(a) as f64).sqrt()).to_bits_f32(),
        1,
    ),
    (
        "exp_f32",
        "v_exp_f32 %0, %1",
        |a, _, _, _| (f(a) as f64).exp2().to_bits_f32(),
        1,
    ),
    (
        "log_f32",
        "v_log_f32 %0, %1",
        |a, _, _, _| (f(a) as f64).log2().to_bits_f32(),
        1,
    ),
    (
        "floor_f32",
        "v_floor_f32 %0, %1",
        |a, _, _, _| f(a).floor().to_bits(),
        0,
    ),
    (
        "rndne_f32",
        "v_rndne_f32 %0, %1",
        |a, _, _, _| f(a).round_ties_even().to_bits(),
        0,
    ),
    (
        "cvt_i32_f32",
        "v_cvt_i32_f32 %0, %1",
        |a, _, _, _| if f(a).is_nan() { 0 } else { f(a) as i32 as u32 },
        0,
    ),
    (
        "cvt_u32_f32",
        "v_cvt_u32_f32 %0, %1",
        |a, _, _, _| if f(a).is_nan() { 0 } else { f(a) as u32 },
        0,
    ),
    (
        "cvt_f32_i32",
        "v_cvt_f32_i32 %0, %1",
        |a, _, _, _| (a as i32 as f32).to_bits(),
        0,
    ),
    (
        "ldexp_f32",
        "v_ldexp_f32 %0, %1, %2",
        |a, b, _, _| ((f(a) as f64) * 2f64.powi((b as i32).clamp(-300, 300))).to_bits_f32(),
        0,
    ),
    (
        "frexp_exp",
        "v_frexp_exp_i32_f32 %0, %1",
        |a, _, _, _| frexp(f(a)).1 as u32,
        0,
    ),
    (
        "frexp_mant",
        "v_frexp_mant_f32 %0, %1",
        |a, _, _, _| frexp(f(a)).0.to_bits(),
        0,
    ),
    (
        "mul_hi_u32",
        "v_mul_hi_u32 %0, %1, %2",
        |a, b, _, _| ((a as u64 * b as u64) >> 32) as u32,
        0,
    ),
    (
        "mul_lo_u32",
        "v_mul_lo_u32 %0, %1, %2",
        |a, b, _, _| a.wrapping_mul(b),
        0,
    ),
    (
        "bfe_i32",
        "v_bfe_i32 %0, %1, %2, %3",
        |a, b, c, _| {
            let (o, w) = (b & 31, c & 31);
            if w == 0 {
                0
            } else {
                (((a >> o) << (32 - w)) as i32 >> (32 - w)) as u32
            }
        },
        0,
    ),
    (
        "alignbit",
        "v_alignbit_b32 %0, %1, %2, %3",
        |a, b, c, _| ((((a as u64) << 32) | b as u64) >> (c & 31)) as u32,
        0,
    ),
    (
        "lshl_add",
        "v_lshl_add_u32 %0, %1, %2, %3",
        |a, b, c, _| (a << (b & 31)).wrapping_add(c),
        0,
    ),
    (
        "ashrrev",
        "v_ashrrev_i32 %0, %1, %2",
        |a, b, _, _| ((b as i32) >> (a & 31)) as u32,
        0,
    ),
    (
        "cndmask_class",
        "v_cmp_class_f32 vcc_lo, %1, %2\n v_cndmask_b32 %0, 0, 1, vcc_lo",
        |a, b, _, _| class(f(a), b) as u32,
        0,
    ),
    (
        "cmp_lt_f32",
        "v_cmp_lt_f32 vcc_lo, %1, %2\n v_cndmask_b32 %0, 0, 1, vcc_lo",
        |a, b, _, _| (f(a) < f(b)) as u32,
        0,
    ),
    (
        "cmp_nge_f32",
        "v_cmp_nge_f32 vcc_lo, %1, %2\n v_cndmask_b32 %0, 0, 1, vcc_lo",
        |a, b, _, _| (!(f(a) >= f(b))) as u32,
        0,
    ),
    (
        "cmp_lt_i32",
        "v_cmp_lt_i32 vcc_lo, %1, %2\n v_cndmask_b32 %0, 0, 1, vcc_lo",
        |a, b, _, _| ((a as i32) < (b as i32)) as u32,
        0,
    ),
    (
        "add_co_chain",
        "v_add_co_u32 %0, vcc_lo, %1, %2\n v_add_co_ci_u32 %0, vcc_lo, %0, %3, vcc_lo",
        |a, b, c, _| {
            let (s, carry) = a.overflowing_add(b);
            s.wrapping_add(c).wrapping_add(carry as u32)
        },
        0,
    ),
    (
        "mbcnt",
        "v_mbcnt_lo_u32_b32 %0, %1, 0",
        |a, _, _, lane| {
            // Only lanes 0-31 of each wave matter: a is uniform per test (see below).
            let m = a as u64 & ((1u64 << (lane % 32)) - 1);
            m.count_ones()
        },
        0,
    ),
    (
        "dpp_quad_perm",
        "v_mov_b32_dpp %0, %1 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf",
        |_, _, _, lane| (lane ^ 1) as u32,
        0,
    ),
    (
        "dpp_row_shr",
        "v_mov_b32 %0, 7\n v_mov_b32_dpp %0, %1 row_shr:1 row_mask:0xf bank_mask:0xf",
        |_, _, _, lane| {
            // Lane 0 of each row has no source and keeps its old value (bound_ctrl off).
            if lane % 16 == 0 { 7 } else { lane as u32 - 1 }
        },
        0,
    ),
    (
        "dpp8",
        "v_mov_b32_dpp %0, %1 dpp8:[7,6,5,4,3,2,1,0]",
        |_, _, _, lane| (lane / 8 * 8 + 7 - lane % 8) as u32,
        0,
    ),
    (
        "readlane",
        "v_readlane_b32 s0, %1, 5\n v_mov_b32 %0, s0",
        |_, _, _, lane| (lane / 32 * 32 + 5) as u32,
        0,
    ),
    (
        "cvt_f16_f32",
        "v_cvt_f16_f32 %0, %1",
        |a, _, _, _| f32_to_f16(f(a)) as u32,
        0,
    ),
    (
        "cvt_f32_f16",
        "v_cvt_f32_f16 %0, %1",
        |a, _, _, _| f16_to_f32(a as u16).to_bits(),
        0,
    ),
    (
        "add_f16",
        "v_add_f16 %0, %1, %2",
        |a, b, _, _| f64_to_f16(f16_to_f32(a as u16) as f64 + f16_to_f32(b as u16) as f64) as u32,
        0,
    ),
    (
        "pk_fma_f16",
        "v_pk_fma_f16 %0, %1, %2, %3",
        |a, b, c, _| {
            let h = |x: u32, k: u32| f16_to_f32((x >> (16 * k)) as u16) as f64;
            (0..2)
                .map(|k| (f64_to_f16(h(a, k).mul_add(h(b, k), h(c, k))) as u32) << (16 * k))
                .sum()
        },
        0,
    ),
    (
        "dot2acc_f16",
        "v_dot2acc_f32_f16 %0, %1, %2",
        |a, b, _, _| {
            let h = |x: u32, k: u32| f16_to_f32((x >> (16 * k)) as u16) as f64;
            ((h(a, 0) * h(b, 0) + h(a, 1) * h(b, 1)) as f32).to_bits()
        },
        1,
    ),
    (
        "perm",
        "v_perm_b32 %0, %1, %2, %3",
        |a, b, c, _| {
            let bytes = ((a as u64) << 32) | b as u64;
            (0..4)
                .map(|k| {
                    let s = (c >> (8 * k)) & 0xff;
                    let v = match s {
                        0..=7 => (bytes >> (8 * s)) & 0xff,
                        8..=11 => {
                            if bytes >> [15, 31, 47, 63][(s - 8) as usize] & 1 != 0 {
                                0xff
                            } else {
                                0
                            }
                        }
                        12 => 0,
                        _ => 0xff,
                    };
                    (v as u32) << (8 * k)
                })
                .sum()
        },
        0,
    ),
];

trait F64Ext {
    fn to_bits_f32(self) -> u32;
}
impl F64Ext for f64 {
    fn to_bits_f32(self) -> u32 {
        (self as f32).to_bits()
    }
}

fn f(x: u32) -> f32 {
    f32::from_bits(x)
}

/// IEEE-mode maxNum: a signalling NaN operand gives that NaN quieted.
fn maxnum(a: f32, b: f32) -> f32 {
    if let Some(q) = snan(a, b) {
        return q;
    }
    if a.is_nan() {
        b
    } else if b.is_nan() {
        a
    } else if a == b {
        if a.is_sign_negative() { b } else { a }
    } else {
        a.max(b)
    }
}
fn snan(a: f32, b: f32) -> Option<f32> {
    let s = |x: f32| x.is_nan() && x.to_bits() & 0x40_0000 == 0;
    if s(a) {
        Some(f32::from_bits(a.to_bits() | 0x40_0000))
    } else if s(b) {
        Some(f32::from_bits(b.to_bits() | 0x40_0000))
    } else {
        None
    }
}

fn minnum(a: f32, b: f32) -> f32 {
    if let Some(q) = snan(a, b) {
        return q;
    }
    if a.is_nan() {
        b
    } else if b.is_nan() {
        a
    } else if a == b {
        if a.is_sign_negative() { a } else { b }
    } else {
        a.min(b)
    }
}
fn med3(a: f32, b: f32, c: f32) -> f32 {
    if a.is_nan() || b.is_nan() || c.is_nan() {
        return minnum(minnum(a, b), c);
    }
    maxnum(minnum(a, b), minnum(maxnum(a, b), c))
}
fn frexp(x: f32) -> (f32, i32) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let e = (x.abs() as f64).log2().floor() as i32 + 1;
    let m = (x as f64 / 2f64.powi(e)) as f32;
    if m.abs() >= 1.0 {
        (m / 2.0, e + 1)
    } else {
        (m, e)
    }
}
fn class(x: f32, mask: u32) -> bool {
    let bit = if x.is_nan() {
        if x.to_bits() & 0x40_0000 == 0 { 0 } else { 1 }
    } else if x.is_infinite() {
        if x < 0.0 { 2 } else { 9 }
    } else if x == 0.0 {
        if x.is_sign_negative() { 5 } else { 6 }
    } else if x.is_subnormal() {
        if x < 0.0 { 4 } else { 7 }
    } else if x < 0.0 {
        3
    } else {
        8
    };
    mask >> bit & 1 != 0
}

/// Edge-case f32 inputs; the three sources are rotations of this list.
const EDGES: &[f32] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    2.5,
    -3.75,
    1e-40,
    -1e-40,
    1e-45,
    f32::MIN_POSITIVE,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
    3.0e38,
    -3.0e38,
    65504.0,
    1e-7,
    7.0,
    100.5,
    -0.5,
    1.5,
    2.0,
    16777217.0,
    -2147483648.0,
    4294967296.0,
    0.333_333_34,
    12345.678,
];

fn inputs(name: &str) -> [Vec<u32>; 3] {
    let mut r = Rng(0x5eed ^ name.len() as u64);
    let mut v: [Vec<u32>; 3] = [vec![], vec![], vec![]];
    for lane in 0..64 {
        for (k, vk) in v.iter_mut().enumerate() {
            let x = if lane < EDGES.len() {
                EDGES[(lane + 7 * k) % EDGES.len()].to_bits()
            } else if name.contains("f16") {
                f32_to_f16(r.f32(-100.0, 100.0)) as u32
                    | (f32_to_f16(r.f32(-4.0, 4.0)) as u32) << 16
            } else if lane % 2 == 0 {
                r.next() as u32
            } else {
                r.f32(-1000.0, 1000.0).to_bits()
            };
            vk.push(x);
        }
    }
    if name.starts_with("dpp") || name == "readlane" {
        v[0] = (0..64).collect();
    }
    if name == "mbcnt" {
        // A uniform mask: mbcnt counts its bits below each lane.
        v[0] = vec![0xdead_beef; 64];
    }
    v
}

fn build() -> (CodeObject, Program) {
    let mut src = String::new();
    for (name, asm, _, _) in CASES32 {
        let asm = asm.replace('\n', "\\n");
        src.push_str(&format!(
            "kernel void t_{name}(global const uint *A, global const uint *B, global const uint *C, global uint *O) {{\n\
             uint i = __builtin_amdgcn_workitem_id_x(); uint a = A[i], b = B[i], c = C[i], r = 0;\n\
             __asm__ volatile(\"{asm}\" : \"+v\"(r) : \"v\"(a), \"v\"(b), \"v\"(c) : \"vcc_lo\", \"s0\");\n\
             O[i] = r; }}\n"
        ));
    }
    let (_, bytes) = compile_cl(&src, &[]);
    let co = CodeObject::parse(&bytes, "semantics").unwrap();
    let prog = Program::new(&co, Isa::Gfx1100).unwrap();
    (co, prog)
}

#[test]
fn vector_instructions_match_isa_reference_on_edge_cases() {
    let k = build();
    let mut failures = vec![];
    for (name, asm, reference, max_ulps) in CASES32 {
        let inp = inputs(name);
        let [a, b, c] = &inp;
        let out = run_abc(&k, &format!("t_{name}"), 64, &inp);
        for lane in 0..64 {
            let want = reference(a[lane], b[lane], c[lane], lane);
            let got = out[lane];
            let ok = got == want
                || (f(got).is_nan()
                    && f(want).is_nan()
                    && !name.contains("cvt")
                    && !name.contains("f16")
                    && !name.starts_with("cmp")
                    && !name.contains("class"))
                || (*max_ulps > 0 && ulps(f(got), f(want)) <= *max_ulps);
            if !ok {
                failures.push(format!(
                    "{asm} lane {lane}: inputs {:#x} ({}) {:#x} ({}) {:#x}: got {got:#x} ({}), want {want:#x} ({})",
                    a[lane], f(a[lane]), b[lane], f(b[lane]), c[lane], f(got), f(want)
                ));
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    for x in failures
        .iter()
        .filter(|x| {
            seen.insert(x.split(" lane ").next().unwrap_or("").to_string()) || x.contains("lane 1:")
        })
        .take(60)
    {
        eprintln!("{x}");
    }
    assert!(failures.is_empty(), "{} lanes differ", failures.len());
}

type SRef = fn(u32, u32) -> u32;

/// Scalar ALU: (name, instruction with %0 = SGPR dst, %1/%2 = SGPR sources, reference).
const SCALAR: &[(&str, &str, SRef)] = &[
    ("s_add_u32", "s_add_u32 %0, %1, %2", |a, b| {
        a.wrapping_add(b)
    }),
    (
        "s_addc",
        "s_add_u32 %0, %1, %2\n s_addc_u32 %0, %0, 0",
        |a, b| {
            let (s, c) = a.overflowing_add(b);
            s + c as u32
        },
    ),
    (
        "s_sub_carry",
        "s_sub_u32 %0, %1, %2\n s_cselect_b32 %0, 1, 0",
        |a, b| (b > a) as u32,
    ),
    ("s_mul_hi_u32", "s_mul_hi_u32 %0, %1, %2", |a, b| {
        ((a as u64 * b as u64) >> 32) as u32
    }),
    ("s_mul_hi_i32", "s_mul_hi_i32 %0, %1, %2", |a, b| {
        ((a as i32 as i64 * b as i32 as i64) >> 32) as u32
    }),
    ("s_bfe_u32", "s_bfe_u32 %0, %1, %2", |a, b| {
        let (o, w) = (b & 31, (b >> 16) & 0x7f);
        if w == 0 {
            0
        } else {
            (a >> o) & ((1u64 << w.min(32)) - 1) as u32
        }
    }),
    ("s_bfe_i32", "s_bfe_i32 %0, %1, %2", |a, b| {
        let (o, w) = (b & 31, ((b >> 16) & 0x7f).min(32));
        if w == 0 {
            0
        } else {
            (((a >> o) << (32 - w)) as i32 >> (32 - w)) as u32
        }
    }),
    ("s_lshl2_add", "s_lshl2_add_u32 %0, %1, %2", |a, b| {
        (a << 2).wrapping_add(b)
    }),
    ("s_ashr", "s_ashr_i32 %0, %1, %2", |a, b| {
        ((a as i32) >> (b & 31)) as u32
    }),
    ("s_absdiff", "s_absdiff_i32 %0, %1, %2", |a, b| {
        (a as i32).wrapping_sub(b as i32).unsigned_abs()
    }),
    ("s_pack_lh", "s_pack_lh_b32_b16 %0, %1, %2", |a, b| {
        (a & 0xffff) | (b & 0xffff_0000)
    }),
    ("s_bcnt1", "s_bcnt1_i32_b32 %0, %1", |a, _| a.count_ones()),
    ("s_ctz", "s_ctz_i32_b32 %0, %1", |a, _| {
        if a == 0 { u32::MAX } else { a.trailing_zeros() }
    }),
    ("s_clz", "s_clz_i32_u32 %0, %1", |a, _| {
        if a == 0 { u32::MAX } else { a.leading_zeros() }
    }),
    ("s_brev", "s_brev_b32 %0, %1", |a, _| a.reverse_bits()),
    ("s_sext_i16", "s_sext_i32_i16 %0, %1", |a, _| {
        a as i16 as i32 as u32
    }),
    ("s_min_i32", "s_min_i32 %0, %1, %2", |a, b| {
        (a as i32).min(b as i32) as u32
    }),
    (
        "s_cmp_lt_i32",
        "s_cmp_lt_i32 %1, %2\n s_cselect_b32 %0, 1, 0",
        |a, b| ((a as i32) < (b as i32)) as u32,
    ),
    (
        "s_bitcmp1",
        "s_bitcmp1_b32 %1, %2\n s_cselect_b32 %0, 1, 0",
        |a, b| (a >> (b & 31)) & 1,
    ),
    ("s_and_not1", "s_and_not1_b32 %0, %1, %2", |a, b| a & !b),
    ("s_xnor", "s_xnor_b32 %0, %1, %2", |a, b| !(a ^ b)),
    (
        "s_mulk",
        "s_mov_b32 %0, %1\n s_mulk_i32 %0, 0xfff9",
        |a, _| (a as i32).wrapping_mul(-7) as u32,
    ),
    (
        "s_lshl_b64",
        "s_mov_b32 s10, %1\n s_mov_b32 s11, %2\n s_lshl_b64 s[10:11], s[10:11], 13\n s_xor_b32 %0, s10, s11",
        |a, b| {
            let v = ((b as u64) << 32 | a as u64) << 13;
            (v as u32) ^ (v >> 32) as u32
        },
    ),
];

#[test]
fn scalar_instructions_match_isa_reference() {
    let mut src = String::new();
    for (name, asm, _) in SCALAR {
        let asm = asm.replace('\n', "\\n");
        src.push_str(&format!(
            "kernel void s_{name}(uint a, uint b, global uint *O) {{\n\
             uint r, sa = __builtin_amdgcn_readfirstlane(a), sb = __builtin_amdgcn_readfirstlane(b);\n\
             __asm__ volatile(\"{asm}\" : \"=&s\"(r) : \"s\"(sa), \"s\"(sb) : \"scc\", \"s10\", \"s11\");\n\
             O[__builtin_amdgcn_workitem_id_x()] = r; }}\n"
        ));
    }
    let (_, bytes) = compile_cl(&src, &[]);
    let co = CodeObject::parse(&bytes, "scalar").unwrap();
    let prog = Program::new(&co, Isa::Gfx1100).unwrap();
    let k = (co, prog);
    let vals: [u32; 12] = [
        0,
        1,
        2,
        31,
        0x8000_0000,
        0xffff_ffff,
        0x1234_5678,
        0x0008_0004,
        0x0010_0003,
        0xdead_beef,
        7,
        0x7fff_ffff,
    ];
    let mut failures = vec![];
    for (name, asm, reference) in SCALAR {
        for &a in &vals {
            for &b in &vals {
                let mut mem = HostMemory::new();
                let po = mem.alloc(4 * 32);
                launch(
                    &k,
                    &format!("s_{name}"),
                    [32, 1, 1],
                    [32, 1, 1],
                    Args::default().u32(a).u32(b).ptr(po),
                    &mut mem,
                );
                let got = download_u32(&mut mem, po, 1)[0];
                let want = reference(a, b);
                if got != want {
                    failures.push(format!(
                        "{asm} with {a:#x}, {b:#x}: got {got:#x}, want {want:#x}"
                    ));
                }
            }
        }
    }
    for f in failures.iter().take(20) {
        eprintln!("{f}");
    }
    assert!(
        failures.is_empty(),
        "{} scalar results differ",
        failures.len()
    );
}
