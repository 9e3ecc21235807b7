#include "kernels/adamw.hpp"

#include <cmath>

#include <gtest/gtest.h>

#include "tests/kernels/gradient_check.hpp"

namespace troupe::kernels {
namespace {

using testing::random_values;

TEST(AdamW, MatchesTheTorchFormulaOverSteps) {
  const int n = 37;
  auto params = random_values(n, 1), want = params;
  std::vector<float> m(n, 0), v(n, 0);
  std::vector<double> rm(n, 0), rv(n, 0);
  adamw_params p{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1};
  for (int step = 1; step <= 5; ++step) {
    p.step = step;
    auto grads = random_values(n, 10 + step);
    cpu::adamw_update(params.data(), grads.data(), m.data(), v.data(), n, p, 0.5f);
    for (int i = 0; i < n; ++i) {  // torch.optim.AdamW: decay, then the Adam step
      const double g = grads[i] * 0.5;
      rm[i] = 0.9 * rm[i] + 0.1 * g;
      rv[i] = 0.95 * rv[i] + 0.05 * g * g;
      const double mhat = rm[i] / (1 - std::pow(0.9, step));
      const double denom = std::sqrt(rv[i]) / std::sqrt(1 - std::pow(0.95, step)) + 1e-8;
      want[i] = want[i] * (1 - 3e-3 * 0.1) - 3e-3 * mhat / denom;
    }
  }
  for (int i = 0; i < n; ++i)
    EXPECT_NEAR(params[i], want[i], 1e-6) << i;
}

TEST(AdamW, SumOfSquares) {
  auto x = random_values(5000, 3);
  double want = 0;
  for (float f : x)
    want += double{f} * f;
  EXPECT_NEAR(cpu::sum_of_squares(x.data(), x.size()), want, want * 1e-6);
}

}  // namespace
}  // namespace troupe::kernels
