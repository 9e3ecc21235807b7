#pragma once

// Rotary position embedding as Hugging Face's Llama applies it (rotate_half): in each head of
// size d, the pairs (i, i + d/2) of a token at position p turn by the angle p * inv_freq[i].
// The frequencies (with the model's scaling) are the model's; see models/decoder/rope_frequencies.

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/tensor/dtype.hpp"

namespace troupe::kernels {

namespace cuda {
/// As the CPU's, on the device: positions [rows] and inv_freq [head_dim / 2] in device memory.
[[nodiscard]] absl::Status rope_angles(float* cos, float* sin, const int32_t* positions,
                                       int64_t rows, int head_dim, const float* inv_freq,
                                       void* stream);
/// As the CPU's, on bf16 rows (rotated in f32, rounded once).
[[nodiscard]] absl::Status rope_forward(tensor::bf16* x, int64_t stride, int64_t rows, int heads,
                                        int head_dim, const float* cos, const float* sin,
                                        void* stream);
[[nodiscard]] absl::Status rope_backward(tensor::bf16* dx, int64_t stride, int64_t rows, int heads,
                                         int head_dim, const float* cos, const float* sin,
                                         void* stream);
}  // namespace cuda

namespace cpu {

/// The cosine and sine of each row's angles, cos and sin [rows, head_dim / 2]: row r's angle i
/// is positions[r] * inv_freq[i], computed in f32 and its cosine and sine rounded to f32, as HF
/// does. Made once per batch and shared by every layer's queries and keys.
void rope_angles(float* cos, float* sin, const int32_t* positions, int64_t rows, int head_dim,
                 const float* inv_freq);
/// Rotates, in place, the `heads` heads of `head_dim` floats at the start of each of `rows`
/// rows of x (row stride `stride`) by row r's angles (rope_angles' row r).
void rope_forward(float* x, int64_t stride, int64_t rows, int heads, int head_dim, const float* cos,
                  const float* sin);
/// The gradient through rope_forward, in place: each pair turned back by the same angle (a
/// rotation's transpose is its inverse).
void rope_backward(float* dx, int64_t stride, int64_t rows, int heads, int head_dim,
                   const float* cos, const float* sin);

}  // namespace cpu

}  // namespace troupe::kernels
