#include "kernels/swiglu.hpp"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "tests/kernels/gradient_check.hpp"

namespace troupe::kernels::cpu {
namespace {

TEST(SwiGlu, IsSiluOfTheGateTimesUp) {
  const std::vector<float> gate = {-20, -2, -0.5f, 0, 0.5f, 2, 20, 3},
                           up = {1, 2, 3, 4, 5, 6, 7, -1};
  std::vector<float> out(gate.size());
  swiglu_forward(out.data(), gate.data(), up.data(), static_cast<int64_t>(gate.size()));
  for (size_t i = 0; i < gate.size(); ++i) {
    const double silu = gate[i] / (1 + std::exp(-double{gate[i]}));
    EXPECT_NEAR(out[i], silu * up[i], 1e-6 * std::max(1.0, std::abs(silu * up[i])));
  }
}

TEST(SwiGlu, BackwardMatchesFiniteDifferences) {
  const int n = 40;
  auto gate = testing::random_values(n, 1, -4, 4), up = testing::random_values(n, 2, -2, 2);
  auto probe = testing::random_values(n, 3);
  std::vector<float> out(n);
  auto loss = [&] {
    swiglu_forward(out.data(), gate.data(), up.data(), n);
    return testing::project(out, probe);
  };
  std::vector<float> dgate(n), dup(n);
  swiglu_backward(dgate.data(), dup.data(), gate.data(), up.data(), probe.data(), n);
  testing::expect_gradient("dgate", gate, dgate, loss);
  testing::expect_gradient("dup", up, dup, loss);
}

}  // namespace
}  // namespace troupe::kernels::cpu
