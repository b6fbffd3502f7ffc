// Test kernels for the emulator, compiled at test time by clang-22 with -nogpulib, so they use
// clang's AMDGPU builtins instead of the OpenCL work-item functions.
#pragma OPENCL EXTENSION cl_khr_fp16 : enable

#define LID_X __builtin_amdgcn_workitem_id_x()
#define LID_Y __builtin_amdgcn_workitem_id_y()
#define GRP_X __builtin_amdgcn_workgroup_id_x()
#define GRP_Y __builtin_amdgcn_workgroup_id_y()
#define BARRIER()                                           \
  do {                                                      \
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");  \
    __builtin_amdgcn_s_barrier();                           \
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");  \
  } while (0)

kernel void vadd(global const float *a, global const float *b, global float *c, uint n) {
  uint i = GRP_X * 256 + LID_X;
  if (i < n) c[i] = a[i] + b[i];
}

kernel void saxpy(float alpha, global const float *x, global float *y, uint n) {
  uint i = GRP_X * 256 + LID_X;
  if (i < n) y[i] = alpha * x[i] + y[i];
}

// Sum of 256 floats per workgroup through LDS, one barrier per step (8 waves in wave32).
kernel void reduce(global const float *in, global float *out) {
  local float buf[256];
  uint t = LID_X;
  buf[t] = in[GRP_X * 256 + t];
  BARRIER();
  for (uint s = 128; s > 0; s >>= 1) {
    if (t < s) buf[t] += buf[t + s];
    BARRIER();
  }
  if (t == 0) out[GRP_X] = buf[0];
}

#define TS 16
kernel void matmul(global const float *A, global const float *B, global float *C, uint N) {
  local float As[TS][TS], Bs[TS][TS];
  uint tx = LID_X, ty = LID_Y;
  uint row = GRP_Y * TS + ty, col = GRP_X * TS + tx;
  float acc = 0.0f;
  for (uint k0 = 0; k0 < N; k0 += TS) {
    As[ty][tx] = A[row * N + k0 + tx];
    Bs[ty][tx] = B[(k0 + ty) * N + col];
    BARRIER();
    for (uint k = 0; k < TS; k++) acc += As[ty][k] * Bs[k][tx];
    BARRIER();
  }
  C[row * N + col] = acc;
}

kernel void transc(global const float *x, global float *e, global float *l, global float *s,
                   global float *d) {
  uint i = GRP_X * 64 + LID_X;
  float v = x[i];
  e[i] = __builtin_expf(v);
  l[i] = __builtin_logf(v);
  s[i] = __builtin_sqrtf(v);
  d[i] = 1.0f / v + v / 3.0f;
}

kernel void idiv(global const int *a, global const int *b, global int *q, global int *r,
                 global uint *uq, global uint *ur) {
  uint i = GRP_X * 64 + LID_X;
  int x = a[i], y = b[i];
  q[i] = x / y;
  r[i] = x % y;
  uq[i] = (uint)x / (uint)y;
  ur[i] = (uint)x % (uint)y;
}

kernel void addr64(global const ulong *p, ulong stride, global ulong *out) {
  uint i = GRP_X * 64 + LID_X;
  ulong a = (ulong)i * stride + 0x100000000UL;
  out[i] = p[i] * 3 + a + (a >> 7) + (p[i] / 7);
}

// Collatz step counts: every lane loops a different number of times.
kernel void divloop(global const uint *n, global uint *out) {
  uint i = GRP_X * 64 + LID_X;
  uint c = n[i], acc = 0;
  while (c != 1 && acc < 1000) {
    c = (c & 1) ? 3 * c + 1 : c / 2;
    acc++;
  }
  out[i] = acc;
}

kernel void f16k(global const half *a, global const half *b, global half *c) {
  uint i = GRP_X * 64 + LID_X;
  c[i] = a[i] * b[i] + a[i];
}

// Compute-bound loop for the benchmark: per lane, `iters` dependent FMAs and integer ops.
kernel void spin(global float *out, uint iters) {
  uint i = GRP_X * 256 + LID_X;
  float x = (float)i * 0.001f, y = 1.0f;
  uint h = i;
  for (uint k = 0; k < iters; k++) {
    x = x * 0.999f + 0.5f;
    y = y * x + 1.0f;
    h = (h ^ (h << 3)) + k;
  }
  out[i] = x + y + (float)(h & 0xff);
}

