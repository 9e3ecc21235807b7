#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "models/gpt/gpt_layout.hpp"

namespace troupe::models {

/// Writes a whole model (`layout` covers every layer) to `out_dir` in Hugging Face's layout, as
/// the architecture that describes it (hf_architecture_of: GPT2LMHeadModel, LlamaForCausalLM,
/// Qwen2ForCausalLM or Qwen3ForCausalLM): model.safetensors (every parameter under its HF
/// name, f32, metadata format "pt"), config.json and generation_config.json (write_hf_model),
/// generation stopping at `eos_token_ids`.
[[nodiscard]] absl::Status write_hf_export(const gpt_layout& layout, const float* params,
                                           const std::string& out_dir,
                                           std::vector<int32_t> eos_token_ids = {});

}  // namespace troupe::models
