#pragma once

// Next-token sampling: temperature, top-k and top-p, seeded. The random draw depends only on
// (seed, counter), so replaying a request with the same seed reproduces it token for token.

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/tensor/dtype.hpp"

namespace troupe::kernels {

/// Per-request sampling options; temperature 0 is greedy.
struct sampling_params {
  float temperature = 1.0f;
  int top_k = 0;       ///< 0: all tokens
  float top_p = 1.0f;  ///< 1: no nucleus cut
};

/// A uniform float in [0, 1) from (seed, counter); a counter-based generator (splitmix64).
float seeded_uniform(uint64_t seed, uint64_t counter);

namespace cuda {
/// Draws a token from device logits [vocab]: the same candidates as the CPU (temperature,
/// top-k, top-p; greedy at temperature 0) with the same probabilities, picked by (seed, counter)
/// in token order as on the CPU (a draw near a boundary between two tokens may still differ:
/// the weights are f32 here). Waits for the stream.
[[nodiscard]] absl::StatusOr<int> sample_token(const float* logits, int vocab,
                                               const sampling_params& p, uint64_t seed,
                                               uint64_t counter, void* stream);
}  // namespace cuda

namespace cpu {
/// Draws a token id from logits [vocab]: the candidates (all tokens, or the top_k by logit with
/// ties by id, then the smallest most likely prefix holding top_p of their mass) weighted by
/// exp((logit - max) / temperature), and the uniform draw of (seed, counter) located among them
/// in token order.
int sample_token(const float* logits, int vocab, const sampling_params& p, uint64_t seed,
                 uint64_t counter);
/// The distribution sample_token draws from, unnormalized: each candidate's weight
/// exp((logit - max) / temperature), 0 for the tokens top-k and top-p cut, into weights[vocab];
/// at temperature 0, 1 for the first most likely token and 0 elsewhere.
void sampling_weights(const float* logits, int vocab, const sampling_params& p, float* weights);
/// The token at fraction `u` in [0, 1) of weights[vocab]'s mass, walked in token order (weights
/// need not sum to 1; at least one is positive).
int draw_token(const float* weights, int vocab, float u);
/// log softmax(logits / temperature)[token] over the whole vocabulary (temperature 1 when it is
/// 0, greedy), computed as the training forward's cross-entropy does.
float token_log_prob(const float* logits, int vocab, float temperature, int token);
/// The `k` most likely tokens of the same distribution and their log-probs, most likely first
/// (ties by token id), into tokens[k] and values[k].
void top_log_probs(const float* logits, int vocab, float temperature, int k, int32_t* tokens,
                   float* values);
}  // namespace cpu

}  // namespace troupe::kernels
