#include "actors/dpo_objective.hpp"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace troupe::actors {
namespace {

// The pair whose chosen row is `chosen` of `b`, its policy log-probs row `at` of `policy` (which
// may hold a slice of the batch's rows).
kernels::preference_pair pair_at(const actor::token_batch& b, int64_t chosen,
                                 const row_logps& policy, int64_t at) {
  return {.policy_chosen = policy.sums[at],
          .policy_rejected = policy.sums[at + 1],
          .reference_chosen = b.reference_logps[chosen],
          .reference_rejected = b.reference_logps[chosen + 1],
          .chosen_tokens = policy.tokens[at],
          .rejected_tokens = policy.tokens[at + 1]};
}

}  // namespace

absl::Status validate_dpo_pairs(const actor::token_batch& b) {
  const size_t n = static_cast<size_t>(b.batch) * b.ctx;
  if (b.batch <= 0 || b.batch % 2 != 0 || b.tokens.size() != n || b.targets.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a DPO batch is whole preference pairs (two rows each) of ctx tokens and targets; got ",
        b.batch, " rows of ", b.ctx, " with ", b.tokens.size(), " tokens and ", b.targets.size(),
        " targets"));
  }
  if (b.reference_logps.size() != static_cast<size_t>(b.batch)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a DPO batch of ", b.batch, " rows has ", b.reference_logps.size(),
                     " reference log-probabilities; it needs one a row"));
  }
  for (int row = 0; row < b.batch; ++row) {
    if (!std::isfinite(b.reference_logps[row])) {
      return absl::InvalidArgumentError(
          absl::StrCat("row ", row, " of a DPO batch has reference log-probability ",
                       b.reference_logps[row], "; it must be finite"));
    }
    const int32_t* targets = b.targets.data() + static_cast<size_t>(row) * b.ctx;
    bool trained = false;
    for (int t = 0; t < b.ctx && !trained; ++t)
      trained = targets[t] >= 0;
    if (!trained) {
      return absl::InvalidArgumentError(
          absl::StrCat("row ", row, " of a DPO batch has no response token (every target is -1)"));
    }
  }
  return absl::OkStatus();
}

row_logps sum_row_logps(const int32_t* targets, const float* logps, int rows, int ctx,
                        double sign) {
  row_logps out{std::vector<double>(rows, 0.0), std::vector<int64_t>(rows, 0)};
  for (int row = 0; row < rows; ++row) {
    for (int t = 0; t < ctx; ++t) {
      const size_t at = static_cast<size_t>(row) * ctx + t;
      if (targets[at] < 0) continue;
      out.sums[row] += sign * logps[at];
      ++out.tokens[row];
    }
  }
  return out;
}

dpo_pair_pass::dpo_pair_pass(const actor::token_batch& b, const kernels::preference_options& o,
                             float loss_scale)
    : b_(b), o_(o), loss_scale_(loss_scale), policy_(b.batch, 0.0), result_(b.batch / 2) {}

models::decoder_cpu_batch::token_objective dpo_pair_pass::objective(int row) {
  models::decoder_cpu_batch::token_objective o;
  o.seed = [this, row](int64_t first, int64_t count, const float* token_losses, const float*,
                       float* dloss,
                       float*) { seed(row + first / b_.ctx, count / b_.ctx, token_losses, dloss); };
  o.rows_together = 2;
  return o;
}

void dpo_pair_pass::seed(int64_t first_row, int64_t rows, const float* token_losses, float* dloss) {
  const int64_t ctx = b_.ctx;
  const int32_t* targets = b_.targets.data() + first_row * ctx;
  // The token losses are -log p: the rows' log-probs are minus their sums.
  const row_logps policy =
      sum_row_logps(targets, token_losses, static_cast<int>(rows), b_.ctx, /*sign=*/-1.0);
  for (int64_t i = 0; i < rows; i += 2) {
    const int64_t chosen = first_row + i;
    policy_[chosen] = policy.sums[i];
    policy_[chosen + 1] = policy.sums[i + 1];
    const kernels::preference_result r =
        kernels::preference_loss_of(pair_at(b_, chosen, policy, i), o_);
    result_[chosen / 2] = r;
    // d J / d loss_t = -d J / d log p_t = -d J / d pi on each of the row's response tokens.
    for (const auto& [offset, d] : {std::pair{i, r.dchosen}, {i + 1, r.drejected}}) {
      const float g = static_cast<float>(-loss_scale_ * d);
      for (int64_t t = 0; t < ctx; ++t) {
        const int64_t at = offset * ctx + t;
        dloss[at] = targets[at] >= 0 ? g : 0.0f;
      }
    }
  }
}

pair_sums dpo_pair_pass::sums() const {
  pair_sums s;
  for (size_t i = 0; i < result_.size(); ++i) {
    const kernels::preference_result& r = result_[i];
    s.add_pair(r.loss, r.reward_chosen, r.reward_rejected, policy_[2 * i], policy_[2 * i + 1]);
  }
  return s;
}

pair_sums dpo_pair_sums(const actor::token_batch& b, const float* logps,
                        const kernels::preference_options& o) {
  const row_logps policy = sum_row_logps(b.targets.data(), logps, b.batch, b.ctx);
  pair_sums s;
  for (int row = 0; row + 1 < b.batch; row += 2) {
    const kernels::preference_result r =
        kernels::preference_loss_of(pair_at(b, row, policy, row), o);
    s.add_pair(r.loss, r.reward_chosen, r.reward_rejected, policy.sums[row], policy.sums[row + 1]);
  }
  return s;
}

}  // namespace troupe::actors
