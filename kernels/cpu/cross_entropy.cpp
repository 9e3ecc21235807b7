#include "kernels/cross_entropy.hpp"

#include <cmath>

#include "kernels/cpu/fast_math.hpp"

namespace troupe::kernels::cpu {

void cross_entropy_forward(float* losses, float* probs, const float* logits, const int32_t* targets,
                           int rows, int vocab) {
  for (int r = 0; r < rows; ++r) {
    const float* z = logits + int64_t{r} * vocab;
    float* p = probs + int64_t{r} * vocab;
    const int32_t t = targets[r];
    const float target_logit = t < 0 ? 0.0f : z[t];  // read before probs overwrites an alias
    float max = z[0];
    for (int j = 1; j < vocab; ++j)
      max = z[j] > max ? z[j] : max;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < vocab; ++j) {
      p[j] = fast_exp(z[j] - max);
      sum += p[j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < vocab; ++j)
      p[j] *= inv;
    // -log p[t] from the logits rather than the rounded probability.
    losses[r] = t < 0 ? 0.0f : std::log(sum) - (target_logit - max);
  }
}

namespace {

// One row: (p - onehot(t)) * scale, 0 for an ignored row. d may alias p.
void backward_row(float* d, const float* p, int32_t t, float scale, int vocab) {
  if (t < 0) scale = 0.0f;
  for (int j = 0; j < vocab; ++j)
    d[j] = p[j] * scale;
  if (t >= 0) d[t] -= scale;
}

}  // namespace

void cross_entropy_backward(float* dlogits, const float* probs, const int32_t* targets, float dloss,
                            int rows, int vocab) {
  for (int r = 0; r < rows; ++r) {
    backward_row(dlogits + int64_t{r} * vocab, probs + int64_t{r} * vocab, targets[r], dloss,
                 vocab);
  }
}

void cross_entropy_backward(float* dlogits, const float* probs, const int32_t* targets,
                            const float* dloss, const float* h, const float* dentropy, int rows,
                            int vocab) {
  for (int r = 0; r < rows; ++r) {
    const float* p = probs + int64_t{r} * vocab;
    float* d = dlogits + int64_t{r} * vocab;
    const float de = dentropy == nullptr ? 0.0f : dentropy[r];
    if (de == 0) {
      backward_row(d, p, targets[r], dloss[r], vocab);
      continue;
    }
    const float scale = targets[r] < 0 ? 0.0f : dloss[r];
    for (int j = 0; j < vocab; ++j) {  // dH/dz_j = -p_j (log p_j + H)
      const float pj = p[j];
      d[j] = pj * scale - (pj > 1e-30f ? de * pj * (fast_log(pj) + h[r]) : 0.0f);
    }
    if (targets[r] >= 0) d[targets[r]] -= scale;
  }
}

}  // namespace troupe::kernels::cpu
