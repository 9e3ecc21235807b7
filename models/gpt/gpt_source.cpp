#include "models/gpt/gpt_source.hpp"

#include <filesystem>

#include "absl/strings/str_cat.h"

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
  auto weights = saved->files.find("model.safetensors");
  if (weights == saved->files.end()) {
    return absl::NotFoundError(absl::StrCat(saved->dir, " holds no model.safetensors"));
  }
  std::vector<float> params(layout.total(), 0.0f);
  if (absl::Status s = layout.from_named(weights->second, params.data()); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(saved->dir, "/model.safetensors: ", s.message(),
                                               " (is model: the one it was trained with?)"));
  }
  return params;
}

}  // namespace troupe::models
