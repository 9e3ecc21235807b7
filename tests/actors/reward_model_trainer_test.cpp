// actors::trainer as a reward model (issue 19): a value-head GPT trained on preference pairs with
// the Bradley-Terry loss, each sequence's reward its value at its last token; the gradient against
// central differences, the step and the held-out figures, and two ranks against one.

#include <cmath>
#include <thread>

#include <gtest/gtest.h>

#include "actors/reward_objective.hpp"
#include "actors/trainer.hpp"
#include "kernels/preference_loss.hpp"
#include "runtime/comm/gloo_communicator.hpp"
#include "tests/actors/toy_pairs.hpp"
#include "tests/kernels/gradient_check.hpp"

namespace troupe::actors {
namespace {

const models::decoder_config scorer_model{24, 12, 2, 16, 2};

// toy_pairs(), each row scored at its last token: target 1 on the chosen row, 0 on the rejected.
token_batch scored_pairs(int pairs, int salt = 0) {
  token_batch b = testing::toy_pairs(scorer_model, pairs, salt);
  for (int row = 0; row < b.batch; ++row) {
    const int last = testing::toy_pair_last(row / 2, salt);
    b.targets[static_cast<size_t>(row) * b.ctx + last] = row % 2 == 0 ? 1 : 0;
  }
  return b;
}

trainer_options rm_options(int rows) {
  trainer_options o;
  o.global_batch = rows;
  o.threads = 1;
  o.lr = {3e-3f, 0, 1, 1.0f};
  o.seed = 4;
  return o;
}

TEST(RewardObjective, MalformedPairBatchesAreRefusedNamingTheRow) {
  token_batch b = scored_pairs(2);
  EXPECT_TRUE(validate_pairs(b).ok());
  token_batch odd = b;
  odd.batch = 3;
  EXPECT_NE(validate_pairs(odd).message().find("whole preference pairs"), std::string::npos);
  token_batch twice = b;
  twice.targets[2 * b.ctx + 1] = 1;  // row 2 scored at two positions
  EXPECT_NE(validate_pairs(twice).message().find("row 2 of a reward model's batch has 2 scored"),
            std::string::npos)
      << validate_pairs(twice);
  token_batch swapped = b;
  for (auto& t : swapped.targets)
    if (t >= 0) t = 1 - t;  // the rejected row first
  EXPECT_NE(validate_pairs(swapped).message().find("row 0"), std::string::npos);
  token_batch none = b;
  std::fill(none.targets.begin() + 3 * b.ctx, none.targets.begin() + 4 * b.ctx, -1);
  EXPECT_NE(validate_pairs(none).message().find("row 3 of a reward model's batch has 0 scored"),
            std::string::npos);
}

// The gradient of the mean Bradley-Terry loss through the scalar head and the trunk is the
// central difference of the loss the values give; every replica split (1, 2 and 3 threads over
// 3 pairs) sees whole pairs and gives the same gradient.
TEST(RewardObjective, TheBradleyTerryGradientIsTheFiniteDifference) {
  const int pairs = 3;
  token_batch b = scored_pairs(pairs, 1);
  b.margins = {0.5f, -0.25f, 1.0f};  // TRL's margins: -log sigmoid(r_c - r_r - m)
  models::decoder_layout layout(scorer_model, models::layer_range::all(scorer_model),
                                models::decoder_head::value);
  std::vector<float> params(layout.total());
  layout.initialize(params.data(), 6);
  for (auto& p : params)
    p *= 3;  // larger weights: gradients well above float noise
  const std::vector<int> scored = scored_positions(b);
  models::decoder_cpu_batch probe(layout, b.batch, 1);
  std::vector<float> values(static_cast<size_t>(b.batch) * b.ctx);
  const auto loss = [&] {
    probe.values(params.data(), b.batch, b.ctx, b.tokens.data(), values.data());
    double sum = 0;
    for (int row = 0; row < b.batch; row += 2) {
      const double d = values[row * b.ctx + scored[row]] -
                       values[(row + 1) * b.ctx + scored[row + 1]] - b.margins[row / 2];
      sum += std::log1p(std::exp(-d));  // -log sigmoid(d)
    }
    return sum / pairs;
  };
  std::vector<std::vector<float>> grads;
  for (int threads : {1, 2, 3}) {
    models::decoder_cpu_batch model(layout, b.batch, threads);
    reward_pair_pass pass(b, 1.0f / pairs);
    models::decoder_cpu_batch::value_objective objective = pass.objective(0);
    const auto seed = objective.seed;
    objective.seed = [&](int64_t first, int64_t count, const float* v, float* dv) {
      EXPECT_EQ(first % (2 * b.ctx), 0) << threads << ": a slice starts inside a pair";
      EXPECT_EQ(count % (2 * b.ctx), 0) << threads << ": a slice ends inside a pair";
      seed(first, count, v, dv);
    };
    grads.emplace_back(layout.total(), 0.0f);
    model.run(params.data(), grads.back().data(), b.batch, b.ctx, b.tokens.data(), objective);
    EXPECT_NEAR(pair_sums::of(b, pass.rewards()).loss / pairs, loss(), 1e-6) << threads;
  }
  for (size_t i = 0; i < grads[0].size(); ++i) {
    ASSERT_NEAR(grads[1][i], grads[0][i], 1e-6 + 1e-4 * std::abs(grads[0][i])) << i;
    ASSERT_NEAR(grads[2][i], grads[0][i], 1e-6 + 1e-4 * std::abs(grads[0][i])) << i;
  }
  testing::expect_gradient("Bradley-Terry", params, grads[0], loss, 3e-3f, 1e-4, 3e-2, 300);
  // The head itself (its weights and its bias), every entry.
  testing::expect_gradient_at_every("scalar head", params, grads[0], loss, layout.value_w(),
                                    layout.value_b() + 1, 3e-3f, 1e-4, 3e-2);
}

// A step reports the mean Bradley-Terry loss of its pairs; steps raise the held-out accuracy
// and the reward gap; passes of one pair give the same step as one pass.
TEST(RewardModelTrainer, StepsRankTheChosenResponsesAbove) {
  const models::decoder_layout layout(scorer_model, models::layer_range::all(scorer_model),
                                      models::decoder_head::value);
  auto t = *trainer::create(layout, rm_options(8), nullptr);
  const token_batch train = scored_pairs(4);
  const std::vector<token_batch> held = {scored_pairs(4, 2), scored_pairs(2, 3)};
  const pair_sums before = *t->evaluate_pairs(held);
  EXPECT_EQ(before.pairs, 6);
  EXPECT_NEAR(before.loss / before.pairs, std::log(2.0), 0.2) << "rewards start near equal";
  auto first = t->step(train);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->step, 1);
  EXPECT_NEAR(first->loss, std::log(2.0), 0.2);
  trainer_options micro = rm_options(8);
  micro.micro_batch = 3;  // room for one pair a pass
  auto in_passes = *trainer::create(layout, micro, nullptr);
  auto same = in_passes->step(train);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_NEAR(same->loss, first->loss, 1e-6);
  EXPECT_NEAR(same->grad_norm, first->grad_norm, 1e-5 * first->grad_norm);
  for (int s = 0; s < 30; ++s)
    ASSERT_TRUE(t->step(train).ok());
  const pair_sums after = *t->evaluate_pairs(held);
  EXPECT_EQ(after.correct, 6) << "every held-out pair ranked right";
  EXPECT_GT(after.means().margin, before.means().margin + 0.5);
  EXPECT_LT(after.loss, before.loss);
}

TEST(RewardModelTrainer, ALanguageModelOrAPassWithoutRoomForAPairIsRefused) {
  const models::decoder_layout value(scorer_model, models::layer_range::all(scorer_model),
                                     models::decoder_head::value);
  trainer_options one_row = rm_options(8);
  one_row.micro_batch = 1;
  auto t = *trainer::create(value, one_row, nullptr);
  auto refused = t->step(scored_pairs(4));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("at least one pair"), std::string::npos)
      << refused.status();
  const models::decoder_layout lm(scorer_model, models::layer_range::all(scorer_model));
  auto policy = *trainer::create(lm, rm_options(8), nullptr);
  EXPECT_FALSE(policy->evaluate_pairs({scored_pairs(2)}).ok());
  EXPECT_EQ(t->steps(), 0);
}

