#include "kernels/rope.hpp"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tests/kernels/gradient_check.hpp"

namespace troupe::kernels::cpu {
namespace {

// Hugging Face's rotate_half convention: in each head, pair (i, i + d/2) turns by
// position * inv_freq[i].
TEST(Rope, TurnsEachHeadsHalvesByPositionTimesFrequency) {
  std::mt19937 rng(2);
  std::normal_distribution<float> normal;
  const int rows = 3, heads = 2, d = 8, stride = heads * d + 5;  // a padded row
  std::vector<float> x(rows * stride), inv = {1.0f, 0.1f, 0.01f, 0.001f};
  for (float& v : x)
    v = normal(rng);
  const std::vector<float> before = x;
  const std::vector<int32_t> positions = {0, 7, 300};
  std::vector<float> cos(rows * d / 2), sin(rows * d / 2);
  rope_angles(cos.data(), sin.data(), positions.data(), rows, d, inv.data());
  rope_forward(x.data(), stride, rows, heads, d, cos.data(), sin.data());
  for (int r = 0; r < rows; ++r) {
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < d / 2; ++i) {
        const int at = r * stride + h * d;
        const double angle = double{float(positions[r]) * inv[i]};
        const double a = before[at + i], b = before[at + i + d / 2];
        EXPECT_NEAR(x[at + i], a * std::cos(angle) - b * std::sin(angle), 1e-5);
        EXPECT_NEAR(x[at + i + d / 2], b * std::cos(angle) + a * std::sin(angle), 1e-5);
      }
    }
    for (int i = heads * d; i < stride; ++i)  // the padding is left alone
      EXPECT_EQ(x[r * stride + i], before[r * stride + i]);
  }
  for (int i = 0; i < heads * d; ++i)  // position 0 turns nothing
    EXPECT_EQ(x[i], before[i]);
}

TEST(Rope, BackwardMatchesFiniteDifferences) {
  const int rows = 3, heads = 2, d = 6;
  const std::vector<float> inv = {1.0f, 0.3f, 0.05f};
  const std::vector<int32_t> positions = {1, 4, 11};
  auto x = testing::random_values(rows * heads * d, 1);
  auto probe = testing::random_values(rows * heads * d, 2);
  std::vector<float> out, cos(rows * d / 2), sin(rows * d / 2);
  rope_angles(cos.data(), sin.data(), positions.data(), rows, d, inv.data());
  auto loss = [&] {
    out = x;
    rope_forward(out.data(), heads * d, rows, heads, d, cos.data(), sin.data());
    return testing::project(out, probe);
  };
  std::vector<float> dx = probe;
  rope_backward(dx.data(), heads * d, rows, heads, d, cos.data(), sin.data());
  testing::expect_gradient("dx", x, dx, loss);
}

}  // namespace
}  // namespace troupe::kernels::cpu
