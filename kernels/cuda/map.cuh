#pragma once

// Elementwise maps over bf16 buffers: out[i] = op(in0[i], in1[i], ...) computed in float, eight
// values (16 bytes) per load and store where every pointer is 16-byte aligned, one at a time
// otherwise and for the last n % 8.

#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace troupe::kernels::cuda {

namespace detail {

__device__ inline float lane_of(const uint4& pack, int j) {
  return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(&pack)[j]);
}

template <class Op, class... Packs>
__device__ uint4 map_pack(const Op& op, const Packs&... packs) {
  uint4 out;
  auto* values = reinterpret_cast<__nv_bfloat16*>(&out);
#pragma unroll
  for (int j = 0; j < 8; ++j)
    values[j] = __float2bfloat16(op(lane_of(packs, j)...));
  return out;
}

template <class Op, class... In>
__global__ void map_kernel(__nv_bfloat16* out, int64_t n, bool packed, Op op, In... in) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t done = 0;
  if (packed) {
    done = n / 8 * 8;
    for (int64_t p = first; p < n / 8; p += stride)
      reinterpret_cast<uint4*>(out)[p] = map_pack(op, reinterpret_cast<const uint4*>(in)[p]...);
  }
  for (int64_t i = done + first; i < n; i += stride)
    out[i] = __float2bfloat16(op(__bfloat162float(in[i])...));
}

}  // namespace detail

/// Launches out[i] = op(in[i]...) for i < n on `stream`; `op` is a functor with a __device__
/// operator()(float...) -> float. `out` may be one of the inputs.
template <class Op, class... In>
absl::Status map_bf16(bf16* out, int64_t n, void* stream, Op op, const In*... in) {
  if (n == 0) return absl::OkStatus();
  const bool packed = aligned16(out, in...);
  constexpr int threads = 256;
  detail::
      map_kernel<<<blocks_for(packed ? (n + 7) / 8 : n, threads), threads, 0, to_stream(stream)>>>(
          dev(out), n, packed, op, dev(in)...);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

}  // namespace troupe::kernels::cuda
