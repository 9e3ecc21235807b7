#include "kernels/entropy.hpp"

#include <cmath>

#include <gtest/gtest.h>

#include "kernels/cross_entropy.hpp"
#include "tests/kernels/gradient_check.hpp"

namespace troupe::kernels {
namespace {

using testing::random_values;

// An objective of each row's loss and entropy: sum_i a_i loss_i + b_i H_i. Its gradient wrt the
// logits, from the fused backward, is the finite difference; the entropy is the naive one.
TEST(Entropy, ForwardAndTheFusedBackwardOfALossAndEntropyObjective) {
  const int rows = 5, vocab = 11;
  auto logits = random_values(rows * vocab, 21, -3, 3);
  const std::vector<int32_t> targets = {3, -1, 0, 10, 4};
  const auto a = random_values(rows, 22), b = random_values(rows, 23);
  std::vector<float> probs(logits.size()), losses(rows), h(rows);
  const auto objective = [&] {
    cpu::cross_entropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), rows,
                               vocab);
    cpu::entropy_forward(h.data(), probs.data(), rows, vocab);
    double j = 0;
    for (int r = 0; r < rows; ++r)
      j += double{a[r]} * losses[r] + double{b[r]} * h[r];
    return j;
  };
  objective();
  for (int r = 0; r < rows; ++r) {
    double plogp = 0;
    for (double logp : testing::naive_log_softmax(logits.data() + r * vocab, vocab))
      plogp += std::exp(logp) * logp;
    EXPECT_NEAR(h[r], -plogp, 1e-5) << r;
  }
  std::vector<float> dlogits(logits.size());
  cpu::cross_entropy_backward(dlogits.data(), probs.data(), targets.data(), a.data(), h.data(),
                              b.data(), rows, vocab);
  testing::expect_gradient("dlogits", logits, dlogits, objective, 1e-2f, 1e-4, 1e-2, logits.size());
}

}  // namespace
}  // namespace troupe::kernels
