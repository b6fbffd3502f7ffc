//! gfx12-only semantics (gfx1200, gfx1201): instruction sequences written as inline assembly
//! (compiled by clang-22), each run by 64 one-lane workgroups so scalar instructions see every
//! input, and compared bit for bit with references written from the RDNA4 ISA description:
//! scalar f32 arithmetic, conversions, compares and transcendentals, 64-bit scalar
//! arithmetic, the OCP fp8/bf8 conversions and dot products, NaN-propagating minimum/maximum; the sub-dword
//! scalar loads the compiler emits for uniform `constant` reads; and WMMA in gfx12's layout.

use crate::common;
use am_emu::{CodeObject, HostMemory, Isa, Program};
use common::*;

/// Reference: inputs a, b, c of the lane.
type Ref = fn(u32, u32, u32) -> u32;

fn f(x: u32) -> f32 {
    f32::from_bits(x)
}

/// OCP 8-bit floats written from the format definitions (not the emulator's decoder): E4M3FN
/// (bias 7, no infinities, S.1111.111 is NaN) and E5M2 (bias 15, IEEE infinities and NaNs).
fn f8(x: u8, exp_bits: u32) -> f32 {
    let man_bits = 7 - exp_bits;
    let bias = (1i32 << (exp_bits - 1)) - 1;
    let e = (x as i32 >> man_bits) & ((1 << exp_bits) - 1);
    let m = (x as i32) & ((1 << man_bits) - 1);
    let max_e = (1 << exp_bits) - 1;
    let mag = if exp_bits == 4 && e == max_e && m == 7 || exp_bits == 5 && e == max_e && m != 0 {
        f32::NAN
    } else if exp_bits == 5 && e == max_e {
        f32::INFINITY
    } else if e == 0 {
        m as f32 * 2f32.powi(1 - bias - man_bits as i32)
    } else {
        (1.0 + m as f32 / (1 << man_bits) as f32) * 2f32.powi(e - bias)
    };
    if x & 0x80 != 0 { -mag } else { mag }
}

/// Reads the three inputs into s0, s1, s2 (every workgroup is one lane).
const S3: &str =
    "v_readfirstlane_b32 s0, %1\nv_readfirstlane_b32 s1, %2\nv_readfirstlane_b32 s2, %3\n";

