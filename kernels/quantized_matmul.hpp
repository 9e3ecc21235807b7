#pragma once

// Weight-only quantization: a linear layer's weight matrix [rows = outputs, cols = inputs] kept
// as 8- or 4-bit integers in groups of `group_size` consecutive inputs of a row, each group with
// its own scale and zero point, and multiplied by f32 activations that stay f32 (the integers
// are widened to f32 in registers). As GPTQ and llama.cpp's Q8_0/Q4_0 do, a group's weights are
//   w[r][k] = scales[r][g] * (v[r][k] - zeros[r][g]),   g = k / group_size,
// where v is the stored integer read as signed: an int8, or a 4-bit value minus 8 (in [-8, 7]).

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/tensor/dtype.hpp"

namespace troupe::kernels {

/// A view of one quantized matrix. bits 8: each row is `cols` int8s. bits 4: each row is
/// cols / 2 bytes, every 16 inputs k0 + [0, 16) in 8 bytes, byte i holding input k0 + i in its low
/// nibble and k0 + 8 + i in its high one (so that one 8-byte load widens to two f32 vectors).
struct quantized_matrix {
  int bits = 8;
  int rows = 0, cols = 0;
  int group_size = 0;             ///< inputs per scale; `cols`: one scale per output channel
  const uint8_t* q = nullptr;     ///< the integers, rows * row_bytes()
  const float* scales = nullptr;  ///< [rows, groups()]
  const float* zeros = nullptr;   ///< [rows, groups()]; null: every zero point is 0 (symmetric)

  [[nodiscard]] int groups() const { return cols / group_size; }
  [[nodiscard]] int64_t row_bytes() const { return bits == 8 ? cols : cols / 2; }
};

namespace cuda {
/// out[m, rows] = x[m, cols] @ dequantize(w)^T (+ bias[rows]) on the GPU, bf16 activations and
/// f32 accumulation: `w`'s integers, scales and zero points are device pointers (the same layout
/// as on the host). One warp per output, up to 4 rows of x at once.
[[nodiscard]] absl::Status quantized_matmul(tensor::bf16* out, const tensor::bf16* x,
                                            const quantized_matrix& w, const tensor::bf16* bias,
                                            int m, void* stream);
}  // namespace cuda

namespace cpu {
class thread_pool;

/// OK when a [rows, cols] matrix can be quantized to `bits` in groups of `group_size` inputs:
/// bits 8 or 4, cols and group_size multiples of 16 with group_size dividing cols; else
/// INVALID_ARGUMENT saying which and what to choose.
[[nodiscard]] absl::Status check_quantizable(int bits, int rows, int cols, int group_size);

/// Quantizes w (element [r][k] at w[r * row_stride + k * col_stride], so that a matrix stored
/// [inputs, outputs] is read transposed) symmetrically by rounding to nearest: each group's scale
/// is its largest magnitude over 127 (bits 8) or 7 (bits 4), its zero point 0. Writes
/// rows * row_bytes() integers to `q` and rows * groups scales to `scales`. The shape must pass
/// check_quantizable.
void quantize_symmetric(const float* w, int64_t row_stride, int64_t col_stride, int bits, int rows,
                        int cols, int group_size, uint8_t* q, float* scales);

/// The f32 matrix [rows, cols] that `w` stands for, by the formula above.
void dequantize(const quantized_matrix& w, float* out);
/// Its row `r` alone: `cols` floats (a token's embedding, when the embedding is the quantized
/// output head).
void dequantize_row(const quantized_matrix& w, int r, float* out);

/// out[m, rows] = x[m, cols] @ dequantize(w)^T (+ bias[rows]) without forming the f32 matrix.
/// Each output is a fixed sequence of operations over its row of x alone, so a row's result is
/// the same bits whatever m is (batch invariance, as kernels::cpu::matmul's), and however its
/// tiles of output channels are spread over `pool` (nullptr: the caller alone; never from inside
/// one of `pool`'s own tasks).
void quantized_matmul(float* out, const float* x, const quantized_matrix& w, const float* bias,
                      int m, thread_pool* pool = nullptr);

}  // namespace cpu
}  // namespace troupe::kernels
