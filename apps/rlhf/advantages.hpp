#pragma once

// The RLHF driver's math on a batch of responses, exactly as veRL's `core_algos` computes it:
// masked statistics, token-level rewards with the KL penalty, and the advantage estimators
// (GAE, GRPO and Dr.GRPO, RLOO, REINFORCE++ and its baseline variant). Plain host arrays, no
// tensors, no CAF: the driver calls these between the rollout and the policy update.
//
// A batch is `rows` responses of `cols` token slots, row-major; the mask is 1 on response tokens
// and 0 on the padding after them.

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/kl_penalty.hpp"

namespace troupe::apps::rlhf {

/// The shape of a batch of responses.
struct token_grid {
  int rows = 0;
  int cols = 0;
  [[nodiscard]] int64_t size() const { return int64_t{rows} * cols; }
};

/// veRL's masked_mean: sum(m x) / (sum(m) + 1e-8).
[[nodiscard]] double masked_mean(std::span<const float> values, std::span<const float> mask);

/// The variance over the masked tokens; unbiased (Bessel's n / (n - 1), veRL's default) needs at
/// least two: INVALID_ARGUMENT otherwise.
[[nodiscard]] absl::StatusOr<double> masked_var(std::span<const float> values,
                                                std::span<const float> mask, bool unbiased = true);

/// (x - mean) / sqrt(var + 1e-8) with the masked mean and unbiased variance, applied to every
/// slot (padding too, as veRL does; the losses mask it out).
[[nodiscard]] absl::StatusOr<std::vector<float>> masked_whiten(std::span<const float> values,
                                                               std::span<const float> mask);

/// veRL's token_level_scores: each response's scalar score at its last response token, 0
/// elsewhere (a response without tokens gets nothing).
[[nodiscard]] std::vector<float> scores_at_last_token(std::span<const float> scores,
                                                      std::span<const float> mask, token_grid g);

/// The KL penalty in the reward (`use_kl_in_reward`): rewards = scores - beta * kl * m, with kl
/// the estimator between the policy that generated (its recomputed log-probs) and the
/// reference. `current_kl` is the batch mean of each response's masked mean kl, what the KL
/// controller is updated with.
struct kl_penalized_rewards {
  std::vector<float> rewards;
  double current_kl = 0;
};
[[nodiscard]] kl_penalized_rewards apply_kl_penalty(std::span<const float> token_level_scores,
                                                    std::span<const float> old_log_prob,
                                                    std::span<const float> ref_log_prob,
                                                    std::span<const float> mask, token_grid g,
                                                    double beta, kernels::kl_estimator estimator);

/// What an estimator returns: the advantages the policy is trained on, and the returns the
/// critic is (for the outcome estimators veRL returns the advantages twice).
struct advantage_estimate {
  std::vector<float> advantages;
  std::vector<float> returns;
};

/// GAE, backwards over the slots with the next value and the running advantage carried through
/// masked slots: delta = r + gamma V' - V, A = delta + gamma lam A'; returns = A + V; the
/// advantages are then whitened (the returns are not).
[[nodiscard]] absl::StatusOr<advantage_estimate> gae(std::span<const float> token_level_rewards,
                                                     std::span<const float> values,
                                                     std::span<const float> mask, token_grid g,
                                                     double gamma, double lam);

/// GRPO: each response's summed reward minus its group's mean, divided by the group's unbiased
/// std + `epsilon` unless `norm_by_std` is false (Dr.GRPO); broadcast over its tokens. `group`
/// names each row's prompt; a group of one has mean 0 and std 1.
[[nodiscard]] advantage_estimate grpo(std::span<const float> token_level_rewards,
                                      std::span<const float> mask, token_grid g,
                                      std::span<const int64_t> group, bool norm_by_std = true,
                                      double epsilon = 1e-6);

/// RLOO: s n/(n-1) - mean n/(n-1), the leave-one-out baseline over the group's n responses
/// (a response alone in its group keeps its score).
[[nodiscard]] advantage_estimate rloo(std::span<const float> token_level_rewards,
                                      std::span<const float> mask, token_grid g,
                                      std::span<const int64_t> group);

/// REINFORCE++: the discounted return G_t = r_t + gamma G_{t+1}, restarted after each
/// response's last token, whitened over the batch.
[[nodiscard]] absl::StatusOr<advantage_estimate> reinforce_plus_plus(
    std::span<const float> token_level_rewards, std::span<const float> mask, token_grid g,
    double gamma);

/// REINFORCE++ with a baseline: the summed reward minus the group's mean, broadcast over the
/// tokens and whitened over the batch.
[[nodiscard]] absl::StatusOr<advantage_estimate> reinforce_plus_plus_baseline(
    std::span<const float> token_level_rewards, std::span<const float> mask, token_grid g,
    std::span<const int64_t> group);

}  // namespace troupe::apps::rlhf
