#include "kernels/sampling.hpp"

#include <cmath>
#include <set>

#include <gtest/gtest.h>

namespace troupe::kernels {
namespace {

const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.0f, 0.0f, 3.0f, -2.0f, 1.5f};

TEST(Sampling, GreedyAndTopOneAreTheArgmax) {
  EXPECT_EQ(cpu::sample_token(logits.data(), 8, {0.0f, 0, 1.0f}, 1, 0), 5);
  for (uint64_t c = 0; c < 50; ++c) {
    EXPECT_EQ(cpu::sample_token(logits.data(), 8, {1.0f, 1, 1.0f}, 7, c), 5);
  }
}

TEST(Sampling, SameSeedAndCounterGiveTheSameToken) {
  for (uint64_t c = 0; c < 100; ++c) {
    EXPECT_EQ(cpu::sample_token(logits.data(), 8, {}, 42, c),
              cpu::sample_token(logits.data(), 8, {}, 42, c));
  }
  int differ = 0;
  for (uint64_t c = 0; c < 100; ++c) {
    differ += cpu::sample_token(logits.data(), 8, {}, 42, c) !=
              cpu::sample_token(logits.data(), 8, {}, 43, c);
  }
  EXPECT_GT(differ, 20);
}

TEST(Sampling, FrequenciesFollowTheSoftmax) {
  const int draws = 40000;
  std::vector<int> counts(8, 0);
  for (int c = 0; c < draws; ++c)
    ++counts[cpu::sample_token(logits.data(), 8, {}, 5, c)];
  double sum = 0;
  for (float l : logits)
    sum += std::exp(l);
  for (int i = 0; i < 8; ++i) {
    const double p = std::exp(logits[i]) / sum;
    EXPECT_NEAR(counts[i] / double(draws), p, 4 * std::sqrt(p * (1 - p) / draws) + 1e-3) << i;
  }
}

TEST(Sampling, TopKAndTopPKeepOnlyTheirCandidates) {
  std::set<int> top3, nucleus;
  for (uint64_t c = 0; c < 2000; ++c) {
    top3.insert(cpu::sample_token(logits.data(), 8, {1.0f, 3, 1.0f}, 9, c));
    nucleus.insert(cpu::sample_token(logits.data(), 8, {1.0f, 0, 0.7f}, 9, c));
  }
  EXPECT_EQ(top3, (std::set<int>{5, 1, 7}));
  // Softmax mass: 3.0 -> 0.53, 2.0 -> 0.19 (0.72 >= 0.7): the nucleus is {5, 1}.
  EXPECT_EQ(nucleus, (std::set<int>{5, 1}));
}

}  // namespace
}  // namespace troupe::kernels
