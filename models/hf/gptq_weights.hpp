#pragma once

// GPTQ checkpoints (config.json's quantization_config, gptq_quantization): reading one into
// troupe's quantized weights, which the CPU decoder multiplies by, and writing one from them
// (`troupe quantize`). Per linear layer PREFIX of a block (model.layers.L.self_attn.q_proj, ...):
//   PREFIX.qweight  I32 [inputs / (32 / bits), outputs]  integer of input i in word i / (32 /
//   bits),
//                                                        bits (i % (32 / bits)) * bits upward
//   PREFIX.qzeros   I32 [groups, outputs / (32 / bits)]  stored zero of output j packed alike
//   PREFIX.scales   F16, BF16 or F32 [groups, outputs]
//   PREFIX.g_idx    I32 [inputs]                         the group of each input: i / group_size
// and w[j][i] = scales[g][j] * (q[i][j] - zero[g][j]), zero = stored + 1 in checkpoint_format
// "gptq" (AutoGPTQ's original), the stored value in "gptq_v2". The other tensors are as in an
// unquantized checkpoint.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/decoder/decoder_layout.hpp"
#include "models/decoder/quantized_weights.hpp"
#include "models/hf/hf_config.hpp"

namespace troupe::models {

/// A quantized checkpoint as the decoder takes it.
struct quantized_hf_model {
  std::vector<float> params;  ///< laid out by the layout; the quantized matrices' slots are 0
  std::shared_ptr<const quantized_weights> quantized;
};

/// Reads the GPTQ checkpoint in `model_dir` (hf.quantization set) for `layout` (a whole model
/// of hf.model). Errors name the file and tensor: anything walk_hf_tensors refuses, an integer
/// tensor that is not I32, a g_idx out of order, and a shape troupe's kernel cannot take.
[[nodiscard]] absl::StatusOr<quantized_hf_model> read_gptq_model(const decoder_layout& layout,
                                                                 const std::string& model_dir,
                                                                 const hf_model_config& hf);

/// What read_gptq_model checks without converting the integers (`troupe check`).
[[nodiscard]] absl::Status check_gptq_weights(const std::string& model_dir,
                                              const hf_model_config& hf);

/// Writes `layout`'s model with `params` (f32) and its block weights `quantized` (every one of
/// them, symmetric, from quantized_weights::quantize) as a GPTQ checkpoint in `out_dir`:
/// config.json with `config`'s quantization_config (checkpoint_format gptq), generation_config.json
/// and model.safetensors (scales in F32; the rest of the tensors F32).
[[nodiscard]] absl::Status write_gptq_model(const std::string& out_dir,
                                            const hf_model_config& config,
                                            const decoder_layout& layout, const float* params,
                                            const quantized_weights& quantized);

}  // namespace troupe::models
