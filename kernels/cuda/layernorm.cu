#include "kernels/cuda/common.cuh"
#include "kernels/layernorm.hpp"

namespace troupe::kernels::cuda {
namespace {

// One warp per row.
__global__ void layernorm_forward_kernel(__nv_bfloat16* out, float* mean, float* rstd,
                                         const __nv_bfloat16* in, const __nv_bfloat16* weight,
                                         const __nv_bfloat16* bias, int rows, int dim) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const __nv_bfloat16* x = in + static_cast<int64_t>(row) * dim;
  float sum = 0.0f;
  for (int i = lane; i < dim; i += 32)
    sum += __bfloat162float(x[i]);
  const float m = warp_sum(sum) / dim;
  float var = 0.0f;
  for (int i = lane; i < dim; i += 32) {
    const float d = __bfloat162float(x[i]) - m;
    var += d * d;
  }
  const float s = rsqrtf(warp_sum(var) / dim + 1e-5f);
  __nv_bfloat16* y = out + static_cast<int64_t>(row) * dim;
  for (int i = lane; i < dim; i += 32) {
    y[i] = __float2bfloat16((__bfloat162float(x[i]) - m) * s * __bfloat162float(weight[i]) +
                            __bfloat162float(bias[i]));
  }
  if (lane == 0) mean[row] = m, rstd[row] = s;
}

// One warp per row (any dim).
__global__ void layernorm_input_grad(__nv_bfloat16* din, const __nv_bfloat16* dout,
                                     const __nv_bfloat16* in, const __nv_bfloat16* weight,
                                     const float* mean, const float* rstd, int rows, int dim) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int64_t base = static_cast<int64_t>(row) * dim;
  const float m = mean[row], s = rstd[row];
  float a = 0.0f, b = 0.0f;
  for (int i = lane; i < dim; i += 32) {
    const float norm = (__bfloat162float(in[base + i]) - m) * s;
    const float dnorm = __bfloat162float(weight[i]) * __bfloat162float(dout[base + i]);
    a += dnorm;
    b += dnorm * norm;
  }
  a = warp_sum(a) / dim;
  b = warp_sum(b) / dim;
  for (int i = lane; i < dim; i += 32) {
    const float norm = (__bfloat162float(in[base + i]) - m) * s;
    const float dnorm = __bfloat162float(weight[i]) * __bfloat162float(dout[base + i]);
    din[base + i] = __float2bfloat16(__bfloat162float(din[base + i]) + (dnorm - a - norm * b) * s);
  }
}

// The same with 16-byte loads and the row kept in registers between the two passes: lane l
// holds groups l, l + 32, ... of 8 values (GROUPS of them); dim a multiple of 8, at most
// GROUPS * 256.
template <int GROUPS>
__global__ void layernorm_input_grad_vec(__nv_bfloat16* din, const __nv_bfloat16* dout,
                                         const __nv_bfloat16* in, const __nv_bfloat16* weight,
                                         const float* mean, const float* rstd, int rows, int dim) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int64_t base = static_cast<int64_t>(row) * dim;
  const int groups = dim / 8;
  const float m = mean[row], s = rstd[row];
  float norm[GROUPS][8], dnorm[GROUPS][8];
  float a = 0.0f, b = 0.0f;
#pragma unroll
  for (int g = 0; g < GROUPS; ++g) {
    const int at = (lane + 32 * g) * 8;
    if (at >= groups * 8) break;
    const uint4 x = *reinterpret_cast<const uint4*>(in + base + at);
    const uint4 dy = *reinterpret_cast<const uint4*>(dout + base + at);
    const uint4 w = *reinterpret_cast<const uint4*>(weight + at);
    const auto* xs = reinterpret_cast<const __nv_bfloat16*>(&x);
    const auto* dys = reinterpret_cast<const __nv_bfloat16*>(&dy);
    const auto* ws = reinterpret_cast<const __nv_bfloat16*>(&w);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      norm[g][e] = (__bfloat162float(xs[e]) - m) * s;
      dnorm[g][e] = __bfloat162float(ws[e]) * __bfloat162float(dys[e]);
      a += dnorm[g][e];
      b += dnorm[g][e] * norm[g][e];
    }
  }
  a = warp_sum(a) / dim;
  b = warp_sum(b) / dim;
#pragma unroll
  for (int g = 0; g < GROUPS; ++g) {
    const int at = (lane + 32 * g) * 8;
    if (at >= groups * 8) break;
    uint4 d = *reinterpret_cast<const uint4*>(din + base + at);
    auto* ds = reinterpret_cast<__nv_bfloat16*>(&d);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      ds[e] = __float2bfloat16(__bfloat162float(ds[e]) + (dnorm[g][e] - a - norm[g][e] * b) * s);
    }
    *reinterpret_cast<uint4*>(din + base + at) = d;
  }
}

