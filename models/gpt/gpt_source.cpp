#include "models/gpt/gpt_source.hpp"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "models/gpt/gpt_checkpoint.hpp"

namespace troupe::models {

gpt_config gpt_config_of(const std::optional<config::model_spec>& model) {
  gpt_config c;
  if (model) {
    c.vocab = model->vocab;
    c.ctx = model->ctx;
    c.layers = model->layers;
    c.dim = model->dim;
    c.heads = model->heads;
  }
  return c;
}

nlohmann::json gpt_config_json(const gpt_config& c) {
  return {
      {"vocab", c.vocab}, {"ctx", c.ctx}, {"layers", c.layers}, {"dim", c.dim}, {"heads", c.heads}};
}

absl::StatusOr<checkpoint::checkpoint> read_checkpoint_at(const std::string& path,
                                                          const std::string& setting) {
  namespace fs = std::filesystem;
  absl::StatusOr<checkpoint::checkpoint> saved;
  if (fs::exists(fs::path(path) / "manifest.json")) {
    saved = checkpoint::checkpoint_store::read(path);
  } else {
    std::vector<std::string> warnings;
    saved =
        checkpoint::checkpoint_store(checkpoint::checkpoint_root_of(path)).read_latest(&warnings);
  }
  if (!saved.ok()) {
    return absl::Status(saved.status().code(),
                        absl::StrCat(setting, " ", path, ": ", saved.status().message()));
  }
  return saved;
}

absl::StatusOr<std::vector<float>> read_gpt_weights(const gpt_layout& layout,
                                                    const std::string& path,
                                                    const std::string& setting) {
  absl::StatusOr<checkpoint::checkpoint> saved = read_checkpoint_at(path, setting);
  if (!saved.ok()) return saved.status();
  TROUPE_ASSIGN_OR_RETURN(const tensor::named_tensors weights, checkpoint_model(*saved));
  std::vector<float> params(layout.total(), 0.0f);
  if (absl::Status s = layout.from_named(weights, params.data()); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(saved->dir, ": ", s.message(),
                                               " (is model: the one it was trained with?)"));
  }
  return params;
}

}  // namespace troupe::models
