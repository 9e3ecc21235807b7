#pragma once

// Softmax cross-entropy over the vocabulary, fused: the forward keeps the probabilities, from
// which the backward is (p - onehot) * dloss.

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "runtime/tensor/dtype.hpp"

namespace troupe::kernels {

namespace cuda {
/// One block per row: losses[i], and the logits overwritten with their gradient
/// (softmax - onehot) * dloss (the fused classifier: no probability tensor is stored).
[[nodiscard]] absl::Status cross_entropy_fused(float* losses, tensor::bf16* logits,
                                               const int32_t* targets, float dloss, int rows,
                                               int vocab, void* stream);
}  // namespace cuda

namespace cpu {
/// probs[i] = softmax(logits[i]); losses[i] = -log probs[i][targets[i]]. A target of -1 is
/// ignored (loss 0). probs may alias logits.
void cross_entropy_forward(float* losses, float* probs, const float* logits, const int32_t* targets,
                           int rows, int vocab);
/// dlogits[i] = (probs[i] - onehot(targets[i])) * dloss, 0 for ignored rows. May alias probs.
void cross_entropy_backward(float* dlogits, const float* probs, const int32_t* targets, float dloss,
                            int rows, int vocab);
/// For an objective of each row's loss and entropy h[i] (kernels/entropy.hpp), as the RL policy
/// loss is: dloss[i] = d objective / d losses[i], dentropy[i] = d objective / d h[i] (null: no
/// entropy term). dlogits[i] = (probs[i] - onehot) dloss[i] - dentropy[i] probs[i] (log probs[i]
/// + h[i]), 0 loss gradient for ignored rows. May alias probs.
void cross_entropy_backward(float* dlogits, const float* probs, const int32_t* targets,
                            const float* dloss, const float* h, const float* dentropy, int rows,
                            int vocab);

/// A vocabulary split over a tensor-parallel group (Megatron's vocab-parallel cross-entropy):
/// this rank holds columns [first, first + vocab) of every row's logits; `sum(data, n)` adds
/// n floats over the group's ranks in place (every rank calls it alike). The forward finds each
/// row's maximum over the whole vocabulary (each rank's own in a column of its own, summed), its
/// softmax's denominator and its target's logit (summed), and leaves this rank's columns of the
/// probabilities in probs (which may alias logits) and the row's loss in losses (0 for a target
/// of -1), on every rank. `scratch` holds (ranks + 2) x rows floats.
void vocab_parallel_cross_entropy_forward(float* losses, float* probs, const float* logits,
                                          const int32_t* targets, int rows, int vocab, int first,
                                          int rank, int ranks, float* scratch,
                                          const std::function<void(float*, int64_t)>& sum);
/// dlogits = (probs - onehot(targets)) * dloss over this rank's columns (the onehot only where
/// the target is one of them), 0 for ignored rows. May alias probs.
void vocab_parallel_cross_entropy_backward(float* dlogits, const float* probs,
                                           const int32_t* targets, float dloss, int rows, int vocab,
                                           int first);
}  // namespace cpu

}  // namespace troupe::kernels
