#include "kernels/embedding.hpp"

#include <gtest/gtest.h>

#include "tests/kernels/gradient_check.hpp"

namespace troupe::kernels {
namespace {

using testing::random_values;

TEST(Embedding, ForwardAddsTokenAndPosition) {
  const int vocab = 11, ctx = 6, dim = 8, n = 9;
  auto wte = random_values(vocab * dim, 1), wpe = random_values(ctx * dim, 2);
  std::vector<int32_t> tokens = {3, 3, 0, 10, 7, 1, 3, 9, 2},
                       positions = {0, 1, 2, 3, 4, 5, 0, 1, 2};
  std::vector<float> out(n * dim);
  cpu::embedding_forward(out.data(), tokens.data(), positions.data(), n, wte.data(), wpe.data(),
                         dim);
  for (int i = 0; i < n; ++i) {
    for (int c = 0; c < dim; ++c) {
      EXPECT_FLOAT_EQ(out[i * dim + c], wte[tokens[i] * dim + c] + wpe[positions[i] * dim + c]);
    }
  }
  auto probe = random_values(n * dim, 3);
  auto loss = [&] {
    cpu::embedding_forward(out.data(), tokens.data(), positions.data(), n, wte.data(), wpe.data(),
                           dim);
    return testing::project(out, probe);
  };
  std::vector<float> dwte(vocab * dim, 0.0f), dwpe(ctx * dim, 0.0f);
  cpu::embedding_backward(dwte.data(), dwpe.data(), probe.data(), tokens.data(), positions.data(),
                          n, dim);
  testing::expect_gradient("dwte", wte, dwte, loss, 1e-2f, 1e-3, 1e-3, wte.size());
  testing::expect_gradient("dwpe", wpe, dwpe, loss, 1e-2f, 1e-3, 1e-3, wpe.size());
}

}  // namespace
}  // namespace troupe::kernels
