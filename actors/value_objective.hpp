#pragma once

#include <vector>

#include "absl/status/status.h"
#include "models/decoder/decoder_cpu_batch.hpp"
#include "runtime/actor/message_types.hpp"

namespace troupe::actors {

/// The RL critic's objective as veRL's critic computes it (`compute_value_loss`), per response
/// token t with weight w_t (the loss aggregation):
///   J = 0.5 sum_t w_t max((V_t - R_t)^2, (clip(V_t, V_old - eps, V_old + eps) - R_t)^2)
/// with eps = cliprange_value, V_old the values the advantages were computed with, R the returns.
struct value_objective {
  float cliprange_value = 0.5f;
};

/// INVALID_ARGUMENT naming the field when `b` is not a well-formed critic batch (tokens, targets,
/// values, returns and weights of batch x ctx; a weight only where there is a target).
[[nodiscard]] absl::Status validate(const actor::rl_batch& b, const value_objective& o);

/// The objective over one rank's rl_batch, as policy_objective_pass is for the policy:
/// objective() seeds the model's backward for each micro-batch pass, local_sums() gives this
/// rank's statistics after the passes, and report() turns every rank's sums into veRL's critic
/// metrics (vf_loss, vf_clipfrac, vpred_mean).
class value_objective_pass {
 public:
  /// `b` must outlive the pass and be valid (validate()).
  value_objective_pass(const value_objective& o, const actor::rl_batch& b);

  /// The objective of the micro-batch whose first row is `row`.
  [[nodiscard]] models::decoder_cpu_batch::value_objective objective(int row);

  /// {vf_loss, clipped, sum of the predicted values, response tokens} over this rank's tokens.
  [[nodiscard]] std::vector<float> local_sums() const;
  [[nodiscard]] static actor::rl_step_report report(const std::vector<float>& sums);

 private:
  void seed(int64_t first, int64_t count, const float* values, float* dvalues);

  value_objective o_;
  const actor::rl_batch& b_;
  std::vector<float> mask_, vpreds_;
};

}  // namespace troupe::actors
