#pragma once

#include <vector>

#include "absl/status/status.h"
#include "actors/reward_objective.hpp"
#include "kernels/preference_loss.hpp"
#include "models/decoder/decoder_cpu_batch.hpp"
#include "runtime/actor/message_types.hpp"

namespace troupe::actors {

/// A DPO batch (app: dpo, a language model): preference pairs, the chosen sequence in row 2i and
/// the rejected one in row 2i + 1, each trained on its response's tokens (its targets >= 0, at
/// least one), with one reference log-probability a row (reference_logps). INVALID_ARGUMENT
/// naming the row otherwise.
[[nodiscard]] absl::Status validate_dpo_pairs(const actor::token_batch& b);

/// Each row's response log-probability: the sum of `logps` [rows * ctx, a row's log p(target) at
/// each position] over the row's targets >= 0, times `sign` (-1 for token losses, -log p), and
/// how many there are. `targets` and `logps` start at the first of `rows` rows.
struct row_logps {
  std::vector<double> sums;
  std::vector<int64_t> tokens;
};
[[nodiscard]] row_logps sum_row_logps(const int32_t* targets, const float* logps, int rows, int ctx,
                                      double sign = 1.0);

/// DPO's objective over one rank's token_batch of pairs, as TRL's DPOTrainer defines it (its
/// loss_type, beta and label_smoothing: kernels/preference_loss.hpp), on the responses' summed
/// log-probs at temperature 1:
///   J = loss_scale * sum_i loss(pi_c,i, pi_r,i, ref_c,i, ref_r,i)
/// (loss_scale: 1 / the global batch's pairs, for the mean). objective() seeds the model's
/// backward for each micro-batch pass, whose rows are whole pairs: d J / d loss_t = -d J / d pi
/// on each response token t of a row; sums() gives this rank's figures afterwards.
class dpo_pair_pass {
 public:
  /// `b` must outlive the pass and be valid (validate_dpo_pairs()).
  dpo_pair_pass(const actor::token_batch& b, const kernels::preference_options& o,
                float loss_scale);

  /// The objective of the micro-batch whose first row is `row` (a chosen row).
  [[nodiscard]] models::decoder_cpu_batch::token_objective objective(int row);

  /// This rank's pairs so far: their loss, implicit rewards and log-probs, summed.
  [[nodiscard]] pair_sums sums() const;

 private:
  void seed(int64_t first_row, int64_t rows, const float* token_losses, float* dloss);

  const actor::token_batch& b_;
  kernels::preference_options o_;
  float loss_scale_;
  std::vector<double> policy_;                      // each row's log-prob
  std::vector<kernels::preference_result> result_;  // each pair's
};

/// The DPO figures of a batch of pairs from each position's log-probability under the policy
/// (`logps`, [batch * ctx]), forward only: a held-out evaluation.
[[nodiscard]] pair_sums dpo_pair_sums(const actor::token_batch& b, const float* logps,
                                      const kernels::preference_options& o);

}  // namespace troupe::actors
