#include "kernels/policy_loss.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/autograd_rules.hpp"

namespace troupe::kernels::cpu {

ppo_policy_stats ppo_policy_loss(float* dlog_prob, const float* log_prob, const float* old_log_prob,
                                 const float* advantages, const float* mask, const float* weights,
                                 int64_t n, ppo_clip_range clip) {
  ppo_policy_stats s;
  double tokens = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float a = advantages[i];
    const float d_raw = log_prob[i] - old_log_prob[i];
    const float d = std::clamp(d_raw, -20.0f, 20.0f);
    const float ratio = std::exp(d);
    const float dratio = ratio * clamp_passes(d_raw, -20.0f, 20.0f);  // d ratio / d log_prob
    const float clipped = std::clamp(ratio, 1.0f - clip.low, 1.0f + clip.high);
    const float l1 = -a * ratio;
    const float l2 = -a * clipped;
    const float dl1 = -a * dratio;
    const float dl2 = -a * dratio * clamp_passes(ratio, 1.0f - clip.low, 1.0f + clip.high);
    const float lc = std::max(l1, l2);
    const float dlc = max_share(l1, l2) * dl1 + max_share(l2, l1) * dl2;
    const float l3 = -a * clip.dual;
    float loss = lc, dloss = dlc;
    if (a < 0) {
      loss = std::min(lc, l3);
      dloss = min_share(lc, l3) * dlc;  // L3 is constant in log_prob
    }
    s.pg_loss += double{weights[i]} * loss;
    dlog_prob[i] = weights[i] * dloss;
    const double m = mask[i];
    tokens += m;
    s.pg_clipfrac += m * (l2 > l1);
    s.ppo_kl += m * -d;
    s.pg_clipfrac_lower += m * (lc > l3 && a < 0);
  }
  // veRL's masked_mean: sum(m x) / (sum(m) + 1e-8).
  for (double* mean : {&s.pg_clipfrac, &s.ppo_kl, &s.pg_clipfrac_lower})
    *mean /= tokens + 1e-8;
  return s;
}

}  // namespace troupe::kernels::cpu
