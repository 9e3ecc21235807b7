#pragma once

// Finite-difference checks for the backward kernels: the loss is a fixed random projection of
// a kernel's output, and each analytic gradient is compared with a central difference.

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace troupe::testing {

/// n values uniform in [lo, hi), the same for a given seed.
inline std::vector<float> random_values(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v)
    x = dist(rng);
  return v;
}

/// log softmax(z) of one row of `vocab` logits, in double: the reference for the softmax kernels.
inline std::vector<double> naive_log_softmax(const float* z, int vocab) {
  double max = -1e30, sum = 0;
  for (int j = 0; j < vocab; ++j)
    max = std::max<double>(max, z[j]);
  for (int j = 0; j < vocab; ++j)
    sum += std::exp(z[j] - max);
  std::vector<double> out(vocab);
  for (int j = 0; j < vocab; ++j)
    out[j] = z[j] - max - std::log(sum);
  return out;
}

/// sum(out * probe) in double: the scalar loss whose gradient wrt out is probe.
inline double project(const std::vector<float>& out, const std::vector<float>& probe) {
  double s = 0.0;
  for (size_t i = 0; i < out.size(); ++i)
    s += double{out[i]} * probe[i];
  return s;
}

/// (loss(x + eps e_i) - loss(x - eps e_i)) / 2 eps, x unchanged afterwards. `loss` reads x.
inline double central_difference(std::vector<float>& x, size_t i, float eps,
                                 const std::function<double()>& loss) {
  const float saved = x[i];
  x[i] = saved + eps;
  const double up = loss();
  x[i] = saved - eps;
  const double down = loss();
  x[i] = saved;
  return (up - down) / (2.0 * eps);
}

/// Checks analytic[i] against central_difference() for up to `samples` indices spread over x.
inline void expect_gradient(const char* what, std::vector<float>& x,
                            const std::vector<float>& analytic, const std::function<double()>& loss,
                            float eps = 1e-2f, double atol = 2e-3, double rtol = 2e-2,
                            size_t samples = 64) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  const size_t step = std::max<size_t>(1, x.size() / samples);
  int failures = 0;
  for (size_t i = 0; i < x.size(); i += step) {
    const double numeric = central_difference(x, i, eps, loss);
    if (std::abs(numeric - analytic[i]) > atol + rtol * std::abs(numeric) && ++failures <= 5) {
      ADD_FAILURE() << what << "[" << i << "]: analytic " << analytic[i] << ", numeric " << numeric;
    }
  }
}

/// expect_gradient() for every index in [begin, end) of x (a small tensor inside it, such as a
/// head's weights), the tolerance relative to the analytic value.
inline void expect_gradient_at_every(const char* what, std::vector<float>& x,
                                     const std::vector<float>& analytic,
                                     const std::function<double()>& loss, int64_t begin,
                                     int64_t end, float eps, double atol, double rtol) {
  for (int64_t i = begin; i < end; ++i) {
    EXPECT_NEAR(analytic[i], central_difference(x, i, eps, loss),
                atol + rtol * std::abs(analytic[i]))
        << what << "[" << i << "]";
  }
}

}  // namespace troupe::testing
