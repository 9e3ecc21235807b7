#pragma once

// PPO's clipped value loss, per response token, as veRL computes it (`compute_value_loss`),
// and its gradient wrt the predicted values:
//   V_clip = clip(V_pred, V_old - eps, V_old + eps)
//   L      = 0.5 * agg(max((V_pred - R)^2, (V_clip - R)^2))
// with PyTorch's gradient rules at ties (kernels/cpu/autograd_rules.hpp).

#include <cstdint>

namespace troupe::kernels {

struct value_loss_stats {
  double vf_loss = 0;      ///< critic/vf_loss
  double vf_clipfrac = 0;  ///< masked mean of [(V_clip - R)^2 > (V_pred - R)^2]: critic/vf_clipfrac
};

namespace cpu {
/// Over n tokens; `weights` come from loss_agg_weights. dvpreds[i] = d vf_loss / d vpreds[i].
/// `cliprange_value` is veRL's cliprange_value (eps).
value_loss_stats clipped_value_loss(float* dvpreds, const float* vpreds, const float* returns,
                                    const float* old_values, const float* mask,
                                    const float* weights, int64_t n, float cliprange_value);
}  // namespace cpu

}  // namespace troupe::kernels
