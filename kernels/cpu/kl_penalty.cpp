#include "kernels/kl_penalty.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/autograd_rules.hpp"

namespace troupe::kernels {

std::string_view to_string(kl_estimator e) {
  switch (e) {
    case kl_estimator::k1:
      return "kl";
    case kl_estimator::abs:
      return "abs";
    case kl_estimator::k2:
      return "mse";
    case kl_estimator::k3:
      return "low_var_kl";
  }
  return "?";
}

std::optional<kl_estimator> parse_kl_estimator(std::string_view name) {
  if (name == "kl" || name == "k1") return kl_estimator::k1;
  if (name == "abs") return kl_estimator::abs;
  if (name == "mse" || name == "k2") return kl_estimator::k2;
  if (name == "low_var_kl" || name == "k3") return kl_estimator::k3;
  return std::nullopt;
}

namespace cpu {

void kl_penalty(float* kl, float* dkl, const float* log_prob, const float* ref_log_prob, int64_t n,
                kl_estimator e) {
  for (int64_t i = 0; i < n; ++i) {
    const float d = log_prob[i] - ref_log_prob[i];
    float value = 0, grad = 0;
    switch (e) {
      case kl_estimator::k1:
        value = d, grad = 1;
        break;
      case kl_estimator::abs:
        value = std::abs(d), grad = d > 0 ? 1.0f : d < 0 ? -1.0f : 0.0f;
        break;
      case kl_estimator::k2:
        value = 0.5f * d * d, grad = d;
        break;
      case kl_estimator::k3: {
        const float u_raw = ref_log_prob[i] - log_prob[i];
        const float u = std::clamp(u_raw, -20.0f, 20.0f);
        const float ratio = std::exp(u);
        const float raw = ratio - u - 1;
        value = std::clamp(raw, -10.0f, 10.0f);
        // d/d log_prob: du = -1 inside u's clamp; d raw / du = ratio - 1.
        grad = -(ratio - 1) * clamp_passes(u_raw, -20.0f, 20.0f) * clamp_passes(raw, -10.0f, 10.0f);
        break;
      }
    }
    kl[i] = value;
    if (dkl != nullptr) dkl[i] = grad;
  }
}

}  // namespace cpu
}  // namespace troupe::kernels
