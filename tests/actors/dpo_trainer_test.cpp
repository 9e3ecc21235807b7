// actors::trainer as a DPO policy (issue 19): a language model trained on preference pairs with
// TRL's DPO losses on the responses' summed log-probs against cached reference log-probs; the
// gradient through the GPT against central differences for each loss type, pairs kept whole in
// every replica split, the step and its TRL figures, and the held-out figures.

#include <cmath>

#include <gtest/gtest.h>

#include "actors/dpo_objective.hpp"
#include "actors/trainer.hpp"
#include "kernels/preference_loss.hpp"
#include "tests/actors/toy_pairs.hpp"
#include "tests/kernels/gradient_check.hpp"

namespace troupe::actors {
namespace {

const models::decoder_config dpo_model{24, 12, 2, 16, 2};

// toy_pairs(), each row trained on its response: each position from the prompt's last predicts
// the next token. Each row's reference log-probability is a fixed number.
token_batch dpo_pairs(int pairs, int salt = 0) {
  token_batch b = testing::toy_pairs(dpo_model, pairs, salt);
  for (int row = 0; row < b.batch; ++row) {
    const int32_t* tokens = b.tokens.data() + static_cast<size_t>(row) * b.ctx;
    for (int t = 2; t < testing::toy_pair_last(row / 2, salt); ++t)
      b.targets[static_cast<size_t>(row) * b.ctx + t] = tokens[t + 1];
    b.reference_logps.push_back(-20.0f - static_cast<float>(row % 3));
  }
  return b;
}

trainer_options dpo_options(int rows, kernels::preference_loss type = {}) {
  trainer_options o;
  o.global_batch = rows;
  o.threads = 1;
  o.lr = {3e-3f, 0, 1, 1.0f};
  o.seed = 4;
  o.preference = kernels::preference_options{.type = type, .beta = 0.1};
  return o;
}

TEST(DpoObjective, MalformedPairBatchesAreRefusedNamingTheRow) {
  const token_batch b = dpo_pairs(2);
  EXPECT_TRUE(validate_dpo_pairs(b).ok()) << validate_dpo_pairs(b);
  token_batch odd = b;
  odd.batch = 3;
  EXPECT_NE(validate_dpo_pairs(odd).message().find("whole preference pairs"), std::string::npos);
  token_batch no_reference = b;
  no_reference.reference_logps.pop_back();
  EXPECT_NE(validate_dpo_pairs(no_reference).message().find("3 reference log-probabilities"),
            std::string::npos)
      << validate_dpo_pairs(no_reference);
  token_batch infinite = b;
  infinite.reference_logps[1] = -INFINITY;
  EXPECT_NE(validate_dpo_pairs(infinite).message().find("row 1"), std::string::npos);
  token_batch none = b;
  std::fill(none.targets.begin() + 2 * b.ctx, none.targets.begin() + 3 * b.ctx, -1);
  EXPECT_NE(validate_dpo_pairs(none).message().find("row 2 of a DPO batch has no response"),
            std::string::npos)
      << validate_dpo_pairs(none);
}

// For each of TRL's loss types, the gradient of the mean DPO loss through the GPT is the
// central difference of the loss the log-probs give; every replica split (1, 2 and 3 threads
// over 3 pairs) sees whole pairs and gives the same gradient.
TEST(DpoObjective, TheDpoGradientIsTheFiniteDifferenceForEachLoss) {
  const int pairs = 3;
  const token_batch b = dpo_pairs(pairs, 1);
  const models::decoder_layout layout(dpo_model, models::layer_range::all(dpo_model));
  std::vector<float> params(layout.total());
  layout.initialize(params.data(), 6);
  for (auto& p : params)
    p *= 3;  // larger weights: gradients well above float noise
  models::decoder_cpu_batch probe(layout, b.batch, 1);
  std::vector<float> logps(static_cast<size_t>(b.batch) * b.ctx);
  for (const kernels::preference_options o :
       {kernels::preference_options{
            .type = kernels::preference_loss::sigmoid, .beta = 0.5, .label_smoothing = 0.2},
        kernels::preference_options{.type = kernels::preference_loss::hinge, .beta = 0.05},
        kernels::preference_options{.type = kernels::preference_loss::ipo, .beta = 0.5}}) {
    const auto loss = [&] {
      probe.log_probs(params.data(), b.batch, b.ctx, b.tokens.data(), b.targets.data(), 1.0f,
                      logps.data());
      const row_logps rows = sum_row_logps(b.targets.data(), logps.data(), b.batch, b.ctx);
      double sum = 0;
      for (int row = 0; row < b.batch; row += 2) {
        sum += kernels::preference_loss_of(
                   {rows.sums[row], rows.sums[row + 1], b.reference_logps[row],
                    b.reference_logps[row + 1], rows.tokens[row], rows.tokens[row + 1]},
                   o)
                   .loss;
      }
      return sum / pairs;
    };
    std::vector<std::vector<float>> grads;
    for (int threads : {1, 2, 3}) {
      models::decoder_cpu_batch model(layout, b.batch, threads);
      dpo_pair_pass pass(b, o, 1.0f / pairs);
      models::decoder_cpu_batch::token_objective objective = pass.objective(0);
      const auto seed = objective.seed;
      objective.seed = [&](int64_t first, int64_t count, const float* l, const float* e, float* dl,
                           float* de) {
        EXPECT_EQ(first % (2 * b.ctx), 0) << threads << ": a slice starts inside a pair";
        EXPECT_EQ(count % (2 * b.ctx), 0) << threads << ": a slice ends inside a pair";
        seed(first, count, l, e, dl, de);
      };
      grads.emplace_back(layout.total(), 0.0f);
      model.run(params.data(), grads.back().data(), b.batch, b.ctx, b.tokens.data(),
                b.targets.data(), objective);
      EXPECT_NEAR(pass.sums().loss / pairs, loss(), 1e-5) << threads;
      EXPECT_EQ(pass.sums().pairs, pairs);
    }
    for (size_t i = 0; i < grads[0].size(); ++i) {
      ASSERT_NEAR(grads[1][i], grads[0][i], 1e-6 + 1e-4 * std::abs(grads[0][i])) << i;
      ASSERT_NEAR(grads[2][i], grads[0][i], 1e-6 + 1e-4 * std::abs(grads[0][i])) << i;
    }
    testing::expect_gradient("DPO", params, grads[0], loss, 3e-3f, 1e-4, 3e-2, 300);
  }
}

// Steps on the pairs raise the chosen responses' log-probs against the rejected ones': the
// held-out implicit reward margin and accuracy rise, and a step reports TRL's figures over the
// whole batch; passes of one pair give the same step as one pass.
TEST(DpoTrainer, StepsPreferTheChosenResponses) {
  const models::decoder_layout layout(dpo_model, models::layer_range::all(dpo_model));
  auto t = *trainer::create(layout, dpo_options(8), nullptr);
  token_batch train = dpo_pairs(4);
  std::vector<token_batch> held = {dpo_pairs(4, 2), dpo_pairs(2, 3)};
  // The reference: this trainer's own log-probs before any step (TRL's reference is the initial
  // policy), so that the first step's logits are 0.
  models::decoder_cpu_batch forward(layout, 8, 1);
  for (token_batch* b : {&train, &held[0], &held[1]}) {
    std::vector<float> logps(b->tokens.size());
    forward.log_probs(t->params(), b->batch, b->ctx, b->tokens.data(), b->targets.data(), 1.0f,
                      logps.data());
    const row_logps rows = sum_row_logps(b->targets.data(), logps.data(), b->batch, b->ctx);
    b->reference_logps.assign(rows.sums.begin(), rows.sums.end());
  }
  const pair_sums before = *t->evaluate_pairs(held);
  EXPECT_EQ(before.pairs, 6);
  EXPECT_NEAR(before.loss / before.pairs, std::log(2.0), 1e-4) << "the policy is the reference";
  auto first = t->step(train);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->step, 1);
  EXPECT_NEAR(first->loss, std::log(2.0), 1e-4);
  EXPECT_EQ(first->pairs.count, 4);
  EXPECT_NEAR(first->pairs.margin, 0.0, 1e-4);
  EXPECT_LT(first->pairs.logp_chosen, 0.0);
  trainer_options micro = dpo_options(8);
  micro.micro_batch = 3;  // room for one pair a pass
  auto in_passes = *trainer::create(layout, micro, nullptr);
  auto same = in_passes->step(train);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_NEAR(same->loss, first->loss, 1e-6);
  EXPECT_NEAR(same->grad_norm, first->grad_norm, 1e-5 * first->grad_norm);
  for (int s = 0; s < 30; ++s)
    ASSERT_TRUE(t->step(train).ok());
  const pair_sums after = *t->evaluate_pairs(held);
  const actor::pair_metrics m = after.means();
  EXPECT_EQ(after.correct, 6) << "every held-out pair ranked right";
  EXPECT_GT(m.margin, before.means().margin + 0.5);
  EXPECT_NEAR(m.margin, m.reward_chosen - m.reward_rejected, 1e-6);
  EXPECT_LT(after.loss, before.loss);
  const actor::eval_report report = *t->held_out_report(held);
  EXPECT_EQ(report.pairs.count, 6);
  EXPECT_NEAR(report.loss, after.loss / 6, 1e-9);
}

TEST(DpoTrainer, APassWithoutRoomForAPairOrAMissingReferenceIsRefused) {
  const models::decoder_layout lm(dpo_model, models::layer_range::all(dpo_model));
  trainer_options one_row = dpo_options(8);
  one_row.micro_batch = 1;
  auto t = *trainer::create(lm, one_row, nullptr);
  auto refused = t->step(dpo_pairs(4));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("DPO's pass holds whole preference pairs"),
            std::string::npos)
      << refused.status();
  auto policy = *trainer::create(lm, dpo_options(8), nullptr);
  token_batch bare = dpo_pairs(4);
  bare.reference_logps.clear();
  EXPECT_FALSE(policy->step(bare).ok());
  EXPECT_EQ(policy->steps(), 0);
}

}  // namespace
}  // namespace troupe::actors
