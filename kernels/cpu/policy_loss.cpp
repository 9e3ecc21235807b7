#include "kernels/policy_loss.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/autograd_rules.hpp"

namespace troupe::kernels {

std::string_view to_string(policy_loss_mode mode) {
  return mode == policy_loss_mode::gspo ? "gspo" : "vanilla";
}

std::optional<policy_loss_mode> parse_policy_loss_mode(std::string_view name) {
  for (const policy_loss_mode m : {policy_loss_mode::vanilla, policy_loss_mode::gspo}) {
    if (name == to_string(m)) return m;
  }
  return std::nullopt;
}

namespace cpu {
namespace {

// veRL's masked_mean: sum(m x) / (sum(m) + 1e-8), for the statistics summed over `tokens`.
void to_masked_means(ppo_policy_stats& s, double tokens) {
  for (double* mean : {&s.pg_clipfrac, &s.ppo_kl, &s.pg_clipfrac_lower})
    *mean /= tokens + 1e-8;
}

}  // namespace

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
  to_masked_means(s, tokens);
  return s;
}

ppo_policy_stats gspo_policy_loss(float* dlog_prob, const float* log_prob,
                                  const float* old_log_prob, const float* advantages,
                                  const float* mask, const float* weights, int rows, int cols,
                                  ppo_clip_range clip) {
  ppo_policy_stats s;
  double tokens = 0;
  for (int r = 0; r < rows; ++r) {
    const int64_t at = int64_t{r} * cols;
    float sum = 0, count = 0;  // in f32, as veRL's tensors
    for (int t = 0; t < cols; ++t) {
      sum += (log_prob[at + t] - old_log_prob[at + t]) * mask[at + t];
      count += mask[at + t];
    }
    const float log_ratio = sum / std::max(count, 1.0f);
    const float ratio = std::exp(std::min(log_ratio, 10.0f));
    const float dratio = ratio * (log_ratio <= 10.0f ? 1.0f : 0.0f);  // d ratio / d log_prob_t
    const float clipped = std::clamp(ratio, 1.0f - clip.low, 1.0f + clip.high);
    const float passes = clamp_passes(ratio, 1.0f - clip.low, 1.0f + clip.high);
    for (int t = 0; t < cols; ++t) {
      const int64_t i = at + t;
      const float a = advantages[i];
      const float l1 = -a * ratio, l2 = -a * clipped;
      const float dloss =
          max_share(l1, l2) * -a * dratio + max_share(l2, l1) * -a * dratio * passes;
      s.pg_loss += double{weights[i]} * std::max(l1, l2);
      dlog_prob[i] = weights[i] * dloss;
      const double m = mask[i];
      tokens += m;
      s.pg_clipfrac += m * (l2 > l1);
      s.ppo_kl += m * -(log_prob[i] - old_log_prob[i]);
    }
  }
  to_masked_means(s, tokens);
  return s;
}

}  // namespace cpu
}  // namespace troupe::kernels
