#pragma once

// How PyTorch's autograd splits a gradient at the points where max, min and clamp are not
// differentiable, so that hand-written backward passes of losses defined in PyTorch (the RL
// objectives) give the same gradients, ties included.

namespace troupe::kernels::cpu {

/// The share of d max(a, b) that flows to `a`: 1 if a > b, 1/2 if equal, else 0.
inline float max_share(float a, float b) {
  return a > b ? 1.0f : a == b ? 0.5f : 0.0f;
}
/// The share of d min(a, b) that flows to `a`: 1 if a < b, 1/2 if equal, else 0.
inline float min_share(float a, float b) {
  return a < b ? 1.0f : a == b ? 0.5f : 0.0f;
}
/// Whether clamp(x, lo, hi) passes the gradient to x: inside the bounds, the bounds included.
inline float clamp_passes(float x, float lo, float hi) {
  return x >= lo && x <= hi ? 1.0f : 0.0f;
}

}  // namespace troupe::kernels::cpu
