#pragma once

// RMSNorm (the Llama family's norm): out = in / sqrt(mean(in^2) + eps) * weight, per row, in
// f32 as Hugging Face's LlamaRMSNorm computes it.

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/tensor/dtype.hpp"

namespace troupe::kernels {

namespace cuda {
/// The rows one call normalises: `tokens` x `per_token` rows of `dim` values, row (t, j) at
/// t * stride + j * dim. Plain rows: per_token 1, stride dim; Qwen 3's per-head norm of the
/// queries inside a [q | k | v] row: per_token heads, dim head_dim, stride the row's width.
struct norm_rows {
  int64_t tokens = 0;
  int dim = 0;
  int per_token = 1;
  int64_t stride = 0;  ///< 0: dim * per_token (contiguous)

  [[nodiscard]] int64_t count() const { return tokens * per_token; }
  [[nodiscard]] int64_t token_stride() const {
    return stride > 0 ? stride : int64_t{dim} * per_token;
  }
};

/// bf16 rows in, bf16 rows out (out may be in), computed in f32; rstd [count()] or null.
[[nodiscard]] absl::Status rmsnorm_forward(tensor::bf16* out, float* rstd, const tensor::bf16* in,
                                           const tensor::bf16* weight, const norm_rows& rows,
                                           float eps, void* stream);
/// din += d/din (bf16, same indexing as in) and dweight += d/dweight (f32, column sums in a
/// fixed order: deterministic), from the forward's rstd.
[[nodiscard]] absl::Status rmsnorm_backward(tensor::bf16* din, float* dweight,
                                            const tensor::bf16* dout, const tensor::bf16* in,
                                            const tensor::bf16* weight, const float* rstd,
                                            const norm_rows& rows, void* stream);
}  // namespace cuda

namespace cpu {

/// Rows of `dim` floats (row stride `dim` for in and out; they may alias). `rstd` [rows] gets
/// each row's 1 / sqrt(mean + eps) for backward, or is null.
void rmsnorm_forward(float* out, float* rstd, const float* in, const float* weight, int64_t rows,
                     int dim, float eps);
/// din += d/din and dweight += d/dweight (its column sums in row order), from the forward's
/// rstd.
void rmsnorm_backward(float* din, float* dweight, const float* dout, const float* in,
                      const float* weight, const float* rstd, int64_t rows, int dim);

}  // namespace cpu

}  // namespace troupe::kernels
