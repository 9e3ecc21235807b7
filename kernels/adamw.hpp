#pragma once

// AdamW with fp32 master weights (decoupled weight decay, bias-corrected moments), and the
// global gradient norm used for clipping.

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/tensor/dtype.hpp"

namespace troupe::kernels {

/// Hyper-parameters of one AdamW update.
struct adamw_params {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  int64_t step = 1;  ///< 1-based, for bias correction
};

namespace cuda {
/// The fused update on f32 master weights; also writes the bf16 copy the forward reads
/// (params_bf16 may be nullptr).
[[nodiscard]] absl::Status adamw_update(float* params, tensor::bf16* params_bf16,
                                        const float* grads, float* m, float* v, int64_t n,
                                        const adamw_params& p, float grad_scale, void* stream);
/// The sum of squares of x in double, by a fixed-shape two-stage reduction (deterministic);
/// waits for the stream.
[[nodiscard]] absl::StatusOr<double> sum_of_squares(const float* x, int64_t n, void* stream);
}  // namespace cuda

namespace cpu {
/// One fused update of n parameters; grads are scaled by grad_scale first (clipping).
void adamw_update(float* params, const float* grads, float* m, float* v, int64_t n,
                  const adamw_params& p, float grad_scale);
/// The sum of squares of x, accumulated in double.
double sum_of_squares(const float* x, int64_t n);
}  // namespace cpu

}  // namespace troupe::kernels
