#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "apps/cli/commands.hpp"
#include "models/gpt/gpt_checkpoint.hpp"
#include "models/gpt/gpt_source.hpp"
#include "models/gpt/hf_export.hpp"
#include "models/hf/hf_config.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"

namespace troupe::cli {
namespace {

// The model a pretraining checkpoint records in its manifest's meta.model.
absl::StatusOr<models::gpt_config> model_of(const checkpoint::checkpoint& c) {
  return models::gpt_config_from_json(c.meta.value("model", nlohmann::json()),
                                      c.dir + "/manifest.json: meta.model");
}

// What export_tokenizer wrote: the files copied, and the ids generation stops at.
struct exported_tokenizer {
  std::vector<std::string> files;  // those copied
  std::vector<int32_t> eos;
};

// The tokenizer the run read its text with (meta.tokenizer: a tokenizer directory, or the
// Hugging Face model it started from), copied into `out` beside the weights with its chat
// template; generation stops where that model's generation_config.json says, or else at the
// tokenizer's end-of-sequence token (tokenizer_config.json's eos_token). No tokenizer:
// byte-level text, nothing to copy.
absl::StatusOr<exported_tokenizer> export_tokenizer(const checkpoint::checkpoint& c,
                                                    const std::string& out) {
  namespace fs = std::filesystem;
  exported_tokenizer exported;
  if (!c.meta.contains("tokenizer")) return exported;
  const fs::path dir = c.meta["tokenizer"].get<std::string>();
  TROUPE_ASSIGN_OR_RETURN(auto tokenizer,
                          tokenizers::tokenizer::load((dir / "tokenizer.json").string()));
  std::error_code ec;
  fs::create_directories(out, ec);
  for (const char* file : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}) {
    if (!fs::exists(dir / file)) continue;
    fs::copy_file(dir / file, fs::path(out) / file, fs::copy_options::overwrite_existing, ec);
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat("cannot copy ", (dir / file).string(), " to ", out, ": ", ec.message()));
    }
    exported.files.push_back(file);
  }
  if (models::is_hf_model_dir(dir.string())) {
    TROUPE_ASSIGN_OR_RETURN(const models::hf_model_config hf, models::load_hf_config(dir.string()));
    exported.eos = hf.eos_token_ids;
    return exported;
  }
  if (fs::exists(dir / "tokenizer_config.json")) {
    std::ifstream in(dir / "tokenizer_config.json");
    const auto config = nlohmann::json::parse(in, nullptr, false);
    if (config.is_object() && config.value("eos_token", nlohmann::json()).is_string()) {
      if (auto id = tokenizer->token_to_id(config["eos_token"].get<std::string>())) {
        exported.eos.push_back(*id);
      }
    }
  }
  return exported;
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
  absl::StatusOr<exported_tokenizer> tokenizer = export_tokenizer(*c, args.out);
  if (!tokenizer.ok())
    return fail("troupe export", exit_runtime_failure, std::string(tokenizer.status().message()));
  if (absl::Status s = models::write_hf_export(layout, params.data(), args.out, tokenizer->eos);
      !s.ok()) {
    return fail("troupe export", exit_runtime_failure, std::string(s.message()));
  }
  nlohmann::json files = {"model.safetensors", "config.json", "generation_config.json"};
  for (const std::string& file : tokenizer->files)
    files.push_back(file);
  const nlohmann::json summary = {{"exported", args.out},
                                  {"step", c->step},
                                  {"checkpoint", c->dir},
                                  {"files", files},
                                  {"parameters", layout.total()}};
  std::printf("%s\n", summary.dump().c_str());
  return exit_ok;
}

}  // namespace troupe::cli
