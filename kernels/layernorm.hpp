#pragma once

// Layer normalisation over the last dimension (eps 1e-5, as GPT-2).

#include "absl/status/statusor.h"
#include "runtime/tensor/dtype.hpp"
namespace troupe::kernels {

namespace cuda {
[[nodiscard]] absl::Status layernorm_forward(tensor::bf16* out, float* mean, float* rstd,
                                             const tensor::bf16* in, const tensor::bf16* weight,
                                             const tensor::bf16* bias, int rows, int dim,
                                             void* stream);
/// din += d/din (bf16); dweight, dbias += (f32, column sums in a fixed order: deterministic).
[[nodiscard]] absl::Status layernorm_backward(tensor::bf16* din, float* dweight, float* dbias,
                                              const tensor::bf16* dout, const tensor::bf16* in,
                                              const tensor::bf16* weight, const float* mean,
                                              const float* rstd, int rows, int dim, void* stream);
}  // namespace cuda

namespace cpu {
/// out = (in - mean) * rstd * weight + bias per row; saves mean and rstd ([rows]) for backward.
void layernorm_forward(float* out, float* mean, float* rstd, const float* in, const float* weight,
                       const float* bias, int rows, int dim);
/// din += d/din, dweight += d/dweight, dbias += d/dbias.
void layernorm_backward(float* din, float* dweight, float* dbias, const float* dout,
                        const float* in, const float* weight, const float* mean, const float* rstd,
                        int rows, int dim);
}  // namespace cpu

}  // namespace troupe::kernels
