#pragma once

// GELU, tanh approximation (GPT-2's): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/tensor/dtype.hpp"

namespace troupe::kernels {

namespace cuda {
[[nodiscard]] absl::Status gelu_forward(tensor::bf16* out, const tensor::bf16* in, int64_t n,
                                        void* stream);
[[nodiscard]] absl::Status gelu_backward(tensor::bf16* din, const tensor::bf16* in,
                                         const tensor::bf16* dout, int64_t n, void* stream);
}  // namespace cuda

namespace cpu {
void gelu_forward(float* out, const float* in, int64_t n);
/// din = dout * gelu'(in) (overwrites).
void gelu_backward(float* din, const float* in, const float* dout, int64_t n);
}  // namespace cpu

}  // namespace troupe::kernels
