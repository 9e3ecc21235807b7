// The elementwise kernels: GELU, residual add and accumulate, token + position embedding.

#include "kernels/cuda/common.cuh"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/residual.hpp"

namespace troupe::kernels::cuda {
namespace {

constexpr float sqrt_2_over_pi = 0.7978845608028654f;
constexpr float cubic = 0.044715f;

__global__ void gelu_forward_kernel(__nv_bfloat16* out, const __nv_bfloat16* in, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = __bfloat162float(in[i]);
  out[i] = __float2bfloat16(0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * (x + cubic * x * x * x))));
}

__global__ void gelu_backward_kernel(__nv_bfloat16* din, const __nv_bfloat16* in,
                                     const __nv_bfloat16* dout, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = __bfloat162float(in[i]);
  const float t = tanhf(sqrt_2_over_pi * (x + cubic * x * x * x));
  const float du = sqrt_2_over_pi * (1.0f + 3.0f * cubic * x * x);
  din[i] = __float2bfloat16(__bfloat162float(dout[i]) *
                            (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du));
}

__global__ void add_kernel(__nv_bfloat16* out, const __nv_bfloat16* a, const __nv_bfloat16* b,
                           int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

__global__ void embedding_forward_kernel(__nv_bfloat16* out, const int32_t* tokens,
                                         const int32_t* positions, int n, const __nv_bfloat16* wte,
                                         const __nv_bfloat16* wpe, int dim) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(n) * dim) return;
  const int row = static_cast<int>(i / dim), c = static_cast<int>(i % dim);
  out[i] = __float2bfloat16(__bfloat162float(wte[static_cast<int64_t>(tokens[row]) * dim + c]) +
                            __bfloat162float(wpe[static_cast<int64_t>(positions[row]) * dim + c]));
}

__global__ void embedding_backward_kernel(float* dwte, float* dwpe, const __nv_bfloat16* dout,
                                          const int32_t* tokens, const int32_t* positions, int n,
                                          int dim) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(n) * dim) return;
  const int row = static_cast<int>(i / dim), c = static_cast<int>(i % dim);
  const float g = __bfloat162float(dout[i]);
  atomicAdd(&dwte[static_cast<int64_t>(tokens[row]) * dim + c], g);
  atomicAdd(&dwpe[static_cast<int64_t>(positions[row]) * dim + c], g);
}

}  // namespace

absl::Status gelu_forward(bf16* out, const bf16* in, int64_t n, void* stream) {
  gelu_forward_kernel<<<blocks_for(n, 256), 256, 0, to_stream(stream)>>>(dev(out), dev(in), n);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

absl::Status gelu_backward(bf16* din, const bf16* in, const bf16* dout, int64_t n, void* stream) {
  gelu_backward_kernel<<<blocks_for(n, 256), 256, 0, to_stream(stream)>>>(dev(din), dev(in),
                                                                          dev(dout), n);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

absl::Status residual_forward(bf16* out, const bf16* a, const bf16* b, int64_t n, void* stream) {
  add_kernel<<<blocks_for(n, 256), 256, 0, to_stream(stream)>>>(dev(out), dev(a), dev(b), n);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

absl::Status accumulate(bf16* dst, const bf16* src, int64_t n, void* stream) {
  add_kernel<<<blocks_for(n, 256), 256, 0, to_stream(stream)>>>(dev(dst), dev(dst), dev(src), n);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

absl::Status embedding_forward(bf16* out, const int32_t* tokens, const int32_t* positions, int n,
                               const bf16* wte, const bf16* wpe, int dim, void* stream) {
  embedding_forward_kernel<<<blocks_for(int64_t{n} * dim, 256), 256, 0, to_stream(stream)>>>(
      dev(out), tokens, positions, n, dev(wte), dev(wpe), dim);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

absl::Status embedding_backward(float* dwte, float* dwpe, const bf16* dout, const int32_t* tokens,
                                const int32_t* positions, int n, int dim, void* stream) {
  embedding_backward_kernel<<<blocks_for(int64_t{n} * dim, 256), 256, 0, to_stream(stream)>>>(
      dwte, dwpe, dev(dout), tokens, positions, n, dim);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

}  // namespace troupe::kernels::cuda
