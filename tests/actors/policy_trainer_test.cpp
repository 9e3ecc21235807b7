// actors::trainer as the RL policy (issue 16): the PPO objective as the trainer's parameter, on
// one rank and split over two, and the forward-only log-probs an RL step starts from; and as the
// critic: the same trainer on a value-head model with the clipped value loss.

#include <cmath>
#include <thread>

#include <gtest/gtest.h>

#include "actors/trainer.hpp"
#include "kernels/loss_aggregation.hpp"
#include "runtime/comm/gloo_communicator.hpp"

namespace troupe::actors {
namespace {

const models::decoder_config policy_model{24, 16, 2, 16, 2};

// `rows` sequences of 16: a prompt of 3 + (row % 3) tokens, then a response that ends 1 + row % 4
// before the context (right padding); targets only on the response.
actor::rl_batch make_batch(int rows) {
  actor::rl_batch b;
  b.batch = rows;
  b.ctx = policy_model.ctx;
  const size_t n = static_cast<size_t>(rows) * policy_model.ctx;
  b.tokens.resize(n);
  b.targets.assign(n, -1);
  std::vector<float> mask(n, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const int prompt = 3 + r % 3, end = policy_model.ctx - 1 - r % 4;
    for (int t = 0; t < policy_model.ctx; ++t) {
      const size_t i = static_cast<size_t>(r) * policy_model.ctx + t;
      b.tokens[i] = (r * 5 + t * 7 + 1) % policy_model.vocab;
      if (t + 1 >= prompt && t + 1 < end) {
        b.targets[i] = (r * 5 + (t + 1) * 7 + 1) % policy_model.vocab;
        mask[i] = 1.0f;
      }
    }
  }
  b.weights.resize(n);
  kernels::cpu::loss_agg_weights(b.weights.data(), mask.data(), rows, policy_model.ctx,
                                 kernels::loss_agg_mode::token_mean);
  b.advantages.assign(n, 0.0f);
  b.old_log_probs.assign(n, 0.0f);
  b.ref_log_probs.assign(n, 0.0f);
  return b;
}

// Rows [first, first + count) of `b`, weights unchanged (they are the whole batch's).
actor::rl_batch rows_of(const actor::rl_batch& b, int first, int count) {
  actor::rl_batch part;
  part.batch = count;
  part.ctx = b.ctx;
  const auto begin = static_cast<ptrdiff_t>(first) * b.ctx, end = begin + ptrdiff_t{count} * b.ctx;
  auto slice = [&](const auto& v) {  // an empty field stays empty
    return v.empty() ? v : std::decay_t<decltype(v)>(v.begin() + begin, v.begin() + end);
  };
  part.tokens = slice(b.tokens);
  part.targets = slice(b.targets);
  part.old_log_probs = slice(b.old_log_probs);
  part.ref_log_probs = slice(b.ref_log_probs);
  part.advantages = slice(b.advantages);
  part.values = slice(b.values);
  part.returns = slice(b.returns);
  part.weights = slice(b.weights);
  return part;
}

trainer_options policy_options() {
  trainer_options o;
  o.global_batch = 8;
  o.threads = 1;
  o.lr = {1e-2f, 0, 1, 1.0f};  // constant, as RL runs use
  o.seed = 3;
  return o;
}

class PolicyTrainerTest : public ::testing::Test {
 protected:
  PolicyTrainerTest() : layout_(policy_model, models::layer_range::all(policy_model)) {}

  // The sum of the log-probs of each row's response under `t`.
  std::vector<double> response_log_probs(trainer& t, const actor::rl_batch& b, float temperature) {
    const std::vector<float> lp = *t.log_probs(b, temperature);
    std::vector<double> sums(b.batch, 0.0);
    for (size_t i = 0; i < lp.size(); ++i)
      sums[i / b.ctx] += lp[i];
    return sums;
  }