/// (name, assembly after [`S3`] with %0 = result (starts as c), %1..%3 = a, b, c, reference).
/// Scratch registers: v40-v47, s[0:7], vcc.
const CASES: &[(&str, &str, Ref)] = &[
    (
        "s_add_f32",
        "s_add_f32 s3, s0, s1\nv_mov_b32 %0, s3",
        |a, b, _| (f(a) + f(b)).to_bits(),
    ),
    (
        "s_sub_f32",
        "s_sub_f32 s3, s0, s1\nv_mov_b32 %0, s3",
        |a, b, _| (f(a) - f(b)).to_bits(),
    ),
    (
        "s_mul_f32",
        "s_mul_f32 s3, s0, s1\nv_mov_b32 %0, s3",
        |a, b, _| (f(a) * f(b)).to_bits(),
    ),
    (
        // maximumNumber: a NaN operand yields the other; +0 is greater than -0.
        "s_max_num_f32",
        "s_max_num_f32 s3, s0, s1\nv_mov_b32 %0, s3",
        |a, b, _| {
            let (x, y) = (f(a), f(b));
            if x.is_nan() {
                b
            } else if y.is_nan() || x > y || x == y && y.is_sign_negative() {
                a
            } else {
                b
            }
        },
    ),
    (
        "s_fmac_f32",
        "s_mov_b32 s3, s2\ns_fmac_f32 s3, s0, s1\nv_mov_b32 %0, s3",
        |a, b, c| f(a).mul_add(f(b), f(c)).to_bits(),
    ),
    (
        "s_fmamk_f32",
        "s_fmamk_f32 s3, s0, 0x40400000, s1\nv_mov_b32 %0, s3",
        |a, b, _| f(a).mul_add(3.0, f(b)).to_bits(),
    ),
    (
        "s_fmaak_f32",
        "s_fmaak_f32 s3, s0, s1, 0xbf000000\nv_mov_b32 %0, s3",
        |a, b, _| f(a).mul_add(f(b), -0.5).to_bits(),
    ),
    (
        // Saturating, NaN to 0.
        "s_cvt_i32_f32",
        "s_cvt_i32_f32 s3, s0\nv_mov_b32 %0, s3",
        |a, _, _| {
            let x = f(a);
            if x.is_nan() {
                0
            } else if x >= 2147483647.0 {
                i32::MAX as u32
            } else if x <= -2147483648.0 {
                i32::MIN as u32
            } else {
                x.trunc() as i64 as i32 as u32
            }
        },
    ),
    (
        "s_cvt_f32_u32",
        "s_cvt_f32_u32 s3, s0\nv_mov_b32 %0, s3",
        |a, _, _| (a as f32).to_bits(),
    ),
    (
        "s_floor_rndne_f32",
        "s_floor_f32 s3, s0\ns_rndne_f32 s4, s1\ns_add_f32 s3, s3, s4\nv_mov_b32 %0, s3",
        |a, b, _| (f(a).floor() + f(b).round_ties_even()).to_bits(),
    ),
    (
        // An ordered compare is false on NaN, its negation true.
        "s_cmp_lt_nge_f32",
        "s_cmp_lt_f32 s0, s1\ns_cselect_b32 s3, 1, 0\ns_cmp_nge_f32 s0, s1\ns_cselect_b32 s4, 2, 0\n\
         s_or_b32 s3, s3, s4\nv_mov_b32 %0, s3",
        |a, b, _| u32::from(f(a) < f(b)) | if f(a) >= f(b) { 0 } else { 2 },
    ),
    // The scalar twins of v_exp/log/rcp/rsq/sqrt_f32, with the vector forms' precision.
    (
        "v_s_exp_f32",
        "v_s_exp_f32 s3, s0\nv_mov_b32 %0, s3",
        |a, _, _| ((f(a) as f64).exp2() as f32).to_bits(),
    ),
    (
        "v_s_log_f32",
        "v_s_log_f32 s3, s0\nv_mov_b32 %0, s3",
        |a, _, _| ((f(a) as f64).log2() as f32).to_bits(),
    ),
    (
        "v_s_rcp_f32",
        "v_s_rcp_f32 s3, s0\nv_mov_b32 %0, s3",
        |a, _, _| ((1.0 / f(a) as f64) as f32).to_bits(),
    ),
    (
        "v_s_rsq_f32",
        "v_s_rsq_f32 s3, |s0|\nv_mov_b32 %0, s3",
        |a, _, _| ((1.0 / (f(a).abs() as f64).sqrt()) as f32).to_bits(),
    ),
    (
        "v_s_sqrt_f32",
        "v_s_sqrt_f32 s3, s0\nv_mov_b32 %0, s3",
        |a, _, _| f(a).sqrt().to_bits(),
    ),
    (
        "s_add_nc_u64_mul_u64",
        "s_mov_b32 s4, s2\ns_mov_b32 s5, s0\ns_add_nc_u64 s[6:7], s[0:1], s[4:5]\n\
         s_mul_u64 s[4:5], s[6:7], s[0:1]\ns_xor_b32 s4, s4, s5\nv_mov_b32 %0, s4",
        |a, b, c| {
            let x = a as u64 | (b as u64) << 32;
            let y = c as u64 | (a as u64) << 32;
            let p = x.wrapping_add(y).wrapping_mul(x);
            p as u32 ^ (p >> 32) as u32
        },
    ),
    (
        "v_cvt_f32_fp8_byte_sel",
        "v_cvt_f32_fp8_e64 %0, %1 byte_sel:2",
        |a, _, _| f8((a >> 16) as u8, 4).to_bits(),
    ),
    ("v_cvt_f32_bf8", "v_cvt_f32_bf8_e32 %0, %1", |a, _, _| {
        f8(a as u8, 5).to_bits()
    }),
    (
        "v_cvt_pk_f32_fp8_high",
        "v_cvt_pk_f32_fp8_e64 v[40:41], %1 op_sel:[1,0]\nv_sub_f32 %0, v40, v41",
        |a, _, _| (f8((a >> 16) as u8, 4) - f8((a >> 24) as u8, 4)).to_bits(),
    ),
    (
        // Products of 8-bit floats are exact in f32; the sum is accumulated in order, each
        // step rounded (the emulator's documented order).
        "v_dot4_f32_fp8_bf8",
        "v_dot4_f32_fp8_bf8 %0, %1, %2, %3",
        |a, b, c| {
            let mut acc = f(c);
            for e in 0..4 {
                let x = f8((a >> (8 * e)) as u8, 4);
                let y = f8((b >> (8 * e)) as u8, 5);
                acc = x.mul_add(y, acc);
            }
            acc.to_bits()
        },
    ),
    ("v_maximum_f32", "v_maximum_f32 %0, %1, %2", |a, b, _| {
        let (x, y) = (f(a), f(b));
        if x.is_nan() || y.is_nan() {
            0x7fc0_0000
        } else if x > y || x == y && y.is_sign_negative() {
            a
        } else {
            b
        }
    }),
];

