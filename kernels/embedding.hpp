#pragma once

// Token plus position embedding: out[i] = wte[tokens[i]] + wpe[positions[i]].

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/tensor/dtype.hpp"

namespace troupe::kernels {

namespace cuda {
/// wpe null: the token embedding alone (the Llama family's, whose positions RoPE gives).
[[nodiscard]] absl::Status embedding_forward(tensor::bf16* out, const int32_t* tokens,
                                             const int32_t* positions, int n,
                                             const tensor::bf16* wte, const tensor::bf16* wpe,
                                             int dim, void* stream);
/// f32 gradients; rows are added with atomics, so the order (and last bits) may vary. dwpe null:
/// no learned positions.
[[nodiscard]] absl::Status embedding_backward(float* dwte, float* dwpe, const tensor::bf16* dout,
                                              const int32_t* tokens, const int32_t* positions,
                                              int n, int dim, void* stream);
}  // namespace cuda

namespace cpu {
void embedding_forward(float* out, const int32_t* tokens, const int32_t* positions, int n,
                       const float* wte, const float* wpe, int dim);
/// dwte[tokens[i]] += dout[i], dwpe[positions[i]] += dout[i].
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                        const int32_t* positions, int n, int dim);

/// A vocabulary split over tensor-parallel ranks (vocab-parallel): this rank holds rows [first,
/// first + vocab) of the token embedding. out[i] = wte[tokens[i] - first] for a token it holds,
/// 0 for another, so that the ranks' outputs summed are the whole lookup (then add_positions).
void embedding_part_forward(float* out, const int32_t* tokens, int n, const float* wte, int first,
                            int vocab, int dim);
/// out[i] += wpe[positions[i]].
void add_positions(float* out, const int32_t* positions, int n, const float* wpe, int dim);
/// dwte[tokens[i] - first] += dout[i] for the tokens this rank holds, dwpe[positions[i]] +=
/// dout[i] for every one (unless dwpe is null: a model without learned positions).
void embedding_part_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                             const int32_t* positions, int n, int first, int vocab, int dim);
}  // namespace cpu

}  // namespace troupe::kernels
