#pragma once

#include <string>

#include "absl/status/status.h"
#include "models/gpt/gpt_layout.hpp"
#include "nlohmann/json.hpp"

namespace troupe::models {

/// GPT-2's Hugging Face `config.json` for a model of `config` (GPT2LMHeadModel, tanh GELU
/// "gelu_new", tied embeddings).
[[nodiscard]] nlohmann::json hf_gpt2_config(const gpt_config& config);

/// Writes `out_dir/model.safetensors` (every parameter under GPT-2's Hugging Face names, f32,
/// metadata format "pt") and `out_dir/config.json`, creating out_dir. `layout` covers the whole
/// model.
[[nodiscard]] absl::Status write_hf_gpt2(const gpt_layout& layout, const float* params,
                                         const std::string& out_dir);

}  // namespace troupe::models
