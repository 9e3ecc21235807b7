#pragma once

// AdamW with fp32 master weights (decoupled weight decay, bias-corrected moments), and the
// global gradient norm used for clipping.

#include <cstdint>

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

namespace cpu {
/// One fused update of n parameters; grads are scaled by grad_scale first (clipping).
void adamw_update(float* params, const float* grads, float* m, float* v, int64_t n,
                  const adamw_params& p, float grad_scale);
/// The sum of squares of x, accumulated in double.
double sum_of_squares(const float* x, int64_t n);
}  // namespace cpu

}  // namespace troupe::kernels
