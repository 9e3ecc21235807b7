#include "absl/strings/str_cat.h"
#include "kernels/attention.hpp"
#include "kernels/cuda/common.cuh"

namespace troupe::kernels::cuda {
namespace {

// A warp holds one head_dim vector: lane l owns dims l, l + 32, ... (PER_LANE of them).
template <int PER_LANE>
__device__ void load(float (&dst)[PER_LANE], const __nv_bfloat16* src, int lane) {
#pragma unroll
  for (int i = 0; i < PER_LANE; ++i)
    dst[i] = __bfloat162float(src[lane + 32 * i]);
}
template <int PER_LANE>
__device__ float dot(const float (&a)[PER_LANE], const __nv_bfloat16* b, int lane) {
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < PER_LANE; ++i)
    s += a[i] * __bfloat162float(b[lane + 32 * i]);
  return warp_sum(s);
}

// One warp per (batch, head, query row t): online softmax over keys 0..t.
template <int PER_LANE>
__global__ void forward_kernel(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, int B,
                               int T, int C, int H) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= static_cast<int64_t>(B) * H * T) return;
  const int t = static_cast<int>(warp % T), h = static_cast<int>((warp / T) % H),
            b = static_cast<int>(warp / (static_cast<int64_t>(T) * H));
  const int hd = C / H;
  const int64_t row_stride = 3 * C;
  const __nv_bfloat16* base = qkv + static_cast<int64_t>(b) * T * row_stride + h * hd;
  float q[PER_LANE], acc[PER_LANE] = {};
  load(q, base + t * row_stride, lane);
  const float scale = rsqrtf(static_cast<float>(hd));
  float max = -INFINITY, sum = 0.0f;
  for (int s = 0; s <= t; ++s) {
    const float score = dot(q, base + s * row_stride + C, lane) * scale;
    const float new_max = fmaxf(max, score);
    const float correction = expf(max - new_max), w = expf(score - new_max);
    sum = sum * correction + w;
    const __nv_bfloat16* v = base + s * row_stride + 2 * C;
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i)
      acc[i] = acc[i] * correction + w * __bfloat162float(v[lane + 32 * i]);
    max = new_max;
  }
  __nv_bfloat16* o = out + (static_cast<int64_t>(b) * T + t) * C + h * hd;
#pragma unroll
  for (int i = 0; i < PER_LANE; ++i)
    o[lane + 32 * i] = __float2bfloat16(acc[i] / sum);
  if (lane == 0) lse[warp] = max + logf(sum);
}

// delta[b, h, t] = dout_t . out_t, the softmax backward's row term.
__global__ void delta_kernel(float* delta, const __nv_bfloat16* dout, const __nv_bfloat16* out,
                             int B, int T, int C, int H) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= static_cast<int64_t>(B) * H * T) return;
  const int t = static_cast<int>(warp % T), h = static_cast<int>((warp / T) % H),
            b = static_cast<int>(warp / (static_cast<int64_t>(T) * H));
  const int hd = C / H;
  const int64_t off = (static_cast<int64_t>(b) * T + t) * C + h * hd;
  float s = 0.0f;
  for (int i = lane; i < hd; i += 32) {
    s += __bfloat162float(dout[off + i]) * __bfloat162float(out[off + i]);
  }
  s = warp_sum(s);
  if (lane == 0) delta[warp] = s;
}

// dq_t = scale * sum_{s<=t} p_ts (dp_ts - delta_t) k_s, one warp per query row.
template <int PER_LANE>
__global__ void dq_kernel(__nv_bfloat16* dqkv, const __nv_bfloat16* dout, const __nv_bfloat16* qkv,
                          const float* lse, const float* delta, int B, int T, int C, int H) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= static_cast<int64_t>(B) * H * T) return;
  const int t = static_cast<int>(warp % T), h = static_cast<int>((warp / T) % H),
            b = static_cast<int>(warp / (static_cast<int64_t>(T) * H));
  const int hd = C / H;
  const int64_t rs = 3 * C;
  const __nv_bfloat16* base = qkv + static_cast<int64_t>(b) * T * rs + h * hd;
  const float scale = rsqrtf(static_cast<float>(hd));
  float q[PER_LANE], d_o[PER_LANE], dq[PER_LANE] = {};
  load(q, base + t * rs, lane);
  load(d_o, dout + (static_cast<int64_t>(b) * T + t) * C + h * hd, lane);
  for (int s = 0; s <= t; ++s) {
    const float p = expf(dot(q, base + s * rs + C, lane) * scale - lse[warp]);
    const float ds = p * (dot(d_o, base + s * rs + 2 * C, lane) - delta[warp]) * scale;
    const __nv_bfloat16* k = base + s * rs + C;
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i)
      dq[i] += ds * __bfloat162float(k[lane + 32 * i]);
  }
  __nv_bfloat16* out = dqkv + static_cast<int64_t>(b) * T * rs + t * rs + h * hd;
#pragma unroll
  for (int i = 0; i < PER_LANE; ++i)
    out[lane + 32 * i] = __float2bfloat16(dq[i]);
}

