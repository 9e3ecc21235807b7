#include "kernels/entropy.hpp"

#include <cmath>
#include <cstdint>

namespace troupe::kernels::cpu {

void entropy_forward(float* h, const float* probs, int rows, int vocab) {
  for (int r = 0; r < rows; ++r) {
    const float* p = probs + int64_t{r} * vocab;
    double sum = 0;
    for (int j = 0; j < vocab; ++j) {
      if (p[j] > 0) sum -= double{p[j]} * std::log(p[j]);
    }
    h[r] = static_cast<float>(sum);
  }
}

}  // namespace troupe::kernels::cpu
