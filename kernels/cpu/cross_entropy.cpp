#include "kernels/cross_entropy.hpp"

#include <algorithm>
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

void vocab_parallel_cross_entropy_forward(float* losses, float* probs, const float* logits,
                                          const int32_t* targets, int rows, int vocab, int first,
                                          int rank, int ranks, float* scratch,
                                          const std::function<void(float*, int64_t)>& sum) {
  // Each row's maximum: this rank's in column `rank` of a rows x ranks table, zeros elsewhere,
  // summed over the ranks, then the largest of each row's.
  float* maxima = scratch;
  std::fill(maxima, maxima + int64_t{rows} * ranks, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const float* z = logits + int64_t{r} * vocab;
    float max = z[0];
    for (int j = 1; j < vocab; ++j)
      max = z[j] > max ? z[j] : max;
    maxima[int64_t{r} * ranks + rank] = max;
  }
  sum(maxima, int64_t{rows} * ranks);
  // Each row's exp-sum over this rank's columns and its target's shifted logit (this rank's
  // when the target is one of its columns, else 0), then both summed over the ranks.
  float* sums = scratch + int64_t{rows} * ranks;
  float* target_logits = sums + rows;
  for (int r = 0; r < rows; ++r) {
    const float* m = maxima + int64_t{r} * ranks;
    const float max = *std::max_element(m, m + ranks);
    const float* z = logits + int64_t{r} * vocab;
    float* p = probs + int64_t{r} * vocab;
    const int32_t t = targets[r] - first;
    target_logits[r] = t >= 0 && t < vocab ? z[t] - max : 0.0f;  // before an alias is written
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < vocab; ++j) {
      p[j] = fast_exp(z[j] - max);
      s += p[j];
    }
    sums[r] = s;
  }
  sum(sums, 2 * int64_t{rows});
  for (int r = 0; r < rows; ++r) {
    const float inv = 1.0f / sums[r];
    float* p = probs + int64_t{r} * vocab;
    for (int j = 0; j < vocab; ++j)
      p[j] *= inv;
    losses[r] = targets[r] < 0 ? 0.0f : std::log(sums[r]) - target_logits[r];
  }
}

namespace {

// One row: (p - onehot(hot)) * scale, with no onehot for hot < 0. d may alias p.
void backward_row(float* d, const float* p, int32_t hot, float scale, int vocab) {
  for (int j = 0; j < vocab; ++j)
    d[j] = p[j] * scale;
  if (hot >= 0) d[hot] -= scale;
}

}  // namespace

void cross_entropy_backward(float* dlogits, const float* probs, const int32_t* targets, float dloss,
                            int rows, int vocab) {
  for (int r = 0; r < rows; ++r) {
    backward_row(dlogits + int64_t{r} * vocab, probs + int64_t{r} * vocab, targets[r],
                 targets[r] < 0 ? 0.0f : dloss, vocab);
  }
}

void vocab_parallel_cross_entropy_backward(float* dlogits, const float* probs,
                                           const int32_t* targets, float dloss, int rows, int vocab,
                                           int first) {
  for (int r = 0; r < rows; ++r) {
    const int32_t t = targets[r] - first;  // this rank's column of the target, if it has it
    backward_row(dlogits + int64_t{r} * vocab, probs + int64_t{r} * vocab,
                 t >= 0 && t < vocab ? t : -1, targets[r] < 0 ? 0.0f : dloss, vocab);
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
      backward_row(d, p, targets[r], targets[r] < 0 ? 0.0f : dloss[r], vocab);
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
