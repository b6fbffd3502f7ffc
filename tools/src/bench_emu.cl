// The kernels of `am bench emu`: realistic shapes of work for the shader emulator, compiled
// for each ISA by clang-22 (-nogpulib, so clang's AMDGPU builtins stand in for the OpenCL
// work-item functions). Every kernel runs 256 work-items per workgroup.

#define GID (__builtin_amdgcn_workgroup_id_x() * 256 + __builtin_amdgcn_workitem_id_x())
#define LID __builtin_amdgcn_workitem_id_x()
#define BARRIER()                                           \
  do {                                                      \
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");  \
    __builtin_amdgcn_s_barrier();                           \
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");  \
  } while (0)

// Memory-bound: a copy of 16 bytes per work-item.
kernel void copy(global const uint4 *in, global uint4 *out) {
  uint i = GID;
  out[i] = in[i];
}

// Memory-bound with a little math.
kernel void saxpy(float a, global const float *x, global float *y) {
  uint i = GID;
  y[i] = a * x[i] + y[i];
}

// Global atomics: a 64-bin histogram of hashed values.
kernel void histogram(global const uint *in, global uint *bins) {
  uint v = in[GID] * 2654435761u;
  __atomic_fetch_add(&bins[v >> 26], 1u, __ATOMIC_RELAXED);
}

// LDS: the sum of each workgroup's 256 values, a tree of barriers.
kernel void reduce(global const float *in, global float *out) {
  local float buf[256];
  uint t = LID;
  buf[t] = in[GID];
  BARRIER();
  for (uint s = 128; s > 0; s >>= 1) {
    if (t < s) buf[t] += buf[t + s];
    BARRIER();
  }
  if (t == 0) out[__builtin_amdgcn_workgroup_id_x()] = buf[0];
}

// Float math: a damped iteration with square roots and exponentials.
kernel void fmath(global float *x) {
  uint i = GID;
  float v = x[i];
  for (int k = 0; k < 16; k++) {
    v = v * 0.75f + 0.25f * __builtin_sqrtf(v * v + 1.0f);
    v = v - 0.01f * __builtin_expf(-v);
  }
  x[i] = v;
}

// 64-bit integers: rounds of the splitmix64 mixer.
kernel void int64(global ulong *s) {
  uint i = GID;
  ulong z = s[i];
  for (int k = 0; k < 8; k++) {
    z += 0x9e3779b97f4a7c15UL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9UL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebUL;
    z ^= z >> 31;
  }
  s[i] = z;
}

// LDS tiles: a 16x16-tiled matrix product (N a multiple of 16; 16x16 workgroups).
kernel void matmul(global const float *A, global const float *B, global float *C, uint N) {
  local float As[16][16], Bs[16][16];
  uint tx = LID % 16, ty = LID / 16;
  uint tiles = N / 16, g = __builtin_amdgcn_workgroup_id_x();
  uint row = (g / tiles) * 16 + ty, col = (g % tiles) * 16 + tx;
  float acc = 0.0f;
  for (uint k0 = 0; k0 < N; k0 += 16) {
    As[ty][tx] = A[row * N + k0 + tx];
    Bs[ty][tx] = B[(k0 + ty) * N + col];
    BARRIER();
    for (uint k = 0; k < 16; k++) acc += As[ty][k] * Bs[k][tx];
    BARRIER();
  }
  C[row * N + col] = acc;
}
