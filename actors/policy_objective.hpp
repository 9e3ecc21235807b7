#pragma once

#include <initializer_list>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "kernels/kl_penalty.hpp"
#include "kernels/policy_loss.hpp"
#include "models/decoder/decoder_cpu_batch.hpp"
#include "runtime/actor/message_types.hpp"

namespace troupe::actors {

/// The RL policy's objective as veRL's actor computes it, per response token t with weight w_t
/// (the loss aggregation) on softmax(logits / temperature):
///   J = sum_t w_t (PPO clipped loss_t - entropy_coeff H_t + kl_loss_coef kl_t)
/// where kl_t, with use_kl_loss, is the estimator kl_loss_type between the policy and the
/// reference, and the clipped loss is of each token's ratio (vanilla) or of its response's
/// (gspo).
struct policy_objective {
  float temperature = 1.0f;  ///< the rollout's: the policy trains on the sampling distribution
  kernels::policy_loss_mode loss_mode = kernels::policy_loss_mode::vanilla;
  kernels::ppo_clip_range clip;
  float entropy_coeff = 0.0f;
  bool use_kl_loss = false;
  float kl_loss_coef = 0.001f;
  kernels::kl_estimator kl_loss_type = kernels::kl_estimator::k3;
};

/// What every reader of an rl_batch checks: a non-empty batch x ctx, each of `fields` (name,
/// size) of batch x ctx entries, and no weight on a position that is not trained on.
/// INVALID_ARGUMENT naming the field otherwise.
[[nodiscard]] absl::Status check_rl_batch(
    const actor::rl_batch& b, std::initializer_list<std::pair<const char*, size_t>> fields);

/// INVALID_ARGUMENT naming the field when `b` is not a well-formed rl_batch (array sizes, a
/// weight on a position that is not trained on, no reference log-probs with the KL loss).
[[nodiscard]] absl::Status validate(const actor::rl_batch& b, const policy_objective& o);

/// The objective over one rank's rl_batch: token_objective() seeds the model's backward for each
/// micro-batch pass, and after the passes local_sums() gives this rank's share of the statistics,
/// which summed over the ranks report() turns into veRL's metrics.
class policy_objective_pass {
 public:
  /// `b` must outlive the pass and be valid (validate()).
  policy_objective_pass(const policy_objective& o, const actor::rl_batch& b);

  /// The objective of the micro-batch whose first row is `row`.
  [[nodiscard]] models::decoder_cpu_batch::token_objective token_objective(int row);

  /// {pg_loss, entropy, kl_loss, clipped, clipped_lower, -d, response tokens}: sums over this
  /// rank's tokens, from the log-probs the passes saw.
  [[nodiscard]] std::vector<float> local_sums() const;
  /// The step's report from every rank's local_sums() added up.
  [[nodiscard]] static actor::rl_step_report report(const std::vector<float>& sums);

 private:
  // The clipped loss of `rows` whole responses from token `first` (dlog_prob too), by the
  // objective's loss mode.
  kernels::ppo_policy_stats clipped_loss(float* dlog_prob, int64_t first, int rows) const;
  // A slice of `count` tokens from index `first` of the rank's batch: whole responses.
  void seed(int64_t first, int64_t count, const float* token_losses, const float* entropies,
            float* dloss, float* dentropy);

  policy_objective o_;
  const actor::rl_batch& b_;
  std::vector<float> mask_, log_prob_, entropy_, kl_, dlog_prob_, dkl_;
};

}  // namespace troupe::actors
