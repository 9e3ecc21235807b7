// The RL critic's model (issue 16): the GPT trunk ending in a scalar value head
// (GPT2ForTokenClassification with one label), its clipped value loss seeded into the backward,
// and a critic initialised from a language model's trunk.

#include <cmath>

#include <gtest/gtest.h>

#include "kernels/loss_aggregation.hpp"
#include "kernels/value_loss.hpp"
#include "models/decoder/decoder_cpu_batch.hpp"
#include "models/decoder/decoder_cpu_stage.hpp"
#include "tests/kernels/gradient_check.hpp"

namespace troupe::models {
namespace {

const decoder_config value_head_model{20, 8, 2, 8, 2};

TEST(DecoderValueHead, LayoutIsTheTrunkPlusAClassifier) {
  const decoder_layout lm(value_head_model, layer_range::all(value_head_model));
  const decoder_layout critic(value_head_model, layer_range::all(value_head_model),
                              decoder_head::value);
  ASSERT_TRUE(critic.has_value_head());
  EXPECT_FALSE(lm.has_value_head());
  ASSERT_EQ(critic.slots().size(), lm.slots().size() + 2);
  for (size_t i = 0; i < lm.slots().size(); ++i) {
    EXPECT_EQ(critic.slots()[i].name, lm.slots()[i].name);
    EXPECT_EQ(critic.slots()[i].offset, lm.slots()[i].offset);
  }
  EXPECT_EQ((*critic.find("classifier.weight"))->shape, (tensor::shape_t{1, value_head_model.dim}));
  EXPECT_EQ((*critic.find("classifier.bias"))->shape, (tensor::shape_t{1}));
  // The same seed gives the same trunk as the policy's, so a critic built without a checkpoint
  // starts from the policy's initial weights too.
  std::vector<float> a(lm.total()), b(critic.total());
  lm.initialize(a.data(), 7);
  critic.initialize(b.data(), 7);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin()));

  // A critic takes a language model's trunk and keeps its own head; from_named wants the head.
  std::vector<float> c(critic.total(), 0.0f);
  c[critic.value_w()] = 0.25f;
  ASSERT_TRUE(critic.trunk_from_named(lm.to_named(a.data()), c.data()).ok());
  EXPECT_EQ(c[critic.value_w()], 0.25f);
  EXPECT_EQ(c[critic.lnf_w()], a[lm.lnf_w()]);
  const absl::Status strict = critic.from_named(lm.to_named(a.data()), c.data());
  EXPECT_NE(strict.message().find("classifier.weight"), std::string::npos) << strict;
}

TEST(DecoderValueHead, ValuesAreTheFinalNormDottedWithTheClassifier) {
  const int batch = 2, seq = 8, n = batch * seq;
  decoder_layout layout(value_head_model, layer_range::all(value_head_model), decoder_head::value);
  std::vector<float> params(layout.total());
  layout.initialize(params.data(), 3);
  params[layout.value_b()] = 0.5f;
  std::vector<int32_t> tokens(n);
  for (int i = 0; i < n; ++i)
    tokens[i] = (i * 7 + 3) % value_head_model.vocab;
  decoder_cpu_stage stage(layout, batch, nullptr);
  stage.forward(params.data(), batch, seq, tokens.data(), nullptr, nullptr);
  // Zeroing the classifier leaves the bias at every position.
  std::vector<float> first(stage.values(), stage.values() + n);
  std::fill_n(params.begin() + layout.value_w(), value_head_model.dim, 0.0f);
  stage.forward(params.data(), batch, seq, tokens.data(), nullptr, nullptr);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(stage.values()[i], 0.5f);
    EXPECT_NE(first[i], 0.5f);
  }
}

