#include "absl/strings/str_cat.h"
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

constexpr int max_head_dim = 256;
constexpr int warps_per_block = 4;

// One warp per (query row, head), with an online softmax over the keys; lane i holds elements
// i, i + 32, ... of the head. Query head h reads key/value head h / (heads / kv_heads).
__global__ void paged_attention_kernel(__nv_bfloat16* out, const __nv_bfloat16* q, int64_t q_stride,
                                       const __nv_bfloat16* keys, const __nv_bfloat16* values,
                                       const int32_t* block_tables, const int32_t* table_offsets,
                                       const int32_t* positions, int block_size, int width,
                                       int rows, int heads, int kv_heads) {
  const int warp = blockIdx.x * warps_per_block + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp >= rows * heads) return;
  const int row = warp / heads, head = warp % heads, head_dim = width / kv_heads;
  const int kv_head = head / (heads / kv_heads);
  const int per_lane = head_dim / 32;
  const int32_t* table = block_tables + table_offsets[row];
  const float scale = rsqrtf(static_cast<float>(head_dim));
  float query[max_head_dim / 32], acc[max_head_dim / 32];
  const __nv_bfloat16* qrow = q + row * q_stride + head * head_dim;
  for (int i = 0; i < per_lane; ++i) {
    query[i] = __bfloat162float(qrow[lane + 32 * i]) * scale;
    acc[i] = 0.0f;
  }
  float max_score = -INFINITY, sum = 0.0f;
  for (int64_t j = 0; j <= positions[row]; ++j) {
    const int64_t at = slot(table, block_size, width, j) + kv_head * head_dim;
    float dot = 0.0f;
    for (int i = 0; i < per_lane; ++i)
      dot += query[i] * __bfloat162float(keys[at + lane + 32 * i]);
    const float score = warp_sum(dot);
    const float new_max = fmaxf(max_score, score);
    const float shrink = __expf(max_score - new_max), weight = __expf(score - new_max);
    sum = sum * shrink + weight;
    for (int i = 0; i < per_lane; ++i)
      acc[i] = acc[i] * shrink + weight * __bfloat162float(values[at + lane + 32 * i]);
    max_score = new_max;
  }
  __nv_bfloat16* orow = out + static_cast<int64_t>(row) * heads * head_dim + head * head_dim;
  for (int i = 0; i < per_lane; ++i)
    orow[lane + 32 * i] = __float2bfloat16(acc[i] / sum);
}

}  // namespace

absl::Status paged_attention(bf16* out, const bf16* q, int64_t q_stride, const bf16* keys,
                             const bf16* values, const int32_t* block_tables,
                             const int32_t* table_offsets, const int32_t* positions,
                             const kv_layout& l, int rows, int heads, int kv_heads, void* stream) {
  if (kv_heads < 1 || heads < 1 || heads % kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "paged_attention: ", kv_heads, " key/value heads must divide the ", heads, " query heads"));
  }
  if (l.width % kv_heads != 0 || (l.width / kv_heads) % 32 != 0 ||
      l.width / kv_heads > max_head_dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "paged_attention: head_dim ", l.width / kv_heads, " (width ", l.width, " / ", kv_heads,
        " key/value heads) must be a multiple of 32, at most ", max_head_dim));
  }
  if (rows == 0) return absl::OkStatus();
  paged_attention_kernel<<<blocks_for(int64_t{rows} * heads, warps_per_block), 32 * warps_per_block,
                           0, to_stream(stream)>>>(
      dev(out), dev(q), q_stride, dev(keys), dev(values), block_tables, table_offsets, positions,
      l.block_size, l.width, rows, heads, kv_heads);
  return TROUPE_CUDA_LAUNCH_STATUS();
}

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