fn inputs(name: &str) -> [Vec<u32>; 3] {
    let mut r = Rng(0x12_00 ^ name.len() as u64);
    let edges = [
        0.0f32,
        -0.0,
        1.0,
        -1.5,
        65504.0,
        1e-30,
        3.0e38,
        f32::INFINITY,
        f32::NAN,
        0.5,
        7.0,
        2.5,
        -3.5,
    ];
    let mut v: [Vec<u32>; 3] = [vec![], vec![], vec![]];
    for lane in 0..64 {
        for (k, vk) in v.iter_mut().enumerate() {
            let x = if name.contains("fp8") || name.contains("bf8") || name.contains("u64") {
                r.next() as u32
            } else if lane < 2 * edges.len() {
                edges[(lane + 3 * k) % edges.len()].to_bits()
            } else if lane % 2 == 0 {
                r.f32(-1e9, 1e9).to_bits()
            } else {
                r.f32(-1000.0, 1000.0).to_bits()
            };
            vk.push(x);
        }
    }
    v
}

fn build(isa: Isa) -> (CodeObject, Program) {
    let mut src = String::new();
    for (name, asm, _) in CASES {
        let asm = format!("{S3}{asm}").replace('\n', "\\n");
        src.push_str(&format!(
            "kernel void t_{name}(global const uint *A, global const uint *B, global const uint *C, global uint *O) {{\n\
             uint i = __builtin_amdgcn_workgroup_id_x(); uint a = A[i], b = B[i], c = C[i], r = c;\n\
             __asm__ volatile(\"{asm}\" : \"+v\"(r) : \"v\"(a), \"v\"(b), \"v\"(c) : \"vcc\", \"s0\", \"s1\", \"s2\", \"s3\", \
             \"s4\", \"s5\", \"s6\", \"s7\", \"v40\", \"v41\", \"v42\", \"v43\", \"v44\", \"v45\", \"v46\", \"v47\");\n\
             O[i] = r; }}\n"
        ));
    }
    let (_, bytes) = compile_cl_for(isa, &src, &[]);
    let co = CodeObject::parse(&bytes, "rdna4 semantics").unwrap();
    let prog = Program::new(&co, isa).unwrap();
    (co, prog)
}

fn run_cases(isa: Isa) {
    let k = build(isa);
    let mut failures = vec![];
    for (name, asm, reference) in CASES {
        let inp = inputs(name);
        let [a, b, c] = &inp;
        let out = run_abc(&k, &format!("t_{name}"), 1, &inp);
        for lane in 0..64 {
            let (got, want) = (out[lane], reference(a[lane], b[lane], c[lane]));
            // NaN results compare as NaN: the ISA does not say which payload survives.
            let both_nan = f(got).is_nan() && f(want).is_nan();
            if got != want && !both_nan {
                failures.push(format!(
                    "{isa:?} {name} ({}) input {lane}: {:#x} {:#x} {:#x}: got {got:#x}, want {want:#x}",
                    asm.lines().next().unwrap_or(""),
                    a[lane],
                    b[lane],
                    c[lane]
                ));
            }
        }
    }
    for x in failures.iter().take(40) {
        eprintln!("{x}");
    }
    assert!(failures.is_empty(), "{} results differ", failures.len());
}

