#include "kernels/loss_aggregation.hpp"

#include <gtest/gtest.h>

namespace troupe::kernels {
namespace {

TEST(LossAggregation, WeightsOfEveryModeOnRaggedRows) {
  // Two rows of four slots: three tokens, then one.
  const std::vector<float> mask = {1, 1, 1, 0, 1, 0, 0, 0};
  std::vector<float> w(8);
  cpu::loss_agg_weights(w.data(), mask.data(), 2, 4, loss_agg_mode::token_mean);
  EXPECT_NEAR(w[0], 1 / 4.0, 1e-7);
  EXPECT_NEAR(w[4], 1 / 4.0, 1e-7);
  cpu::loss_agg_weights(w.data(), mask.data(), 2, 4, loss_agg_mode::seq_mean_token_sum);
  EXPECT_EQ(w[0], 0.5f);
  EXPECT_EQ(w[4], 0.5f);
  cpu::loss_agg_weights(w.data(), mask.data(), 2, 4, loss_agg_mode::seq_mean_token_mean);
  EXPECT_NEAR(w[0], 1 / 6.0, 1e-7);
  EXPECT_EQ(w[4], 0.5f);
  cpu::loss_agg_weights(w.data(), mask.data(), 2, 4, loss_agg_mode::seq_mean_token_sum_norm);
  EXPECT_EQ(w[0], 0.25f);
  for (int i : {3, 5, 6, 7})
    EXPECT_EQ(w[i], 0.0f) << "padding weighs nothing";
}

TEST(LossAggregation, ARowWithoutTokensWeighsNothing) {
  const std::vector<float> mask = {1, 1, 0, 0};
  std::vector<float> w(4);
  cpu::loss_agg_weights(w.data(), mask.data(), 2, 2, loss_agg_mode::seq_mean_token_mean);
  EXPECT_EQ(w, (std::vector<float>{0.25f, 0.25f, 0.0f, 0.0f}));
}

TEST(LossAggregation, VerlNames) {
  for (auto mode : {loss_agg_mode::token_mean, loss_agg_mode::seq_mean_token_sum,
                    loss_agg_mode::seq_mean_token_mean, loss_agg_mode::seq_mean_token_sum_norm}) {
    EXPECT_EQ(parse_loss_agg_mode(to_string(mode)), mode);
  }
  EXPECT_FALSE(parse_loss_agg_mode("token-sum").has_value());
}

}  // namespace
}  // namespace troupe::kernels
