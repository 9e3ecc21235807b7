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

}  // namespace troupe::kernels::cpu
