#include "kernels/layernorm.hpp"

#include <gtest/gtest.h>

#include "tests/kernels/gradient_check.hpp"

namespace troupe::kernels {
namespace {

using testing::expect_gradient;
using testing::project;
using testing::random_values;

constexpr int rows = 5, dim = 24;

TEST(Layernorm, ForwardNormalisesEachRow) {
  auto in = random_values(rows * dim, 1, -3, 5);
  std::vector<float> w(dim, 1.0f), b(dim, 0.0f), out(rows * dim), mean(rows), rstd(rows);
  cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), in.data(), w.data(), b.data(), rows,
                         dim);
  for (int r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int i = 0; i < dim; ++i)
      m += out[r * dim + i];
    for (int i = 0; i < dim; ++i)
      v += out[r * dim + i] * out[r * dim + i];
    EXPECT_NEAR(m / dim, 0.0, 1e-5);
    EXPECT_NEAR(v / dim, 1.0, 1e-3);  // eps 1e-5 shrinks it a little
  }
}

TEST(Layernorm, BackwardMatchesFiniteDifferences) {
  auto in = random_values(rows * dim, 1, -2, 2);
  auto w = random_values(dim, 2, 0.5, 1.5), b = random_values(dim, 3);
  auto probe = random_values(rows * dim, 4);
  std::vector<float> out(rows * dim), mean(rows), rstd(rows);
  auto loss = [&] {
    cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), in.data(), w.data(), b.data(),
                           rows, dim);
    return project(out, probe);
  };
  loss();
  std::vector<float> din(rows * dim, 0.0f), dw(dim, 0.0f), db(dim, 0.0f);
  cpu::layernorm_backward(din.data(), dw.data(), db.data(), probe.data(), in.data(), w.data(),
                          mean.data(), rstd.data(), rows, dim);
  expect_gradient("din", in, din, loss);
  expect_gradient("dweight", w, dw, loss);
  expect_gradient("dbias", b, db, loss);
}

}  // namespace
}  // namespace troupe::kernels
