//! WMMA end to end: OpenCL kernels calling the compiler's WMMA builtins (which become
//! `llvm.amdgcn.wmma.*` and the `v_wmma_*` instructions), compiled by clang-22 for gfx1100 in
//! wave32 and wave64 and for gfx1201 in wave64, run by one wave. Each lane loads its fragments
//! of row-major A, B and C by the layout AMD's Matrix Instruction Calculator gives, and stores
//! D the same way; D must equal a plain matrix product in the emulator's documented order
//! (from C, one f32 fused multiply-add per k), bit for bit.
//! gfx12's wave32 forms are checked the same way in `tests/integration/rdna4.rs`.

use crate::common;
use am_emu::float::{f16_to_f32, f32_to_f16};
use am_emu::{CodeObject, HostMemory, Isa, Program};
use common::*;

/// gfx11: lane l holds row/column l mod 16 of A and B (all 16 elements; every group of 16
/// lanes a copy), and C/D[i][j] in register i / R of lane 16·(i mod R) + j, R = lanes / 16.
const GFX11_CL: &str = r#"
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
typedef half h16 __attribute__((ext_vector_type(16)));
typedef half h8 __attribute__((ext_vector_type(8)));
typedef float f8 __attribute__((ext_vector_type(8)));
typedef float f4 __attribute__((ext_vector_type(4)));
typedef int i4 __attribute__((ext_vector_type(4)));
typedef int i8v __attribute__((ext_vector_type(8)));
#define LANE uint l = __builtin_amdgcn_workitem_id_x(), x = l % 16, g = l / 16;
#ifdef W64
#define R 4
typedef f4 acc_t;
typedef h8 hacc_t;
typedef i4 iacc_t;
#define WMMA_F32 __builtin_amdgcn_wmma_f32_16x16x16_f16_w64
#define WMMA_F16 __builtin_amdgcn_wmma_f16_16x16x16_f16_w64
#define WMMA_IU8 __builtin_amdgcn_wmma_i32_16x16x16_iu8_w64
#else
#define R 2
typedef f8 acc_t;
typedef h16 hacc_t;
typedef i8v iacc_t;
#define WMMA_F32 __builtin_amdgcn_wmma_f32_16x16x16_f16_w32
#define WMMA_F16 __builtin_amdgcn_wmma_f16_16x16x16_f16_w32
#define WMMA_IU8 __builtin_amdgcn_wmma_i32_16x16x16_iu8_w32
#endif
#define ROW(r) (((r) * R + g) * 16 + x)
kernel void f16_f32(global const half *A, global const half *B, global const float *C,
                    global float *D) {
  LANE h16 a, b; acc_t c;
  for (int k = 0; k < 16; k++) { a[k] = A[x * 16 + k]; b[k] = B[k * 16 + x]; }
  for (int r = 0; r < 8 / (R / 2); r++) c[r] = C[ROW(r)];
  acc_t d = WMMA_F32(a, b, c);
  for (int r = 0; r < 8 / (R / 2); r++) D[ROW(r)] = d[r];
}
// The f16 result in the high halves (op_sel[2]); the low halves hold 7.0 before, and D
// keeps them (stored to Keep).
kernel void f16_f16_hi(global const half *A, global const half *B, global const half *C,
                       global half *D, global half *Keep) {
  LANE h16 a, b; hacc_t c;
  for (int k = 0; k < 16; k++) { a[k] = A[x * 16 + k]; b[k] = B[k * 16 + x]; }
  for (int r = 0; r < 8 / (R / 2); r++) { c[2 * r] = 7.0h; c[2 * r + 1] = C[ROW(r)]; }
  hacc_t d = WMMA_F16(a, b, c, true);
  for (int r = 0; r < 8 / (R / 2); r++) { D[ROW(r)] = d[2 * r + 1]; Keep[ROW(r)] = d[2 * r]; }
}
kernel void iu8(global const uchar *A, global const uchar *B, global const int *C,
                global int *D) {
  LANE uint a[4], b[4]; iacc_t c;
  for (int v = 0; v < 4; v++) {
    a[v] = 0; b[v] = 0;
    for (int e = 0; e < 4; e++) {
      a[v] |= (uint)A[x * 16 + 4 * v + e] << (8 * e);
      b[v] |= (uint)B[(4 * v + e) * 16 + x] << (8 * e);
    }
  }
  for (int r = 0; r < 8 / (R / 2); r++) c[r] = C[ROW(r)];
  iacc_t d = WMMA_IU8(false, (i4)(a[0], a[1], a[2], a[3]), true,
                      (i4)(b[0], b[1], b[2], b[3]), c, true);
  for (int r = 0; r < 8 / (R / 2); r++) D[ROW(r)] = d[r];
}
"#;

