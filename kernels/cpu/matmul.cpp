#include "kernels/matmul.hpp"

#include <algorithm>
#include <cstring>

#include <cblas.h>

namespace troupe::kernels::cpu {

void matmul(float* out, const float* a, const float* b, const float* bias, const gemm& g) {
  float beta = g.accumulate ? 1.0f : 0.0f;
  if (bias != nullptr && !g.accumulate) {
    for (int i = 0; i < g.m; ++i)
      std::memcpy(out + int64_t{i} * g.n, bias, g.n * sizeof(float));
    beta = 1.0f;
  } else if (bias != nullptr) {
    for (int i = 0; i < g.m; ++i) {
      float* row = out + int64_t{i} * g.n;
      for (int j = 0; j < g.n; ++j)
        row[j] += bias[j];
    }
  }
  const int lda = g.trans_a ? g.m : g.k;
  const int ldb = g.trans_b ? g.k : g.n;
  cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans,
              g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f, a, lda, b, ldb, beta, out,
              g.n);
}

void bias_backward(float* dbias, const float* dout, int m, int n) {
  for (int i = 0; i < m; ++i) {
    const float* row = dout + int64_t{i} * n;
    for (int j = 0; j < n; ++j)
      dbias[j] += row[j];
  }
}

const char* blas_config() {
  return openblas_get_config();
}

void set_blas_threads(int threads) {
  openblas_set_num_threads(threads);
}

}  // namespace troupe::kernels::cpu
