#pragma once

// The request-level adjustments of a sequence's logits before its next token is drawn, as the
// OpenAI API and vLLM define them, in vLLM's order: logit_bias, min_tokens (the stop tokens
// masked), then the repetition, frequency and presence penalties. The draw and its log-prob
// then see the adjusted logits: the log-prob is the one of the distribution the token came from.

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "runtime/actor/message_types.hpp"

namespace troupe::actors {

/// INVALID_ARGUMENT naming the field when `r` asks for an adjustment outside what the API allows
/// (a penalty out of range, a biased or stop token outside [0, vocab)).
[[nodiscard]] absl::Status check_logit_adjustments(const actor::generation_request& r, int vocab);

/// Whether `r` adjusts logits at all; false for a plain request, which then costs nothing.
[[nodiscard]] bool adjusts_logits(const actor::generation_request& r);

/// Adjusts logits[vocab] for the next token of a sequence with `prompt` and `output` so far:
/// - logit_bias added;
/// - while output has fewer than min_tokens tokens, every stop_token_ids token at -infinity;
/// - repetition_penalty on each token of prompt or output, once: z / p when z > 0, else z × p;
/// - z − frequency_penalty × count − presence_penalty for each token that output holds `count`
///   (≥ 1) times.
/// `r` must have passed check_logit_adjustments for `vocab`.
void adjust_logits(float* logits, int vocab, const actor::generation_request& r,
                   std::span<const int32_t> prompt, std::span<const int32_t> output);

}  // namespace troupe::actors