  models::decoder_layout layout_;
};

// On-policy, the first epoch's log-probs are the old ones bit for bit (the same forward), so
// nothing is clipped and the ratio's KL is 0; a positive advantage raises its response's
// log-prob and a negative one lowers it.
TEST_F(PolicyTrainerTest, AdvantagesMoveTheirResponsesLogProbs) {
  auto t = *trainer::create(layout_, policy_options(), nullptr);
  const policy_objective objective{.temperature = 0.8f};
  actor::rl_batch b = make_batch(8);
  b.old_log_probs = *t->log_probs(b, objective.temperature);
  for (size_t i = 0; i < b.advantages.size(); ++i)
    b.advantages[i] = b.targets[i] < 0 ? 0.0f : (i / b.ctx % 2 == 0 ? 1.0f : -1.0f);
  const std::vector<double> before = response_log_probs(*t, b, objective.temperature);

  auto report = t->step(b, objective);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->step, 1);
  EXPECT_EQ(report->ppo_kl, 0.0);
  EXPECT_EQ(report->pg_clipfrac, 0.0);
  EXPECT_GT(report->entropy, 0.0);
  EXPECT_GT(report->grad_norm, 0.0);
  // At ratio 1 the loss is -sum(w A): the rows' advantages nearly cancel, not exactly (rows differ
  // in length).
  double want = 0;
  for (size_t i = 0; i < b.weights.size(); ++i)
    want -= double{b.weights[i]} * b.advantages[i];
  EXPECT_NEAR(report->pg_loss, want, 1e-6);

  const std::vector<double> after = response_log_probs(*t, b, objective.temperature);
  for (int r = 0; r < b.batch; ++r) {
    if (r % 2 == 0) {
      EXPECT_GT(after[r], before[r]) << "row " << r << " had advantage +1";
    } else {
      EXPECT_LT(after[r], before[r]) << "row " << r << " had advantage -1";
    }
  }
  // The second epoch on the same batch is off-policy now: the ratio moved.
  report = t->step(b, objective);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_NE(report->ppo_kl, 0.0);
}

// With only the KL loss (no advantage), steps pull the policy towards the reference.
TEST_F(PolicyTrainerTest, TheKlLossPullsTowardsTheReference) {
  auto reference = *trainer::create(
      layout_,
      [] {
        trainer_options o = policy_options();
        o.seed = 4;  // another initialisation: a different distribution
        return o;
      }(),
      nullptr);
  trainer_options slow = policy_options();
  slow.lr.peak = 1e-3f;  // Adam moves every weight by about lr: small steps on a small KL
  auto t = *trainer::create(layout_, slow, nullptr);
  const policy_objective objective{.use_kl_loss = true, .kl_loss_coef = 1.0f};
  actor::rl_batch b = make_batch(8);
  b.old_log_probs = *t->log_probs(b, 1.0f);
  b.ref_log_probs = *reference->log_probs(b, 1.0f);
  std::vector<double> kl;
  for (int s = 0; s < 6; ++s) {
    auto report = t->step(b, objective);
    ASSERT_TRUE(report.ok()) << report.status();
    kl.push_back(report->kl_loss);
    EXPECT_EQ(report->pg_loss, 0.0) << "no advantage, no policy-gradient loss";
  }
  EXPECT_GT(kl.front(), 0.0);
  for (size_t s = 1; s < kl.size(); ++s)
    EXPECT_LT(kl[s], kl[s - 1]) << "step " << s;
}

// Two ranks, each with half the rows and the whole batch's weights, make the one-rank step: the
// same metrics and parameters (up to the order of the gradient sum).
TEST_F(PolicyTrainerTest, TwoRanksMatchOneOnTheSameMiniBatch) {
  const policy_objective objective{.temperature = 0.9f, .entropy_coeff = 0.01f};
  actor::rl_batch b = make_batch(8);
  {
    auto t = *trainer::create(layout_, policy_options(), nullptr);
    b.old_log_probs = *t->log_probs(b, objective.temperature);
  }
  for (size_t i = 0; i < b.advantages.size(); ++i)
    b.advantages[i] = b.targets[i] < 0 ? 0.0f : std::sin(0.37f * static_cast<float>(i));
  auto one = *trainer::create(layout_, policy_options(), nullptr);
  std::vector<actor::rl_step_report> single;
  for (int s = 0; s < 3; ++s)
    single.push_back(*one->step(b, objective));

  comm::memory_store store;
  std::vector<std::vector<actor::rl_step_report>> reports(2);
  std::vector<float> params;
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      auto group = comm::make_gloo_communicator(store, {.name = "policy", .rank = r, .size = 2});
      ASSERT_TRUE(group.ok()) << group.status();
      auto t = *trainer::create(layout_, policy_options(), group->get());
      const actor::rl_batch mine = rows_of(b, 4 * r, 4);
      for (int s = 0; s < 3; ++s) {
        auto report = t->step(mine, objective);
        ASSERT_TRUE(report.ok()) << report.status();
        reports[r].push_back(*report);
      }
      if (r == 0) params.assign(t->params(), t->params() + layout_.total());
    });
  }
  for (auto& t : ranks)
    t.join();
  ASSERT_EQ(reports[0].size(), 3u);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(reports[1][s].pg_loss, reports[0][s].pg_loss) << "ranks disagree at step " << s;
    EXPECT_NEAR(reports[0][s].pg_loss, single[s].pg_loss, 1e-5) << "step " << s;
    EXPECT_NEAR(reports[0][s].entropy, single[s].entropy, 1e-4) << "step " << s;
    EXPECT_NEAR(reports[0][s].ppo_kl, single[s].ppo_kl, 1e-5) << "step " << s;
    EXPECT_NEAR(reports[0][s].pg_clipfrac, single[s].pg_clipfrac, 1e-6) << "step " << s;
    EXPECT_NEAR(reports[0][s].grad_norm, single[s].grad_norm, 1e-4) << "step " << s;
  }
  double max_diff = 0;
  for (size_t i = 0; i < params.size(); ++i)
    max_diff = std::max<double>(max_diff, std::abs(params[i] - one->params()[i]));
  EXPECT_LT(max_diff, 1e-4);
}

