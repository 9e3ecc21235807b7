#include "models/decoder/decoder_source.hpp"

#include <filesystem>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "models/decoder/decoder_checkpoint.hpp"
#include "models/hf/hf_config.hpp"
#include "models/hf/hf_weights.hpp"
#include "models/vocab/hf_vocabulary.hpp"
#include "runtime/base/status.hpp"

namespace troupe::models {

absl::StatusOr<decoder_config> decoder_config_of(const std::optional<config::model_spec>& model) {
  decoder_config c;
  if (model && !model->path.empty()) {
    TROUPE_ASSIGN_OR_RETURN(const hf_model_config hf, load_hf_config(model->path));
    c = hf.model;
    if (model->ctx && *model->ctx != c.ctx) {
      if (*model->ctx > c.ctx) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model.ctx ", *model->ctx, " is longer than ", model->path,
            "/config.json's max_position_embeddings (", c.ctx, "); use at most ", c.ctx));
      }
      if (c.family == decoder_family::gpt2) {
        return absl::InvalidArgumentError(
            absl::StrCat("model.ctx: a GPT-2's position table has n_positions (", c.ctx,
                         ") rows, so ", model->path,
                         " runs with exactly that context; remove "
                         "model.ctx"));
      }
      c.ctx = *model->ctx;
    }
  } else if (model) {
    c.vocab = model->vocab.value_or(c.vocab);
    c.ctx = model->ctx.value_or(c.ctx);
    c.layers = model->layers.value_or(c.layers);
    c.dim = model->dim.value_or(c.dim);
    c.heads = model->heads.value_or(c.heads);
    if (model->arch != "gpt2") {  // Llama's defaults; Qwen 3's norms and RoPE base
      const bool qwen3 = model->arch == "qwen3";
      c.family = decoder_family::llama;
      c.kv_heads = model->kv_heads.value_or(0);
      c.ffn = model->ffn.value_or((8 * c.dim / 3 + 15) / 16 * 16);
      c.qk_norm = qwen3;
      c.norm_eps = qwen3 ? 1e-6f : 1e-5f;
      c.rope_theta = qwen3 ? 1e6 : 1e4;
    }
  }
  TROUPE_RETURN_IF_ERROR(c.validate());
  return c;
}

namespace {

// What a vocabulary is loaded from: the directory, the model's vocabulary size, and the size and
// modification time of each file hf_vocabulary::load reads (an edited file is read again).
std::string vocabulary_source(const std::string& dir, int32_t vocab) {
  namespace fs = std::filesystem;
  std::error_code error;
  std::string key = absl::StrCat(fs::weakly_canonical(dir, error).string(), " ", vocab);
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}) {
    const fs::path file = fs::path(dir) / name;
    const auto size = fs::file_size(file, error);
    const auto written = fs::last_write_time(file, error);
    absl::StrAppend(&key, " ", error ? -1 : static_cast<int64_t>(size), "@",
                    error ? 0 : written.time_since_epoch().count());
  }
  return key;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const model_vocabulary>> vocabulary_of(
    const std::optional<config::model_spec>& model) {
  const std::string dir = hf_model_dir(model);
  if (dir.empty()) {  // the static byte vocabulary, owned by no one
    return std::shared_ptr<const model_vocabulary>(std::shared_ptr<void>(), &byte_vocabulary());
  }
  TROUPE_ASSIGN_OR_RETURN(const decoder_config config, decoder_config_of(model));
  // The last one loaded is kept: a process checks a directory before it runs the app (`troupe
  // serve`, then the app's check, then the router), and a large tokenizer takes half a second.
  static std::mutex mutex;
  static std::string last_source;
  static std::shared_ptr<const model_vocabulary> last;
  const std::string source = vocabulary_source(dir, config.vocab);
  const std::lock_guard lock(mutex);
  if (last != nullptr && source == last_source) return last;
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<hf_vocabulary> vocabulary,
                          hf_vocabulary::load(dir, config.vocab));
  last = std::move(vocabulary);
  last_source = source;
  return last;
}

absl::Status check_model_dir(const std::optional<config::model_spec>& model) {
  const std::string dir = hf_model_dir(model);
  if (dir.empty()) return absl::OkStatus();
  TROUPE_RETURN_IF_ERROR(vocabulary_of(model).status());
  TROUPE_ASSIGN_OR_RETURN(const hf_model_config hf, load_hf_config(dir));
  return check_hf_weights(dir, hf);
}