#[test]
fn gfx12_instructions_match_isa_reference_on_gfx1200() {
    run_cases(Isa::Gfx1200);
}

#[test]
fn gfx12_instructions_match_isa_reference_on_gfx1201() {
    run_cases(Isa::Gfx1201);
}

/// Uniform reads of `constant` bytes and shorts compile to gfx12's `s_load_i8/u8/i16/u16`,
/// which sign- or zero-extend into an SGPR.
#[test]
fn scalar_sub_dword_loads_extend_as_their_type_says() {
    let src = "kernel void sload(constant char *p, constant short *q, global int *o) {\n\
               o[0] = p[5]; o[1] = ((constant uchar *)p)[7];\n\
               o[2] = q[3]; o[3] = ((constant ushort *)q)[1]; }\n";
    let (path, bytes) = compile_cl_for(Isa::Gfx1200, src, &[]);
    let dis = std::process::Command::new("llvm-objdump-22")
        .args(["-d", "--mcpu=gfx1200"])
        .arg(&*path)
        .output()
        .unwrap();
    let dis = String::from_utf8_lossy(&dis.stdout);
    for m in ["s_load_i8", "s_load_u8", "s_load_i16", "s_load_u16"] {
        assert!(dis.contains(m), "the compiler no longer emits {m}:\n{dis}");
    }
    let co = CodeObject::parse(&bytes, "sload").unwrap();
    let k = (co.clone(), Program::new(&co, Isa::Gfx1200).unwrap());
    let mut mem = HostMemory::new();
    let bytes8: Vec<u8> = (0..16).map(|i| 0x80 | (i * 3) as u8).collect();
    let p = mem.alloc_bytes(&bytes8);
    let shorts: Vec<u16> = vec![0x1234, 0xfedc, 0x7fff, 0x8001];
    let q = upload(&mut mem, &shorts);
    let o = mem.alloc(16);
    launch(
        &k,
        "sload",
        [1, 1, 1],
        [1, 1, 1],
        Args::default().ptr(p).ptr(q).ptr(o),
        &mut mem,
    );
    let out = download_u32(&mut mem, o, 4);
    assert_eq!(
        out[0] as i32, bytes8[5] as i8 as i32,
        "s_load_i8 sign-extends"
    );
    assert_eq!(out[1], bytes8[7] as u32, "s_load_u8 zero-extends");
    assert_eq!(
        out[2] as i32, shorts[3] as i16 as i32,
        "s_load_i16 sign-extends"
    );
    assert_eq!(out[3], shorts[1] as u32, "s_load_u16 zero-extends");
}

