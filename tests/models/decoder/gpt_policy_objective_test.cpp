// The RL policy objective through the GPT (issue 16): PPO's clipped loss on the response tokens,
// an entropy bonus and a k3 KL loss to a reference, on softmax(logits / temperature), seeded per
// token into the model's backward.

#include <cmath>

#include <gtest/gtest.h>

#include "kernels/kl_penalty.hpp"
#include "kernels/loss_aggregation.hpp"
#include "kernels/policy_loss.hpp"
#include "models/decoder/decoder_cpu_batch.hpp"
#include "models/decoder/decoder_cpu_stage.hpp"
#include "tests/kernels/gradient_check.hpp"

namespace troupe::models {
namespace {

TEST(GptPolicyObjective, GradientThroughTheModelIsTheFiniteDifference) {
  const decoder_config config{20, 8, 2, 8, 2};
  const int batch = 2, seq = 8, n = batch * seq;
  const float temperature = 0.7f, entropy_coeff = 0.05f, kl_coef = 0.3f;
  decoder_layout layout(config, layer_range::all(config));
  std::vector<float> params(layout.total()), grads(layout.total(), 0.0f);
  layout.initialize(params.data(), 5);
  for (auto& p : params)
    p *= 3;  // larger weights: gradients well above float noise
  // Prompts of 3 and 4 tokens, then the responses: the loss covers the responses only.
  std::vector<int32_t> tokens(n), targets(n);
  std::vector<float> mask(n);
  for (int i = 0; i < n; ++i) {
    const int t = i % seq;
    tokens[i] = (i * 7 + 3) % 20;
    const bool response = t + 1 >= (i < seq ? 3 : 4) && t + 1 < seq;
    targets[i] = response ? (i * 7 + 10) % 20 : -1;
    mask[i] = response ? 1.0f : 0.0f;
  }
  decoder_cpu_stage stage(layout, batch, nullptr);

  std::vector<float> log_prob(n), entropy(n), weights(n);
  kernels::cpu::loss_agg_weights(weights.data(), mask.data(), batch, seq,
                                 kernels::loss_agg_mode::token_mean);
  const auto forward = [&] {
    stage.forward(params.data(), batch, seq, tokens.data(), nullptr, targets.data(), temperature);
    for (int i = 0; i < n; ++i)
      log_prob[i] = -stage.token_losses()[i];
    stage.entropies(entropy.data());
  };
  // Old and reference log-probs near the model's, so that no ratio sits at a clip boundary.
  forward();
  const auto noise = testing::random_values(n, 11, -0.1f, 0.1f);
  const auto far = testing::random_values(n, 12, -1.0f, 1.0f);
  const auto advantages = testing::random_values(n, 13, -1.0f, 1.0f);
  std::vector<float> old_log_prob(n), ref_log_prob(n);
  for (int i = 0; i < n; ++i) {
    old_log_prob[i] = log_prob[i] + noise[i];
    ref_log_prob[i] = log_prob[i] + far[i];
  }

  std::vector<float> dlog_prob(n), kl(n), dkl(n);
  const auto objective = [&] {
    forward();
    const auto pg =
        kernels::cpu::ppo_policy_loss(dlog_prob.data(), log_prob.data(), old_log_prob.data(),
                                      advantages.data(), mask.data(), weights.data(), n, {});
    kernels::cpu::kl_penalty(kl.data(), dkl.data(), log_prob.data(), ref_log_prob.data(), n,
                             kernels::kl_estimator::k3);
    double j = pg.pg_loss;
    for (int i = 0; i < n; ++i)
      j += weights[i] * (kl_coef * double{kl[i]} - entropy_coeff * double{entropy[i]});
    return j;
  };
  objective();
  std::vector<float> dloss(n), dentropy(n);
  for (int i = 0; i < n; ++i) {
    dloss[i] = -(dlog_prob[i] + kl_coef * weights[i] * dkl[i]);  // a token's loss is -log p
    dentropy[i] = -entropy_coeff * weights[i];
  }
  stage.backward(params.data(), grads.data(), {dloss.data(), entropy.data(), dentropy.data()});
  testing::expect_gradient("policy objective", params, grads, objective, 3e-3f, 1e-4, 3e-2, 300);
}

// decoder_cpu_batch runs the same objective slice by slice on its replicas: with one thread it is
// the stage's gradient exactly, with two the same up to the order of the replicas' sum.
TEST(GptPolicyObjective, TheBatchSplitsItOverItsReplicas) {
  const decoder_config config{32, 12, 2, 16, 2};
  const int batch = 4, seq = 12, n = batch * seq;
  decoder_layout layout(config, layer_range::all(config));
  std::vector<float> params(layout.total());
  layout.initialize(params.data(), 9);
  std::vector<int32_t> tokens(n), targets(n);
  std::vector<float> mask(n), weights(n);
  for (int i = 0; i < n; ++i) {
    tokens[i] = (i * 11 + 1) % 32;
    const bool response = i % seq >= 5 && i % seq < seq - 1 - (i / seq);
    targets[i] = response ? (i * 5 + 2) % 32 : -1;
    mask[i] = response ? 1.0f : 0.0f;
  }
  kernels::cpu::loss_agg_weights(weights.data(), mask.data(), batch, seq,
                                 kernels::loss_agg_mode::seq_mean_token_mean);
  const auto old_log_prob = testing::random_values(n, 31, -4.0f, -2.0f);
  const auto advantages = testing::random_values(n, 32, -1.0f, 1.0f);
  std::vector<float> log_prob(n), dlog_prob(n);
  // PPO plus an entropy bonus, each slice on its own tokens only.
  decoder_cpu_batch::token_objective objective{
      0.9f, true,
      [&](int64_t first, int64_t count, const float* losses, const float* entropies, float* dloss,
          float* dentropy) {
        for (int64_t i = 0; i < count; ++i)
          log_prob[first + i] = -losses[i];
        kernels::cpu::ppo_policy_loss(dlog_prob.data() + first, log_prob.data() + first,
                                      old_log_prob.data() + first, advantages.data() + first,
                                      mask.data() + first, weights.data() + first, count, {});
        for (int64_t i = 0; i < count; ++i) {
          dloss[i] = -dlog_prob[first + i];
          dentropy[i] = -0.01f * weights[first + i];
          EXPECT_GE(entropies[i], 0.0f);
        }
      }};

  decoder_cpu_stage stage(layout, batch, nullptr);
  std::vector<float> want(layout.total(), 0.0f), h(n), dloss(n), dentropy(n);
  stage.forward(params.data(), batch, seq, tokens.data(), nullptr, targets.data(), 0.9f);
  stage.entropies(h.data());
  objective.seed(0, n, stage.token_losses(), h.data(), dloss.data(), dentropy.data());
  stage.backward(params.data(), want.data(), {dloss.data(), h.data(), dentropy.data()});

  for (int threads : {1, 2}) {
    decoder_cpu_batch model(layout, batch, threads);
    std::vector<float> grads(layout.total(), 0.0f);
    model.run(params.data(), grads.data(), batch, seq, tokens.data(), targets.data(), objective);
    if (threads == 1) {
      EXPECT_EQ(grads, want);
    } else {
      for (size_t i = 0; i < grads.size(); ++i)
        ASSERT_NEAR(grads[i], want[i], 1e-6 + 1e-4 * std::abs(want[i])) << i;
    }
  }
}

}  // namespace
}  // namespace troupe::models
