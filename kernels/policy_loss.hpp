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
#include <optional>
#include <string_view>

namespace troupe::kernels {

/// veRL's clip_ratio_low, clip_ratio_high and clip_ratio_c (GSPO uses no dual clip).
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

/// veRL's actor.policy_loss.loss_mode: which ratio the clipped loss is of.
enum class policy_loss_mode {
  vanilla,  ///< each token's own ratio, dual clip (ppo_policy_loss)
  gspo,     ///< the sequence's ratio (gspo_policy_loss)
};
/// veRL's name of `mode` ("vanilla", "gspo").
[[nodiscard]] std::string_view to_string(policy_loss_mode mode);
/// The mode named `name`, or nullopt.
[[nodiscard]] std::optional<policy_loss_mode> parse_policy_loss_mode(std::string_view name);

namespace cpu {
/// Over n tokens; `weights` come from loss_agg_weights (0 on padding). dlog_prob[i] =
/// d pg_loss / d log_prob[i].
ppo_policy_stats ppo_policy_loss(float* dlog_prob, const float* log_prob, const float* old_log_prob,
                                 const float* advantages, const float* mask, const float* weights,
                                 int64_t n, ppo_clip_range clip);

/// GSPO (Qwen's Group Sequence Policy Optimization, veRL's compute_policy_loss_gspo) over `rows`
/// responses of `cols` positions: each response's ratio is the geometric mean of its tokens',
///   s = exp(min(sum_t m_t (log_prob_t - old_log_prob_t) / max(1, sum_t m_t), 10)),
/// every token of it carrying s with d s / d log_prob_t = s (veRL's log_prob - sg(log_prob) +
/// sg(log s), the clamp at 10 passing no gradient past it); L1 = -A s, L2 = -A clamp(s, 1 - low,
/// 1 + high), L = max(L1, L2), without the dual clip. `weights` as ppo_policy_loss's (veRL
/// aggregates GSPO by seq-mean-token-mean); pg_clipfrac_lower is 0, ppo_kl the tokens' masked
/// mean of -(log_prob - old_log_prob).
ppo_policy_stats gspo_policy_loss(float* dlog_prob, const float* log_prob,
                                  const float* old_log_prob, const float* advantages,
                                  const float* mask, const float* weights, int rows, int cols,
                                  ppo_clip_range clip);
}  // namespace cpu

}  // namespace troupe::kernels
