#include "kernels/value_loss.hpp"

#include <algorithm>

#include "kernels/cpu/autograd_rules.hpp"

namespace troupe::kernels::cpu {

value_loss_stats clipped_value_loss(float* dvpreds, const float* vpreds, const float* returns,
                                    const float* old_values, const float* mask,
                                    const float* weights, int64_t n, float cliprange_value) {
  value_loss_stats s;
  double tokens = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = vpreds[i], r = returns[i];
    const float lo = old_values[i] - cliprange_value, hi = old_values[i] + cliprange_value;
    // clip_by_value(x, lo, hi) = max(min(x, hi), lo)
    const float below_hi = std::min(v, hi);
    const float clipped = std::max(below_hi, lo);
    const float dclipped = min_share(v, hi) * max_share(below_hi, lo);
    const float l1 = (v - r) * (v - r);
    const float l2 = (clipped - r) * (clipped - r);
    const float dl1 = 2 * (v - r);
    const float dl2 = 2 * (clipped - r) * dclipped;
    s.vf_loss += 0.5 * weights[i] * std::max(l1, l2);
    dvpreds[i] = 0.5f * weights[i] * (max_share(l1, l2) * dl1 + max_share(l2, l1) * dl2);
    tokens += mask[i];
    s.vf_clipfrac += double{mask[i]} * (l2 > l1);
  }
  s.vf_clipfrac /= tokens + 1e-8;
  return s;
}

}  // namespace troupe::kernels::cpu
