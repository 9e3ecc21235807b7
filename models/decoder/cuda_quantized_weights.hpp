#pragma once

#include <cstdint>
#include <initializer_list>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "kernels/quantized_matmul.hpp"
#include "models/decoder/decoder_layout.hpp"
#include "models/decoder/quantized_weights.hpp"
#include "runtime/tensor/tensor.hpp"

namespace troupe::models {

/// A model's quantized matrices (quantized_weights) on a CUDA device, as the CUDA decoder
/// multiplies by them (kernels::cuda::quantized_matmul), each found by its f32 weight's offset. A
/// Llama block's q, k and v are stacked into one matrix (found at q_proj's offset), and its gate
/// and up into another (at gate_proj's), so that one call fills the rows of [q | k | v] and
/// [gate | up] that the decoder's bf16 GEMMs fill.
class cuda_quantized_weights {
 public:
  /// Copies `host`'s matrices of `layout` (a whole model) to CUDA device `device`.
  /// INVALID_ARGUMENT when parts to stack are not quantized alike (bits, inputs, group size,
  /// zero points), naming the layer.
  [[nodiscard]] static absl::StatusOr<cuda_quantized_weights> upload(const decoder_layout& layout,
                                                                     const quantized_weights& host,
                                                                     int device);

  /// The device matrix whose f32 weight starts at `offset`; null when that weight stays bf16.
  [[nodiscard]] const kernels::quantized_matrix* find(int64_t offset) const;

 private:
  struct matrix {
    kernels::quantized_matrix view;  // pointing into the tensors below
    tensor::tensor q, scales, zeros;
  };
  absl::Status stack(const quantized_weights& host, std::initializer_list<int64_t> parts, int layer,
                     int device);

  std::unordered_map<int64_t, matrix> matrices_;
};

}  // namespace troupe::models
