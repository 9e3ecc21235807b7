#include <cstdio>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "apps/cli/commands.hpp"
#include "models/gpt/gpt_checkpoint.hpp"
#include "models/gpt/hf_export.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"

namespace troupe::cli {
namespace {

// The model shape a pretraining checkpoint records in its manifest's meta.model.
absl::StatusOr<models::gpt_config> model_of(const checkpoint::checkpoint& c) {
  const nlohmann::json& m = c.meta.contains("model") ? c.meta["model"] : nlohmann::json();
  models::gpt_config config;
  for (auto [key, field] : {std::pair{"vocab", &config.vocab},
                            {"ctx", &config.ctx},
                            {"layers", &config.layers},
                            {"dim", &config.dim},
                            {"heads", &config.heads}}) {
    if (!m.is_object() || !m.contains(key) || !m[key].is_number_integer()) {
      return absl::DataLossError(absl::StrCat(c.dir, "/manifest.json: meta.model.", key,
                                              " is missing; not a pretraining checkpoint?"));
    }
    *field = m[key].get<int>();
  }
  TROUPE_RETURN_IF_ERROR(config.validate());
  return config;
}

}  // namespace

int export_command(const export_args& args) {
  if (args.format != "safetensors") {
    return fail(
        "troupe export", exit_usage_error,
        absl::StrCat("--format ", args.format, " is not supported; use --format safetensors"));
  }
  const checkpoint::checkpoint_store store(
      (std::filesystem::path(args.run_dir) / "checkpoints").string());
  absl::StatusOr<checkpoint::checkpoint> c;
  if (args.step) {
    c = checkpoint::checkpoint_store::read(store.step_dir(*args.step));
  } else {
    std::vector<std::string> warnings;
    c = store.read_latest(&warnings);
    for (const auto& w : warnings)
      std::fprintf(stderr, "troupe export: warning: %s\n", w.c_str());
  }
  if (!c.ok())
    return fail("troupe export", exit_runtime_failure, std::string(c.status().message()));
  absl::StatusOr<models::gpt_config> config = model_of(*c);
  if (!config.ok())
    return fail("troupe export", exit_runtime_failure, std::string(config.status().message()));
  // One file, or a pipeline's stages gathered by name.
  absl::StatusOr<tensor::named_tensors> model = models::checkpoint_model(*c);
  if (!model.ok())
    return fail("troupe export", exit_runtime_failure, std::string(model.status().message()));
  const models::gpt_layout layout(*config, models::layer_range::all(*config));
  std::vector<float> params(layout.total());
  if (absl::Status s = layout.from_named(*model, params.data()); !s.ok()) {
    return fail("troupe export", exit_runtime_failure, absl::StrCat(c->dir, ": ", s.message()));
  }
  if (absl::Status s = models::write_hf_gpt2(layout, params.data(), args.out); !s.ok()) {
    return fail("troupe export", exit_runtime_failure, std::string(s.message()));
  }
  const nlohmann::json summary = {{"exported", args.out},
                                  {"step", c->step},
                                  {"checkpoint", c->dir},
                                  {"files", {"model.safetensors", "config.json"}},
                                  {"parameters", layout.total()}};
  std::printf("%s\n", summary.dump().c_str());
  return exit_ok;
}

}  // namespace troupe::cli
