#include "kernels/rmsnorm.hpp"

#include <cmath>

namespace troupe::kernels::cpu {

void rmsnorm_forward(float* out, float* rstd, const float* in, const float* weight, int64_t rows,
                     int dim, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in + r * dim;
    float* y = out + r * dim;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < dim; ++i)
      sum += x[i] * x[i];
    const float s = 1.0f / std::sqrt(sum / static_cast<float>(dim) + eps);
    if (rstd != nullptr) rstd[r] = s;
#pragma omp simd
    for (int i = 0; i < dim; ++i)
      y[i] = weight[i] * (x[i] * s);
  }
}

void rmsnorm_backward(float* din, float* dweight, const float* dout, const float* in,
                      const float* weight, const float* rstd, int64_t rows, int dim) {
  // y = w x s with s = (mean(x^2) + eps)^-1/2: dx = s (w dy) - s^3 / dim x sum(w dy x).
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in + r * dim;
    const float* dy = dout + r * dim;
    float* dx = din + r * dim;
    const float s = rstd[r];
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int i = 0; i < dim; ++i)
      dot += weight[i] * dy[i] * x[i];
    const float c = s * s * s * dot / static_cast<float>(dim);
#pragma omp simd
    for (int i = 0; i < dim; ++i) {
      dx[i] += s * weight[i] * dy[i] - c * x[i];
      dweight[i] += dy[i] * x[i] * s;
    }
  }
}

}  // namespace troupe::kernels::cpu