/// gfx12 wave64: 16-bit A[i][k] in lane 16·(k / 4) + i (lanes 32–63 take the upper half of
/// wave32's registers), element k mod 4; C/D[i][j] in register i mod 4 of lane
/// 32·((i / 4) mod 2) + 16·(i / 8) + j.
const GFX12_W64_CL: &str = r#"
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
typedef half h4 __attribute__((ext_vector_type(4)));
typedef float f4 __attribute__((ext_vector_type(4)));
kernel void f16_f32(global const half *A, global const half *B, global const float *C,
                    global float *D) {
  uint l = __builtin_amdgcn_workitem_id_x(), x = l % 16, g = l / 16;
  h4 a, b; f4 c;
  for (int e = 0; e < 4; e++) { a[e] = A[x * 16 + 4 * g + e]; b[e] = B[(4 * g + e) * 16 + x]; }
  uint i0 = 8 * (g % 2) + 4 * (g / 2);
  for (int r = 0; r < 4; r++) c[r] = C[(i0 + r) * 16 + x];
  f4 d = __builtin_amdgcn_wmma_f32_16x16x16_f16_w64_gfx12(a, b, c);
  for (int r = 0; r < 4; r++) D[(i0 + r) * 16 + x] = d[r];
}
"#;

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

fn halves(r: &mut Rng, lo: f32, hi: f32) -> Vec<u16> {
    (0..256).map(|_| f32_to_f16(r.f32(lo, hi))).collect()
}

fn widen(h: &[u16]) -> Vec<f32> {
    h.iter().map(|&x| f16_to_f32(x)).collect()
}

fn load(bytes: &[u8], isa: Isa) -> (CodeObject, Program) {
    let co = CodeObject::parse(bytes, "wmma").unwrap();
    let prog = Program::new(&co, isa).unwrap();
    (co, prog)
}

