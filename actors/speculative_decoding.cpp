#include "actors/speculative_decoding.hpp"

#include <algorithm>

namespace troupe::actors {

std::vector<int32_t> propose_by_prompt_lookup(std::span<const int32_t> tokens, int min_n, int max_n,
                                              int k) {
  const int size = static_cast<int>(tokens.size());
  if (k < 1 || min_n < 1 || size <= min_n) return {};
  // For each earlier end e (the token after the match is tokens[e + 1], so e < size - 1), how
  // many tokens before it, up to max_n, equal the sequence's last ones.
  int longest = 0, next = 0;
  for (int e = 0; e + 1 < size; ++e) {
    int n = 0;
    while (n < max_n && n <= e && tokens[e - n] == tokens[size - 1 - n])
      ++n;
    if (n > longest) {  // strictly longer: the earliest place of the longest stays
      longest = n;
      next = e + 1;
      if (n == max_n) break;
    }
  }
  if (longest < min_n) return {};
  const int count = std::min(k, size - next);
  return {tokens.begin() + next, tokens.begin() + next + count};
}

namespace {

// Apart from the (seed, output index) counters plain sampling uses.
constexpr uint64_t accept_stream = uint64_t{1} << 40;
constexpr uint64_t residual_stream = uint64_t{2} << 40;
constexpr uint64_t draft_stream = uint64_t{3} << 40;

}  // namespace

int32_t draw_draft_token(const float* logits, int vocab, const kernels::sampling_params& p,
                         uint64_t seed, uint64_t counter, float* probs) {
  namespace k = kernels::cpu;
  if (p.temperature <= 0.0f) return k::sample_token(logits, vocab, p, seed, counter);
  k::sampling_weights(logits, vocab, p, probs);
  double sum = 0.0;
  for (int i = 0; i < vocab; ++i)
    sum += probs[i];
  for (int i = 0; i < vocab; ++i)
    probs[i] = static_cast<float>(probs[i] / sum);
  return k::draw_token(probs, vocab, kernels::seeded_uniform(seed, counter + draft_stream));
}

draft_verdict verify_draft_token(const float* logits, int vocab, const kernels::sampling_params& p,
                                 uint64_t seed, uint64_t counter, int32_t draft,
                                 const float* draft_probs) {
  namespace k = kernels::cpu;
  if (p.temperature <= 0.0f) {
    const int32_t best = k::sample_token(logits, vocab, p, seed, counter);
    return {best == draft, best};
  }
  thread_local std::vector<float> weights;
  weights.resize(vocab);
  k::sampling_weights(logits, vocab, p, weights.data());
  double sum = 0.0;
  for (float w : weights)
    sum += w;
  const double target = weights[draft] / sum;
  const double proposed = draft_probs != nullptr ? draft_probs[draft] : 1.0;
  const double u = kernels::seeded_uniform(seed, counter + accept_stream);
  if (u < target / proposed) return {true, draft};  // u < 1 always: target >= proposed accepts
  // The residual max(0, p - q): under a sure proposer, p without the draft.
  if (draft_probs == nullptr) {
    weights[draft] = 0.0f;
  } else {
    for (int i = 0; i < vocab; ++i)
      weights[i] = static_cast<float>(std::max(0.0, weights[i] / sum - double{draft_probs[i]}));
  }
  if (std::all_of(weights.begin(), weights.end(), [](float w) { return w == 0.0f; })) {
    return {true, draft};  // p and q agree to rounding: nothing is left to draw from
  }
  return {false, k::draw_token(weights.data(), vocab,
                               kernels::seeded_uniform(seed, counter + residual_stream))};
}

}  // namespace troupe::actors
