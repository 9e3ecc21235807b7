#include "kernels/matmul.hpp"

#include <cmath>
#include <tuple>

#include <gtest/gtest.h>

#include "kernels/cpu/thread_pool.hpp"
#include "tests/kernels/gradient_check.hpp"

namespace troupe::kernels {
namespace {

using testing::random_values;

// out[i][j] = sum_k op(a)[i][k] op(b)[k][j] in double.
std::vector<float> reference(const std::vector<float>& a, const std::vector<float>& b,
                             const gemm& g) {
  std::vector<float> out(g.m * g.n);
  for (int i = 0; i < g.m; ++i) {
    for (int j = 0; j < g.n; ++j) {
      double s = 0;
      for (int k = 0; k < g.k; ++k) {
        const float x = g.trans_a ? a[k * g.m + i] : a[i * g.k + k];
        const float y = g.trans_b ? b[j * g.k + k] : b[k * g.n + j];
        s += double{x} * y;
      }
      out[i * g.n + j] = static_cast<float>(s);
    }
  }
  return out;
}

TEST(Matmul, EveryTransposeWithBiasAndAccumulate) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const gemm g{7, 13, 5, ta, tb, false};
      auto a = random_values(g.m * g.k, 1), b = random_values(g.k * g.n, 2);
      auto bias = random_values(g.n, 3);
      std::vector<float> out(g.m * g.n, 99.0f);
      cpu::matmul(out.data(), a.data(), b.data(), bias.data(), g);
      auto want = reference(a, b, g);
      for (int i = 0; i < g.m * g.n; ++i) {
        EXPECT_NEAR(out[i], want[i] + bias[i % g.n], 1e-5) << ta << tb << " at " << i;
      }
      gemm acc = g;
      acc.accumulate = true;
      cpu::matmul(out.data(), a.data(), b.data(), nullptr, acc);
      for (int i = 0; i < g.m * g.n; ++i) {
        EXPECT_NEAR(out[i], 2 * want[i] + bias[i % g.n], 1e-5) << ta << tb << " at " << i;
      }
    }
  }
}

// Batch invariance: without trans_a or accumulate, a row's result is the same bits whatever
// rows come with it, also across the kernel's row blocks (6) and its packed chunks of k and n
// (256 each).
TEST(Matmul, EachRowIsTheSameBitsWhateverRowsComeWithIt) {
  for (bool tb : {false, true}) {
    for (const auto& [n, k] : {std::pair{13, 5}, {300, 70}, {40, 600}}) {
      const int rows = 20;
      auto a = random_values(rows * k, 5), b = random_values(k * n, 6);
      auto bias = random_values(n, 7);
      std::vector<float> alone(n);
      std::vector<float> batch(int64_t{rows} * n);
      for (int m : {1, 4, 7, 12, 20}) {
        cpu::matmul(batch.data(), a.data(), b.data(), bias.data(), {m, n, k, false, tb});
        for (int r = 0; r < m; ++r) {
          cpu::matmul(alone.data(), a.data() + int64_t{r} * k, b.data(), bias.data(),
                      {1, n, k, false, tb});
          for (int j = 0; j < n; ++j) {
            ASSERT_EQ(batch[int64_t{r} * n + j], alone[j])
                << "trans_b " << tb << ", n " << n << ", k " << k << ": row " << r << " of " << m
                << ", column " << j;
          }
        }
      }
      auto want = reference(a, b, {rows, n, k, false, tb});
      for (int i = 0; i < rows * n; ++i)
        ASSERT_NEAR(batch[i], want[i] + bias[i % n], 1e-5 * std::sqrt(k)) << i;
    }
  }
}

// Columns split over a pool (in chunks of 256, the last one partial) give the same bits as the
// caller alone, for one row and for several.
TEST(Matmul, ColumnsSplitOverAPoolAreTheSameBits) {
  cpu::thread_pool pool(3, std::chrono::microseconds(0));
  for (bool tb : {false, true}) {
    for (const auto& [m, n, k] : {std::tuple{1, 1000, 300}, {5, 513, 70}, {9, 40, 600}}) {
      auto a = random_values(m * k, 8), b = random_values(k * n, 9), bias = random_values(n, 10);
      std::vector<float> alone(int64_t{m} * n), split(int64_t{m} * n, -1.0f);
      cpu::matmul(alone.data(), a.data(), b.data(), bias.data(), {m, n, k, false, tb});
      cpu::matmul(split.data(), a.data(), b.data(), bias.data(), {m, n, k, false, tb}, &pool);
      ASSERT_EQ(split, alone) << "trans_b " << tb << ", m " << m << ", n " << n << ", k " << k;
    }
  }
}

TEST(Matmul, BiasBackwardAddsColumnSums) {
  auto dout = random_values(6 * 4, 4);
  std::vector<float> dbias(4, 1.0f);
  cpu::bias_backward(dbias.data(), dout.data(), 6, 4);
  for (int j = 0; j < 4; ++j) {
    float s = 1.0f;
    for (int i = 0; i < 6; ++i)
      s += dout[i * 4 + j];
    EXPECT_NEAR(dbias[j], s, 1e-6);
  }
}

}  // namespace
}  // namespace troupe::kernels
