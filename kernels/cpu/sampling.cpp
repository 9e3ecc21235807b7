#include "kernels/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu/fast_math.hpp"
#include "kernels/cross_entropy.hpp"

namespace troupe::kernels {

float seeded_uniform(uint64_t seed, uint64_t counter) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (counter + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);  // 24 random bits
}

namespace cpu {

void sampling_weights(const float* logits, int vocab, const sampling_params& p, float* weights) {
  if (p.temperature <= 0.0f) {  // greedy: all the mass on the first most likely token
    std::fill(weights, weights + vocab, 0.0f);
    weights[std::max_element(logits, logits + vocab) - logits] = 1.0f;
    return;
  }
  // Every token's weight exp((z - max) / T); a cut-off token's becomes 0.
  const float max = *std::max_element(logits, logits + vocab);
  for (int i = 0; i < vocab; ++i) {  // vectorized: fast_exp, not the library's exp
    const float x = (logits[i] - max) / p.temperature;
    weights[i] = x < -87.0f ? 0.0f : fast_exp(x);  // below f32's range: never drawn
  }
  const bool top_k = p.top_k > 0 && p.top_k < vocab;
  if (top_k || p.top_p < 1.0f) {
    // Candidates in descending logit order, ties by id, as far as the cut needs them.
    thread_local std::vector<int> ids;
    ids.resize(vocab);
    std::iota(ids.begin(), ids.end(), 0);
    auto by_logit = [&](int a, int b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    };
    int keep = top_k ? p.top_k : vocab;
    if (top_k) std::nth_element(ids.begin(), ids.begin() + keep, ids.end(), by_logit);
    if (p.top_p < 1.0f) {  // the smallest prefix of the candidates whose mass reaches top_p
      std::sort(ids.begin(), ids.begin() + keep, by_logit);
      double sum = 0.0;
      for (int i = 0; i < keep; ++i)
        sum += double{weights[ids[i]]};
      double mass = 0.0;
      for (int i = 0; i < keep; ++i) {
        mass += weights[ids[i]] / sum;
        if (mass >= p.top_p) {
          keep = i + 1;
          break;
        }
      }
    }
    for (int i = keep; i < vocab; ++i)
      weights[ids[i]] = 0.0f;
  }
}

int draw_token(const float* weights, int vocab, float u) {
  // Walks the tokens in id order (as the CUDA sampler does), so no sort is needed.
  const double sum = std::accumulate(weights, weights + vocab, 0.0);
  const double target = u * sum;
  double acc = 0.0;
  int last = 0;
  for (int i = 0; i < vocab; ++i) {
    if (weights[i] == 0.0f) continue;
    acc += double{weights[i]};
    last = i;
    if (target < acc) break;
  }
  return last;
}

int sample_token(const float* logits, int vocab, const sampling_params& p, uint64_t seed,
                 uint64_t counter) {
  if (p.temperature <= 0.0f) {
    return static_cast<int>(std::max_element(logits, logits + vocab) - logits);
  }
  thread_local std::vector<float> weights;
  weights.resize(vocab);
  sampling_weights(logits, vocab, p, weights.data());
  return draw_token(weights.data(), vocab, seeded_uniform(seed, counter));
}

float token_log_prob(const float* logits, int vocab, float temperature, int token) {
  // The training forward's arithmetic: logits times 1 / temperature, then its cross-entropy.
  thread_local std::vector<float> z;
  z.assign(logits, logits + vocab);
  if (temperature > 0.0f && temperature != 1.0f) {
    const float inv = 1.0f / temperature;
    for (float& v : z)
      v *= inv;
  }
  float loss = 0.0f;
  const int32_t target = token;
  cross_entropy_forward(&loss, z.data(), z.data(), &target, 1, vocab);
  return 0.0f - loss;
}

void top_log_probs(const float* logits, int vocab, float temperature, int k, int32_t* tokens,
                   float* values) {
  k = std::min(k, vocab);
  std::vector<int> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (int i = 0; i < k; ++i) {
    tokens[i] = ids[i];
    values[i] = token_log_prob(logits, vocab, temperature, ids[i]);
  }
}

}  // namespace cpu
}  // namespace troupe::kernels
