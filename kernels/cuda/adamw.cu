#include "kernels/adamw.hpp"
#include "kernels/cuda/common.cuh"

namespace troupe::kernels::cuda {
namespace {

__global__ void adamw_kernel(float* params, __nv_bfloat16* params_bf16, const float* grads,
                             float* m, float* v, int64_t n, adamw_params p, float c1, float c2,
                             float grad_scale) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float g = grads[i] * grad_scale;
  const float mi = p.beta1 * m[i] + (1.0f - p.beta1) * g;
  const float vi = p.beta2 * v[i] + (1.0f - p.beta2) * g * g;
  m[i] = mi;
  v[i] = vi;
  const float w =
      params[i] - p.lr * ((mi * c1) / (sqrtf(vi * c2) + p.eps) + p.weight_decay * params[i]);
  params[i] = w;
  if (params_bf16 != nullptr) params_bf16[i] = __float2bfloat16(w);
}

constexpr int reduce_blocks = 512, reduce_threads = 256;

// Stage 1: each block sums a fixed strided share of x; stage 2 adds the partials in order.
__global__ void squares_partial(double* partial, const float* x, int64_t n) {
  __shared__ double shared[reduce_threads];
  double s = 0.0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    s += static_cast<double>(x[i]) * x[i];
  }
  shared[threadIdx.x] = s;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = shared[0];
}

__global__ void squares_total(double* total, const double* partial) {
  double s = 0.0;
  for (int i = 0; i < reduce_blocks; ++i)
    s += partial[i];
  *total = s;
}

}  // namespace

absl::Status adamw_update(float* params, bf16* params_bf16, const float* grads, float* m, float* v,
                          int64_t n, const adamw_params& p, float grad_scale, void* stream) {
  const float c1 = 1.0f / (1.0f - powf(p.beta1, static_cast<float>(p.step)));
  const float c2 = 1.0f / (1.0f - powf(p.beta2, static_cast<float>(p.step)));
  adamw_kernel<<<blocks_for(n, 256), 256, 0, to_stream(stream)>>>(
      params, reinterpret_cast<__nv_bfloat16*>(params_bf16), grads, m, v, n, p, c1, c2, grad_scale);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

absl::StatusOr<double> sum_of_squares(const float* x, int64_t n, void* stream) {
  cudaStream_t st = to_stream(stream);
  device_scratch mem(st);
  TROUPE_ASSIGN_OR_RETURN(double* scratch, mem.take<double>(reduce_blocks + 1));
  squares_partial<<<reduce_blocks, reduce_threads, 0, st>>>(scratch, x, n);
  squares_total<<<1, 1, 0, st>>>(scratch + reduce_blocks, scratch);
  return read_scalar(scratch + reduce_blocks, st);
}

}  // namespace troupe::kernels::cuda
