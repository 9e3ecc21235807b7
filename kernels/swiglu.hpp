#pragma once

// The Llama family's MLP activation: out = silu(gate) * up, silu(x) = x / (1 + e^-x).

#include <cstdint>

namespace troupe::kernels::cpu {

/// n elements; out may alias gate or up.
void swiglu_forward(float* out, const float* gate, const float* up, int64_t n);
/// dgate = dout up silu'(gate) and dup = dout silu(gate) (overwritten); dout may alias either.
void swiglu_backward(float* dgate, float* dup, const float* gate, const float* up,
                     const float* dout, int64_t n);

}  // namespace troupe::kernels::cpu
