// The elementwise kernels: GELU, SwiGLU, residual add and accumulate, token (+ position)
// embedding.

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/map.cuh"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/residual.hpp"
#include "kernels/swiglu.hpp"

namespace troupe::kernels::cuda {
namespace {

constexpr float sqrt_2_over_pi = 0.7978845608028654f;
constexpr float cubic = 0.044715f;

// GELU, tanh approximation (GPT-2's).
struct gelu_op {
  __device__ float operator()(float x) const {
    return 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * (x + cubic * x * x * x)));
  }
};

// GELU's gradient at x times the output's gradient dy.
struct gelu_grad_op {
  __device__ float operator()(float x, float dy) const {
    const float t = tanhf(sqrt_2_over_pi * (x + cubic * x * x * x));
    const float du = sqrt_2_over_pi * (1.0f + 3.0f * cubic * x * x);
    return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
  }
};

struct add_op {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// silu(gate) * up over rows of [gate (width) | up (width)].
__global__ void swiglu_forward_kernel(__nv_bfloat16* out, const __nv_bfloat16* gate_up,
                                      int64_t rows, int width) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * width) return;
  const int64_t at = i / width * 2 * width + i % width;
  const float g = __bfloat162float(gate_up[at]), u = __bfloat162float(gate_up[at + width]);
  out[i] = __float2bfloat16(g / (1.0f + __expf(-g)) * u);
}

// dgate = dout up silu'(gate), dup = dout silu(gate); each thread reads its gate and up before
// writing either, so dgate_up may be gate_up.
__global__ void swiglu_backward_kernel(__nv_bfloat16* dgate_up, const __nv_bfloat16* gate_up,
                                       const __nv_bfloat16* dout, int64_t rows, int width) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * width) return;
  const int64_t at = i / width * 2 * width + i % width;
  const float g = __bfloat162float(gate_up[at]), u = __bfloat162float(gate_up[at + width]);
  const float sigma = 1.0f / (1.0f + __expf(-g)), d = __bfloat162float(dout[i]);
  dgate_up[at] = __float2bfloat16(d * u * sigma * (1.0f + g * (1.0f - sigma)));
  dgate_up[at + width] = __float2bfloat16(d * g * sigma);
}

__global__ void embedding_forward_kernel(__nv_bfloat16* out, const int32_t* tokens,
                                         const int32_t* positions, int n, const __nv_bfloat16* wte,
                                         const __nv_bfloat16* wpe, int dim) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(n) * dim) return;
  const int row = static_cast<int>(i / dim), c = static_cast<int>(i % dim);
  float x = __bfloat162float(wte[static_cast<int64_t>(tokens[row]) * dim + c]);
  if (wpe != nullptr) x += __bfloat162float(wpe[static_cast<int64_t>(positions[row]) * dim + c]);
  out[i] = __float2bfloat16(x);
}

__global__ void embedding_backward_kernel(float* dwte, float* dwpe, const __nv_bfloat16* dout,
                                          const int32_t* tokens, const int32_t* positions, int n,
                                          int dim) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(n) * dim) return;
  const int row = static_cast<int>(i / dim), c = static_cast<int>(i % dim);
  const float g = __bfloat162float(dout[i]);
  atomicAdd(&dwte[static_cast<int64_t>(tokens[row]) * dim + c], g);
  if (dwpe != nullptr) atomicAdd(&dwpe[static_cast<int64_t>(positions[row]) * dim + c], g);
}

}  // namespace

absl::Status gelu_forward(bf16* out, const bf16* in, int64_t n, void* stream) {
  return map_bf16(out, n, stream, gelu_op{}, in);
}

absl::Status gelu_backward(bf16* din, const bf16* in, const bf16* dout, int64_t n, void* stream) {
  return map_bf16(din, n, stream, gelu_grad_op{}, in, dout);
}

absl::Status swiglu_forward(bf16* out, const bf16* gate_up, int64_t rows, int width, void* stream) {
  if (rows * width == 0) return absl::OkStatus();
  swiglu_forward_kernel<<<blocks_for(rows * width, 256), 256, 0, to_stream(stream)>>>(
      dev(out), dev(gate_up), rows, width);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

absl::Status swiglu_backward(bf16* dgate_up, const bf16* gate_up, const bf16* dout, int64_t rows,
                             int width, void* stream) {
  if (rows * width == 0) return absl::OkStatus();
  swiglu_backward_kernel<<<blocks_for(rows * width, 256), 256, 0, to_stream(stream)>>>(
      dev(dgate_up), dev(gate_up), dev(dout), rows, width);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

absl::Status residual_forward(bf16* out, const bf16* a, const bf16* b, int64_t n, void* stream) {
  return map_bf16(out, n, stream, add_op{}, a, b);
}

absl::Status accumulate(bf16* dst, const bf16* src, int64_t n, void* stream) {
  return map_bf16(dst, n, stream, add_op{}, dst, src);
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
