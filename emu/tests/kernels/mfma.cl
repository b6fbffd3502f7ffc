// MFMA tiles for the emulator tests: one wave64 computes D = A * B + C for one instruction,
// loading its fragments and storing its results by the operand layout of the CDNA3 matrix
// cores (see emu/src/cdna3/exec.rs). Matrices are row-major: A is M x K, B is K x N, C and D
// are M x N (blocked instructions: one such problem per block, block after block).
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

#define LANE __builtin_amdgcn_workitem_id_x()
// Row of f32/i32 result register r of a lane in group g, with L = 64 / N lane groups.
#define ROW(r, g, L) (((r) / 4) * (4 * (L)) + (g) * 4 + (r) % 4)

// One block, K split over the lane groups: lane g*M + i holds A[i][g*KL + e], B[g*KL + e][i].
#define KRED(NAME, M, K, IN, INV, NV, OUTT, OUTV, NR, BUILTIN)                              \
  kernel void NAME(global const IN *A, global const IN *B, global const OUTT *C,          \
                   global OUTT *D) {                                                      \
    uint l = LANE, i = l % M, g = l / M, L = 64 / M, KL = K / (64 / M);                     \
    INV a, b;                                                                              \
    for (uint e = 0; e < NV; e++) {                                                        \
      a[e] = A[i * K + g * KL + e];                                                        \
      b[e] = B[(g * KL + e) * M + i];                                                      \
    }                                                                                      \
    OUTV c;                                                                                \
    for (uint r = 0; r < NR; r++) c[r] = C[ROW(r, g, L) * M + i];                          \
    OUTV d = BUILTIN(a, b, c, 0, 0, 0);                                                    \
    for (uint r = 0; r < NR; r++) D[ROW(r, g, L) * M + i] = d[r];                          \
  }

// The i8 and fp8 builtins take their eight bytes as one 64-bit value.
#define I8_32(a, b, c, x, y, z) __builtin_amdgcn_mfma_i32_32x32x16_i8(as_long(a), as_long(b), c, x, y, z)
#define I8_16(a, b, c, x, y, z) __builtin_amdgcn_mfma_i32_16x16x32_i8(as_long(a), as_long(b), c, x, y, z)
#define FP8(a, b, c, x, y, z) __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(as_long(a), as_long(b), c, x, y, z)
#define BF8FP8(a, b, c, x, y, z) __builtin_amdgcn_mfma_f32_32x32x16_bf8_fp8(as_long(a), as_long(b), c, x, y, z)

KRED(mfma_f32_32x32x8_f16, 32, 8, half, half4, 4, float, float16, 16,
     __builtin_amdgcn_mfma_f32_32x32x8f16)
KRED(mfma_f32_16x16x16_f16, 16, 16, half, half4, 4, float, float4, 4,
     __builtin_amdgcn_mfma_f32_16x16x16f16)
KRED(mfma_f32_32x32x8_bf16, 32, 8, short, short4, 4, float, float16, 16,
     __builtin_amdgcn_mfma_f32_32x32x8bf16_1k)
KRED(mfma_f32_16x16x16_bf16, 16, 16, short, short4, 4, float, float4, 4,
     __builtin_amdgcn_mfma_f32_16x16x16bf16_1k)
KRED(mfma_i32_32x32x16_i8, 32, 16, char, char8, 8, int, int16, 16, I8_32)
KRED(mfma_i32_16x16x32_i8, 16, 32, char, char8, 8, int, int4, 4, I8_16)

KRED(mfma_f32_16x16x32_fp8_fp8, 16, 32, uchar, uchar8, 8, float, float4, 4, FP8)
KRED(mfma_f32_32x32x16_bf8_fp8, 32, 16, uchar, uchar8, 8, float, float16, 16, BF8FP8)

// f32 sources: one element per lane.
#define F32_32(a, b, c, x, y, z) __builtin_amdgcn_mfma_f32_32x32x2f32(a[0], b[0], c, x, y, z)
typedef float float1v __attribute__((ext_vector_type(1)));
KRED(mfma_f32_32x32x2_f32, 32, 2, float, float1v, 1, float, float16, 16, F32_32)
#define F32_16(a, b, c, x, y, z) __builtin_amdgcn_mfma_f32_16x16x4f32(a[0], b[0], c, x, y, z)
KRED(mfma_f32_16x16x4_f32, 16, 4, float, float1v, 1, float, float4, 4, F32_16)

