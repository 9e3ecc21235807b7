#include "kernels/rope.hpp"

#include <cmath>

namespace troupe::kernels::cpu {

namespace {

// Turns each pair by +angle (sign 1) or -angle (sign -1).
void rotate(float* x, int64_t stride, int64_t rows, int heads, int head_dim, const float* cos,
            const float* sin, float sign) {
  const int half = head_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const float* c = cos + r * half;
    const float* s = sin + r * half;
    for (int h = 0; h < heads; ++h) {
      float* v = x + r * stride + static_cast<int64_t>(h) * head_dim;
#pragma omp simd
      for (int i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half], sn = sign * s[i];
        v[i] = a * c[i] - b * sn;
        v[i + half] = b * c[i] + a * sn;
      }
    }
  }
}

}  // namespace

void rope_angles(float* cos, float* sin, const int32_t* positions, int64_t rows, int head_dim,
                 const float* inv_freq) {
  const int half = head_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const float p = static_cast<float>(positions[r]);
    for (int i = 0; i < half; ++i) {
      const float angle = p * inv_freq[i];
      cos[r * half + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sin[r * half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  }
}

void rope_forward(float* x, int64_t stride, int64_t rows, int heads, int head_dim, const float* cos,
                  const float* sin) {
  rotate(x, stride, rows, heads, head_dim, cos, sin, 1.0f);
}

void rope_backward(float* dx, int64_t stride, int64_t rows, int heads, int head_dim,
                   const float* cos, const float* sin) {
  rotate(dx, stride, rows, heads, head_dim, cos, sin, -1.0f);
}

}  // namespace troupe::kernels::cpu
