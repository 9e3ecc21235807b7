#pragma once

// The paged KV cache: a pool of fixed-size blocks [blocks, block_size, width]; each sequence maps
// its logical block i to a physical block through its block table.

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/tensor/dtype.hpp"

namespace troupe::kernels {

/// Geometry of one cache pool (one layer's keys or values).
struct kv_layout {
  int block_size = 16;
  int width = 0;  ///< floats per position (dim)
};

namespace cuda {
[[nodiscard]] absl::Status kv_append(tensor::bf16* cache, const int32_t* block_table,
                                     const kv_layout& l, int64_t first_position,
                                     const tensor::bf16* values, int64_t value_stride, int n,
                                     void* stream);
[[nodiscard]] absl::Status kv_gather(tensor::bf16* out, const tensor::bf16* cache,
                                     const int32_t* block_table, const kv_layout& l, int64_t n,
                                     void* stream);

/// Attention of new query rows against the paged cache, read in place through the block tables
/// (the incremental decoding step, any mix of sequences in one launch). Row r of q (row stride
/// q_stride) is the token at position positions[r] of a sequence whose block table starts at
/// block_tables + table_offsets[r]; it attends to that sequence's keys and values at positions
/// [0, positions[r]] (its own appended first). The cache's rows hold kv_heads heads of head_dim
/// = width / kv_heads (a multiple of 32, at most 256), each shared by heads / kv_heads query
/// heads (grouped-query attention; kv_heads = heads without it); out [rows, heads head_dim].
[[nodiscard]] absl::Status paged_attention(tensor::bf16* out, const tensor::bf16* q,
                                           int64_t q_stride, const tensor::bf16* keys,
                                           const tensor::bf16* values, const int32_t* block_tables,
                                           const int32_t* table_offsets, const int32_t* positions,
                                           const kv_layout& l, int rows, int heads, int kv_heads,
                                           void* stream);
}  // namespace cuda

namespace cpu {
/// Writes rows [0, n) of values (row stride value_stride) at positions first_position.. .
void kv_append(float* cache, const int32_t* block_table, const kv_layout& l, int64_t first_position,
               const float* values, int64_t value_stride, int n);
/// Copies positions [0, n) into out [n, width], contiguous.
void kv_gather(float* out, const float* cache, const int32_t* block_table, const kv_layout& l,
               int64_t n);
/// Where positions [0, n) are: rows[s] points at position s's width floats in the cache.
void kv_rows(const float** rows, const float* cache, const int32_t* block_table, const kv_layout& l,
             int64_t n);

/// An int8 pool (`serve.engine.kv_cache_dtype: int8`): each position's row of width values in
/// `heads` heads of width / heads, each head as int8s with one f32 scale in `scales` (a pool of
/// `heads` floats per position): its largest magnitude over 127, rounded to nearest. Writes rows
/// [0, n) of values (row stride value_stride) at positions first_position.. .
void kv_append_int8(int8_t* cache, float* scales, const int32_t* block_table, const kv_layout& l,
                    int heads, int64_t first_position, const float* values, int64_t value_stride,
                    int n);
/// Positions [0, n) of an int8 pool, dequantized (int8 times its head's scale) into out
/// [n, width], contiguous.
void kv_gather_int8(float* out, const int8_t* cache, const float* scales,
                    const int32_t* block_table, const kv_layout& l, int heads, int64_t n);
}  // namespace cpu

}  // namespace troupe::kernels
