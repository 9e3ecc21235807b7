#include "apps/rlhf/rollout_batch.hpp"

#include <cmath>

#include <gtest/gtest.h>

namespace troupe::apps::rlhf {
namespace {

// Two prompts, two responses each, of different lengths.
std::vector<rollout_sample> samples() {
  return {{0, {1, 2, 3}, {10, 11}, true, {-0.5f}, 4},
          {0, {1, 2, 3}, {12, 13, 14}, false, {-0.1f, -0.2f, -0.3f}, 4},
          {1, {5, 6}, {20}, true, {}, 4},
          {1, {5, 6}, {21, 22, 23, 24}, true, {-1, -1, -1}, 4}};
}

TEST(RolloutBatch, LaysResponsesOutAsTargetsAfterTheirPrompts) {
  auto b = *rollout_batch::create(samples(), 16);
  EXPECT_EQ(b.seq_len(), 6);  // the longest: 2 + 4
  const actor::rl_batch s = b.sequences(0, 4);
  EXPECT_EQ(std::vector<int32_t>(s.tokens.begin(), s.tokens.begin() + 6),
            (std::vector<int32_t>{1, 2, 3, 10, 11, 0}));
  // Position t's target is token t + 1, on the response only.
  EXPECT_EQ(std::vector<int32_t>(s.targets.begin(), s.targets.begin() + 6),
            (std::vector<int32_t>{-1, -1, 10, 11, -1, -1}));
  EXPECT_EQ(std::vector<int32_t>(s.targets.begin() + 18, s.targets.end()),
            (std::vector<int32_t>{-1, 21, 22, 23, 24, -1}));
  const actor::rl_batch last = b.sequences(3, 1);
  EXPECT_EQ(last.targets, std::vector<int32_t>(s.targets.begin() + 18, s.targets.end()));
  EXPECT_EQ(rollout_batch::create(samples(), 5).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// GRPO on the scores; the mini-batch's halves carry their rows' log-probs and advantages, and
// token-mean weights that add up to one over both ranks.
TEST(RolloutBatch, GrpoAdvantagesReachTheRanksMiniBatches) {
  auto b = *rollout_batch::create(samples(), 16);
  std::vector<float> old(4 * 6), ref(4 * 6, -2.0f);
  for (size_t i = 0; i < old.size(); ++i)
    old[i] = -0.01f * static_cast<float>(i);
  b.set_log_probs(false, 0, 4, old);
  b.set_log_probs(true, 0, 4, ref);
  const auto kl = b.compute_advantages({1.0, 0.0, 0.5, 0.5}, {}, 0.0);
  ASSERT_TRUE(kl.ok()) << kl.status();
  EXPECT_GT(*kl, 0.0);  // k1 of old - ref, positive here
  // Group 0: (1 - 0.5) / (std 0.7071 + 1e-6); group 1: equal scores, 0.
  EXPECT_NEAR(b.advantage(0), 0.5 / std::sqrt(0.5), 1e-5);
  EXPECT_NEAR(b.advantage(1), -0.5 / std::sqrt(0.5), 1e-5);
  EXPECT_NEAR(b.advantage(2), 0.0, 1e-6);
  EXPECT_DOUBLE_EQ(b.reward(0), 1.0);  // no KL in the reward

  const auto parts = b.mini_batch(0, 4, 2, kernels::loss_agg_mode::token_mean);
  ASSERT_EQ(parts.size(), 2u);
  double weight = 0;
  for (const auto& p : parts) {
    EXPECT_EQ(p.batch, 2);
    for (size_t i = 0; i < p.weights.size(); ++i) {
      weight += p.weights[i];
      EXPECT_EQ(p.weights[i] > 0, p.targets[i] >= 0) << i;
    }
  }
  EXPECT_NEAR(weight, 1.0, 1e-6);
  // Rank 1's first row is sample 2 (prompt of 2): its response token's target is position 1.
  EXPECT_EQ(parts[1].targets[1], 20);
  EXPECT_FLOAT_EQ(parts[1].old_log_probs[1], old[2 * 6 + 1]);
  EXPECT_FLOAT_EQ(parts[0].advantages[2], static_cast<float>(b.advantage(0)));
  EXPECT_FLOAT_EQ(parts[0].advantages[4], 0.0f);  // padding

  const nlohmann::json m = b.data_metrics(4);
  EXPECT_DOUBLE_EQ(m["critic/score/mean"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(m["response_length/mean"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(m["response_length/clip_ratio"].get<double>(), 0.25);
  EXPECT_GT(m["training/rollout_probs_diff_max"].get<double>(), 0.0);
}

TEST(RolloutBatch, GaeWithoutACriticIsRefusedClearly) {
  auto b = *rollout_batch::create(samples(), 16);
  rl_algorithm a;
  a.adv_estimator = rl_algorithm::estimator::gae;
  const auto kl = b.compute_advantages({1, 0, 0, 1}, a, 0.0);
  EXPECT_EQ(kl.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(kl.status().message().find("needs the critic's values"), std::string::npos);
  EXPECT_EQ(b.compute_advantages({1, 0}, {}, 0.0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// GAE on the critic's values at the response positions (the rest ignored), the same as gae() on
// the response grid; the mini-batch carries the values and returns where the targets are.
TEST(RolloutBatch, GaeUsesTheCriticsValuesAtTheResponsePositions) {
  auto b = *rollout_batch::create(samples(), 16);
  std::vector<float> values(4 * 6);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = 0.1f * static_cast<float>(i % 7) - 0.2f;
  b.set_log_probs(false, 0, 4, std::vector<float>(4 * 6, -1.0f));
  b.set_log_probs(true, 0, 4, std::vector<float>(4 * 6, -1.0f));
  b.set_values(0, 2, std::vector<float>(values.begin(), values.begin() + 12));
  b.set_values(2, 2, std::vector<float>(values.begin() + 12, values.end()));
  rl_algorithm a;
  a.adv_estimator = rl_algorithm::estimator::gae;
  a.gamma = 0.9;
  a.lam = 0.8;
  const std::vector<double> scores = {1.0, 0.0, 0.5, 0.25};
  ASSERT_TRUE(b.compute_advantages(scores, a, 0.0).ok());

  // The same on the response grid [4, 4], built by hand.
  const token_grid g{4, 4};
  std::vector<float> rewards(16, 0.0f), slot_values(16, 0.0f), mask(16, 0.0f);
  const auto all = samples();
  for (int r = 0; r < 4; ++r) {
    const int n = static_cast<int>(all[r].response.size());
    for (int j = 0; j < n; ++j) {
      mask[r * 4 + j] = 1.0f;
      slot_values[r * 4 + j] = values[r * 6 + all[r].prompt.size() - 1 + j];
    }
    rewards[r * 4 + n - 1] = static_cast<float>(scores[r]);
  }
  const auto want = *gae(rewards, slot_values, mask, g, 0.9, 0.8);
  const auto parts = b.mini_batch(0, 4, 2, kernels::loss_agg_mode::token_mean);
  for (int k = 0; k < 2; ++k) {
    const actor::rl_batch& p = parts[k];
    ASSERT_EQ(p.values.size(), p.targets.size());
    ASSERT_EQ(p.returns.size(), p.targets.size());
    for (int i = 0; i < 2; ++i) {
      const int r = 2 * k + i;
      for (size_t j = 0; j < all[r].response.size(); ++j) {
        const size_t at = i * 6 + all[r].prompt.size() - 1 + j;
        ASSERT_GE(p.targets[at], 0);
        EXPECT_FLOAT_EQ(p.values[at], slot_values[r * 4 + j]);
        EXPECT_FLOAT_EQ(p.returns[at], want.returns[r * 4 + j]);
        EXPECT_FLOAT_EQ(p.advantages[at], want.advantages[r * 4 + j]);
      }
    }
    for (size_t at = 0; at < p.targets.size(); ++at) {
      if (p.targets[at] < 0) {
        EXPECT_EQ(p.values[at], 0.0f) << "no value off the response";
      }
    }
  }
  const nlohmann::json m = b.data_metrics(4);
  ASSERT_TRUE(m.contains("critic/values/mean"));
  ASSERT_TRUE(m.contains("critic/vf_explained_var"));
  EXPECT_LT(m["critic/vf_explained_var"].get<double>(), 1.0);
}

}  // namespace
}  // namespace troupe::apps::rlhf
