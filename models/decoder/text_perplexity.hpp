#pragma once

#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "models/decoder/decoder_layout.hpp"

namespace troupe::models {

/// A language model's perplexity on a text.
struct perplexity {
  double value = 0;     ///< exp of the mean next-token cross entropy (nats)
  double mean_nll = 0;  ///< that mean
  int64_t scored = 0;   ///< tokens predicted (each window's first token is context only)
  int64_t windows = 0;
};

/// The perplexity of `tokens` under the model `layout` (a whole language model) with weights
/// `params`: the text is cut into windows of `window` consecutive tokens (the last may be shorter,
/// down to 2), which do not overlap, and every token of a window after its first is scored
/// against the model's prediction from the tokens before it in the window (Hugging Face's
/// perplexity with a stride of the window). Runs the training forward (decoder_cpu_batch) over
/// `threads` threads. INVALID_ARGUMENT when there are fewer than 2 tokens, a token outside the
/// vocabulary, or a window outside [2, ctx].
[[nodiscard]] absl::StatusOr<perplexity> text_perplexity(const decoder_layout& layout,
                                                         const float* params,
                                                         std::span<const int32_t> tokens,
                                                         int window, int threads);

}  // namespace troupe::models
