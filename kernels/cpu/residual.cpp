#include "kernels/residual.hpp"

namespace troupe::kernels::cpu {

void residual_forward(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = a[i] + b[i];
}

void accumulate(float* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] += src[i];
}

}  // namespace troupe::kernels::cpu
