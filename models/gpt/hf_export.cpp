#include "models/gpt/hf_export.hpp"

#include "models/hf/hf_weights.hpp"

namespace troupe::models {

absl::Status write_hf_gpt2(const gpt_layout& layout, const float* params,
                           const std::string& out_dir) {
  if (!layout.range().has_embedding() || !layout.range().has_head(layout.config())) {
    return absl::InvalidArgumentError("export needs the whole model, not a pipeline stage");
  }
  return write_hf_model(out_dir, {"GPT2LMHeadModel", layout.config()}, layout.to_named(params));
}

}  // namespace troupe::models
