// RMSNorm on bf16 rows, f32 inside: one warp per row; the weight gradient's column sums in two
// deterministic stages, as layernorm's.

#include "absl/strings/str_cat.h"
#include "kernels/cuda/common.cuh"
#include "kernels/rmsnorm.hpp"

namespace troupe::kernels::cuda {
namespace {

// Where row r of a norm_rows starts.
struct row_index {
  int dim, per_token;
  int64_t stride;
  __device__ int64_t operator()(int64_t r) const {
    return r / per_token * stride + r % per_token * dim;
  }
};

__global__ void rmsnorm_forward_kernel(__nv_bfloat16* out, float* rstd, const __nv_bfloat16* in,
                                       const __nv_bfloat16* weight, int64_t rows, row_index at,
                                       float eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32, dim = at.dim;
  if (row >= rows) return;
  const int64_t base = at(row);
  float sum = 0.0f;
  for (int i = lane; i < dim; i += 32) {
    const float x = __bfloat162float(in[base + i]);
    sum += x * x;
  }
  const float s = rsqrtf(warp_sum(sum) / static_cast<float>(dim) + eps);
  for (int i = lane; i < dim; i += 32)
    out[base + i] =
        __float2bfloat16(__bfloat162float(weight[i]) * (__bfloat162float(in[base + i]) * s));
  if (lane == 0 && rstd != nullptr) rstd[row] = s;
}

// dx = s w dy - s^3 / dim x sum(w dy x), added to din.
__global__ void rmsnorm_input_grad(__nv_bfloat16* din, const __nv_bfloat16* dout,
                                   const __nv_bfloat16* in, const __nv_bfloat16* weight,
                                   const float* rstd, int64_t rows, row_index at) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32, dim = at.dim;
  if (row >= rows) return;
  const int64_t base = at(row);
  const float s = rstd[row];
  float dot = 0.0f;
  for (int i = lane; i < dim; i += 32) {
    dot += __bfloat162float(weight[i]) * __bfloat162float(dout[base + i]) *
           __bfloat162float(in[base + i]);
  }
  const float c = s * s * s * warp_sum(dot) / static_cast<float>(dim);
  for (int i = lane; i < dim; i += 32) {
    const float g = s * __bfloat162float(weight[i]) * __bfloat162float(dout[base + i]) -
                    c * __bfloat162float(in[base + i]);
    din[base + i] = __float2bfloat16(__bfloat162float(din[base + i]) + g);
  }
}

constexpr int grad_chunks = 64;

// Block (chunk, column tile) sums its chunk of rows' dy x s per column into partial[chunk].
__global__ void rmsnorm_weight_partials(float* partial, const __nv_bfloat16* dout,
                                        const __nv_bfloat16* in, const float* rstd, int64_t rows,
                                        row_index at) {
  const int c = blockIdx.y * blockDim.x + threadIdx.x, chunk = blockIdx.x;
  if (c >= at.dim) return;
  const int64_t per_chunk = (rows + grad_chunks - 1) / grad_chunks;
  const int64_t first = chunk * per_chunk, last = min(rows, first + per_chunk);
  float dw = 0.0f;
  for (int64_t r = first; r < last; ++r) {
    const int64_t i = at(r) + c;
    dw += __bfloat162float(dout[i]) * __bfloat162float(in[i]) * rstd[r];
  }
  partial[static_cast<int64_t>(chunk) * at.dim + c] = dw;
}

__global__ void rmsnorm_weight_totals(float* dweight, const float* partial, int dim) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= dim) return;
  float dw = 0.0f;
  for (int chunk = 0; chunk < grad_chunks; ++chunk)
    dw += partial[static_cast<int64_t>(chunk) * dim + c];
  dweight[c] += dw;
}

absl::Status check_rows(const norm_rows& r) {
  if (r.tokens < 0 || r.dim < 1 || r.per_token < 1 ||
      r.token_stride() < int64_t{r.dim} * r.per_token) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda rmsnorm: ", r.tokens, " tokens of ", r.per_token, " rows of ", r.dim,
                     " values, ", r.token_stride(),
                     " apart: the sizes must be positive and the rows of a "
                     "token must fit in its stride"));
  }
  return absl::OkStatus();
}

row_index index_of(const norm_rows& r) {
  return {r.dim, r.per_token, r.token_stride()};
}

}  // namespace

absl::Status rmsnorm_forward(bf16* out, float* rstd, const bf16* in, const bf16* weight,
                             const norm_rows& rows, float eps, void* stream) {
  TROUPE_RETURN_IF_ERROR(check_rows(rows));
  if (rows.count() == 0) return absl::OkStatus();
  rmsnorm_forward_kernel<<<blocks_for(rows.count(), 8), 256, 0, to_stream(stream)>>>(
      dev(out), rstd, dev(in), dev(weight), rows.count(), index_of(rows), eps);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

absl::Status rmsnorm_backward(bf16* din, float* dweight, const bf16* dout, const bf16* in,
                              const bf16* weight, const float* rstd, const norm_rows& rows,
                              void* stream) {
  TROUPE_RETURN_IF_ERROR(check_rows(rows));
  if (rows.count() == 0) return absl::OkStatus();
  cudaStream_t st = to_stream(stream);
  const row_index at = index_of(rows);
  rmsnorm_input_grad<<<blocks_for(rows.count(), 8), 256, 0, st>>>(
      dev(din), dev(dout), dev(in), dev(weight), rstd, rows.count(), at);
  TROUPE_RETURN_IF_ERROR(TROUPE_CUDA_LAUNCH_STATUS());
  device_scratch mem(st);
  TROUPE_ASSIGN_OR_RETURN(float* partial, mem.take<float>(int64_t{grad_chunks} * rows.dim));
  rmsnorm_weight_partials<<<dim3(grad_chunks, blocks_for(rows.dim, 128)), 128, 0, st>>>(
      partial, dev(dout), dev(in), rstd, rows.count(), at);
  TROUPE_RETURN_IF_ERROR(TROUPE_CUDA_LAUNCH_STATUS());
  rmsnorm_weight_totals<<<blocks_for(rows.dim, 128), 128, 0, st>>>(dweight, partial, rows.dim);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

}  // namespace troupe::kernels::cuda
