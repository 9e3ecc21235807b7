#pragma once

// The weights of a Hugging Face checkpoint: which tensors a config implies (their names and
// shapes in HF's own layout: nn.Linear weights [out, in], GPT-2's Conv1D [in, out]), and
// reading them from model.safetensors or the shards of model.safetensors.index.json, memory-
// mapped, in F32, BF16 or F16, each checked against the config before it is used.

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/hf/hf_config.hpp"
#include "runtime/tensor/mapped_safetensors.hpp"
#include "runtime/tensor/safetensors.hpp"

namespace troupe::models {

/// One tensor a model of a config has.
struct hf_tensor_spec {
  std::string name;
  tensor::shape_t shape;
};

/// Every tensor of a model of `config`, in HF's names and order (embeddings, each layer's,
/// the final norm, the output head unless tied).
[[nodiscard]] std::vector<hf_tensor_spec> hf_tensor_specs(const decoder_config& config);

/// Reads the weights of the model in `model_dir` as f32 host tensors under the names of
/// hf_tensor_specs, in its order. Errors name the tensor and the file: a missing, extra or
/// misshapen tensor (with the config.json values its shape comes from), a dtype that is not a
/// float, a shard the index names that is absent, a truncated or corrupt file, or a
/// directory with neither model.safetensors nor model.safetensors.index.json. Tensors that
/// checkpoints carry without being weights (GPT-2's attention masks, RoPE's inv_freq) are
/// skipped, and so is a tied model's copy of its output head. A GPTQ checkpoint is
/// INVALID_ARGUMENT (only serving reads it: read_gptq_model).
[[nodiscard]] absl::StatusOr<tensor::named_tensors> read_hf_weights(const std::string& model_dir,
                                                                    const hf_model_config& config);
/// Walks the tensors of the model in `model_dir` (model.safetensors, or the shards its
/// model.safetensors.index.json names): each must be one of `specs` by name and shape, found
/// once, and every one of `specs` must be found; `take` gets each with its index in `specs`.
/// Errors name the tensor and the file (see read_hf_weights). Buffers are skipped, and so is a
/// tied model's copy of its output head.
using hf_tensor_taker =
    std::function<absl::Status(size_t, const tensor::mapped_safetensors::entry&)>;
[[nodiscard]] absl::Status walk_hf_tensors(const std::string& model_dir, const hf_model_config& hf,
                                           const std::vector<hf_tensor_spec>& specs,
                                           const hf_tensor_taker& take);

/// What read_hf_weights checks, without reading the tensors: every file's header, every
/// tensor's name, shape and dtype, the shards the index names (what `troupe check` looks at).
[[nodiscard]] absl::Status check_hf_weights(const std::string& model_dir,
                                            const hf_model_config& config);

/// config.json (to_hf_config_json) and generation_config.json (its stop tokens) into `out_dir`.
[[nodiscard]] absl::Status write_hf_configs(const std::string& out_dir,
                                            const hf_model_config& config);

/// Writes a model in Hugging Face's layout to `out_dir` (created if need be): config.json
/// (to_hf_config_json), generation_config.json (its stop tokens) and model.safetensors with
/// `weights` (f32 host tensors under hf_tensor_specs' names and shapes, every one of them and
/// no other) in `dtype` (f32, or bf16 rounded to nearest even). An error names a missing,
/// extra or misshapen tensor, or the file that could not be written.
[[nodiscard]] absl::Status write_hf_model(const std::string& out_dir, const hf_model_config& config,
                                          const tensor::named_tensors& weights,
                                          tensor::dtype dtype = tensor::dtype::f32);

}  // namespace troupe::models
