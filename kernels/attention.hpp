#pragma once

// Causal multi-head self-attention. qkv is [batch, seq, 3 * dim] (q, k and v side by side, each
// split into heads of dim / heads), out is [batch, seq, dim]. With grouped-query attention a
// row is [q (dim), k (kv_dim), v (kv_dim)], kv_dim = kv_heads * head_dim, each key/value head
// shared by heads / kv_heads query heads.

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/tensor/dtype.hpp"

namespace troupe::kernels {

/// Sizes of one attention call.
struct attention_shape {
  int batch = 0, seq = 0, dim = 0, heads = 0;
  int kv_heads = 0;  ///< 0: as many as heads
  [[nodiscard]] int head_dim() const { return dim / heads; }
  [[nodiscard]] int kv_head_count() const { return kv_heads > 0 ? kv_heads : heads; }
  /// A token's row of q, k and v: dim + 2 kv_heads head_dim.
  [[nodiscard]] int row_width() const { return dim + 2 * kv_head_count() * head_dim(); }
};

namespace cuda {
/// The default bound on the scratch that holds a chunk of heads' scores and probabilities.
inline constexpr int64_t attention_scores_limit = int64_t{768} << 20;

/// Causal attention as cuBLASLt batched GEMMs over every (batch, head): the scores of a chunk
/// of heads (as many as fit in `scores_limit` bytes of f32 scores and bf16 probabilities, at
/// least one) are materialised in scratch, never kept; saves the log-sum-exp per row,
/// lse [batch, heads, seq]. head_dim must be a multiple of 8. With grouped-query attention the
/// keys and values are repeated for their query heads in the head-major scratch (HF's
/// repeat_kv), and in backward their gradients summed over those heads in a fixed order.
[[nodiscard]] absl::Status attention_forward(tensor::bf16* out, float* lse, const tensor::bf16* qkv,
                                             const attention_shape& s, void* stream,
                                             int64_t scores_limit = attention_scores_limit);
/// dqkv (overwritten) from dout, recomputing the probabilities from lse, with the same GEMMs
/// (dv = p^T dout, dp = dout v^T, ds = p (dp - delta) / sqrt(hd), dq = ds k, dk = ds^T q): no
/// atomics, a fixed summation order.
[[nodiscard]] absl::Status attention_backward(tensor::bf16* dqkv, const tensor::bf16* dout,
                                              const tensor::bf16* qkv, const tensor::bf16* out,
                                              const float* lse, const attention_shape& s,
                                              void* stream,
                                              int64_t scores_limit = attention_scores_limit);
}  // namespace cuda

namespace cpu {
class thread_pool;

/// Saves the attention probabilities, probs [batch, heads, seq, seq], for backward; (batch,
/// head) pairs run on `pool` (in backward, (batch, key/value head) pairs: a shared key's and
/// value's gradients are summed over its query heads in order, by one task). Batch-invariant: each
/// query row is computed by the same function as cached_attention_forward's, from its own data
/// only, so the two agree bit for bit.
void attention_forward(float* out, float* probs, const float* qkv, const attention_shape& s,
                       thread_pool* pool);
/// dqkv = d/dqkv (overwrites).
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                        const attention_shape& s, thread_pool* pool);

/// Attention of `queries` new rows against a cache: q [queries, dim] (row stride q_stride) at
/// positions first_position.. attends to the keys and values of positions [0, first_position
/// + queries), keys[s] and values[s] pointing at position s's floats (in a paged cache's
/// blocks, read in place); out is [queries, dim]. The incremental decoding step. With
/// grouped-query attention (`kv_heads` < heads; 0 means as many as heads) a key or value row
/// holds kv_heads heads of dim / heads floats, each shared by heads / kv_heads query heads.
void cached_attention_forward(float* out, const float* q, int64_t q_stride,
                              const float* const* keys, const float* const* values, int queries,
                              int first_position, int dim, int heads, int kv_heads = 0);
}  // namespace cpu

}  // namespace troupe::kernels
