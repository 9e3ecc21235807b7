#pragma once

// A Hugging Face model's description, read from its config.json (and generation_config.json):
// the decoder family troupe runs (GPT-2, and Llama with its relatives Mistral, Qwen 2 and
// Qwen 3), every hyperparameter the forward pass depends on, and the tokens generation stops
// at. Anything the family cannot honour is refused by key, value and what is supported, never
// ignored.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace troupe::models {

/// The block a family is built of.
enum class decoder_family {
  gpt2,   ///< learned positions, LayerNorm with biases, GELU (tanh) MLP, fused biased QKV
  llama,  ///< RoPE, RMSNorm, SwiGLU MLP, grouped-query attention (Llama, Mistral, Qwen 2/3)
};

/// RoPE's frequency scaling (config.json's rope_scaling).
struct rope_scaling {
  enum class kind { none, linear, llama3 } type = kind::none;
  double factor = 1.0;
  double low_freq_factor = 1.0;                     ///< llama3
  double high_freq_factor = 4.0;                    ///< llama3
  int64_t original_max_position_embeddings = 8192;  ///< llama3
};

/// What a checkpoint's config.json says, in troupe's terms.
struct hf_model_config {
  std::string architecture;  ///< as config.json names it, e.g. "Qwen3ForCausalLM"
  decoder_family family = decoder_family::llama;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;  ///< grouped-query attention: heads share these key/value heads
  int64_t head_dim = 0;  ///< explicit in Qwen 3 (heads * head_dim may differ from hidden_size)
  int64_t max_position_embeddings = 0;
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;
  rope_scaling rope;
  bool qkv_bias = false;         ///< the query, key and value projections have biases (Qwen 2)
  bool o_bias = false;           ///< the attention output projection has a bias
  bool qk_norm = false;          ///< per-head RMSNorm of queries and keys (Qwen 3)
  bool tied_embeddings = false;  ///< the output head is the token embedding
  std::string torch_dtype;       ///< what the checkpoint was saved in ("bfloat16", ...), if said
  std::vector<int32_t> eos_token_ids;  ///< config.json's and generation_config.json's, merged
  int32_t bos_token_id = -1;
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

}  // namespace troupe::models
