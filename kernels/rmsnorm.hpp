#pragma once

// RMSNorm (the Llama family's norm): out = in / sqrt(mean(in^2) + eps) * weight, per row, in
// f32 as Hugging Face's LlamaRMSNorm computes it.

#include <cstdint>

namespace troupe::kernels::cpu {

/// Rows of `dim` floats (row stride `dim` for in and out; they may alias). `rstd` [rows] gets
/// each row's 1 / sqrt(mean + eps) for backward, or is null.
void rmsnorm_forward(float* out, float* rstd, const float* in, const float* weight, int64_t rows,
                     int dim, float eps);
/// din += d/din and dweight += d/dweight (its column sums in row order), from the forward's
/// rstd.
void rmsnorm_backward(float* din, float* dweight, const float* dout, const float* in,
                      const float* weight, const float* rstd, int64_t rows, int dim);

}  // namespace troupe::kernels::cpu
