#include "kernels/rope.hpp"

#include <cmath>
#include <vector>

namespace troupe::kernels::cpu {

namespace {

// Turns each pair by +angle (sign 1) or -angle (sign -1).
void rotate(float* x, int64_t stride, const int32_t* positions, int64_t rows, int heads,
            int head_dim, const float* inv_freq, float sign) {
  const int half = head_dim / 2;
  thread_local std::vector<float> cos_row, sin_row;
  cos_row.resize(half);
  sin_row.resize(half);
  for (int64_t r = 0; r < rows; ++r) {
    const float p = static_cast<float>(positions[r]);
    for (int i = 0; i < half; ++i) {
      const float angle = p * inv_freq[i];
      cos_row[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sin_row[i] = sign * static_cast<float>(std::sin(static_cast<double>(angle)));
    }
    for (int h = 0; h < heads; ++h) {
      float* v = x + r * stride + static_cast<int64_t>(h) * head_dim;
#pragma omp simd
      for (int i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * cos_row[i] - b * sin_row[i];
        v[i + half] = b * cos_row[i] + a * sin_row[i];
      }
    }
  }
}

}  // namespace

void rope_forward(float* x, int64_t stride, const int32_t* positions, int64_t rows, int heads,
                  int head_dim, const float* inv_freq) {
  rotate(x, stride, positions, rows, heads, head_dim, inv_freq, 1.0f);
}

void rope_backward(float* dx, int64_t stride, const int32_t* positions, int64_t rows, int heads,
                   int head_dim, const float* inv_freq) {
  rotate(dx, stride, positions, rows, heads, head_dim, inv_freq, -1.0f);
}

}  // namespace troupe::kernels::cpu
