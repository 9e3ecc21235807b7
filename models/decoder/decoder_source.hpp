#pragma once

// Where a decoder comes from in an app: its shape from the config's `model:` section, its
// weights from a checkpoint or a Hugging Face directory. Every app that runs one (pretraining,
// serving, RLHF) uses these, so they live below apps/.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/decoder/decoder_layout.hpp"
#include "models/vocab/model_vocabulary.hpp"
#include "nlohmann/json.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"
#include "runtime/config/app_spec.hpp"

namespace troupe::models {

/// The decoder that a config's `model:` section describes: troupe's GPT of its shape keys (those
/// absent, and the whole section absent: the tiny GPT's defaults), or the Hugging Face model at
/// `model.path` (its config.json), whose context `model.ctx` may shorten. Errors say what in the
/// directory or the section is wrong, validate() included.
[[nodiscard]] absl::StatusOr<decoder_config> decoder_config_of(
    const std::optional<config::model_spec>& model);

/// `model.path`: the Hugging Face model directory a config names; empty when it names none.
[[nodiscard]] inline std::string hf_model_dir(const std::optional<config::model_spec>& model) {
  return model ? model->path : std::string();
}

/// The vocabulary of the model a config's `model:` section describes: the Hugging Face model's
/// at `model.path` (its tokenizer.json and chat template), else troupe's bytes. The process
/// keeps the last one loaded and hands it out again while its files are unchanged.
[[nodiscard]] absl::StatusOr<std::shared_ptr<const model_vocabulary>> vocabulary_of(
    const std::optional<config::model_spec>& model);

/// What `troupe check` validates of `model.path` before any process starts: config.json, the
/// tokenizer and the chat template, and every weights file's header (names, shapes, dtypes;
/// not the data). OK when the section names no directory.
[[nodiscard]] absl::Status check_model_dir(const std::optional<config::model_spec>& model);

/// The shape of `c` as a checkpoint's manifest records it ({vocab, ctx, layers, dim, heads}, and
/// for the Llama family its whole Hugging Face config.json under "hf_config"), to check that a
/// checkpoint fits a config and to export it.
[[nodiscard]] nlohmann::json decoder_config_json(const decoder_config& c);
/// The model decoder_config_json() recorded; DATA_LOSS naming `where` and the key when it is not
/// one.
[[nodiscard]] absl::StatusOr<decoder_config> decoder_config_from_json(const nlohmann::json& j,
                                                                      const std::string& where);

/// The checkpoint at `path`: a checkpoint directory (it has a manifest.json), a directory of
/// checkpoints, or a run directory (its checkpoints/): then the newest good one. `setting`
/// names where the path came from in the errors (e.g. "serve.checkpoint").
[[nodiscard]] absl::StatusOr<checkpoint::checkpoint> read_checkpoint_at(const std::string& path,
                                                                        const std::string& setting);

/// Whether `path` is a Hugging Face model directory: a config.json, and neither a checkpoint's
/// manifest.json nor a run's checkpoints/.
[[nodiscard]] bool is_hf_model_dir(const std::string& path);

/// Where a run's first weights come from (init_from, a reference, a critic's trunk).
struct weights_source {
  std::string dir;   ///< a checkpoint directory, or a Hugging Face model directory
  int64_t step = 0;  ///< the checkpoint's step; 0 for a Hugging Face model
};
/// The weights `path` names for `model`: a Hugging Face model directory whose config.json
/// describes `model` (its context may differ), or a checkpoint as read_checkpoint_at finds it
/// whose meta.model is `model`. `setting` names where the path came from; FAILED_PRECONDITION
/// shows both models when they differ.
[[nodiscard]] absl::StatusOr<weights_source> find_weights(const std::string& path,
                                                          const decoder_config& model,
                                                          const std::string& setting);
/// The model's tensors in `dir` (a weights_source's): a Hugging Face model's (read_hf_weights)
/// or a checkpoint's (checkpoint_model), under the names decoder_layout::from_named reads.
[[nodiscard]] absl::StatusOr<tensor::named_tensors> read_model_tensors(const std::string& dir);

/// The flat parameters of `layout` from a checkpoint's model.safetensors, or a Hugging Face
/// model's. `path` is a checkpoint directory (it has a manifest.json), a directory of
/// checkpoints, or a run directory (its checkpoints/): then the newest good one; or a Hugging
/// Face model directory (is_hf_model_dir). `setting` names where the path came from in the
/// errors (e.g. "serve.checkpoint").
[[nodiscard]] absl::StatusOr<std::vector<float>> read_decoder_weights(const decoder_layout& layout,
                                                                      const std::string& path,
                                                                      const std::string& setting);

/// The flat parameters of `layout` from the Hugging Face model at `model_dir` (read_hf_weights:
/// each tensor checked against the directory's config.json, which must describe `layout`'s
/// model).
[[nodiscard]] absl::StatusOr<std::vector<float>> read_hf_params(const decoder_layout& layout,
                                                                const std::string& model_dir);

}  // namespace troupe::models
