#include "actors/logits_processor.hpp"

#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"

namespace troupe::actors {

absl::Status check_logit_adjustments(const actor::generation_request& r, int vocab) {
  for (auto [name, value] : {std::pair{"frequency_penalty", r.frequency_penalty},
                             {"presence_penalty", r.presence_penalty}}) {
    if (!(value >= -2.0f && value <= 2.0f)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " is ", value, "; it must be between -2 and 2"));
    }
  }
  if (!(r.repetition_penalty > 0.0f && r.repetition_penalty <= 100.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("repetition_penalty is ", r.repetition_penalty,
                                                   "; it must be above 0 and at most 100"));
  }
  if (r.min_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat("min_tokens is ", r.min_tokens));
  }
  for (const auto& b : r.logit_bias) {
    if (b.token < 0 || b.token >= vocab || !(b.bias >= -100.0f && b.bias <= 100.0f)) {
      return absl::InvalidArgumentError(absl::StrCat("logit_bias of token ", b.token, " is ",
                                                     b.bias, "; tokens are in [0, ", vocab,
                                                     ") and biases between -100 and 100"));
    }
  }
  for (int32_t t : r.stop_token_ids) {
    if (t < 0 || t >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("stop token ", t, " is outside the vocabulary [0, ", vocab, ")"));
    }
  }
  return absl::OkStatus();
}

bool adjusts_logits(const actor::generation_request& r) {
  return !r.logit_bias.empty() || r.min_tokens > 0 || r.repetition_penalty != 1.0f ||
         r.frequency_penalty != 0.0f || r.presence_penalty != 0.0f;
}

void adjust_logits(float* logits, int vocab, const actor::generation_request& r,
                   std::span<const int32_t> prompt, std::span<const int32_t> output) {
  for (const auto& b : r.logit_bias)
    logits[b.token] += b.bias;
  if (static_cast<int64_t>(output.size()) < r.min_tokens) {
    for (int32_t t : r.stop_token_ids)
      logits[t] = -std::numeric_limits<float>::infinity();
  }
  // Per-token marks and counts over the vocabulary, touched only at the sequence's tokens and
  // left zero again, so that a step costs the sequence's length, not the vocabulary's.
  if (r.repetition_penalty != 1.0f) {
    thread_local std::vector<uint8_t> seen;
    seen.resize(vocab);
    const float p = r.repetition_penalty;
    for (auto tokens : {prompt, output}) {
      for (int32_t t : tokens) {
        if (seen[t]) continue;
        seen[t] = 1;
        logits[t] = logits[t] > 0.0f ? logits[t] / p : logits[t] * p;
      }
    }
    for (auto tokens : {prompt, output}) {
      for (int32_t t : tokens)
        seen[t] = 0;
    }
  }
  if (r.frequency_penalty != 0.0f || r.presence_penalty != 0.0f) {
    thread_local std::vector<int32_t> counts;
    counts.resize(vocab);
    for (int32_t t : output)
      ++counts[t];
    for (int32_t t : output) {
      if (counts[t] == 0) continue;  // already penalized
      logits[t] -= r.frequency_penalty * static_cast<float>(counts[t]) + r.presence_penalty;
      counts[t] = 0;
    }
  }
}

}  // namespace troupe::actors
