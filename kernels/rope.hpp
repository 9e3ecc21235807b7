#pragma once

// Rotary position embedding as Hugging Face's Llama applies it (rotate_half): in each head of
// size d, the pairs (i, i + d/2) of a token at position p turn by the angle p * inv_freq[i].
// The frequencies (with the model's scaling) are the model's; see models/gpt/rope_frequencies.

#include <cstdint>

namespace troupe::kernels::cpu {

/// Rotates, in place, the `heads` heads of `head_dim` floats at the start of each of `rows`
/// rows of x (row stride `stride`), row r at position positions[r]. inv_freq has head_dim / 2
/// entries. The angle is computed in f32 and its cosine and sine rounded to f32, as HF does.
void rope_forward(float* x, int64_t stride, const int32_t* positions, int64_t rows, int heads,
                  int head_dim, const float* inv_freq);
/// The gradient through rope_forward, in place: each pair turned back by the same angle (a
/// rotation's transpose is its inverse).
void rope_backward(float* dx, int64_t stride, const int32_t* positions, int64_t rows, int heads,
                   int head_dim, const float* inv_freq);

}  // namespace troupe::kernels::cpu