#ifdef __gfx950__
typedef half half8v __attribute__((ext_vector_type(8)));
typedef __bf16 bf16x8 __attribute__((ext_vector_type(8)));
typedef short short8v __attribute__((ext_vector_type(8)));
#define BF16_950(a, b, c, x, y, z) __builtin_amdgcn_mfma_f32_32x32x16_bf16(__builtin_bit_cast(bf16x8, a), __builtin_bit_cast(bf16x8, b), c, x, y, z)
#define I8_950(a, b, c, x, y, z) __builtin_amdgcn_mfma_i32_16x16x64_i8(as_int4(a), as_int4(b), c, x, y, z)
KRED(mfma_f32_16x16x32_f16, 16, 32, half, half8v, 8, float, float4, 4,
     __builtin_amdgcn_mfma_f32_16x16x32_f16)
KRED(mfma_f32_32x32x16_bf16, 32, 16, short, short8v, 8, float, float16, 16, BF16_950)
KRED(mfma_i32_16x16x64_i8, 16, 64, char, char16, 16, int, int4, 4, I8_950)
#endif

// Sixteen independent 4x4x1 blocks: lane 4b + i holds A_b[i][0] and B_b[0][i]; D_b[i][j] is
// register i of lane 4b + j.
kernel void mfma_f32_4x4x1_16b_f32(global const float *A, global const float *B,
                                   global const float *C, global float *D) {
  uint l = LANE, blk = l / 4, j = l % 4;
  float4 c;
  for (uint r = 0; r < 4; r++) c[r] = C[blk * 16 + r * 4 + j];
  float4 d = __builtin_amdgcn_mfma_f32_4x4x1f32(A[l], B[l], c, 0, 0, 0);
  for (uint r = 0; r < 4; r++) D[blk * 16 + r * 4 + j] = d[r];
}

// f64: four rows per lane group are one register pair each: D[4r + g][j] is result r of
// lane 16g + j.
kernel void mfma_f64_16x16x4_f64(global const double *A, global const double *B,
                                 global const double *C, global double *D) {
  uint l = LANE, i = l % 16, g = l / 16;
  double4 c;
  for (uint r = 0; r < 4; r++) c[r] = C[(4 * r + g) * 16 + i];
  double4 d = __builtin_amdgcn_mfma_f64_16x16x4f64(A[i * 4 + g], B[g * 16 + i], c, 0, 0, 0);
  for (uint r = 0; r < 4; r++) D[(4 * r + g) * 16 + i] = d[r];
}

// The same 32x32x8 f16 product with the accumulator and result in AccVGPRs (the compiler
// prefers VGPRs for a single MFMA), accumulating twice: D = A * B + (A * B + C).
kernel void mfma_acc_agpr_32x32x8_f16(global const half *A, global const half *B,
                                      global const float *C, global float *D) {
  uint l = LANE, i = l % 32, g = l / 32;
  half4 a, b;
  for (uint e = 0; e < 4; e++) {
    a[e] = A[i * 8 + g * 4 + e];
    b[e] = B[(g * 4 + e) * 32 + i];
  }
  float16 c;
  for (uint r = 0; r < 16; r++) c[r] = C[ROW(r, g, 2) * 32 + i];
  float16 d;
  __asm__ volatile("v_mfma_f32_32x32x8_f16 %0, %1, %2, %3\n"
                   "s_nop 7\ns_nop 7\ns_nop 2\n"
                   "v_mfma_f32_32x32x8_f16 %0, %1, %2, %0\n"
                   "s_nop 7\ns_nop 7\ns_nop 2"
                   : "=&a"(d)
                   : "v"(a), "v"(b), "a"(c));
  for (uint r = 0; r < 16; r++) D[ROW(r, g, 2) * 32 + i] = d[r];
}
