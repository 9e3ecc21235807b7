#include "kernels/adamw.hpp"

#include <cmath>

namespace troupe::kernels::cpu {

void adamw_update(float* params, const float* grads, float* m, float* v, int64_t n,
                  const adamw_params& p, float grad_scale) {
  const float c1 = 1.0f / (1.0f - std::pow(p.beta1, static_cast<float>(p.step)));
  const float c2 = 1.0f / (1.0f - std::pow(p.beta2, static_cast<float>(p.step)));
  for (int64_t i = 0; i < n; ++i) {
    const float g = grads[i] * grad_scale;
    m[i] = p.beta1 * m[i] + (1.0f - p.beta1) * g;
    v[i] = p.beta2 * v[i] + (1.0f - p.beta2) * g * g;
    const float update = (m[i] * c1) / (std::sqrt(v[i] * c2) + p.eps);
    params[i] -= p.lr * (update + p.weight_decay * params[i]);
  }
}

double sum_of_squares(const float* x, int64_t n) {
  // Partial sums in float over short runs keep the loop vectorised; the total is in double.
  double total = 0.0;
  constexpr int64_t chunk = 1024;
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t end = start + chunk < n ? start + chunk : n;
    float partial = 0.0f;
#pragma omp simd reduction(+ : partial)
    for (int64_t i = start; i < end; ++i)
      partial += x[i] * x[i];
    total += partial;
  }
  return total;
}

}  // namespace troupe::kernels::cpu
