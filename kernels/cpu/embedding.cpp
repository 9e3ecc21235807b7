#include "kernels/embedding.hpp"

namespace troupe::kernels::cpu {

void embedding_forward(float* out, const int32_t* tokens, const int32_t* positions, int n,
                       const float* wte, const float* wpe, int dim) {
  for (int i = 0; i < n; ++i) {
    const float* t = wte + int64_t{tokens[i]} * dim;
    const float* p = wpe + int64_t{positions[i]} * dim;
    float* y = out + int64_t{i} * dim;
    for (int c = 0; c < dim; ++c)
      y[c] = t[c] + p[c];
  }
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                        const int32_t* positions, int n, int dim) {
  for (int i = 0; i < n; ++i) {
    const float* dy = dout + int64_t{i} * dim;
    float* t = dwte + int64_t{tokens[i]} * dim;
    float* p = dwpe + int64_t{positions[i]} * dim;
    for (int c = 0; c < dim; ++c) {
      t[c] += dy[c];
      p[c] += dy[c];
    }
  }
}

}  // namespace troupe::kernels::cpu
