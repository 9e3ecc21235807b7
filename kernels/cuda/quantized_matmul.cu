// Weight-only quantized GEMM on bf16 activations (the CPU kernel's twin): each warp computes one
// output for up to 4 rows of x, its lanes striding the inputs, the integers widened to f32 and
// scaled per group, the group's zero point applied as scale * (v - zero).

#include "absl/strings/str_cat.h"
#include "kernels/cuda/common.cuh"
#include "kernels/quantized_matmul.hpp"

namespace troupe::kernels::cuda {
namespace {

constexpr int rows_per_warp = 4;

// The stored integer of input k of an int8 or int4 row, signed (see quantized_matrix).
__device__ inline float stored_value(const uint8_t* row, int k, int bits) {
  if (bits == 8) return static_cast<float>(static_cast<int8_t>(row[k]));
  const uint8_t byte = row[(k / 16) * 8 + k % 8];
  return static_cast<float>((k % 16 < 8 ? byte & 15 : byte >> 4) - 8);
}

__global__ void quantized_matmul_kernel(__nv_bfloat16* out, const __nv_bfloat16* x,
                                        quantized_matrix w, const __nv_bfloat16* bias, int m) {
  const int warps = blockDim.x / 32;
  const int r = blockIdx.x * warps + threadIdx.x / 32;
  const int i0 = blockIdx.y * rows_per_warp;
  const int lane = threadIdx.x % 32;
  if (r >= w.rows) return;
  const int rows = min(rows_per_warp, m - i0);
  const int groups = w.cols / w.group_size;
  const int64_t row_bytes = w.bits == 8 ? w.cols : w.cols / 2;
  const uint8_t* q = w.q + static_cast<int64_t>(r) * row_bytes;
  float sums[rows_per_warp] = {0, 0, 0, 0};
  for (int k = lane; k < w.cols; k += 32) {
    const int64_t g = static_cast<int64_t>(r) * groups + k / w.group_size;
    const float zero = w.zeros != nullptr ? w.zeros[g] : 0.0f;
    const float weight = w.scales[g] * (stored_value(q, k, w.bits) - zero);
    for (int i = 0; i < rows; ++i)
      sums[i] += __bfloat162float(x[static_cast<int64_t>(i0 + i) * w.cols + k]) * weight;
  }
  for (int i = 0; i < rows; ++i) {
    const float y = warp_sum(sums[i]);
    if (lane == 0) {
      out[static_cast<int64_t>(i0 + i) * w.rows + r] =
          __float2bfloat16(bias != nullptr ? y + __bfloat162float(bias[r]) : y);
    }
  }
}

}  // namespace

absl::Status quantized_matmul(bf16* out, const bf16* x, const quantized_matrix& w,
                              const bf16* bias, int m, void* stream) {
  if (m == 0 || w.rows == 0) return absl::OkStatus();
  constexpr int threads = 256;
  const dim3 grid(blocks_for(w.rows, threads / 32), blocks_for(m, rows_per_warp));
  quantized_matmul_kernel<<<grid, threads, 0, to_stream(stream)>>>(dev(out), dev(x), w, dev(bias),
                                                                   m);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

}  // namespace troupe::kernels::cuda
