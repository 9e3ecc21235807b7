#include "kernels/cross_entropy.hpp"

#include <cmath>

#include <gtest/gtest.h>

#include "tests/kernels/gradient_check.hpp"

namespace troupe::kernels {
namespace {

using testing::random_values;

TEST(CrossEntropy, ForwardAndBackward) {
  const int rows = 6, vocab = 19;
  auto logits = random_values(rows * vocab, 1, -5, 5);
  std::vector<int32_t> targets = {0, 18, 5, -1, 7, 7};
  std::vector<float> probs(logits.size()), losses(rows);
  auto loss = [&] {
    cpu::cross_entropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), rows,
                               vocab);
    double s = 0;
    for (float l : losses)
      s += l;
    return s / 5;  // mean over the five real targets
  };
  loss();
  for (int r = 0; r < rows; ++r) {
    const auto logp = testing::naive_log_softmax(logits.data() + r * vocab, vocab);
    EXPECT_NEAR(losses[r], targets[r] < 0 ? 0 : -logp[targets[r]], 1e-5) << r;
  }
  std::vector<float> dlogits(logits.size());
  cpu::cross_entropy_backward(dlogits.data(), probs.data(), targets.data(), 1.0f / 5, rows, vocab);
  testing::expect_gradient("dlogits", logits, dlogits, loss, 1e-2f, 1e-4, 1e-2, logits.size());
}

TEST(CrossEntropy, ProbabilitiesMayOverwriteTheLogits) {
  const int rows = 3, vocab = 7;
  auto logits = random_values(rows * vocab, 2, -3, 3);
  std::vector<int32_t> targets = {1, 6, 0};
  std::vector<float> probs(logits.size()), losses(rows), aliased = logits, aliased_losses(rows);
  cpu::cross_entropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), rows,
                             vocab);
  cpu::cross_entropy_forward(aliased_losses.data(), aliased.data(), aliased.data(), targets.data(),
                             rows, vocab);
  EXPECT_EQ(aliased_losses, losses);
  EXPECT_EQ(aliased, probs);
}

}  // namespace
}  // namespace troupe::kernels
