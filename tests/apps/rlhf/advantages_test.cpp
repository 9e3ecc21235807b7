#include "apps/rlhf/advantages.hpp"

#include <gtest/gtest.h>

#include "tests/support/rl_golden.hpp"

namespace troupe::apps::rlhf {
namespace {

using testing::expect_close;
using testing::floats;

// Golden values from veRL's core_algos formulas in PyTorch (tests/kernels/make_rl_golden.py):
// ragged responses (7, 4, 1, 5, 3 and 6 tokens of 7) in groups of three, two and one.
class Advantages : public ::testing::Test {
 protected:
  const nlohmann::json& g_ = testing::rl_golden();
  const token_grid grid_{g_["rows"], g_["cols"]};
  const std::vector<float> mask_ = floats(g_["inputs"]["mask"]);
  const std::vector<float> rewards_ = floats(g_["inputs"]["token_level_rewards"]);
  const std::vector<int64_t> group_ = g_["group"].get<std::vector<int64_t>>();
};

TEST_F(Advantages, MaskedWhitenUsesTheUnbiasedVariance) {
  auto w = masked_whiten(floats(g_["inputs"]["advantages"]), mask_);
  ASSERT_TRUE(w.ok()) << w.status();
  expect_close(*w, floats(g_["masked_whiten"]), "whitened");
}

TEST_F(Advantages, AVarianceOverFewerThanTwoTokensIsRefused) {
  const std::vector<float> one = {3.0f, 1.0f}, mask = {1.0f, 0.0f};
  auto var = masked_var(one, mask);
  ASSERT_FALSE(var.ok());
  EXPECT_NE(var.status().message().find("at least 2"), std::string::npos) << var.status();
  EXPECT_TRUE(masked_var(one, mask, false).ok());
}

TEST_F(Advantages, GaeCarriesThroughTheMaskAndWhitensOnlyTheAdvantages) {
  for (const auto& [name, want] : g_["gae"].items()) {
    auto e =
        gae(rewards_, floats(g_["inputs"]["values"]), mask_, grid_, want["gamma"], want["lam"]);
    ASSERT_TRUE(e.ok()) << e.status();
    expect_close(e->returns, floats(want["returns"]), "returns " + name);
    expect_close(e->advantages, floats(want["advantages"]), "advantages " + name);
  }
}

TEST_F(Advantages, GrpoAndDrGrpoNormaliseByGroup) {
  const auto normalised = grpo(rewards_, mask_, grid_, group_, true);
  expect_close(normalised.advantages, floats(g_["grpo_std"]), "grpo");
  EXPECT_EQ(normalised.returns, normalised.advantages);
  expect_close(grpo(rewards_, mask_, grid_, group_, false).advantages, floats(g_["grpo_no_std"]),
               "dr grpo");
}

TEST_F(Advantages, RlooLeavesOneOut) {
  expect_close(rloo(rewards_, mask_, grid_, group_).advantages, floats(g_["rloo"]), "rloo");
}

TEST_F(Advantages, ReinforcePlusPlusAndItsBaseline) {
  const auto& want = g_["reinforce_plus_plus"];
  auto e = reinforce_plus_plus(rewards_, mask_, grid_, want["gamma"]);
  ASSERT_TRUE(e.ok()) << e.status();
  expect_close(e->returns, floats(want["returns"]), "returns");
  expect_close(e->advantages, floats(want["advantages"]), "advantages");
  auto b = reinforce_plus_plus_baseline(rewards_, mask_, grid_, group_);
  ASSERT_TRUE(b.ok()) << b.status();
  expect_close(b->advantages, floats(g_["reinforce_plus_plus_baseline"]), "baseline");
}

TEST_F(Advantages, ScoresGoToTheLastTokenAndTheKlComesOffThem) {
  const auto& want = g_["kl_in_reward"];
  const auto scores = scores_at_last_token(floats(g_["inputs"]["scores"]), mask_, grid_);
  EXPECT_EQ(scores, floats(want["token_level_scores"]));
  const auto r = apply_kl_penalty(scores, floats(g_["inputs"]["old_log_prob"]),
                                  floats(g_["inputs"]["ref_log_prob"]), mask_, grid_, want["beta"],
                                  kernels::kl_estimator::k1);
  expect_close(r.rewards, floats(want["rewards"]), "rewards");
  EXPECT_NEAR(r.current_kl, want["current_kl"].get<double>(), 1e-5);
}

}  // namespace
}  // namespace troupe::apps::rlhf
