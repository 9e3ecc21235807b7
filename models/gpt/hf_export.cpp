#include "models/gpt/hf_export.hpp"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.hpp"

namespace troupe::models {

nlohmann::json hf_gpt2_config(const gpt_config& c) {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", c.vocab},
          {"n_positions", c.ctx},
          {"n_ctx", c.ctx},
          {"n_embd", c.dim},
          {"n_layer", c.layers},
          {"n_head", c.heads},
          {"n_inner", nullptr},
          {"activation_function", "gelu_new"},
          {"layer_norm_epsilon", 1e-5},
          {"tie_word_embeddings", true},
          {"torch_dtype", "float32"}};
}

absl::Status write_hf_gpt2(const gpt_layout& layout, const float* params,
                           const std::string& out_dir) {
  if (!layout.range().has_embedding() || !layout.range().has_head(layout.config())) {
    return absl::InvalidArgumentError("export needs the whole model, not a pipeline stage");
  }
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat(out_dir, ": cannot create: ", ec.message()));
  tensor::named_tensors weights = layout.to_named(params);
  weights.metadata = {{"format", "pt"}};
  TROUPE_RETURN_IF_ERROR(tensor::write_safetensors(
      (std::filesystem::path(out_dir) / "model.safetensors").string(), weights));
  const std::string config_path = (std::filesystem::path(out_dir) / "config.json").string();
  std::ofstream out(config_path, std::ios::trunc);
  out << hf_gpt2_config(layout.config()).dump(2) << "\n";
  if (!out) return absl::DataLossError(absl::StrCat(config_path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace troupe::models