// dk_s and dv_s over queries t >= s, one warp per key row.
template <int PER_LANE>
__global__ void dkv_kernel(__nv_bfloat16* dqkv, const __nv_bfloat16* dout, const __nv_bfloat16* qkv,
                           const float* lse, const float* delta, int B, int T, int C, int H) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= static_cast<int64_t>(B) * H * T) return;
  const int s = static_cast<int>(warp % T), h = static_cast<int>((warp / T) % H),
            b = static_cast<int>(warp / (static_cast<int64_t>(T) * H));
  const int hd = C / H;
  const int64_t rs = 3 * C;
  const __nv_bfloat16* base = qkv + static_cast<int64_t>(b) * T * rs + h * hd;
  const int64_t row0 = (static_cast<int64_t>(b) * H + h) * T;  // lse/delta index of query 0
  const float scale = rsqrtf(static_cast<float>(hd));
  float k[PER_LANE], v[PER_LANE], dk[PER_LANE] = {}, dv[PER_LANE] = {};
  load(k, base + s * rs + C, lane);
  load(v, base + s * rs + 2 * C, lane);
  for (int t = s; t < T; ++t) {
    const __nv_bfloat16* q = base + t * rs;
    const __nv_bfloat16* d_o = dout + (static_cast<int64_t>(b) * T + t) * C + h * hd;
    const float p = expf(dot(k, q, lane) * scale - lse[row0 + t]);
    const float ds = p * (dot(v, d_o, lane) - delta[row0 + t]) * scale;
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i) {
      dv[i] += p * __bfloat162float(d_o[lane + 32 * i]);
      dk[i] += ds * __bfloat162float(q[lane + 32 * i]);
    }
  }
  __nv_bfloat16* out = dqkv + static_cast<int64_t>(b) * T * rs + s * rs + h * hd;
#pragma unroll
  for (int i = 0; i < PER_LANE; ++i) {
    out[C + lane + 32 * i] = __float2bfloat16(dk[i]);
    out[2 * C + lane + 32 * i] = __float2bfloat16(dv[i]);
  }
}

absl::Status check_shape(const attention_shape& s) {
  const int hd = s.head_dim();
  if (s.dim % s.heads != 0 || hd % 32 != 0 || hd > 256) {
    return absl::InvalidArgumentError(absl::StrCat("cuda attention: head_dim ", hd, " (dim ", s.dim,
                                                   " / heads ", s.heads,
                                                   ") must be a multiple of 32 up to 256"));
  }
  return absl::OkStatus();
}

}  // namespace

#define TROUPE_ATTENTION_DISPATCH(hd, KERNEL, ...)  \
  switch ((hd) / 32) {                              \
    case 1:                                         \
      KERNEL<1><<<grid, 256, 0, st>>>(__VA_ARGS__); \
      break;                                        \
    case 2:                                         \
      KERNEL<2><<<grid, 256, 0, st>>>(__VA_ARGS__); \
      break;                                        \
    case 3:                                         \
      KERNEL<3><<<grid, 256, 0, st>>>(__VA_ARGS__); \
      break;                                        \
    case 4:                                         \
      KERNEL<4><<<grid, 256, 0, st>>>(__VA_ARGS__); \
      break;                                        \
    case 5:                                         \
      KERNEL<5><<<grid, 256, 0, st>>>(__VA_ARGS__); \
      break;                                        \
    case 6:                                         \
      KERNEL<6><<<grid, 256, 0, st>>>(__VA_ARGS__); \
      break;                                        \
    case 7:                                         \
      KERNEL<7><<<grid, 256, 0, st>>>(__VA_ARGS__); \
      break;                                        \
    default:                                        \
      KERNEL<8><<<grid, 256, 0, st>>>(__VA_ARGS__); \
      break;                                        \
  }

absl::Status attention_forward(bf16* out, float* lse, const bf16* qkv, const attention_shape& s,
                               void* stream) {
  TROUPE_RETURN_IF_ERROR(check_shape(s));
  const int64_t warps = int64_t{s.batch} * s.heads * s.seq;
  const int grid = blocks_for(warps * 32, 256);
  cudaStream_t st = to_stream(stream);
  TROUPE_ATTENTION_DISPATCH(s.head_dim(), forward_kernel, dev(out), lse, dev(qkv), s.batch, s.seq,
                            s.dim, s.heads);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

absl::Status attention_backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out,
                                const float* lse, const attention_shape& s, void* stream) {
  TROUPE_RETURN_IF_ERROR(check_shape(s));
  const int64_t warps = int64_t{s.batch} * s.heads * s.seq;
  const int grid = blocks_for(warps * 32, 256);
  cudaStream_t st = to_stream(stream);
  float* delta = nullptr;
  TROUPE_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&delta, warps * sizeof(float), st));
  delta_kernel<<<grid, 256, 0, st>>>(delta, dev(dout), dev(out), s.batch, s.seq, s.dim, s.heads);
  absl::Status status = TROUPE_CUDA_LAUNCH_STATUS();
  if (status.ok()) {
    TROUPE_ATTENTION_DISPATCH(s.head_dim(), dq_kernel, dev(dqkv), dev(dout), dev(qkv), lse, delta,
                              s.batch, s.seq, s.dim, s.heads);
    status = TROUPE_CUDA_LAUNCH_STATUS();
  }
  if (status.ok()) {
    TROUPE_ATTENTION_DISPATCH(s.head_dim(), dkv_kernel, dev(dqkv), dev(dout), dev(qkv), lse, delta,
                              s.batch, s.seq, s.dim, s.heads);
    status = TROUPE_CUDA_LAUNCH_STATUS();
  }
  cudaFreeAsync(delta, st);
  return status;
}

}  // namespace troupe::kernels::cuda