TEST(RewardModelTrainer, TwoRanksMatchOne) {
  const models::decoder_layout layout(scorer_model, models::layer_range::all(scorer_model),
                                      models::decoder_head::value);
  auto one = *trainer::create(layout, rm_options(8), nullptr);
  const token_batch all = scored_pairs(4);
  std::vector<step_report> single;
  for (int s = 0; s < 3; ++s)
    single.push_back(*one->step(all));
  const pair_sums held_one = *one->evaluate_pairs({scored_pairs(2, 2), scored_pairs(2, 3)});
  comm::memory_store store;
  std::vector<std::vector<step_report>> reports(2);
  std::vector<pair_sums> held(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      auto group = comm::make_gloo_communicator(store, {.name = "rm", .rank = r, .size = 2});
      ASSERT_TRUE(group.ok()) << group.status();
      auto t = *trainer::create(layout, rm_options(8), group->get());
      token_batch mine = all;  // rank r: pairs 2r and 2r + 1
      mine.batch = 4;
      const auto begin = static_cast<ptrdiff_t>(4 * r) * all.ctx, end = begin + 4 * all.ctx;
      mine.tokens.assign(all.tokens.begin() + begin, all.tokens.begin() + end);
      mine.targets.assign(all.targets.begin() + begin, all.targets.begin() + end);
      for (int s = 0; s < 3; ++s)
        reports[r].push_back(*t->step(mine));
      held[r] = *t->evaluate_pairs({scored_pairs(2, 2), scored_pairs(2, 3)});
    });
  }
  for (auto& t : ranks)
    t.join();
  ASSERT_EQ(reports[0].size(), 3u);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(reports[1][s].loss, reports[0][s].loss) << "ranks disagree at step " << s;
    EXPECT_NEAR(reports[0][s].loss, single[s].loss, 1e-5) << s;
  }
  EXPECT_EQ(held[0].correct, held[1].correct);
  EXPECT_EQ(held[0].pairs, held_one.pairs);
  EXPECT_NEAR(held[0].chosen - held[0].rejected, held_one.chosen - held_one.rejected, 1e-4);
}

}  // namespace
}  // namespace troupe::actors
