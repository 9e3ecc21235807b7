#include "kernels/cuda/common.cuh"
#include "kernels/kv_cache.hpp"

namespace troupe::kernels::cuda {
namespace {

__device__ int64_t slot(const int32_t* block_table, int block_size, int width, int64_t position) {
  return (static_cast<int64_t>(block_table[position / block_size]) * block_size +
          position % block_size) *
         width;
}

__global__ void append_kernel(__nv_bfloat16* cache, const int32_t* block_table, int block_size,
                              int width, int64_t first, const __nv_bfloat16* values, int64_t stride,
                              int n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(n) * width) return;
  const int64_t row = i / width, c = i % width;
  cache[slot(block_table, block_size, width, first + row) + c] = values[row * stride + c];
}

__global__ void gather_kernel(__nv_bfloat16* out, const __nv_bfloat16* cache,
                              const int32_t* block_table, int block_size, int width, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * width) return;
  const int64_t row = i / width, c = i % width;
  out[i] = cache[slot(block_table, block_size, width, row) + c];
}

}  // namespace

absl::Status kv_append(bf16* cache, const int32_t* block_table, const kv_layout& l,
                       int64_t first_position, const bf16* values, int64_t value_stride, int n,
                       void* stream) {
  append_kernel<<<blocks_for(int64_t{n} * l.width, 256), 256, 0, to_stream(stream)>>>(
      dev(cache), block_table, l.block_size, l.width, first_position, dev(values), value_stride, n);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

absl::Status kv_gather(bf16* out, const bf16* cache, const int32_t* block_table, const kv_layout& l,
                       int64_t n, void* stream) {
  gather_kernel<<<blocks_for(n * l.width, 256), 256, 0, to_stream(stream)>>>(
      dev(out), dev(cache), block_table, l.block_size, l.width, n);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

}  // namespace troupe::kernels::cuda
