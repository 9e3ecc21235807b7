#pragma once

// GELU, tanh approximation (GPT-2's): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

#include <cstdint>

namespace troupe::kernels {

namespace cpu {
void gelu_forward(float* out, const float* in, int64_t n);
/// din = dout * gelu'(in) (overwrites).
void gelu_backward(float* din, const float* in, const float* dout, int64_t n);
}  // namespace cpu

}  // namespace troupe::kernels
