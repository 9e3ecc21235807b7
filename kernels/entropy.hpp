#pragma once

// The entropy of each row's softmax distribution, H = -sum_j p_j log p_j (veRL's
// entropy_from_logits), from the probabilities the cross-entropy forward keeps: the entropy
// bonus of the RL policy loss and veRL's actor/entropy. Its gradient, dH/dz_j = -p_j (log p_j +
// H), is folded into cross_entropy_backward.

namespace troupe::kernels::cpu {
/// h[i] = entropy of probs[i] (a probability of 0 adds nothing).
void entropy_forward(float* h, const float* probs, int rows, int vocab);
}  // namespace troupe::kernels::cpu
