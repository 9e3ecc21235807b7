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

}  // namespace troupe::kernels::cpu
