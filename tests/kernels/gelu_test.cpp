#include "kernels/gelu.hpp"

#include <cmath>

#include <gtest/gtest.h>

#include "kernels/cpu/fast_math.hpp"
#include "tests/kernels/gradient_check.hpp"

namespace troupe::kernels {
namespace {

using testing::random_values;

TEST(FastMath, LogIsAccurate) {
  for (float x = 1e-30f; x < 1e30f; x *= 1.37f) {
    const double want = std::log(double{x});
    EXPECT_NEAR(cpu::fast_log(x), want, 2e-7 * std::max(1.0, std::abs(want))) << x;
  }
  for (float x = 0.5f; x < 2.0f; x += 0.001f)  // around 1, where log(x) is small
    EXPECT_NEAR(cpu::fast_log(x), std::log(double{x}), 1e-7) << x;
}

TEST(FastMath, ExpAndTanhAreAccurate) {
  for (float x = -80.0f; x < 80.0f; x += 0.37f) {
    EXPECT_NEAR(cpu::fast_exp(x) / std::exp(x), 1.0, 5e-7) << x;
  }
  for (float x = -10.0f; x < 10.0f; x += 0.01f) {
    EXPECT_NEAR(cpu::fast_tanh(x), std::tanh(x), 3e-7) << x;
  }
  EXPECT_EQ(cpu::fast_exp(-1000.0f) < 1e-37f, true);
  EXPECT_TRUE(std::isfinite(cpu::fast_exp(1000.0f)));
}

TEST(Gelu, ForwardMatchesTheFormula) {
  auto in = random_values(257, 1, -6, 6);
  std::vector<float> out(in.size());
  cpu::gelu_forward(out.data(), in.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const double x = in[i];
    const double want = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(out[i], want, 1e-6) << x;
  }
}

TEST(Gelu, BackwardMatchesFiniteDifferences) {
  auto in = random_values(301, 2, -4, 4), probe = random_values(301, 3);
  std::vector<float> out(in.size()), din(in.size());
  auto loss = [&] {
    cpu::gelu_forward(out.data(), in.data(), in.size());
    return testing::project(out, probe);
  };
  cpu::gelu_backward(din.data(), in.data(), probe.data(), in.size());
  testing::expect_gradient("din", in, din, loss, 1e-3f, 1e-3, 1e-2, 301);
}

}  // namespace
}  // namespace troupe::kernels
