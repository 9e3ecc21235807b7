#pragma once

// Where a GPT comes from in an app: its shape from the config's `model:` section, its weights
// from a checkpoint. Every app that runs a GPT (pretraining, serving, RLHF) uses these, so they
// live below apps/.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/gpt/gpt_layout.hpp"
#include "nlohmann/json.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"
#include "runtime/config/app_spec.hpp"

namespace troupe::models {

/// The decoder that a config's `model:` section describes: troupe's GPT of its shape keys (those
/// absent, and the whole section absent: the tiny GPT's defaults), or the Hugging Face model at
/// `model.path` (its config.json), whose context `model.ctx` may shorten. Errors say what in the
/// directory or the section is wrong, validate() included.
[[nodiscard]] absl::StatusOr<gpt_config> gpt_config_of(
    const std::optional<config::model_spec>& model);

/// `model.path`: the Hugging Face model directory a config names; empty when it names none.
[[nodiscard]] inline std::string hf_model_dir(const std::optional<config::model_spec>& model) {
  return model ? model->path : std::string();
}

/// The shape of `c` as a checkpoint's manifest records it ({vocab, ctx, layers, dim, heads}, and
/// for the Llama family its whole Hugging Face config.json under "hf_config"), to check that a
/// checkpoint fits a config and to export it.
[[nodiscard]] nlohmann::json gpt_config_json(const gpt_config& c);
/// The model gpt_config_json() recorded; DATA_LOSS naming `where` and the key when it is not
/// one.
[[nodiscard]] absl::StatusOr<gpt_config> gpt_config_from_json(const nlohmann::json& j,
                                                              const std::string& where);

/// The checkpoint at `path`: a checkpoint directory (it has a manifest.json), a directory of
/// checkpoints, or a run directory (its checkpoints/): then the newest good one. `setting`
/// names where the path came from in the errors (e.g. "serve.checkpoint").
[[nodiscard]] absl::StatusOr<checkpoint::checkpoint> read_checkpoint_at(const std::string& path,
                                                                        const std::string& setting);

/// The flat parameters of `layout` from a checkpoint's model.safetensors. `path` is a checkpoint
/// directory (it has a manifest.json), a directory of checkpoints, or a run directory (its
/// checkpoints/): then the newest good one. `setting` names where the path came from in the
/// errors (e.g. "serve.checkpoint").
[[nodiscard]] absl::StatusOr<std::vector<float>> read_gpt_weights(const gpt_layout& layout,
                                                                  const std::string& path,
                                                                  const std::string& setting);

/// The flat parameters of `layout` from the Hugging Face model at `model_dir` (read_hf_weights:
/// each tensor checked against the directory's config.json, which must describe `layout`'s
/// model).
[[nodiscard]] absl::StatusOr<std::vector<float>> read_hf_params(const gpt_layout& layout,
                                                                const std::string& model_dir);

}  // namespace troupe::models
