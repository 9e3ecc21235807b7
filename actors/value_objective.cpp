#include "actors/value_objective.hpp"

#include <algorithm>

#include "actors/policy_objective.hpp"
#include "kernels/value_loss.hpp"
#include "runtime/base/status.hpp"

namespace troupe::actors {
namespace {

// The statistics local_sums() adds up, in order.
namespace value_sum {
enum index { vf_loss, clipped, vpred_sum, tokens, n_sums };
}  // namespace value_sum

}  // namespace

absl::Status validate(const actor::rl_batch& b, const value_objective&) {
  return check_rl_batch(b, {{"tokens", b.tokens.size()},
                            {"targets", b.targets.size()},
                            {"values", b.values.size()},
                            {"returns", b.returns.size()},
                            {"weights", b.weights.size()}});
}

value_objective_pass::value_objective_pass(const value_objective& o, const actor::rl_batch& b)
    : o_(o), b_(b) {
  const size_t n = static_cast<size_t>(b.batch) * b.ctx;
  mask_.resize(n);
  for (size_t i = 0; i < n; ++i)
    mask_[i] = b.targets[i] >= 0 ? 1.0f : 0.0f;
  vpreds_.assign(n, 0.0f);
}

models::decoder_cpu_batch::value_objective value_objective_pass::objective(int row) {
  const int64_t offset = int64_t{row} * b_.ctx;
  return {[this, offset](int64_t first, int64_t count, const float* values, float* dvalues) {
    seed(offset + first, count, values, dvalues);
  }};
}

void value_objective_pass::seed(int64_t first, int64_t count, const float* values, float* dvalues) {
  std::copy(values, values + count, vpreds_.data() + first);
  kernels::cpu::clipped_value_loss(dvalues, vpreds_.data() + first, b_.returns.data() + first,
                                   b_.values.data() + first, mask_.data() + first,
                                   b_.weights.data() + first, count, o_.cliprange_value);
}

std::vector<float> value_objective_pass::local_sums() const {
  const int64_t n = static_cast<int64_t>(mask_.size());
  std::vector<float> scratch(n);
  const kernels::value_loss_stats vf = kernels::cpu::clipped_value_loss(
      scratch.data(), vpreds_.data(), b_.returns.data(), b_.values.data(), mask_.data(),
      b_.weights.data(), n, o_.cliprange_value);
  double count = 0, v = 0;
  for (int64_t i = 0; i < n; ++i) {
    count += mask_[i];
    v += double{mask_[i]} * vpreds_[i];
  }
  std::vector<float> sums(value_sum::n_sums);
  sums[value_sum::vf_loss] = static_cast<float>(vf.vf_loss);
  sums[value_sum::clipped] =
      static_cast<float>(vf.vf_clipfrac * count);  // the kernel's mean, back to a sum
  sums[value_sum::vpred_sum] = static_cast<float>(v);
  sums[value_sum::tokens] = static_cast<float>(count);
  return sums;
}

actor::rl_step_report value_objective_pass::report(const std::vector<float>& sums) {
  actor::rl_step_report r;
  r.vf_loss = sums[value_sum::vf_loss];
  const double count = std::max(1.0f, sums[value_sum::tokens]);
  r.vf_clipfrac = sums[value_sum::clipped] / count;
  r.vpred_mean = sums[value_sum::vpred_sum] / count;
  return r;
}

}  // namespace troupe::actors