TEST_F(PolicyTrainerTest, MalformedBatchesAreRefusedNamingTheField) {
  auto t = *trainer::create(layout_, policy_options(), nullptr);
  const auto error = [&](const actor::rl_batch& b, const policy_objective& o) {
    auto report = t->step(b, o);
    EXPECT_FALSE(report.ok());
    return std::string(report.status().message());
  };
  actor::rl_batch b = make_batch(2);
  b.advantages.pop_back();
  EXPECT_NE(
      error(b, policy_objective{}).find("advantages has 31 entries; batch 2 x ctx 16 needs 32"),
      std::string::npos);
  b = make_batch(2);
  b.ref_log_probs.clear();
  EXPECT_TRUE(t->step(b, policy_objective{}).ok()) << "the reference is read only with the KL loss";
  EXPECT_NE(error(b, policy_objective{.use_kl_loss = true}).find("ref_log_probs (use_kl_loss)"),
            std::string::npos);
  b = make_batch(2);
  b.weights[0] = 0.5f;  // position 0 is prompt
  EXPECT_NE(error(b, policy_objective{}).find("position 0 has weight 0.5 but no target"),
            std::string::npos);
  EXPECT_EQ(t->steps(), 1) << "a refused batch takes no step";
}

// The critic: values move towards the returns, the report carries veRL's critic metrics, and two
// ranks make the one-rank step.
class CriticTrainerTest : public ::testing::Test {
 protected:
  CriticTrainerTest()
      : layout_(policy_model, models::layer_range::all(policy_model), models::decoder_head::value) {
  }

  // make_batch's rows with the critic's values (its own, before the update) and returns.
  actor::rl_batch critic_batch(trainer& t) {
    actor::rl_batch b = make_batch(8);
    b.values = *t.values(b);
    b.returns.resize(b.values.size());
    for (size_t i = 0; i < b.returns.size(); ++i)
      b.returns[i] = b.targets[i] < 0 ? 0.0f : (i / b.ctx % 2 == 0 ? 1.0f : -0.5f);
    return b;
  }
  // The mean squared error of the values against the returns over the response tokens.
  static double error(const std::vector<float>& values, const actor::rl_batch& b) {
    double sum = 0, n = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      if (b.targets[i] < 0) continue;
      sum += (values[i] - b.returns[i]) * (values[i] - b.returns[i]);
      ++n;
    }
    return sum / n;
  }

  models::decoder_layout layout_;
};

