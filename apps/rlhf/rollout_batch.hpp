#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "apps/rlhf/advantages.hpp"
#include "kernels/loss_aggregation.hpp"
#include "nlohmann/json.hpp"
#include "runtime/actor/message_types.hpp"

namespace troupe::apps::rlhf {

/// One generated response, as the rollout returned it.
struct rollout_sample {
  int64_t group = 0;  ///< the prompt it answers: GRPO and RLOO compare responses of one group
  std::vector<int32_t> prompt;
  /// The response's tokens, the end token included when it ended (it is trained on too).
  std::vector<int32_t> response;
  bool ended = false;  ///< it ended with the end token rather than at the length limit
  /// The rollout's log-prob of each response token, the end token included.
  std::vector<float> logprobs;
  uint64_t version = 0;  ///< the policy version that generated it
};

/// veRL's `algorithm` section, as far as the batch math needs it.
struct rl_algorithm {
  enum class estimator { gae, grpo, rloo, reinforce_plus_plus, reinforce_plus_plus_baseline };
  estimator adv_estimator = estimator::grpo;
  bool norm_adv_by_std_in_grpo = true;
  bool use_kl_in_reward = false;
  kernels::kl_estimator kl_penalty = kernels::kl_estimator::k1;  ///< of the in-reward KL
  double gamma = 1.0;
  double lam = 1.0;
};

/// One RL step's batch between the rollout and the update, CAF-free: the responses on a padded
/// grid of whole sequences (prompt then response, [rows, seq_len]) for the trainer, the same
/// responses on a grid of response slots ([rows, response_len]) for the advantage math, and the
/// per-token data the update needs. Response slot j of row r is the target of sequence position
/// prompt_r - 1 + j.
class rollout_batch {
 public:
  /// INVALID_ARGUMENT for an empty batch, a sample without prompt or response, or sequences
  /// longer than `max_len` (the model's context).
  [[nodiscard]] static absl::StatusOr<rollout_batch> create(std::vector<rollout_sample> samples,
                                                            int max_len);

  [[nodiscard]] int rows() const { return static_cast<int>(samples_.size()); }
  [[nodiscard]] int seq_len() const { return seq_len_; }
  [[nodiscard]] const std::vector<rollout_sample>& samples() const { return samples_; }

  /// Rows [first, first + count) as tokens and targets (the response's tokens) only: what the
  /// policy and the reference give log-probs of.
  [[nodiscard]] actor::rl_batch sequences(int first, int count) const;
  /// Each position's log-prob under the policy before the update (old) or the reference, for
  /// rows [first, first + count), as sequences(first, count) laid them out.
  void set_log_probs(bool reference, int first, int count, const std::vector<float>& per_position);
  /// The rollout's log-probs as the old ones (veRL's bypass mode). INVALID_ARGUMENT when a
  /// sample has not one per response token.
  [[nodiscard]] absl::Status use_rollout_log_probs();
  /// The critic's value at each position, as set_log_probs(); GAE needs them.
  void set_values(int first, int count, const std::vector<float>& per_position);

  /// Scores (one per row, from the reward role) to advantages: veRL's token_level_scores, the
  /// KL penalty in the reward when use_kl_in_reward (beta `kl_coef`), then the estimator (GAE on
  /// the values set_values() gave, masked to the response as veRL's critic returns them).
  /// Returns the batch's KL to the reference (the mean over responses of each one's masked
  /// mean, with `algorithm.kl_penalty`), measured with or without the penalty in the reward.
  [[nodiscard]] absl::StatusOr<double> compute_advantages(const std::vector<double>& scores,
                                                          const rl_algorithm& algorithm,
                                                          double kl_coef);

  /// Mini-batch rows [first, first + count) split over `ranks` as evenly as it goes, each rank's
  /// rows with their old and reference log-probs, advantages, values and returns (with values
  /// set) and the loss-aggregation weights over the whole mini-batch: what the policy's and the
  /// critic's updates read.
  [[nodiscard]] std::vector<actor::rl_batch> mini_batch(int first, int count, int ranks,
                                                        kernels::loss_agg_mode mode) const;

  /// veRL's data metrics: critic/score, critic/rewards, critic/advantages, critic/returns
  /// ({mean,max,min}), response_length and prompt_length ({mean,max,min}, and clip_ratio: the
  /// share that hit `max_response`), training/rollout_probs_diff_max and _mean (the rollout's
  /// probabilities of its tokens against the policy's recomputed ones; not when the rollout's
  /// are the old log-probs); with values,
  /// critic/values ({mean,max,min}) and critic/vf_explained_var, 1 - Var(R - V) / (Var(R) + 1e-5).
  [[nodiscard]] nlohmann::json data_metrics(int max_response) const;

  /// Row r's advantage (its first response token's) and summed reward, for samples.jsonl.
  [[nodiscard]] double advantage(int r) const;
  [[nodiscard]] double reward(int r) const;
  [[nodiscard]] double score(int r) const { return scores_.at(r); }
  /// Row r's mean KL to the reference over its response tokens.
  [[nodiscard]] double kl(int r) const;

 private:
  rollout_batch() = default;
  // Response slot j of row r as an index into the sequence grid.
  [[nodiscard]] int64_t position(int r, int j) const;
  // Rows [first, first + count) of `per_position` into `into`.
  void copy_rows(std::vector<float>& into, int first, int count,
                 const std::vector<float>& per_position) const;

  std::vector<rollout_sample> samples_;
  int seq_len_ = 0;
  token_grid responses_;
  std::vector<float> response_mask_;                   // [rows, response_len]
  std::vector<float> old_, ref_, values_;              // per sequence position
  std::vector<float> advantages_, returns_, rewards_;  // per response slot
  std::vector<float> value_slots_;                     // per response slot, masked; with values
  std::vector<float> kl_;                              // per response slot
  std::vector<double> scores_;
  bool old_from_rollout_ = false;
};

}  // namespace troupe::apps::rlhf