/// gfx12 WMMA kernels: each lane loads its fragments of row-major A (16×16), B (16×16) and
/// C by the layout AMD's Matrix Instruction Calculator gives (16-bit A[i][k] in lane
/// i + 16·k[2], element k[1:0] | k[3] << 2; 8-bit A[i][k] in lane i + 16·k[3], element
/// k[2:0]; C/D[m][n] in lane n + 16·(m / 8), register m mod 8), runs one WMMA through the
/// compiler builtin and stores D the same way.
const WMMA_CL: &str = r#"
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
typedef half h8 __attribute__((ext_vector_type(8)));
typedef float f8 __attribute__((ext_vector_type(8)));
typedef int i8v __attribute__((ext_vector_type(8)));
typedef int i2 __attribute__((ext_vector_type(2)));
#define LANE uint l = __builtin_amdgcn_workitem_id_x(), x = l % 16, hi = l / 16;
#define KOF(e) ((uint)((e) & 3) | (hi << 2) | ((uint)((e) >> 2) << 3))
#define KOF8(e) ((uint)(e) | (hi << 3))
kernel void wmma_f16(global const half *A, global const half *B, global const float *C,
                     global float *D) {
  LANE h8 a, b; f8 c;
  for (int e = 0; e < 8; e++) { a[e] = A[x * 16 + KOF(e)]; b[e] = B[KOF(e) * 16 + x]; }
  for (int r = 0; r < 8; r++) c[r] = C[(r + 8 * hi) * 16 + x];
  f8 d = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(a, b, c);
  for (int r = 0; r < 8; r++) D[(r + 8 * hi) * 16 + x] = d[r];
}
kernel void wmma_f16_out(global const half *A, global const half *B, global const half *C,
                         global half *D) {
  LANE h8 a, b, c;
  for (int e = 0; e < 8; e++) { a[e] = A[x * 16 + KOF(e)]; b[e] = B[KOF(e) * 16 + x]; }
  for (int r = 0; r < 8; r++) c[r] = C[(r + 8 * hi) * 16 + x];
  h8 d = __builtin_amdgcn_wmma_f16_16x16x16_f16_w32_gfx12(a, b, c);
  for (int r = 0; r < 8; r++) D[(r + 8 * hi) * 16 + x] = d[r];
}
kernel void wmma_iu8(global const uchar *A, global const uchar *B, global const int *C,
                     global int *D) {
  LANE uchar a[8], b[8]; i8v c;
  for (int e = 0; e < 8; e++) { a[e] = A[x * 16 + KOF8(e)]; b[e] = B[KOF8(e) * 16 + x]; }
  i2 av = (i2)(a[0] | a[1] << 8 | a[2] << 16 | a[3] << 24, a[4] | a[5] << 8 | a[6] << 16 | a[7] << 24);
  i2 bv = (i2)(b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24, b[4] | b[5] << 8 | b[6] << 16 | b[7] << 24);
  for (int r = 0; r < 8; r++) c[r] = C[(r + 8 * hi) * 16 + x];
  i8v d = __builtin_amdgcn_wmma_i32_16x16x16_iu8_w32_gfx12(true, av, false, bv, c, false);
  for (int r = 0; r < 8; r++) D[(r + 8 * hi) * 16 + x] = d[r];
}
kernel void wmma_fp8_bf8(global const uchar *A, global const uchar *B, global const float *C,
                         global float *D) {
  LANE uchar a[8], b[8]; f8 c;
  for (int e = 0; e < 8; e++) { a[e] = A[x * 16 + KOF8(e)]; b[e] = B[KOF8(e) * 16 + x]; }
  i2 av = (i2)(a[0] | a[1] << 8 | a[2] << 16 | a[3] << 24, a[4] | a[5] << 8 | a[6] << 16 | a[7] << 24);
  i2 bv = (i2)(b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24, b[4] | b[5] << 8 | b[6] << 16 | b[7] << 24);
  for (int r = 0; r < 8; r++) c[r] = C[(r + 8 * hi) * 16 + x];
  f8 d = __builtin_amdgcn_wmma_f32_16x16x16_fp8_bf8_w32_gfx12(av, bv, c);
  for (int r = 0; r < 8; r++) D[(r + 8 * hi) * 16 + x] = d[r];
}
"#;

/// A random 8-bit float that is neither NaN nor infinite.
fn finite_f8(r: &mut Rng, exp_bits: u32) -> u8 {
    loop {
        let b = r.next() as u8;
        if f8(b, exp_bits).is_finite() {
            return b;
        }
    }
}

/// D = A·B + C in the documented order: from C, one f32 fused multiply-add per k.
fn matmul_f32(a: &[f32], b: &[f32], c: &[f32]) -> Vec<f32> {
    let mut d = vec![0f32; 256];
    for m in 0..16 {
        for n in 0..16 {
            let mut acc = c[m * 16 + n];
            for k in 0..16 {
                acc = a[m * 16 + k].mul_add(b[k * 16 + n], acc);
            }
            d[m * 16 + n] = acc;
        }
    }
    d
}