TEST_F(CriticTrainerTest, ValuesMoveTowardsTheReturns) {
  trainer_options slow = policy_options();
  slow.lr.peak = 1e-3f;  // Adam moves every weight by about lr: no overshoot
  auto t = *trainer::create(layout_, slow, nullptr);
  actor::rl_batch b = critic_batch(*t);
  const value_objective objective{.cliprange_value = 100.0f};  // no clipping
  double before = error(b.values, b);
  // At the values the batch holds, the loss is 0.5 * the weighted squared error.
  double want = 0;
  for (size_t i = 0; i < b.values.size(); ++i)
    want += 0.5 * b.weights[i] * (b.values[i] - b.returns[i]) * (b.values[i] - b.returns[i]);
  auto report = t->step(b, objective);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->step, 1);
  EXPECT_NEAR(report->vf_loss, want, 1e-6);
  EXPECT_EQ(report->vf_clipfrac, 0.0);
  EXPECT_GT(report->grad_norm, 0.0);
  double vpred = 0, tokens = 0;
  for (size_t i = 0; i < b.values.size(); ++i) {
    if (b.targets[i] < 0) continue;
    vpred += b.values[i], ++tokens;
  }
  EXPECT_NEAR(report->vpred_mean, vpred / tokens, 1e-6);
  for (int s = 0; s < 5; ++s) {
    ASSERT_TRUE(t->step(b, objective).ok());
    const double now = error(*t->values(b), b);
    EXPECT_LT(now, before) << "step " << s + 2;
    before = now;
  }
  // With a tight clip range the values soon leave the old values' band: clipped tokens.
  auto clipped = t->step(b, value_objective{.cliprange_value = 1e-4f});
  ASSERT_TRUE(clipped.ok());
  EXPECT_GT(clipped->vf_clipfrac, 0.5);
}

TEST_F(CriticTrainerTest, TheCriticRefusesThePolicysRequestsAndMalformedBatches) {
  auto t = *trainer::create(layout_, policy_options(), nullptr);
  actor::rl_batch b = critic_batch(*t);
  EXPECT_FALSE(t->log_probs(b, 1.0f).ok());
  EXPECT_FALSE(t->step(b, policy_objective{}).ok());
  b.returns.pop_back();
  auto report = t->step(b, value_objective{});
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("returns has 127 entries; batch 8 x ctx 16 needs 128"),
            std::string::npos)
      << report.status();
  const models::decoder_layout lm_layout(policy_model, models::layer_range::all(policy_model));
  auto policy = *trainer::create(lm_layout, policy_options(), nullptr);
  EXPECT_FALSE(policy->values(b).ok());
  EXPECT_FALSE(policy->step(critic_batch(*t), value_objective{}).ok());
  EXPECT_EQ(t->steps(), 0);
}

TEST_F(CriticTrainerTest, TwoRanksMatchOne) {
  auto one = *trainer::create(layout_, policy_options(), nullptr);
  const actor::rl_batch b = critic_batch(*one);
  const value_objective objective{.cliprange_value = 0.05f};
  std::vector<actor::rl_step_report> single;
  for (int s = 0; s < 3; ++s)
    single.push_back(*one->step(b, objective));
  comm::memory_store store;
  std::vector<std::vector<actor::rl_step_report>> reports(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      auto group = comm::make_gloo_communicator(store, {.name = "critic", .rank = r, .size = 2});
      ASSERT_TRUE(group.ok()) << group.status();
      auto t = *trainer::create(layout_, policy_options(), group->get());
      const actor::rl_batch mine = rows_of(b, 4 * r, 4);
      for (int s = 0; s < 3; ++s)
        reports[r].push_back(*t->step(mine, objective));
    });
  }
  for (auto& t : ranks)
    t.join();
  ASSERT_EQ(reports[0].size(), 3u);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(reports[1][s].vf_loss, reports[0][s].vf_loss) << "ranks disagree at step " << s;
    EXPECT_NEAR(reports[0][s].vf_loss, single[s].vf_loss, 1e-6) << "step " << s;
    EXPECT_NEAR(reports[0][s].vf_clipfrac, single[s].vf_clipfrac, 1e-6) << "step " << s;
    EXPECT_NEAR(reports[0][s].vpred_mean, single[s].vpred_mean, 1e-5) << "step " << s;
    EXPECT_NEAR(reports[0][s].grad_norm, single[s].grad_norm, 1e-4) << "step " << s;
  }
}

}  // namespace
}  // namespace troupe::actors