// Weight and bias gradients in two deterministic stages: block (chunk, column tile) sums its
// chunk of rows per column into partial[chunk]; then one thread per column adds the chunks in
// order. Enough blocks to fill the GPU, and the same sums in the same order every run.
constexpr int grad_chunks = 64;

__global__ void layernorm_param_partials(float* partial_w, float* partial_b,
                                         const __nv_bfloat16* dout, const __nv_bfloat16* in,
                                         const float* mean, const float* rstd, int rows, int dim) {
  const int c = blockIdx.y * blockDim.x + threadIdx.x, chunk = blockIdx.x;
  if (c >= dim) return;
  const int per_chunk = (rows + grad_chunks - 1) / grad_chunks;
  const int first = chunk * per_chunk, last = min(rows, first + per_chunk);
  float dw = 0.0f, db = 0.0f;
  for (int r = first; r < last; ++r) {
    const int64_t i = static_cast<int64_t>(r) * dim + c;
    const float g = __bfloat162float(dout[i]);
    db += g;
    dw += g * (__bfloat162float(in[i]) - mean[r]) * rstd[r];
  }
  partial_w[static_cast<int64_t>(chunk) * dim + c] = dw;
  partial_b[static_cast<int64_t>(chunk) * dim + c] = db;
}

__global__ void layernorm_param_totals(float* dweight, float* dbias, const float* partial_w,
                                       const float* partial_b, int dim) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= dim) return;
  float dw = 0.0f, db = 0.0f;
  for (int chunk = 0; chunk < grad_chunks; ++chunk) {
    dw += partial_w[static_cast<int64_t>(chunk) * dim + c];
    db += partial_b[static_cast<int64_t>(chunk) * dim + c];
  }
  dweight[c] += dw;
  dbias[c] += db;
}

}  // namespace

absl::Status layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* in,
                               const bf16* weight, const bf16* bias, int rows, int dim,
                               void* stream) {
  layernorm_forward_kernel<<<blocks_for(rows, 8), 256, 0, to_stream(stream)>>>(
      dev(out), mean, rstd, dev(in), dev(weight), dev(bias), rows, dim);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

absl::Status layernorm_backward(bf16* din, float* dweight, float* dbias, const bf16* dout,
                                const bf16* in, const bf16* weight, const float* mean,
                                const float* rstd, int rows, int dim, void* stream) {
  const int groups = (dim + 255) / 256;  // of 8 values per lane
  const dim3 grid(blocks_for(rows, 8)), block(256);
  cudaStream_t st = to_stream(stream);
  if (dim % 8 != 0 || groups > 4 || !aligned16(din, dout, in, weight)) {
    layernorm_input_grad<<<grid, block, 0, st>>>(dev(din), dev(dout), dev(in), dev(weight), mean,
                                                 rstd, rows, dim);
  } else if (groups == 1) {
    layernorm_input_grad_vec<1>
        <<<grid, block, 0, st>>>(dev(din), dev(dout), dev(in), dev(weight), mean, rstd, rows, dim);
  } else if (groups == 2) {
    layernorm_input_grad_vec<2>
        <<<grid, block, 0, st>>>(dev(din), dev(dout), dev(in), dev(weight), mean, rstd, rows, dim);
  } else if (groups == 3) {
    layernorm_input_grad_vec<3>
        <<<grid, block, 0, st>>>(dev(din), dev(dout), dev(in), dev(weight), mean, rstd, rows, dim);
  } else {
    layernorm_input_grad_vec<4>
        <<<grid, block, 0, st>>>(dev(din), dev(dout), dev(in), dev(weight), mean, rstd, rows, dim);
  }
  TROUPE_RETURN_IF_ERROR(TROUPE_CUDA_LAUNCH_STATUS());
  device_scratch mem(st);
  TROUPE_ASSIGN_OR_RETURN(float* partial, mem.take<float>(2 * int64_t{grad_chunks} * dim));
  float* partial_b = partial + static_cast<int64_t>(grad_chunks) * dim;
  layernorm_param_partials<<<dim3(grad_chunks, blocks_for(dim, 128)), 128, 0, st>>>(
      partial, partial_b, dev(dout), dev(in), mean, rstd, rows, dim);
  TROUPE_RETURN_IF_ERROR(TROUPE_CUDA_LAUNCH_STATUS());
  layernorm_param_totals<<<blocks_for(dim, 128), 128, 0, st>>>(dweight, dbias, partial, partial_b,
                                                               dim);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

}  // namespace troupe::kernels::cuda
