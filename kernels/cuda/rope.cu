// Rotary position embedding on bf16 rows: a thread per (row, head, pair), f32 inside.

#include "kernels/cuda/common.cuh"
#include "kernels/rope.hpp"

namespace troupe::kernels::cuda {
namespace {

// The angle in f32 (as the CPU multiplies), its cosine and sine in double rounded to f32, as the
// CPU computes them, so that both sides turn by the same numbers.
__global__ void rope_angles_kernel(float* cos_out, float* sin_out, const int32_t* positions,
                                   int64_t rows, int half, const float* inv_freq) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * half) return;
  const float angle = static_cast<float>(positions[i / half]) * inv_freq[i % half];
  double s, c;
  sincos(static_cast<double>(angle), &s, &c);
  cos_out[i] = static_cast<float>(c);
  sin_out[i] = static_cast<float>(s);
}

// Turns the pairs (i, i + half) of each head by +angle (sign 1) or -angle (sign -1).
__global__ void rope_rotate(__nv_bfloat16* x, int64_t stride, int64_t rows, int heads, int half,
                            const float* cos, const float* sin, float sign) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * heads * half) return;
  const int64_t row = i / (static_cast<int64_t>(heads) * half);
  const int head = static_cast<int>(i / half % heads), pair = static_cast<int>(i % half);
  __nv_bfloat16* v = x + row * stride + static_cast<int64_t>(head) * 2 * half;
  const float c = cos[row * half + pair], s = sign * sin[row * half + pair];
  const float a = __bfloat162float(v[pair]), b = __bfloat162float(v[pair + half]);
  v[pair] = __float2bfloat16(a * c - b * s);
  v[pair + half] = __float2bfloat16(b * c + a * s);
}

absl::Status rotate(bf16* x, int64_t stride, int64_t rows, int heads, int head_dim,
                    const float* cos, const float* sin, float sign, void* stream) {
  const int64_t n = rows * heads * (head_dim / 2);
  if (n == 0) return absl::OkStatus();
  rope_rotate<<<blocks_for(n, 256), 256, 0, to_stream(stream)>>>(dev(x), stride, rows, heads,
                                                                 head_dim / 2, cos, sin, sign);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

}  // namespace

absl::Status rope_angles(float* cos, float* sin, const int32_t* positions, int64_t rows,
                         int head_dim, const float* inv_freq, void* stream) {
  const int64_t n = rows * (head_dim / 2);
  if (n == 0) return absl::OkStatus();
  rope_angles_kernel<<<blocks_for(n, 256), 256, 0, to_stream(stream)>>>(cos, sin, positions, rows,
                                                                        head_dim / 2, inv_freq);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

absl::Status rope_forward(bf16* x, int64_t stride, int64_t rows, int heads, int head_dim,
                          const float* cos, const float* sin, void* stream) {
  return rotate(x, stride, rows, heads, head_dim, cos, sin, 1.0f, stream);
}

absl::Status rope_backward(bf16* dx, int64_t stride, int64_t rows, int heads, int head_dim,
                           const float* cos, const float* sin, void* stream) {
  return rotate(dx, stride, rows, heads, head_dim, cos, sin, -1.0f, stream);
}

}  // namespace troupe::kernels::cuda
