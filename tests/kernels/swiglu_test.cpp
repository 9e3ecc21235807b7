#include "kernels/swiglu.hpp"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace troupe::kernels::cpu
