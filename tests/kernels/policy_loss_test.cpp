#include "kernels/policy_loss.hpp"

#include <gtest/gtest.h>

#include "kernels/loss_aggregation.hpp"
#include "tests/kernels/gradient_check.hpp"
#include "tests/support/rl_golden.hpp"

namespace troupe::kernels {
namespace {

using testing::floats;
using testing::rl_golden;

// Against veRL's compute_policy_loss_vanilla in PyTorch, in every aggregation mode, with ratios
// past the clamp at +-20, clipped on both sides, and dual-clipped.
TEST(PpoPolicyLoss, MatchesVerlAndItsAutogradInEveryAggregationMode) {
  const auto& g = rl_golden();
  const int rows = g["rows"], cols = g["cols"];
  const auto& in = g["inputs"];
  const auto mask = floats(in["mask"]), log_prob = floats(in["log_prob"]),
             old_log_prob = floats(in["old_log_prob"]), advantages = floats(in["advantages"]);
  for (const auto& [name, want] : g["policy_loss"].items()) {
    const auto mode = parse_loss_agg_mode(name);
    ASSERT_TRUE(mode.has_value()) << name;
    std::vector<float> weights(mask.size()), dlog_prob(mask.size());
    cpu::loss_agg_weights(weights.data(), mask.data(), rows, cols, *mode);
    const ppo_clip_range clip{want["clip"]["low"], want["clip"]["high"], want["clip"]["dual"]};
    const ppo_policy_stats s =
        cpu::ppo_policy_loss(dlog_prob.data(), log_prob.data(), old_log_prob.data(),
                             advantages.data(), mask.data(), weights.data(), mask.size(), clip);
    EXPECT_NEAR(s.pg_loss, want["pg_loss"].get<double>(), 1e-5) << name;
    EXPECT_NEAR(s.pg_clipfrac, want["pg_clipfrac"].get<double>(), 1e-6) << name;
    EXPECT_NEAR(s.ppo_kl, want["ppo_kl"].get<double>(), 1e-5) << name;
    EXPECT_NEAR(s.pg_clipfrac_lower, want["pg_clipfrac_lower"].get<double>(), 1e-6) << name;
    EXPECT_GT(s.pg_clipfrac, 0) << "the fixture clips";
    EXPECT_GT(s.pg_clipfrac_lower, 0) << "the fixture dual-clips";
    testing::expect_close(dlog_prob, floats(want["dlog_prob"]), "dlog_prob " + name, 1e-6);
  }
}

// GSPO against veRL's compute_policy_loss_gspo in PyTorch (seq-mean-token-mean): responses whose
// mean log-ratio is inside the clip range, below it, above it, past the clamp at 10 (no gradient
// there), and a response of one token.
TEST(GspoPolicyLoss, MatchesVerlAndItsAutograd) {
  const auto& g = rl_golden();
  const int rows = g["rows"], cols = g["cols"];
  const auto& in = g["inputs"];
  const auto& want = g["gspo"];
  const auto mask = floats(in["mask"]), log_prob = floats(in["log_prob"]),
             old_log_prob = floats(want["old_log_prob"]), advantages = floats(in["advantages"]);
  std::vector<float> weights(mask.size()), dlog_prob(mask.size());
  cpu::loss_agg_weights(weights.data(), mask.data(), rows, cols,
                        loss_agg_mode::seq_mean_token_mean);
  const ppo_clip_range clip{want["clip"]["low"], want["clip"]["high"]};
  const ppo_policy_stats s =
      cpu::gspo_policy_loss(dlog_prob.data(), log_prob.data(), old_log_prob.data(),
                            advantages.data(), mask.data(), weights.data(), rows, cols, clip);
  EXPECT_NEAR(s.pg_loss, want["pg_loss"].get<double>(),
              1e-5 * std::abs(want["pg_loss"].get<double>()));
  EXPECT_NEAR(s.pg_clipfrac, want["pg_clipfrac"].get<double>(), 1e-6);
  EXPECT_NEAR(s.ppo_kl, want["ppo_kl"].get<double>(), 1e-5);
  EXPECT_EQ(s.pg_clipfrac_lower, 0);
  EXPECT_GT(s.pg_clipfrac, 0) << "the fixture clips";
  testing::expect_close(dlog_prob, floats(want["dlog_prob"]), "dlog_prob", 1e-5);
  EXPECT_EQ(parse_policy_loss_mode("gspo"), policy_loss_mode::gspo);
  EXPECT_EQ(parse_policy_loss_mode("sapo"), std::nullopt);
}

// Away from the kinks (ratios well inside or outside the clip range), the gradient is the
// central difference of the loss.
TEST(PpoPolicyLoss, GradientIsTheFiniteDifference) {
  std::vector<float> old_log_prob(24, -1.0f), log_prob(24), advantages(24), mask(24, 1.0f);
  const float offsets[] = {-1.0f, -0.5f, -0.05f, 0.05f, 0.5f, 1.5f};
  for (int i = 0; i < 24; ++i) {
    log_prob[i] = old_log_prob[i] + offsets[i % 6];
    advantages[i] = (i / 6) % 2 == 0 ? 0.7f : -1.3f;
  }
  mask[23] = 0.0f;
  std::vector<float> weights(24), dlog_prob(24), ignored(24);
  cpu::loss_agg_weights(weights.data(), mask.data(), 4, 6, loss_agg_mode::token_mean);
  const ppo_clip_range clip{0.2f, 0.28f, 3.0f};
  cpu::ppo_policy_loss(dlog_prob.data(), log_prob.data(), old_log_prob.data(), advantages.data(),
                       mask.data(), weights.data(), 24, clip);
  testing::expect_gradient(
      "dlog_prob", log_prob, dlog_prob,
      [&] {
        return cpu::ppo_policy_loss(ignored.data(), log_prob.data(), old_log_prob.data(),
                                    advantages.data(), mask.data(), weights.data(), 24, clip)
            .pg_loss;
      },
      1e-3f, 1e-5, 1e-3, 24);
  EXPECT_EQ(dlog_prob[23], 0.0f) << "padding has no gradient";
}

}  // namespace
}  // namespace troupe::kernels
