// Hand-written kernels of the batch-1 Elman RNN's loop in one persistent block,
// hidden(t) = tanh(h(t - 1) . W + hin(t)), for benchmarks/cuda_step_kernels.py to set
// against the kernels tcdsl generates: what a persistent step could reach.
// W is (in, out) ("io": W[k*Co+o]) or (out, in) ("oi": W[o*Co+k]).
//   cross:  P parts of each output's sum on threads tid = p * Co + o, the parts' values
//           combined through shared memory after a barrier (what `split` generates)
//   crossh: the same with h(t - 1) kept in shared memory
//   lanes:  g consecutive lanes of a warp per output, combined by shuffles
//   ilp:    one thread per output with four independent partial sums
#define WIO(k, o) W[(k) * Co + (o)]
#define WOI(k, o) W[(o) * Co + (k)]

#define CROSS(NAME, WAT)                                                                   \
extern "C" __global__ void __launch_bounds__(1024) NAME(const float* __restrict__ h0,     \
    const float* __restrict__ W, float* __restrict__ hid, const float* __restrict__ hin,   \
    int Co, int T, int P) {                                                                \
  __shared__ float part[1024];                                                             \
  int tid = threadIdx.x, o = tid % Co, p = tid / Co;                                       \
  for (int t = 0; t < T; ++t) {                                                            \
    const float* hp = t == 0 ? h0 : hid + (t - 1) * Co;                                    \
    if (p < P) {                                                                           \
      float acc = 0.f;                                                                     \
      _Pragma("unroll 4")                                                                  \
      for (int k = p; k < Co; k += P) acc += WAT(k, o) * hp[k];                            \
      part[tid] = acc;                                                                     \
    }                                                                                      \
    __syncthreads();                                                                       \
    if (p == 0) {                                                                          \
      float s = 0.f;                                                                       \
      for (int q = 0; q < P; ++q) s += part[q * Co + o];                                   \
      hid[t * Co + o] = tanhf(s + hin[t * Co + o]);                                        \
    }                                                                                      \
    __syncthreads();                                                                       \
  }                                                                                        \
}
CROSS(cross_io, WIO)
CROSS(cross_oi, WOI)

// the same with h(t-1) kept in shared memory
#define CROSSH(NAME, WAT)                                                                  \
extern "C" __global__ void __launch_bounds__(1024) NAME(const float* __restrict__ h0,     \
    const float* __restrict__ W, float* __restrict__ hid, const float* __restrict__ hin,   \
    int Co, int T, int P) {                                                                \
  __shared__ float part[1024];                                                             \
  __shared__ float hs[1024];                                                               \
  int tid = threadIdx.x, o = tid % Co, p = tid / Co;                                       \
  if (p == 0) hs[o] = h0[o];                                                               \
  __syncthreads();                                                                         \
  for (int t = 0; t < T; ++t) {                                                            \
    if (p < P) {                                                                           \
      float acc = 0.f;                                                                     \
      _Pragma("unroll 4")                                                                  \
      for (int k = p; k < Co; k += P) acc += WAT(k, o) * hs[k];                            \
      part[tid] = acc;                                                                     \
    }                                                                                      \
    float x = p == 0 ? hin[t * Co + o] : 0.f;                                              \
    __syncthreads();                                                                       \
    if (p == 0) {                                                                          \
      float s = 0.f;                                                                       \
      for (int q = 0; q < P; ++q) s += part[q * Co + o];                                   \
      float h = tanhf(s + x);                                                              \
      hid[t * Co + o] = h;                                                                 \
      hs[o] = h;                                                                           \
    }                                                                                      \
    __syncthreads();                                                                       \
  }                                                                                        \
}
CROSSH(crossh_io, WIO)
CROSSH(crossh_oi, WOI)

// g consecutive lanes of a warp per output, combined by shuffles (g a power of two <= 32)
#define LANES(NAME, WAT)                                                                   \
extern "C" __global__ void __launch_bounds__(1024) NAME(const float* __restrict__ h0,     \
    const float* __restrict__ W, float* __restrict__ hid, const float* __restrict__ hin,   \
    int Co, int T, int g) {                                                                \
  int tid = threadIdx.x, lane = tid & (g - 1), o = tid / g;                                \
  for (int t = 0; t < T; ++t) {                                                            \
    const float* hp = t == 0 ? h0 : hid + (t - 1) * Co;                                    \
    if (o < Co) {                                                                          \
      float acc = 0.f;                                                                     \
      _Pragma("unroll 4")                                                                  \
      for (int k = lane; k < Co; k += g) acc += WAT(k, o) * hp[k];                         \
      for (int off = g >> 1; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off, g); \
      if (lane == 0) hid[t * Co + o] = tanhf(acc + hin[t * Co + o]);                       \
    }                                                                                      \
    __syncthreads();                                                                       \
  }                                                                                        \
}
LANES(lanes_io, WIO)
LANES(lanes_oi, WOI)

// one thread per output, 4 independent partial sums
#define ILP(NAME, WAT)                                                                     \
extern "C" __global__ void __launch_bounds__(1024) NAME(const float* __restrict__ h0,     \
    const float* __restrict__ W, float* __restrict__ hid, const float* __restrict__ hin,   \
    int Co, int T, int unused) {                                                           \
  int o = threadIdx.x;                                                                     \
  for (int t = 0; t < T; ++t) {                                                            \
    const float* hp = t == 0 ? h0 : hid + (t - 1) * Co;                                    \
    if (o < Co) {                                                                          \
      float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;                                        \
      int k = 0;                                                                           \
      for (; k + 3 < Co; k += 4) {                                                         \
        a0 += WAT(k, o) * hp[k]; a1 += WAT(k + 1, o) * hp[k + 1];                          \
        a2 += WAT(k + 2, o) * hp[k + 2]; a3 += WAT(k + 3, o) * hp[k + 3];                  \
      }                                                                                    \
      for (; k < Co; ++k) a0 += WAT(k, o) * hp[k];                                         \
      hid[t * Co + o] = tanhf((a0 + a1) + (a2 + a3) + hin[t * Co + o]);                    \
    }                                                                                      \
    __syncthreads();                                                                       \
  }                                                                                        \
}
ILP(ilp_io, WIO)
ILP(ilp_oi, WOI)
