#include "kernels/entropy.hpp"

#include <cstdint>

#include "kernels/cpu/fast_math.hpp"

namespace troupe::kernels::cpu {

void entropy_forward(float* h, const float* probs, int rows, int vocab) {
  for (int r = 0; r < rows; ++r) {
    const float* p = probs + int64_t{r} * vocab;
    float sum = 0.0f;
    // Vectorized; a probability below 1e-30 adds less than 1e-28 and is left out (fast_log
    // takes normal numbers only).
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < vocab; ++j)
      sum += p[j] > 1e-30f ? p[j] * fast_log(p[j]) : 0.0f;
    h[r] = -sum;
  }
}

}  // namespace troupe::kernels::cpu
