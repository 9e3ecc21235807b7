#pragma once

// PPO's clipped policy loss with dual clip, per response token, as veRL computes it
// (`compute_policy_loss_vanilla`), and its gradient wrt the policy's log-probs. With
// d = clamp(log_prob - old_log_prob, -20, 20), r = exp(d) and advantage A:
//   L1 = -A r,  L2 = -A clamp(r, 1 - low, 1 + high),  Lc = max(L1, L2),  L3 = -A dual
//   L  = A < 0 ? min(Lc, L3) : Lc
// The gradient follows PyTorch's autograd through the same expression, ties included (max and
// min share the gradient equally between equal operands; clamp passes it at its bounds), so
// that a step matches veRL's.

#include <cstdint>

namespace troupe::kernels {

/// veRL's clip_ratio_low, clip_ratio_high and clip_ratio_c.
struct ppo_clip_range {
  float low = 0.2f;   ///< the ratio's floor is 1 - low
  float high = 0.2f;  ///< its ceiling is 1 + high
  float dual = 3.0f;  ///< with A < 0 the loss is at most -A * dual (must be > 1)
};

/// The loss and veRL's metrics over the masked tokens.
struct ppo_policy_stats {
  double pg_loss = 0;            ///< sum(weights * L): actor/pg_loss
  double pg_clipfrac = 0;        ///< masked mean of [L2 > L1]: actor/pg_clipfrac
  double ppo_kl = 0;             ///< masked mean of -d: actor/ppo_kl
  double pg_clipfrac_lower = 0;  ///< masked mean of [Lc > L3 and A < 0]
};

namespace cpu {
/// Over n tokens; `weights` come from loss_agg_weights (0 on padding). dlog_prob[i] =
/// d pg_loss / d log_prob[i].
ppo_policy_stats ppo_policy_loss(float* dlog_prob, const float* log_prob, const float* old_log_prob,
                                 const float* advantages, const float* mask, const float* weights,
                                 int64_t n, ppo_clip_range clip);
}  // namespace cpu

}  // namespace troupe::kernels
