#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/quantized_matmul.hpp"
#include "models/decoder/decoder_layout.hpp"

namespace troupe::models {

/// Weight-only quantization of a model's linear layers (`serve.engine.quantization`).
struct weight_quantization {
  int bits = 0;        ///< 0: none (f32); 8 or 4
  int group_size = 0;  ///< inputs per scale; 0: bits 8 one per output channel, bits 4 groups of
                       ///< 128 (gcd(128, inputs) where 128 does not divide a layer's inputs)
  /// The output head too, int8 per output channel (the token embedding with it, when tied).
  bool head = false;

  /// What `serve.engine.quantization` (and `troupe eval --quantization`) mean by int8 and int4:
  /// int8 quantizes the head too, as llama.cpp's Q8_0 does; int4 keeps it f32, as GPTQ leaves
  /// lm_head (and llama.cpp keeps its output at more bits).
  [[nodiscard]] static weight_quantization serving(int bits, int group_size) {
    return {bits, group_size, bits == 8};
  }
  [[nodiscard]] bool enabled() const { return bits != 0; }
  /// "int8 per output channel", "int4 in groups of 128 inputs", "... and the output head",
  /// "f32".
  [[nodiscard]] std::string describe() const;
};

/// Quantized copies of every block's linear weights (GPT-2's c_attn, c_proj, c_fc and mlp.c_proj;
/// the Llama family's q/k/v/o, gate, up and down projections), each as [outputs, inputs] (GPT-2's
/// Conv1D [in, out] read transposed), and with weight_quantization::head of the output head
/// [vocab, dim] (when tied, the token embedding: the decoder then reads a token's embedding from
/// its quantized row). The norms, biases and the rest stay f32: the decoder reads those from the
/// f32 buffer.
class quantized_weights {
 public:
  /// One quantized matrix: its integers, scales and zero points (empty: all 0), in the layout of
  /// kernels::quantized_matrix, whose view points into them.
  struct matrix {
    std::vector<uint8_t> q;
    std::vector<float> scales, zeros;
    kernels::quantized_matrix view;
    bool stored_transposed = false;  ///< its f32 weight is [inputs, outputs] (GPT-2's Conv1D)
  };
  /// A linear weight of a block: where its f32 weight starts in the buffer, its Hugging Face
  /// name within the block ("self_attn.q_proj"), its shape as [outputs, inputs].
  struct linear_weight {
    const char* name;
    int64_t offset;
    int outputs, inputs;
    bool stored_transposed;
  };
  /// Every linear weight of block `layer` of `layout`, in Hugging Face's order.
  [[nodiscard]] static std::vector<linear_weight> block_weights(const decoder_layout& layout,
                                                                int layer);

  quantized_weights() = default;

  /// Quantizes `params` (laid out by `layout`, a whole model) symmetrically, rounding to nearest
  /// (kernels::cpu::quantize_symmetric). INVALID_ARGUMENT names the layer and what to choose when
  /// a shape cannot be quantized as asked.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<quantized_weights>> quantize(
      const decoder_layout& layout, const float* params, weight_quantization q);

  /// Takes `m` as the matrix of the f32 weight at `offset` (its view pointed at its own vectors):
  /// how a checkpoint's quantized weights come in.
  void add(int64_t offset, matrix m);

  /// The quantized matrix whose f32 weight starts at `offset` in the buffer; null when that one
  /// stays f32.
  [[nodiscard]] const kernels::quantized_matrix* find(int64_t offset) const;
  /// Writes each quantized matrix's f32 value (kernels::cpu::dequantize) over its weight in
  /// `params` (laid out as the model quantized), leaving the rest: the model the quantized
  /// decoder computes, which the training forward then evaluates (perplexity, tests).
  void dequantize_into(float* params) const;
  /// Gives the memory of the f32 weights these matrices replace in `params` (laid out as the
  /// model quantized) back to the system: the whole pages inside each, by madvise(MADV_DONTNEED),
  /// after which their floats read 0. A server that keeps the buffer for the rest of the model
  /// then holds about the quantized bytes. Returns the bytes given back.
  int64_t release_f32(float* params) const;
  /// The quantized matrices' integers, scales and zero points, in bytes.
  [[nodiscard]] int64_t bytes() const { return bytes_; }

 private:
  std::unordered_map<int64_t, matrix> matrices_;
  int64_t bytes_ = 0;
};

}  // namespace troupe::models
