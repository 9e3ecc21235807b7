#pragma once

// A Hugging Face model's description, read from its config.json (and generation_config.json):
// the decoder family troupe runs (GPT-2, and Llama with its relatives Mistral, Qwen 2 and
// Qwen 3), every hyperparameter the forward pass depends on, and the tokens generation stops
// at. Anything the family cannot honour is refused by key, value and what is supported, never
// ignored.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/decoder/decoder_config.hpp"
#include "nlohmann/json.hpp"

namespace troupe::models {

/// config.json's quantization_config of a GPTQ checkpoint (AutoGPTQ's and GPTQModel's format,
/// which transformers, optimum and vLLM load): each block's linear weights as `qweight` (the
/// integers packed along the inputs into int32s), `qzeros` (the zero points, packed along the
/// outputs), `scales` and `g_idx`, and w = scale * (q - zero), where the stored zero is one less
/// than the zero point in the original format ("gptq") and the zero point itself in "gptq_v2".
struct gptq_quantization {
  int bits = 4;                 ///< 4 or 8
  int group_size = 0;           ///< inputs per scale; 0 (config.json's -1): one per output channel
  bool zeros_minus_one = true;  ///< checkpoint_format "gptq" (true) or "gptq_v2"
  bool symmetric = true;        ///< config.json's sym (every zero point the middle value)
};

/// What a checkpoint's config.json (and generation_config.json) say, in troupe's terms.
struct hf_model_config {
  std::string architecture;  ///< as config.json names it, e.g. "Qwen3ForCausalLM"
  decoder_config model;      ///< the decoder; ctx is max_position_embeddings
  std::string torch_dtype;   ///< what the checkpoint was saved in ("bfloat16", ...), if said
  std::vector<int32_t> eos_token_ids;  ///< config.json's and generation_config.json's, merged
  int32_t bos_token_id = -1;
  std::optional<gptq_quantization> quantization;  ///< a GPTQ checkpoint's
};

/// The supported `architectures` entries, for messages.
[[nodiscard]] const std::vector<std::string>& supported_architectures();

/// Reads a config.json document; `where` names it in errors ("DIR/config.json: rope_scaling:
/// 'yarn' is not supported; troupe reads linear and llama3").
[[nodiscard]] absl::StatusOr<hf_model_config> parse_hf_config(const nlohmann::json& config,
                                                              const std::string& where);

/// Reads MODEL_DIR/config.json, and MODEL_DIR/generation_config.json when present (its
/// eos_token_id list joins the config's). NOT_FOUND naming the file when config.json is absent.
[[nodiscard]] absl::StatusOr<hf_model_config> load_hf_config(const std::string& model_dir);

/// The config.json of `config` as transformers writes one for its architecture (the inverse of
/// parse_hf_config: parsing it gives `config` back).
[[nodiscard]] nlohmann::json to_hf_config_json(const hf_model_config& config);

/// The architecture that describes `c` as transformers names it: GPT2LMHeadModel, Qwen3ForCausalLM
/// (q/k norms), Qwen2ForCausalLM (q/k/v biases without an output bias), else LlamaForCausalLM.
[[nodiscard]] std::string hf_architecture_of(const decoder_config& c);

/// The model_type of an architecture ("llama", "qwen3", ...).
[[nodiscard]] std::string model_type_of(const std::string& architecture);

}  // namespace troupe::models
