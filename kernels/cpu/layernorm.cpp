#include "kernels/layernorm.hpp"

#include <cmath>
#include <cstdint>

namespace troupe::kernels::cpu {

void layernorm_forward(float* out, float* mean, float* rstd, const float* in, const float* weight,
                       const float* bias, int rows, int dim) {
  constexpr float eps = 1e-5f;
  for (int r = 0; r < rows; ++r) {
    const float* x = in + int64_t{r} * dim;
    float* y = out + int64_t{r} * dim;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < dim; ++i)
      sum += x[i];
    const float m = sum / dim;
    float var = 0.0f;
#pragma omp simd reduction(+ : var)
    for (int i = 0; i < dim; ++i)
      var += (x[i] - m) * (x[i] - m);
    const float s = 1.0f / std::sqrt(var / dim + eps);
    for (int i = 0; i < dim; ++i)
      y[i] = (x[i] - m) * s * weight[i] + bias[i];
    mean[r] = m;
    rstd[r] = s;
  }
}

void layernorm_backward(float* din, float* dweight, float* dbias, const float* dout,
                        const float* in, const float* weight, const float* mean, const float* rstd,
                        int rows, int dim) {
  for (int r = 0; r < rows; ++r) {
    const float* x = in + int64_t{r} * dim;
    const float* dy = dout + int64_t{r} * dim;
    float* dx = din + int64_t{r} * dim;
    const float m = mean[r], s = rstd[r];
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
#pragma omp simd reduction(+ : dnorm_mean, dnorm_norm_mean)
    for (int i = 0; i < dim; ++i) {
      const float norm = (x[i] - m) * s;
      const float dnorm = weight[i] * dy[i];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean /= dim;
    dnorm_norm_mean /= dim;
    for (int i = 0; i < dim; ++i) {
      const float norm = (x[i] - m) * s;
      const float dnorm = weight[i] * dy[i];
      dbias[i] += dy[i];
      dweight[i] += norm * dy[i];
      dx[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
  }
}

}  // namespace troupe::kernels::cpu
