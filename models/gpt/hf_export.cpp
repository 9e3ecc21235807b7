#include "models/gpt/hf_export.hpp"

#include "models/hf/hf_config.hpp"
#include "models/hf/hf_weights.hpp"

namespace troupe::models {

absl::Status write_hf_export(const gpt_layout& layout, const float* params,
                             const std::string& out_dir, std::vector<int32_t> eos_token_ids) {
  if (!layout.range().has_embedding() || !layout.range().has_head(layout.config())) {
    return absl::InvalidArgumentError("export needs the whole model, not a pipeline stage");
  }
  hf_model_config hf{hf_architecture_of(layout.config()), layout.config()};
  hf.eos_token_ids = std::move(eos_token_ids);
  return write_hf_model(out_dir, hf, layout.to_named(params));
}

}  // namespace troupe::models