nlohmann::json decoder_config_json(const decoder_config& c) {
  nlohmann::json j = {
      {"vocab", c.vocab}, {"ctx", c.ctx}, {"layers", c.layers}, {"dim", c.dim}, {"heads", c.heads}};
  if (c.family != decoder_family::gpt2) {
    j["hf_config"] = to_hf_config_json({hf_architecture_of(c), c});
  }
  return j;
}

absl::StatusOr<decoder_config> decoder_config_from_json(const nlohmann::json& j,
                                                        const std::string& where) {
  if (j.is_object() && j.contains("hf_config")) {
    TROUPE_ASSIGN_OR_RETURN(const hf_model_config hf,
                            parse_hf_config(j["hf_config"], where + ".hf_config"));
    return hf.model;
  }
  decoder_config c;
  for (auto [key, field] : {std::pair{"vocab", &c.vocab},
                            {"ctx", &c.ctx},
                            {"layers", &c.layers},
                            {"dim", &c.dim},
                            {"heads", &c.heads}}) {
    if (!j.is_object() || !j.contains(key) || !j[key].is_number_integer()) {
      return absl::DataLossError(
          absl::StrCat(where, ".", key, " is missing; not a pretraining checkpoint?"));
    }
    *field = j[key].get<int>();
  }
  TROUPE_RETURN_IF_ERROR(c.validate());
  return c;
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

bool is_hf_model_dir(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  return fs::exists(p / "config.json") && !fs::exists(p / "manifest.json") &&
         !fs::exists(p / "checkpoints");
}

absl::StatusOr<weights_source> find_weights(const std::string& path, const decoder_config& model,
                                            const std::string& setting) {
  if (is_hf_model_dir(path)) {
    absl::StatusOr<hf_model_config> hf = load_hf_config(path);
    if (!hf.ok()) {
      return absl::Status(hf.status().code(),
                          absl::StrCat(setting, " ", path, ": ", hf.status().message()));
    }
    decoder_config held = hf->model;
    held.ctx = model.ctx;  // a Llama's weights do not depend on its context
    if (decoder_config_json(held) != decoder_config_json(model)) {
      return absl::FailedPreconditionError(
          absl::StrCat(setting, " ", path, "/config.json describes model ",
                       decoder_config_json(hf->model).dump(), " but this config's model is ",
                       decoder_config_json(model).dump(),
                       "; give the same model.path, or a directory of this model's shape"));
    }
    return weights_source{path, 0};
  }
  TROUPE_ASSIGN_OR_RETURN(const checkpoint::checkpoint saved, read_checkpoint_at(path, setting));
  const nlohmann::json held = saved.meta.value("model", nlohmann::json());
  if (held != decoder_config_json(model)) {
    return absl::FailedPreconditionError(absl::StrCat(setting, " ", saved.dir, " holds model ",
                                                      held.dump(), " but this config's model is ",
                                                      decoder_config_json(model).dump()));
  }
  return weights_source{saved.dir, saved.step};
}

absl::StatusOr<tensor::named_tensors> read_model_tensors(const std::string& dir) {
  if (is_hf_model_dir(dir)) {
    TROUPE_ASSIGN_OR_RETURN(const hf_model_config hf, load_hf_config(dir));
    return read_hf_weights(dir, hf);
  }
  TROUPE_ASSIGN_OR_RETURN(const checkpoint::checkpoint saved,
                          checkpoint::checkpoint_store::read(dir));
  return checkpoint_model(saved);
}

absl::StatusOr<std::vector<float>> read_decoder_weights(const decoder_layout& layout,
                                                        const std::string& path,
                                                        const std::string& setting) {
  if (is_hf_model_dir(path)) return read_hf_params(layout, path);
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

absl::StatusOr<std::vector<float>> read_hf_params(const decoder_layout& layout,
                                                  const std::string& model_dir) {
  TROUPE_ASSIGN_OR_RETURN(const hf_model_config hf, load_hf_config(model_dir));
  TROUPE_ASSIGN_OR_RETURN(const tensor::named_tensors weights, read_hf_weights(model_dir, hf));
  std::vector<float> params(layout.total());
  if (absl::Status s = layout.from_named(weights, params.data()); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(model_dir, ": ", s.message()));
  }
  return params;
}

}  // namespace troupe::models