TEST(DecoderValueHead, ClippedValueLossGradientIsTheFiniteDifference) {
  const int batch = 2, seq = 8, n = batch * seq;
  const float cliprange = 0.2f;
  decoder_layout layout(value_head_model, layer_range::all(value_head_model), decoder_head::value);
  std::vector<float> params(layout.total()), grads(layout.total(), 0.0f);
  layout.initialize(params.data(), 5);
  for (auto& p : params)
    p *= 3;  // larger weights: gradients well above float noise
  std::vector<int32_t> tokens(n);
  std::vector<float> mask(n), weights(n);
  for (int i = 0; i < n; ++i) {
    const int t = i % seq;
    tokens[i] = (i * 7 + 3) % value_head_model.vocab;
    mask[i] = t + 1 >= (i < seq ? 3 : 4) && t + 1 < seq ? 1.0f : 0.0f;
  }
  kernels::cpu::loss_agg_weights(weights.data(), mask.data(), batch, seq,
                                 kernels::loss_agg_mode::token_mean);
  decoder_cpu_stage stage(layout, batch, nullptr);
  stage.forward(params.data(), batch, seq, tokens.data(), nullptr, nullptr);
  // Old values away from the predictions by more or less than the clip range, so that both the
  // clipped and the unclipped branch carry gradient, but no prediction sits on a boundary.
  const auto offsets = testing::random_values(n, 21, -0.15f, 0.15f);
  const auto returns = testing::random_values(n, 22, -1.0f, 1.0f);
  std::vector<float> old_values(n), dvalues(n);
  for (int i = 0; i < n; ++i)
    old_values[i] = stage.values()[i] + (i % 3 == 0 ? offsets[i] + 0.5f : offsets[i]);
  const auto objective = [&] {
    stage.forward(params.data(), batch, seq, tokens.data(), nullptr, nullptr);
    return kernels::cpu::clipped_value_loss(dvalues.data(), stage.values(), returns.data(),
                                            old_values.data(), mask.data(), weights.data(), n,
                                            cliprange)
        .vf_loss;
  };
  objective();
  stage.backward(params.data(), grads.data(), value_objective_grad{dvalues.data()});
  testing::expect_gradient("value loss", params, grads, objective, 3e-3f, 1e-4, 3e-2, 300);
  // The head itself, every entry.
  testing::expect_gradient_at_every("value head", params, grads, objective, layout.value_w(),
                                    layout.value_w() + value_head_model.dim, 3e-3f, 1e-4, 3e-2);
}

// decoder_cpu_batch splits the value objective over its replicas like the policy's.
TEST(DecoderValueHead, TheBatchSplitsItOverItsReplicas) {
  const int batch = 4, seq = 8, n = batch * seq;
  decoder_layout layout(value_head_model, layer_range::all(value_head_model), decoder_head::value);
  std::vector<float> params(layout.total());
  layout.initialize(params.data(), 9);
  std::vector<int32_t> tokens(n);
  for (int i = 0; i < n; ++i)
    tokens[i] = (i * 11 + 1) % value_head_model.vocab;
  const auto returns = testing::random_values(n, 41, -1.0f, 1.0f);
  // A plain squared error, each slice on its own positions.
  decoder_cpu_batch::value_objective objective{
      [&](int64_t first, int64_t count, const float* values, float* dvalues) {
        for (int64_t i = 0; i < count; ++i)
          dvalues[i] = 2 * (values[i] - returns[first + i]) / n;
      }};
  decoder_cpu_stage stage(layout, batch, nullptr);
  std::vector<float> want(layout.total(), 0.0f), dvalues(n), values(n);
  stage.forward(params.data(), batch, seq, tokens.data(), nullptr, nullptr);
  objective.seed(0, n, stage.values(), dvalues.data());
  stage.backward(params.data(), want.data(), value_objective_grad{dvalues.data()});
  for (int threads : {1, 2}) {
    decoder_cpu_batch model(layout, batch, threads);
    model.values(params.data(), batch, seq, tokens.data(), values.data());
    EXPECT_TRUE(std::equal(values.begin(), values.end(), stage.values())) << threads;
    std::vector<float> grads(layout.total(), 0.0f);
    model.run(params.data(), grads.data(), batch, seq, tokens.data(), objective);
    for (size_t i = 0; i < grads.size(); ++i)
      ASSERT_NEAR(grads[i], want[i], 1e-6 + 1e-4 * std::abs(want[i])) << threads << " " << i;
  }
}

}  // namespace
}  // namespace troupe::models
