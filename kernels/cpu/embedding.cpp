#include "kernels/embedding.hpp"

#include <algorithm>
#include <limits>

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
  embedding_part_backward(dwte, dwpe, dout, tokens, positions, n, 0,
                          std::numeric_limits<int>::max(), dim);
}

void embedding_part_forward(float* out, const int32_t* tokens, int n, const float* wte, int first,
                            int vocab, int dim) {
  for (int i = 0; i < n; ++i) {
    const int64_t row = int64_t{tokens[i]} - first;
    float* y = out + int64_t{i} * dim;
    if (row < 0 || row >= vocab) {
      std::fill(y, y + dim, 0.0f);
    } else {
      std::copy(wte + row * dim, wte + (row + 1) * dim, y);
    }
  }
}

void add_positions(float* out, const int32_t* positions, int n, const float* wpe, int dim) {
  for (int i = 0; i < n; ++i) {
    const float* p = wpe + int64_t{positions[i]} * dim;
    float* y = out + int64_t{i} * dim;
    for (int c = 0; c < dim; ++c)
      y[c] += p[c];
  }
}

void embedding_part_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                             const int32_t* positions, int n, int first, int vocab, int dim) {
  for (int i = 0; i < n; ++i) {
    const float* dy = dout + int64_t{i} * dim;
    const int64_t row = int64_t{tokens[i]} - first;
    if (row >= 0 && row < vocab) {
      float* t = dwte + row * dim;
      for (int c = 0; c < dim; ++c)
        t[c] += dy[c];
    }
    if (dwpe == nullptr) continue;
    float* p = dwpe + int64_t{positions[i]} * dim;
    for (int c = 0; c < dim; ++c)
      p[c] += dy[c];
  }
}

}  // namespace troupe::kernels::cpu
