#include "actors/policy_objective.hpp"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.hpp"

namespace troupe::actors {
namespace {

// The statistics local_sums() adds up, in order.
namespace policy_sum {
enum index {
  pg_loss,
  entropy,
  kl_loss,
  clipped,
  clipped_lower,
  negative_log_ratio,
  tokens,
  n_sums
};
}  // namespace policy_sum

}  // namespace

absl::Status check_rl_batch(const actor::rl_batch& b,
                            std::initializer_list<std::pair<const char*, size_t>> fields) {
  if (b.batch < 1 || b.ctx < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("rl_batch: batch ", b.batch, " x ctx ", b.ctx, " is empty"));
  }
  const size_t n = static_cast<size_t>(b.batch) * b.ctx;
  for (const auto& [field, size] : fields) {
    if (size == n) continue;
    return absl::InvalidArgumentError(absl::StrCat("rl_batch: ", field, " has ", size,
                                                   " entries; batch ", b.batch, " x ctx ", b.ctx,
                                                   " needs ", n));
  }
  for (size_t i = 0; i < n; ++i) {
    if (b.targets[i] < 0 && b.weights[i] != 0.0f) {
      return absl::InvalidArgumentError(
          absl::StrCat("rl_batch: position ", i, " has weight ", b.weights[i],
                       " but no target (-1): only response tokens are trained on"));
    }
  }
  return absl::OkStatus();
}

absl::Status validate(const actor::rl_batch& b, const policy_objective& o) {
  TROUPE_RETURN_IF_ERROR(check_rl_batch(b, {{"tokens", b.tokens.size()},
                                            {"targets", b.targets.size()},
                                            {"old_log_probs", b.old_log_probs.size()},
                                            {"advantages", b.advantages.size()},
                                            {"weights", b.weights.size()}}));
  if (o.use_kl_loss) {
    TROUPE_RETURN_IF_ERROR(
        check_rl_batch(b, {{"ref_log_probs (use_kl_loss)", b.ref_log_probs.size()}}));
  }
  return absl::OkStatus();
}

policy_objective_pass::policy_objective_pass(const policy_objective& o, const actor::rl_batch& b)
    : o_(o), b_(b) {
  const size_t n = static_cast<size_t>(b.batch) * b.ctx;
  mask_.resize(n);
  for (size_t i = 0; i < n; ++i)
    mask_[i] = b.targets[i] >= 0 ? 1.0f : 0.0f;
  log_prob_.assign(n, 0.0f);
  entropy_.assign(n, 0.0f);
  kl_.assign(n, 0.0f);
  dlog_prob_.assign(n, 0.0f);
  dkl_.assign(n, 0.0f);
}

models::decoder_cpu_batch::token_objective policy_objective_pass::token_objective(int row) {
  const int64_t offset = int64_t{row} * b_.ctx;
  return {o_.temperature, true,
          [this, offset](int64_t first, int64_t count, const float* token_losses,
                         const float* entropies, float* dloss, float* dentropy) {
            seed(offset + first, count, token_losses, entropies, dloss, dentropy);
          }};
}

void policy_objective_pass::seed(int64_t first, int64_t count, const float* token_losses,
                                 const float* entropies, float* dloss, float* dentropy) {
  for (int64_t i = 0; i < count; ++i) {
    log_prob_[first + i] = 0.0f - token_losses[i];
    entropy_[first + i] = entropies[i];
  }
  TROUPE_CHECK(count % b_.ctx == 0);  // the model's slices hold whole responses
  (void)clipped_loss(dlog_prob_.data() + first, first, static_cast<int>(count / b_.ctx));
  if (o_.use_kl_loss) {
    kernels::cpu::kl_penalty(kl_.data() + first, dkl_.data() + first, log_prob_.data() + first,
                             b_.ref_log_probs.data() + first, count, o_.kl_loss_type);
  }
  for (int64_t i = 0; i < count; ++i) {
    const float w = b_.weights[first + i];
    float dlog_prob = dlog_prob_[first + i];
    if (o_.use_kl_loss) dlog_prob += o_.kl_loss_coef * w * dkl_[first + i];
    dloss[i] = -dlog_prob;  // a token's loss is -log p
    dentropy[i] = -o_.entropy_coeff * w;
  }
}

kernels::ppo_policy_stats policy_objective_pass::clipped_loss(float* dlog_prob, int64_t first,
                                                              int rows) const {
  const float *log_prob = log_prob_.data() + first, *old = b_.old_log_probs.data() + first,
              *advantages = b_.advantages.data() + first, *mask = mask_.data() + first,
              *weights = b_.weights.data() + first;
  if (o_.loss_mode == kernels::policy_loss_mode::gspo) {
    return kernels::cpu::gspo_policy_loss(dlog_prob, log_prob, old, advantages, mask, weights, rows,
                                          b_.ctx, o_.clip);
  }
  return kernels::cpu::ppo_policy_loss(dlog_prob, log_prob, old, advantages, mask, weights,
                                       int64_t{rows} * b_.ctx, o_.clip);
}

std::vector<float> policy_objective_pass::local_sums() const {
  const int64_t n = static_cast<int64_t>(mask_.size());
  std::vector<float> scratch(n);
  const kernels::ppo_policy_stats pg = clipped_loss(scratch.data(), 0, b_.batch);
  double count = 0, h = 0, kl = 0;
  for (int64_t i = 0; i < n; ++i) {
    count += mask_[i];
    h += double{b_.weights[i]} * entropy_[i];
    kl += double{b_.weights[i]} * kl_[i];
  }
  std::vector<float> sums(policy_sum::n_sums);
  sums[policy_sum::pg_loss] = static_cast<float>(pg.pg_loss);
  sums[policy_sum::entropy] = static_cast<float>(h);
  sums[policy_sum::kl_loss] = static_cast<float>(kl);
  // The kernel's masked means over this rank's tokens, back to sums.
  sums[policy_sum::clipped] = static_cast<float>(pg.pg_clipfrac * count);
  sums[policy_sum::clipped_lower] = static_cast<float>(pg.pg_clipfrac_lower * count);
  sums[policy_sum::negative_log_ratio] = static_cast<float>(pg.ppo_kl * count);
  sums[policy_sum::tokens] = static_cast<float>(count);
  return sums;
}

actor::rl_step_report policy_objective_pass::report(const std::vector<float>& sums) {
  actor::rl_step_report r;
  r.pg_loss = sums[policy_sum::pg_loss];
  r.entropy = sums[policy_sum::entropy];
  r.kl_loss = sums[policy_sum::kl_loss];
  const double count = std::max(1.0f, sums[policy_sum::tokens]);
  r.pg_clipfrac = sums[policy_sum::clipped] / count;
  r.pg_clipfrac_lower = sums[policy_sum::clipped_lower] / count;
  r.ppo_kl = sums[policy_sum::negative_log_ratio] / count;
  return r;
}

}  // namespace troupe::actors
