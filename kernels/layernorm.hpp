#pragma once

// Layer normalisation over the last dimension (eps 1e-5, as GPT-2).

namespace troupe::kernels {

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
