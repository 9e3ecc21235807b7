#pragma once

// The Llama family's MLP activation: out = silu(gate) * up, silu(x) = x / (1 + e^-x).

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/tensor/dtype.hpp"

namespace troupe::kernels {

namespace cuda {
/// gate_up [rows, 2 width] holds each row's gate then its up (the one GEMM of the layout's
/// back-to-back gate_proj and up_proj); out [rows, width].
[[nodiscard]] absl::Status swiglu_forward(tensor::bf16* out, const tensor::bf16* gate_up,
                                          int64_t rows, int width, void* stream);
/// dgate_up [rows, 2 width] (overwritten; it may be gate_up) from dout [rows, width].
[[nodiscard]] absl::Status swiglu_backward(tensor::bf16* dgate_up, const tensor::bf16* gate_up,
                                           const tensor::bf16* dout, int64_t rows, int width,
                                           void* stream);
}  // namespace cuda

namespace cpu {

/// n elements; out may alias gate or up.
void swiglu_forward(float* out, const float* gate, const float* up, int64_t n);
/// dgate = dout up silu'(gate) and dup = dout silu(gate) (overwritten); dout may alias either.
void swiglu_backward(float* dgate, float* dup, const float* gate, const float* up,
                     const float* dout, int64_t n);

}  // namespace cpu

}  // namespace troupe::kernels
