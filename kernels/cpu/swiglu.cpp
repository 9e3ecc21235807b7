#include "kernels/swiglu.hpp"

#include <cmath>

namespace troupe::kernels::cpu {

void swiglu_forward(float* out, const float* gate, const float* up, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void swiglu_backward(float* dgate, float* dup, const float* gate, const float* up,
                     const float* dout, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i], sigma = 1.0f / (1.0f + std::exp(-g));
    const float d = dout[i];
    dup[i] = d * g * sigma;
    dgate[i] = d * up[i] * sigma * (1.0f + g * (1.0f - sigma));
  }
}

}  // namespace troupe::kernels::cpu