#[test]
fn wmma_computes_d_equals_a_times_b_plus_c_in_the_gfx12_layout() {
    use am_emu::float::{f16_to_f32, f32_to_f16};
    for isa in [Isa::Gfx1200, Isa::Gfx1201] {
        let (_, bytes) = compile_cl_for(isa, WMMA_CL, &[]);
        let co = CodeObject::parse(&bytes, "wmma").unwrap();
        let k = (co.clone(), Program::new(&co, isa).unwrap());
        let mut r = Rng(0x3a3a);
        let run = |name: &str, a: u64, b: u64, c: u64, d: u64, mem: &mut HostMemory| {
            launch(
                &k,
                name,
                [32, 1, 1],
                [32, 1, 1],
                Args::default().ptr(a).ptr(b).ptr(c).ptr(d),
                mem,
            );
        };
        // f16 inputs, f32 and f16 accumulators.
        let ah: Vec<u16> = (0..256).map(|_| f32_to_f16(r.f32(-4.0, 4.0))).collect();
        let bh: Vec<u16> = (0..256).map(|_| f32_to_f16(r.f32(-4.0, 4.0))).collect();
        let c32: Vec<f32> = (0..256).map(|_| r.f32(-8.0, 8.0)).collect();
        let c16: Vec<u16> = c32.iter().map(|&x| f32_to_f16(x)).collect();
        let af: Vec<f32> = ah.iter().map(|&h| f16_to_f32(h)).collect();
        let bf: Vec<f32> = bh.iter().map(|&h| f16_to_f32(h)).collect();
        let mut mem = HostMemory::new();
        let (pa, pb, pc, pd) = (
            upload(&mut mem, &ah),
            upload(&mut mem, &bh),
            upload(&mut mem, &c32),
            mem.alloc(4 * 256),
        );
        run("wmma_f16", pa, pb, pc, pd, &mut mem);
        let want = matmul_f32(&af, &bf, &c32);
        let got = download_u32(&mut mem, pd, 256);
        for e in 0..256 {
            assert_eq!(
                got[e],
                want[e].to_bits(),
                "{isa:?} f16→f32 D[{}][{}]",
                e / 16,
                e % 16
            );
        }
        let (pc, pd) = (upload(&mut mem, &c16), mem.alloc(2 * 256));
        run("wmma_f16_out", pa, pb, pc, pd, &mut mem);
        let c16f: Vec<f32> = c16.iter().map(|&h| f16_to_f32(h)).collect();
        let want: Vec<u16> = matmul_f32(&af, &bf, &c16f)
            .iter()
            .map(|&x| f32_to_f16(x))
            .collect();
        let got = download_u16(&mut mem, pd, 256);
        assert_eq!(got, want, "{isa:?} f16→f16");
        // Signed A times unsigned B, i32 accumulator.
        let a8: Vec<u8> = (0..256).map(|_| r.next() as u8).collect();
        let b8: Vec<u8> = (0..256).map(|_| r.next() as u8).collect();
        let ci: Vec<i32> = (0..256).map(|_| r.next() as i32 >> 8).collect();
        let (pa, pb, pc, pd) = (
            mem.alloc_bytes(&a8),
            mem.alloc_bytes(&b8),
            upload(&mut mem, &ci),
            mem.alloc(4 * 256),
        );
        run("wmma_iu8", pa, pb, pc, pd, &mut mem);
        let got = download_u32(&mut mem, pd, 256);
        for m in 0..16 {
            for n in 0..16 {
                let dot: i32 = (0..16)
                    .map(|k| a8[m * 16 + k] as i8 as i32 * b8[k * 16 + n] as i32)
                    .sum();
                let want = ci[m * 16 + n].wrapping_add(dot);
                assert_eq!(got[m * 16 + n] as i32, want, "{isa:?} iu8 D[{m}][{n}]");
            }
        }
        // fp8 (E4M3) times bf8 (E5M2).
        let a8: Vec<u8> = (0..256).map(|_| finite_f8(&mut r, 4)).collect();
        let b8: Vec<u8> = (0..256).map(|_| finite_f8(&mut r, 5)).collect();
        let (pa, pb, pc, pd) = (
            mem.alloc_bytes(&a8),
            mem.alloc_bytes(&b8),
            upload(&mut mem, &c32),
            mem.alloc(4 * 256),
        );
        run("wmma_fp8_bf8", pa, pb, pc, pd, &mut mem);
        let af: Vec<f32> = a8.iter().map(|&x| f8(x, 4)).collect();
        let bf: Vec<f32> = b8.iter().map(|&x| f8(x, 5)).collect();
        let want = matmul_f32(&af, &bf, &c32);
        let got = download_u32(&mut mem, pd, 256);
        for e in 0..256 {
            assert_eq!(
                got[e],
                want[e].to_bits(),
                "{isa:?} fp8×bf8 D[{}][{}]",
                e / 16,
                e % 16
            );
        }
    }
}