#[test]
fn gfx11_wmma_builtins_compute_d_equals_a_times_b_plus_c_in_wave32_and_wave64() {
    for lanes in [32u32, 64] {
        let extra: &[&str] = if lanes == 64 {
            &["-mwavefrontsize64", "-DW64"]
        } else {
            &[]
        };
        let (_, bytes) = compile_cl_for(Isa::Gfx1100, GFX11_CL, extra);
        let k = load(&bytes, Isa::Gfx1100);
        let mut r = Rng(0x57_3232 + lanes as u64);
        let mut mem = HostMemory::new();
        let ah = halves(&mut r, -4.0, 4.0);
        let bh = halves(&mut r, -4.0, 4.0);
        let c32: Vec<f32> = (0..256).map(|_| r.f32(-8.0, 8.0)).collect();
        let (pa, pb, pc, pd) = (
            upload(&mut mem, &ah),
            upload(&mut mem, &bh),
            upload(&mut mem, &c32),
            mem.alloc(4 * 256),
        );
        let args = Args::default().ptr(pa).ptr(pb).ptr(pc).ptr(pd);
        launch(&k, "f16_f32", [lanes, 1, 1], [lanes, 1, 1], args, &mut mem);
        let want = matmul_f32(&widen(&ah), &widen(&bh), &c32);
        let got = download_u32(&mut mem, pd, 256);
        for e in 0..256 {
            assert_eq!(
                got[e],
                want[e].to_bits(),
                "wave{lanes} f16→f32 D[{}][{}]",
                e / 16,
                e % 16
            );
        }

        let c16: Vec<u16> = c32.iter().map(|&x| f32_to_f16(x)).collect();
        let (pc, pd, keep) = (upload(&mut mem, &c16), mem.alloc(512), mem.alloc(512));
        let args = Args::default().ptr(pa).ptr(pb).ptr(pc).ptr(pd).ptr(keep);
        launch(
            &k,
            "f16_f16_hi",
            [lanes, 1, 1],
            [lanes, 1, 1],
            args,
            &mut mem,
        );
        let want: Vec<u16> = matmul_f32(&widen(&ah), &widen(&bh), &widen(&c16))
            .iter()
            .map(|&x| f32_to_f16(x))
            .collect();
        assert_eq!(
            download_u16(&mut mem, pd, 256),
            want,
            "wave{lanes} f16→f16 in the high halves"
        );
        assert_eq!(
            download_u16(&mut mem, keep, 256),
            vec![f32_to_f16(7.0); 256],
            "wave{lanes}: the low halves keep C's"
        );

        // Unsigned A times signed B, saturating.
        let a8: Vec<u8> = (0..256).map(|_| r.next() as u8).collect();
        let b8: Vec<u8> = (0..256).map(|_| r.next() as u8).collect();
        let mut ci: Vec<i32> = (0..256).map(|_| r.next() as i32 >> 8).collect();
        ci[0] = i32::MAX - 5;
        ci[17] = i32::MIN + 5;
        let (pa, pb, pc, pd) = (
            mem.alloc_bytes(&a8),
            mem.alloc_bytes(&b8),
            upload(&mut mem, &ci),
            mem.alloc(4 * 256),
        );
        let args = Args::default().ptr(pa).ptr(pb).ptr(pc).ptr(pd);
        launch(&k, "iu8", [lanes, 1, 1], [lanes, 1, 1], args, &mut mem);
        let got = download_u32(&mut mem, pd, 256);
        for m in 0..16 {
            for n in 0..16 {
                let dot: i64 = (0..16)
                    .map(|k| a8[m * 16 + k] as i64 * b8[k * 16 + n] as i8 as i64)
                    .sum();
                let want = (ci[m * 16 + n] as i64 + dot).clamp(i32::MIN.into(), i32::MAX.into());
                assert_eq!(
                    got[m * 16 + n] as i32 as i64,
                    want,
                    "wave{lanes} iu8 D[{m}][{n}]"
                );
            }
        }
    }
}

#[test]
fn gfx12_wmma_builtin_computes_d_equals_a_times_b_plus_c_in_wave64() {
    let (_, bytes) = compile_cl_for(Isa::Gfx1201, GFX12_W64_CL, &["-mwavefrontsize64"]);
    let k = load(&bytes, Isa::Gfx1201);
    let mut r = Rng(0x1201_0064);
    let mut mem = HostMemory::new();
    let ah = halves(&mut r, -4.0, 4.0);
    let bh = halves(&mut r, -4.0, 4.0);
    let c32: Vec<f32> = (0..256).map(|_| r.f32(-8.0, 8.0)).collect();
    let (pa, pb, pc, pd) = (
        upload(&mut mem, &ah),
        upload(&mut mem, &bh),
        upload(&mut mem, &c32),
        mem.alloc(4 * 256),
    );
    let args = Args::default().ptr(pa).ptr(pb).ptr(pc).ptr(pd);
    launch(&k, "f16_f32", [64, 1, 1], [64, 1, 1], args, &mut mem);
    let want = matmul_f32(&widen(&ah), &widen(&bh), &c32);
    let got = download_u32(&mut mem, pd, 256);
    for e in 0..256 {
        assert_eq!(got[e], want[e].to_bits(), "D[{}][{}]", e / 16, e % 16);
    }
}
