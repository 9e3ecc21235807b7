#include "kernels/kl_penalty.hpp"

#include <gtest/gtest.h>

#include "tests/support/rl_golden.hpp"

namespace troupe::kernels {
namespace {

using testing::floats;

// The four estimators against veRL's kl_penalty in PyTorch, values and autograd gradients,
// with k3's clamps reached (the fixture's reference is far from the policy in places).
TEST(KlPenalty, EveryEstimatorMatchesVerl) {
  const auto& g = testing::rl_golden();
  const auto log_prob = floats(g["inputs"]["log_prob"]);
  const auto ref_log_prob = floats(g["inputs"]["ref_log_prob"]);
  for (const auto& [name, want] : g["kl"].items()) {
    const auto e = parse_kl_estimator(name);
    ASSERT_TRUE(e.has_value()) << name;
    EXPECT_EQ(to_string(*e), name);
    std::vector<float> kl(log_prob.size()), dkl(log_prob.size());
    cpu::kl_penalty(kl.data(), dkl.data(), log_prob.data(), ref_log_prob.data(), kl.size(), *e);
    testing::expect_close(kl, floats(want["kl"]), "kl " + name);
    testing::expect_close(dkl, floats(want["dkl"]), "dkl " + name);
  }
}

TEST(KlPenalty, NamesAndAliases) {
  EXPECT_EQ(parse_kl_estimator("k1"), kl_estimator::k1);
  EXPECT_EQ(parse_kl_estimator("k2"), kl_estimator::k2);
  EXPECT_EQ(parse_kl_estimator("k3"), kl_estimator::k3);
  EXPECT_FALSE(parse_kl_estimator("full").has_value());
}

}  // namespace
}  // namespace troupe::kernels
