#pragma once

// Residual connections: the forward adds two streams; the backward passes the gradient to both,
// which is an accumulate.

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/tensor/dtype.hpp"

namespace troupe::kernels {

namespace cuda {
[[nodiscard]] absl::Status residual_forward(tensor::bf16* out, const tensor::bf16* a,
                                            const tensor::bf16* b, int64_t n, void* stream);
[[nodiscard]] absl::Status accumulate(tensor::bf16* dst, const tensor::bf16* src, int64_t n,
                                      void* stream);
}  // namespace cuda

namespace cpu {
/// out = a + b.
void residual_forward(float* out, const float* a, const float* b, int64_t n);
/// dst += src.
void accumulate(float* dst, const float* src, int64_t n);
}  // namespace cpu

}  // namespace troupe::kernels
