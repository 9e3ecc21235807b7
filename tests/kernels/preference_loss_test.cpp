#include "kernels/preference_loss.hpp"

#include <gtest/gtest.h>

#include "tests/support/rl_golden.hpp"

namespace troupe::kernels {
namespace {

using testing::golden_fixture;

// TRL's DPO losses (sigmoid, cDPO's label smoothing, hinge, IPO with its per-token means, RPO's
// added NLL of the chosen response per token), their
// implicit rewards and their gradients, against PyTorch's autograd on the same numbers
// (tests/kernels/make_preference_golden.py), pair by pair.
TEST(PreferenceLoss, DpoFamilyMatchesTrlInPyTorch) {
  const auto& g = golden_fixture("preference_golden");
  struct variant {
    const char* name;
    preference_options options;
  };
  const double beta = g["beta"];
  for (const variant& v : {variant{"sigmoid", {preference_loss::sigmoid, beta, 0.0}},
                           variant{"cdpo", {preference_loss::sigmoid, beta, 0.2}},
                           variant{"hinge", {preference_loss::hinge, beta, 0.0}},
                           variant{"ipo", {preference_loss::ipo, beta, 0.0}},
                           variant{"rpo", {preference_loss::sigmoid, beta, 0.0, 0.5}}}) {
    const auto& want = g["cases"][v.name];
    for (size_t i = 0; i < want["loss"].size(); ++i) {
      const preference_pair p{g["policy_chosen"][i],
                              g["policy_rejected"][i],
                              g["reference_chosen"][i],
                              g["reference_rejected"][i],
                              g["chosen_tokens"][i].get<int64_t>(),
                              g["rejected_tokens"][i].get<int64_t>()};
      const preference_result r = preference_loss_of(p, v.options);
      const std::string at = std::string(v.name) + " pair " + std::to_string(i);
      EXPECT_NEAR(r.loss, want["loss"][i].get<double>(), 1e-12) << at;
      EXPECT_NEAR(r.dchosen, want["dchosen"][i].get<double>(), 1e-12) << at;
      EXPECT_NEAR(r.drejected, want["drejected"][i].get<double>(), 1e-12) << at;
      EXPECT_NEAR(r.reward_chosen, want["reward_chosen"][i].get<double>(), 1e-12) << at;
      EXPECT_NEAR(r.reward_rejected, want["reward_rejected"][i].get<double>(), 1e-12) << at;
    }
  }
  EXPECT_EQ(g["cases"]["hinge"]["loss"][2], 0.0) << "the fixture covers a satisfied margin";
}

TEST(PreferenceLoss, BradleyTerryWithAMarginMatchesTrlInPyTorch) {
  const auto& g = golden_fixture("preference_golden")["bradley_terry"];
  for (size_t i = 0; i < g["loss"].size(); ++i) {
    const bradley_terry_result r =
        bradley_terry_loss(g["chosen"][i], g["rejected"][i], g["margin"][i]);
    EXPECT_NEAR(r.loss, g["loss"][i].get<double>(), 1e-12) << i;
    EXPECT_NEAR(r.dchosen, g["dchosen"][i].get<double>(), 1e-12) << i;
    EXPECT_NEAR(r.drejected, g["drejected"][i].get<double>(), 1e-12) << i;
  }
  // No overflow far from the margin: the loss of a hopeless pair grows linearly.
  EXPECT_NEAR(bradley_terry_loss(-400, 400).loss, 800, 1e-9);
  EXPECT_EQ(bradley_terry_loss(400, -400).loss, 0.0);
}

TEST(PreferenceLoss, ParsesTrlsLossTypeNames) {
  EXPECT_EQ(parse_preference_loss("sigmoid"), preference_loss::sigmoid);
  EXPECT_EQ(parse_preference_loss("hinge"), preference_loss::hinge);
  EXPECT_EQ(parse_preference_loss("ipo"), preference_loss::ipo);
  EXPECT_FALSE(parse_preference_loss("dpo").has_value());
}

}  // namespace
}  // namespace troupe::kernels
