#include "apps/rlhf/kl_controller.hpp"

#include <gtest/gtest.h>

#include "tests/support/rl_golden.hpp"

namespace troupe::apps::rlhf {
namespace {

TEST(KlController, AdaptiveFollowsZieglersRuleWithItsClip) {
  const auto& want = testing::rl_golden()["adaptive_kl"];
  auto c = kl_controller::adaptive(want["kl_coef"], want["target_kl"], want["horizon"]);
  const auto kls = want["current_kl"].get<std::vector<double>>();
  const auto values = want["values"].get<std::vector<double>>();
  for (size_t i = 0; i < kls.size(); ++i) {
    c.update(kls[i], want["n_steps"]);
    EXPECT_NEAR(c.value(), values[i], 1e-12) << "update " << i;
  }
}

TEST(KlController, FixedStaysAndARestoreSetsTheValue) {
  auto c = kl_controller::fixed(0.001);
  c.update(5.0, 1000);
  EXPECT_EQ(c.value(), 0.001);
  c.restore(0.04);
  EXPECT_EQ(c.value(), 0.04);
}

}  // namespace
}  // namespace troupe::apps::rlhf
