#pragma once

#include <vector>

#include "absl/status/status.h"
#include "models/decoder/decoder_cpu_batch.hpp"
#include "runtime/actor/message_types.hpp"

namespace troupe::actors {

/// A reward model's batch (a value-head layout): preference pairs, the chosen sequence in row 2i
/// and the rejected one in row 2i + 1, each scored at its one position whose target is not -1
/// (its last token): target 1 on the chosen row, 0 on the rejected. INVALID_ARGUMENT naming the
/// row otherwise.
[[nodiscard]] absl::Status validate_pairs(const actor::token_batch& b);

/// The reward model's objective over one rank's token_batch of pairs, as TRL's RewardTrainer
/// (and InstructGPT) define it: with r the value at a row's scored position,
///   J = loss_scale * sum_i -log sigmoid(r_chosen,i - r_rejected,i - margin_i)
/// (margin_i from b.margins, 0 without).
/// (loss_scale: 1 / the global batch's pairs, for the mean). objective() seeds the model's
/// backward for each micro-batch pass, whose rows are whole pairs; local_sums() gives this rank's
/// statistics afterwards.
class reward_pair_pass {
 public:
  /// `b` must outlive the pass and be valid (validate_pairs()).
  reward_pair_pass(const actor::token_batch& b, float loss_scale);

  /// The objective of the micro-batch whose first row is `row` (a chosen row).
  [[nodiscard]] models::decoder_cpu_batch::value_objective objective(int row);

  /// The rewards this rank's rows got in the passes so far, one per row.
  [[nodiscard]] const std::vector<float>& rewards() const { return rewards_; }

 private:
  void seed(int64_t first_row, int64_t rows, const float* values, float* dvalues);

  const actor::token_batch& b_;
  float loss_scale_;
  std::vector<int> scored_;  // each row's scored position
  std::vector<float> rewards_;
};

/// What a batch of preference pairs adds up to (a reward model's or DPO's): the loss, the pairs
/// ranked right (r_chosen > r_rejected), each side's reward and (DPO) log-probability, summed;
/// and the pairs.
struct pair_sums {
  double loss = 0, correct = 0, chosen = 0, rejected = 0, logp_chosen = 0, logp_rejected = 0,
         pairs = 0;
  static constexpr size_t fields = 7;

  /// A reward model's sums over the pairs of `rewards` (one per row of `b`, chosen first).
  [[nodiscard]] static pair_sums of(const actor::token_batch& b, const std::vector<float>& rewards);
  /// One pair's: its loss, rewards and log-probabilities.
  void add_pair(double pair_loss, double reward_chosen, double reward_rejected,
                double chosen_logp = 0, double rejected_logp = 0);
  void add(const pair_sums& o);
  /// The sums as floats (to add up over a group) and back.
  [[nodiscard]] std::vector<float> to_floats() const;
  [[nodiscard]] static pair_sums from_floats(const float* f);
  /// The means over the pairs (TRL's figures).
  [[nodiscard]] actor::pair_metrics means() const;
};

/// Each row's scored position in `b` (validate_pairs() first).
[[nodiscard]] std::vector<int> scored_positions(const actor::token_batch& b);

}  // namespace troupe::actors
