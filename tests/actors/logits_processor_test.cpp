#include "actors/logits_processor.hpp"

#include <cmath>
#include <map>
#include <set>

#include <gtest/gtest.h>

namespace troupe::actors {
namespace {

using actor::generation_request;

// vLLM's rules written out plainly: bias, the stop tokens masked before min_tokens, repetition
// over prompt and output, frequency and presence over the output.
std::vector<float> expected(std::vector<float> z, const generation_request& r,
                            const std::vector<int32_t>& prompt,
                            const std::vector<int32_t>& output) {
  for (const auto& b : r.logit_bias)
    z[b.token] += b.bias;
  if (static_cast<int>(output.size()) < r.min_tokens) {
    for (int32_t t : r.stop_token_ids)
      z[t] = -INFINITY;
  }
  std::set<int32_t> seen(prompt.begin(), prompt.end());
  seen.insert(output.begin(), output.end());
  for (int32_t t : seen)
    z[t] = z[t] > 0 ? z[t] / r.repetition_penalty : z[t] * r.repetition_penalty;
  std::map<int32_t, int> counts;
  for (int32_t t : output)
    ++counts[t];
  for (auto [t, n] : counts)
    z[t] -= r.frequency_penalty * n + r.presence_penalty;
  return z;
}

TEST(LogitsProcessor, BiasThenPenaltiesAsVllm) {
  const std::vector<float> logits = {1.5f, -0.5f, 2.0f, 0.25f, -3.0f, 0.0f, 4.0f, -1.0f};
  generation_request r;
  r.logit_bias = {{0, -2.0f}, {5, 1.0f}};
  r.repetition_penalty = 1.5f;
  r.frequency_penalty = 0.5f;
  r.presence_penalty = 0.25f;
  const std::vector<int32_t> prompt = {1, 2, 2, 6}, output = {2, 3, 3, 3, 0};
  ASSERT_TRUE(adjusts_logits(r));
  ASSERT_TRUE(check_logit_adjustments(r, 8).ok());
  // Twice, and with another sequence between: the marks and counts are left clean.
  for (int round = 0; round < 2; ++round) {
    std::vector<float> z = logits;
    adjust_logits(z.data(), 8, r, prompt, output);
    const std::vector<float> want = expected(logits, r, prompt, output);
    for (int t = 0; t < 8; ++t)
      EXPECT_FLOAT_EQ(z[t], want[t]) << "token " << t;
    std::vector<float> other = logits;
    adjust_logits(other.data(), 8, r, std::vector<int32_t>{7}, std::vector<int32_t>{7, 7});
    EXPECT_FLOAT_EQ(other[7], expected(logits, r, {7}, {7, 7})[7]);
    EXPECT_FLOAT_EQ(other[3], logits[3]);
  }
  EXPECT_FALSE(adjusts_logits(generation_request{}));
}

TEST(LogitsProcessor, StopTokensCannotBeDrawnBeforeMinTokens) {
  generation_request r;
  r.stop_token_ids = {3, 6};
  r.min_tokens = 2;
  std::vector<float> z(8, 1.0f);
  adjust_logits(z.data(), 8, r, std::vector<int32_t>{1}, std::vector<int32_t>{4});
  EXPECT_EQ(z[3], -INFINITY);
  EXPECT_EQ(z[6], -INFINITY);
  EXPECT_EQ(z[4], 1.0f);
  z.assign(8, 1.0f);
  adjust_logits(z.data(), 8, r, std::vector<int32_t>{1}, std::vector<int32_t>{4, 5});
  EXPECT_EQ(z, std::vector<float>(8, 1.0f));
}

TEST(LogitsProcessor, RefusesAdjustmentsTheApiDoesNotAllow) {
  const auto refusal = [](auto change) {
    generation_request r;
    change(r);
    return std::string(check_logit_adjustments(r, 8).message());
  };
  EXPECT_EQ(refusal([](auto& r) { r.frequency_penalty = 3; }),
            "frequency_penalty is 3; it must be between -2 and 2");
  EXPECT_EQ(refusal([](auto& r) { r.presence_penalty = NAN; }),
            "presence_penalty is nan; it must be between -2 and 2");
  EXPECT_EQ(refusal([](auto& r) { r.repetition_penalty = 0; }),
            "repetition_penalty is 0; it must be above 0 and at most 100");
  EXPECT_EQ(refusal([](auto& r) {
              r.logit_bias = {{8, 1.0f}};
            }),
            "logit_bias of token 8 is 1; tokens are in [0, 8) and biases between -100 and 100");
  EXPECT_EQ(refusal([](auto& r) {
              r.logit_bias = {{2, 200.0f}};
            }),
            "logit_bias of token 2 is 200; tokens are in [0, 8) and biases between -100 and 100");
  EXPECT_EQ(refusal([](auto& r) { r.stop_token_ids = {9}; }),
            "stop token 9 is outside the vocabulary [0, 8)");
  EXPECT_EQ(refusal([](auto& r) { r.min_tokens = -1; }), "min_tokens is -1");
  EXPECT_EQ(refusal([](auto&) {}), "");
}

}  // namespace
}  // namespace troupe::actors
