#include "kernels/value_loss.hpp"

#include <gtest/gtest.h>

#include "kernels/loss_aggregation.hpp"
#include "tests/kernels/gradient_check.hpp"
#include "tests/support/rl_golden.hpp"

namespace troupe::kernels {
namespace {

using testing::floats;

TEST(ClippedValueLoss, MatchesVerlAndItsAutograd) {
  const auto& g = testing::rl_golden();
  const auto& in = g["inputs"];
  const auto& want = g["value_loss"];
  const auto mask = floats(in["mask"]), vpreds = floats(in["vpreds"]),
             returns = floats(in["returns"]), values = floats(in["values"]);
  std::vector<float> weights(mask.size()), dvpreds(mask.size());
  cpu::loss_agg_weights(weights.data(), mask.data(), g["rows"], g["cols"],
                        loss_agg_mode::token_mean);
  const value_loss_stats s =
      cpu::clipped_value_loss(dvpreds.data(), vpreds.data(), returns.data(), values.data(),
                              mask.data(), weights.data(), mask.size(), want["cliprange_value"]);
  EXPECT_NEAR(s.vf_loss, want["vf_loss"].get<double>(), 1e-5);
  EXPECT_NEAR(s.vf_clipfrac, want["vf_clipfrac"].get<double>(), 1e-6);
  EXPECT_GT(s.vf_clipfrac, 0) << "the fixture clips";
  testing::expect_close(dvpreds, floats(want["dvpreds"]), "dvpreds", 1e-6);
}

TEST(ClippedValueLoss, GradientIsTheFiniteDifference) {
  auto vpreds = testing::random_values(30, 3, -2, 2);
  const auto returns = testing::random_values(30, 4, -2, 2);
  const auto values = testing::random_values(30, 5, -2, 2);
  std::vector<float> mask(30, 1.0f), weights(30), dvpreds(30), ignored(30);
  cpu::loss_agg_weights(weights.data(), mask.data(), 5, 6, loss_agg_mode::seq_mean_token_sum);
  cpu::clipped_value_loss(dvpreds.data(), vpreds.data(), returns.data(), values.data(), mask.data(),
                          weights.data(), 30, 0.5f);
  testing::expect_gradient(
      "dvpreds", vpreds, dvpreds,
      [&] {
        return cpu::clipped_value_loss(ignored.data(), vpreds.data(), returns.data(), values.data(),
                                       mask.data(), weights.data(), 30, 0.5f)
            .vf_loss;
      },
      1e-3f, 1e-4, 1e-2, 30);
}

}  // namespace
}  // namespace troupe::kernels
