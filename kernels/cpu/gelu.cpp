#include "kernels/gelu.hpp"

#include "kernels/cpu/fast_math.hpp"

namespace troupe::kernels::cpu {
namespace {
constexpr float sqrt_2_over_pi = 0.7978845608028654f;
constexpr float cubic = 0.044715f;
}  // namespace

void gelu_forward(float* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = in[i];
    const float u = sqrt_2_over_pi * (x + cubic * x * x * x);
    out[i] = 0.5f * x * (1.0f + fast_tanh(u));
  }
}

void gelu_backward(float* din, const float* in, const float* dout, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = in[i];
    const float u = sqrt_2_over_pi * (x + cubic * x * x * x);
    const float t = fast_tanh(u);
    const float du = sqrt_2_over_pi * (1.0f + 3.0f * cubic * x * x);
    din[i] = dout[i] * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
  }
}

}  // namespace troupe::kernels::cpu
