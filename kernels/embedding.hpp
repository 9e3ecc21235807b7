#pragma once

// Token plus position embedding: out[i] = wte[tokens[i]] + wpe[positions[i]].

#include <cstdint>

namespace troupe::kernels {

namespace cpu {
void embedding_forward(float* out, const int32_t* tokens, const int32_t* positions, int n,
                       const float* wte, const float* wpe, int dim);
/// dwte[tokens[i]] += dout[i], dwpe[positions[i]] += dout[i].
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                        const int32_t* positions, int n, int dim);
}  // namespace cpu

}  // namespace troupe::kernels
