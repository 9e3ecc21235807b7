#pragma once

// The per-token KL estimators between the policy and the reference, as veRL's `kl_penalty`
// computes them (J. Schulman, "Approximating KL divergence"), with d = log_prob - ref_log_prob:
//   kl (k1)          d
//   abs              |d|
//   mse (k2)         d^2 / 2
//   low_var_kl (k3)  u = clamp(-d, -20, 20); clamp(e^u - u - 1, -10, 10)
// and their gradient wrt log_prob (for the KL loss), with PyTorch's rules at the clamps.

#include <cstdint>
#include <optional>
#include <string_view>

namespace troupe::kernels {

enum class kl_estimator { k1, abs, k2, k3 };

/// veRL's name of `e`: "kl", "abs", "mse", "low_var_kl".
[[nodiscard]] std::string_view to_string(kl_estimator e);
/// The estimator named `name` (veRL's names, or "k1", "k2", "k3"), or nullopt.
[[nodiscard]] std::optional<kl_estimator> parse_kl_estimator(std::string_view name);

namespace cpu {
/// kl[i] for n tokens; dkl[i] = d kl[i] / d log_prob[i] unless dkl is null.
void kl_penalty(float* kl, float* dkl, const float* log_prob, const float* ref_log_prob, int64_t n,
                kl_estimator e);
}  // namespace cpu

}  // namespace troupe::kernels
