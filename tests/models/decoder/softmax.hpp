#pragma once

// Probabilities from logits, for the decoder tests' comparisons.

#include <algorithm>
#include <cmath>
#include <vector>

namespace troupe::models {

inline std::vector<float> softmax(const float* logits, int vocab) {
  std::vector<float> p(logits, logits + vocab);
  float max = *std::max_element(p.begin(), p.end()), sum = 0;
  for (auto& x : p)
    sum += (x = std::exp(x - max));
  for (auto& x : p)
    x /= sum;
  return p;
}

}  // namespace troupe::models
