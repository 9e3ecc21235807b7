#include "kernels/rmsnorm.hpp"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tests/kernels/gradient_check.hpp"

namespace troupe::kernels::cpu {
namespace {

TEST(RmsNorm, MatchesTheDefinitionInDoublePrecision) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  const int rows = 5, dim = 37;  // not a multiple of the vector width
  std::vector<float> in(rows * dim), weight(dim), out(rows * dim), rstd(rows);
  for (float& x : in)
    x = 3 * normal(rng);
  for (float& w : weight)
    w = 1 + 0.1f * normal(rng);
  rmsnorm_forward(out.data(), rstd.data(), in.data(), weight.data(), rows, dim, 1e-6f);
  for (int r = 0; r < rows; ++r) {
    double sum = 0;
    for (int i = 0; i < dim; ++i)
      sum += double{in[r * dim + i]} * in[r * dim + i];
    const double s = 1 / std::sqrt(sum / dim + 1e-6);
    EXPECT_NEAR(rstd[r], s, 1e-6 * s);
    for (int i = 0; i < dim; ++i)
      EXPECT_NEAR(out[r * dim + i], weight[i] * in[r * dim + i] * s, 1e-5);
  }
  // In place, as the per-head q/k norms run.
  std::vector<float> same = in;
  rmsnorm_forward(same.data(), nullptr, same.data(), weight.data(), rows, dim, 1e-6f);
  EXPECT_EQ(same, out);
}

TEST(RmsNorm, BackwardMatchesFiniteDifferences) {
  const int rows = 4, dim = 19;
  auto in = testing::random_values(rows * dim, 1, -2, 2);
  auto w = testing::random_values(dim, 2, 0.5, 1.5);
  auto probe = testing::random_values(rows * dim, 3);
  std::vector<float> out(rows * dim), rstd(rows);
  auto loss = [&] {
    rmsnorm_forward(out.data(), rstd.data(), in.data(), w.data(), rows, dim, 1e-5f);
    return testing::project(out, probe);
  };
  loss();
  std::vector<float> din(rows * dim, 0.0f), dw(dim, 0.0f);
  rmsnorm_backward(din.data(), dw.data(), probe.data(), in.data(), w.data(), rstd.data(), rows,
                   dim);
  testing::expect_gradient("din", in, din, loss);
  testing::expect_gradient("dweight", w, dw, loss);
}

}  // namespace
}  // namespace troupe::kernels::cpu