// A private array indexed per lane lives in scratch.
kernel void priv(global const uint *idx, global uint *out) {
  uint i = GRP_X * 64 + LID_X;
  volatile uint arr[64];
  for (uint k = 0; k < 64; k++) arr[k] = i * 1000 + k;
  out[i] = arr[idx[i] & 63];
}

// Global and LDS atomics (the atomic optimizer turns the uniform-address add into a wave
// reduction with DPP and lane reads), ds_bpermute and a cross-row lane shuffle: permlanex16
// on RDNA3 and RDNA4, a DPP wave rotate (wave_rol:1) on CDNA, which has no permlane.
kernel void atomics(global uint *counter, global uint *old, global uint *lds_old,
                    global uint *shuf, global uint *xperm, global int *mx) {
  local uint lcount;
  uint t = LID_X;
  uint i = GRP_X * 64 + t;
  if (t == 0) lcount = 100;
  BARRIER();
  old[i] = __atomic_fetch_add(counter, 1 + (i & 3), __ATOMIC_RELAXED);
  lds_old[i] = __atomic_fetch_add(&lcount, i, __ATOMIC_RELAXED);
  __atomic_fetch_max(mx, (int)(i * 7919u % 1000u) - 500, __ATOMIC_RELAXED);
  shuf[i] = __builtin_amdgcn_ds_bpermute((int)((t ^ 5) * 4), (int)(i * 3));
#if defined(__GFX11__) || defined(__GFX12__)
  xperm[i] = __builtin_amdgcn_permlanex16(0u, i, 0x76543210u, 0xfedcba98u, false, false);
#else
  xperm[i] = __builtin_amdgcn_update_dpp(0u, i, 0x134, 0xf, 0xf, false);
#endif
}

// A __constant table lives in the code object's data; the code finds it PC-relative
// (s_getpc_b64 plus a literal offset).
constant float ctable[8] = {1.5f, 2.5f, -3.0f, 4.25f, 8.0f, 0.125f, 6.0f, 7.75f};
kernel void ctab(global const uint *idx, global float *out) {
  uint i = GRP_X * 64 + LID_X;
  out[i] = ctable[idx[i] & 7] * 2.0f;
}

// Generic (flat) pointers into LDS, global and private memory through a function that is
// not inlined: s_swappc_b64 / s_setpc_b64 calls, a stack in scratch, flat_* instructions
// routed by aperture.
__attribute__((noinline)) void bump(float *p, float v) { *p += v; }
kernel void genptr(global float *out, global const uint *sel) {
  local float buf[64];
  uint t = LID_X;
  float priv[4] = {10.0f, 20.0f, 30.0f, 40.0f};
  buf[t] = (float)t;
  BARRIER();
  bump(&buf[t ^ 1], 1.0f);
  bump(&out[t], 2.0f);
  bump(&priv[sel[t] & 3], 0.5f);
  BARRIER();
  out[t] += buf[t] + priv[sel[t] & 3];
}

// f16 division (v_rcp_f32, v_fma_mix, v_div_fixup_f16), sqrt, exp, log, max.
kernel void hmath(global const half *a, global const half *b, global half *q, global half *s,
                  global half *e, global half *l, global half *m) {
  uint i = GRP_X * 64 + LID_X;
  q[i] = a[i] / b[i];
  s[i] = __builtin_sqrtf16(a[i]);
  e[i] = __builtin_expf16(b[i]);
  l[i] = __builtin_logf16(a[i]);
  m[i] = __builtin_fmaxf16(a[i], b[i]);
}

// Halves through LDS: 16-bit DS stores and d16 loads into register halves.
kernel void hlds(global const half *in, global half *out) {
  local half buf[128];
  uint t = LID_X;
  buf[t] = in[GRP_X * 64 + t];
  buf[64 + t] = in[GRP_X * 64 + (t ^ 7)];
  BARRIER();
  half2 v = (half2)(buf[63 - t], buf[64 + t]);
  out[GRP_X * 64 + t] = v.x * v.y + buf[t];
}

// Sizes read from the AQL dispatch packet through the dispatch pointer.
kernel void sizes(global uint *out) {
  const constant ushort *p = (const constant ushort *)__builtin_amdgcn_dispatch_ptr();
  const constant uint *q = (const constant uint *)__builtin_amdgcn_dispatch_ptr();
  uint i = GRP_X * p[2] + LID_X;
  if (i < q[3]) out[i] = p[2] * 100000u + q[3];
}
