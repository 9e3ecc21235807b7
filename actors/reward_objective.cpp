#include "actors/reward_objective.hpp"

#include "absl/strings/str_cat.h"
#include "kernels/preference_loss.hpp"

namespace troupe::actors {
namespace {

// The margin of the pair whose chosen row is `row`.
double margin_of(const actor::token_batch& b, int64_t row) {
  return b.margins.empty() ? 0.0 : b.margins[row / 2];
}

}  // namespace

absl::Status validate_pairs(const actor::token_batch& b) {
  const size_t n = static_cast<size_t>(b.batch) * b.ctx;
  if (!b.margins.empty() && 2 * b.margins.size() != static_cast<size_t>(b.batch)) {
    return absl::InvalidArgumentError(absl::StrCat("a reward model's batch of ", b.batch,
                                                   " rows has ", b.margins.size(),
                                                   " margins; it needs one a pair"));
  }
  if (b.batch <= 0 || b.batch % 2 != 0 || b.tokens.size() != n || b.targets.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a reward model's batch is whole preference pairs (two rows each) of ctx tokens and "
        "targets; got ",
        b.batch, " rows of ", b.ctx, " with ", b.tokens.size(), " tokens and ", b.targets.size(),
        " targets"));
  }
  for (int row = 0; row < b.batch; ++row) {
    const int32_t label = row % 2 == 0 ? 1 : 0;
    int scored = 0;
    for (int t = 0; t < b.ctx; ++t) {
      const int32_t target = b.targets[static_cast<size_t>(row) * b.ctx + t];
      if (target == -1) continue;
      if (target != label) {
        return absl::InvalidArgumentError(absl::StrCat(
            "row ", row, " of a reward model's batch: target ", target, " at position ", t,
            "; a pair's chosen row (even) is scored with target 1, its rejected row with 0"));
      }
      ++scored;
    }
    if (scored != 1) {
      return absl::InvalidArgumentError(absl::StrCat("row ", row, " of a reward model's batch has ",
                                                     scored,
                                                     " scored positions; it needs exactly one"));
    }
  }
  return absl::OkStatus();
}

std::vector<int> scored_positions(const actor::token_batch& b) {
  std::vector<int> at(b.batch, 0);
  for (int row = 0; row < b.batch; ++row) {
    for (int t = 0; t < b.ctx; ++t) {
      if (b.targets[static_cast<size_t>(row) * b.ctx + t] >= 0) at[row] = t;
    }
  }
  return at;
}

reward_pair_pass::reward_pair_pass(const actor::token_batch& b, float loss_scale)
    : b_(b), loss_scale_(loss_scale), scored_(scored_positions(b)), rewards_(b.batch, 0.0f) {}

models::decoder_cpu_batch::value_objective reward_pair_pass::objective(int row) {
  return {[this, row](int64_t first, int64_t count, const float* values, float* dvalues) {
            seed(row + first / b_.ctx, count / b_.ctx, values, dvalues);
          },
          /*rows_together=*/2};
}

void reward_pair_pass::seed(int64_t first_row, int64_t rows, const float* values, float* dvalues) {
  const int64_t ctx = b_.ctx;
  for (int64_t i = 0; i < rows; ++i)
    rewards_[first_row + i] = values[i * ctx + scored_[first_row + i]];
  for (int64_t i = 0; i < rows; i += 2) {
    const int64_t chosen = first_row + i, rejected = chosen + 1;
    const kernels::bradley_terry_result bt =
        kernels::bradley_terry_loss(rewards_[chosen], rewards_[rejected], margin_of(b_, chosen));
    dvalues[i * ctx + scored_[chosen]] = static_cast<float>(loss_scale_ * bt.dchosen);
    dvalues[(i + 1) * ctx + scored_[rejected]] = static_cast<float>(loss_scale_ * bt.drejected);
  }
}

pair_sums pair_sums::of(const actor::token_batch& b, const std::vector<float>& rewards) {
  pair_sums s;
  for (int row = 0; row + 1 < b.batch; row += 2) {
    const double chosen = rewards[row], rejected = rewards[row + 1];
    s.add_pair(kernels::bradley_terry_loss(chosen, rejected, margin_of(b, row)).loss, chosen,
               rejected);
  }
  return s;
}

void pair_sums::add_pair(double pair_loss, double reward_chosen, double reward_rejected,
                         double chosen_logp, double rejected_logp) {
  loss += pair_loss;
  correct += reward_chosen > reward_rejected ? 1 : 0;
  chosen += reward_chosen, rejected += reward_rejected;
  logp_chosen += chosen_logp, logp_rejected += rejected_logp;
  pairs += 1;
}

void pair_sums::add(const pair_sums& o) {
  loss += o.loss, correct += o.correct, chosen += o.chosen, rejected += o.rejected;
  logp_chosen += o.logp_chosen, logp_rejected += o.logp_rejected, pairs += o.pairs;
}

std::vector<float> pair_sums::to_floats() const {
  return {static_cast<float>(loss),        static_cast<float>(correct),
          static_cast<float>(chosen),      static_cast<float>(rejected),
          static_cast<float>(logp_chosen), static_cast<float>(logp_rejected),
          static_cast<float>(pairs)};
}

pair_sums pair_sums::from_floats(const float* f) {
  return {f[0], f[1], f[2], f[3], f[4], f[5], f[6]};
}

actor::pair_metrics pair_sums::means() const {
  if (pairs == 0) return {};
  return {.count = static_cast<int64_t>(pairs),
          .accuracy = correct / pairs,
          .margin = (chosen - rejected) / pairs,
          .reward_chosen = chosen / pairs,
          .reward_rejected = rejected / pairs,
          .logp_chosen = logp_chosen / pairs,
          .logp_rejected = logp_rejected / pairs};
}

}  // namespace troupe::actors
