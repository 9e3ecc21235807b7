#pragma once

// Residual connections: the forward adds two streams; the backward passes the gradient to both,
// which is an accumulate.

#include <cstdint>

namespace troupe::kernels {

namespace cpu {
/// out = a + b.
void residual_forward(float* out, const float* a, const float* b, int64_t n);
/// dst += src.
void accumulate(float* dst, const float* src, int64_t n);
}  // namespace cpu

}  // namespace troupe::kernels
