#pragma once

#include <string>

#include "absl/status/status.h"
#include "models/gpt/gpt_layout.hpp"

namespace troupe::models {

/// Writes a whole model of troupe's GPT-2 (`layout` covers every layer) to `out_dir` in Hugging
/// Face's layout, as GPT2LMHeadModel: model.safetensors (every parameter under GPT-2's names,
/// f32, metadata format "pt"), config.json and generation_config.json (write_hf_model).
[[nodiscard]] absl::Status write_hf_gpt2(const gpt_layout& layout, const float* params,
                                         const std::string& out_dir);

}  // namespace troupe::models
