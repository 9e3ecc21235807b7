#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "apps/cli/commands.hpp"
#include "models/decoder/decoder_checkpoint.hpp"
#include "models/decoder/decoder_source.hpp"
#include "models/gguf/gguf_export.hpp"
#include "models/hf/hf_config.hpp"
#include "models/hf/hf_weights.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"

namespace troupe::cli {
namespace {

// The model a pretraining checkpoint records in its manifest's meta.model.
absl::StatusOr<models::decoder_config> model_of(const checkpoint::checkpoint& c) {
  return models::decoder_config_from_json(c.meta.value("model", nlohmann::json()),
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

// What is exported: a model's description (with the ids generation stops at), its weights under
// Hugging Face's names (f32) and the directory of its tokenizer ("" for the byte vocabulary).
struct export_source {
  models::hf_model_config hf;
  tensor::named_tensors weights;
  std::string tokenizer_dir;
  nlohmann::json summary;  // where it came from: step and checkpoint, or the model directory
  std::optional<checkpoint::checkpoint> checkpoint;  // a run's
};

// A run's newest good checkpoint (or --step's), or a Hugging Face model directory.
absl::StatusOr<export_source> read_export_source(const export_args& args) {
  export_source source;
  if (models::is_hf_model_dir(args.run_dir)) {
    TROUPE_ASSIGN_OR_RETURN(source.hf, models::load_hf_config(args.run_dir));
    TROUPE_ASSIGN_OR_RETURN(source.weights, models::read_hf_weights(args.run_dir, source.hf));
    if (std::filesystem::exists(std::filesystem::path(args.run_dir) / "tokenizer.json"))
      source.tokenizer_dir = args.run_dir;
    source.summary = {{"model", args.run_dir}};
    return source;
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
  if (!c.ok()) return c.status();
  TROUPE_ASSIGN_OR_RETURN(const models::decoder_config config, model_of(*c));
  // One file, or a pipeline's stages gathered by name.
  TROUPE_ASSIGN_OR_RETURN(const tensor::named_tensors model, models::checkpoint_model(*c));
  const models::decoder_layout layout(config, models::layer_range::all(config));
  std::vector<float> params(layout.total());
  if (absl::Status s = layout.from_named(model, params.data()); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(c->dir, ": ", s.message()));
  }
  source.hf = {models::hf_architecture_of(config), config};
  source.weights = layout.to_named(params.data());
  if (c->meta.contains("tokenizer")) source.tokenizer_dir = c->meta["tokenizer"].get<std::string>();
  source.summary = {{"step", c->step}, {"checkpoint", c->dir}, {"parameters", layout.total()}};
  source.checkpoint = std::move(*c);
  return source;
}

}  // namespace

int export_command(const export_args& args) {
  if (args.format != "safetensors" && args.format != "gguf") {
    return fail("troupe export", exit_usage_error,
                absl::StrCat("--format ", args.format,
                             " is not supported; use --format safetensors (a Hugging Face "
                             "directory) or --format gguf (one file for llama.cpp)"));
  }
  absl::StatusOr<models::gguf::outtype> outtype = models::gguf::parse_outtype(args.outtype);
  if (!outtype.ok()) {
    return fail("troupe export", exit_usage_error,
                absl::StrCat("--outtype: ", outtype.status().message()));
  }
  if (args.format == "safetensors" && models::is_hf_model_dir(args.run_dir)) {
    return fail("troupe export", exit_usage_error,
                absl::StrCat(args.run_dir,
                             " is already a Hugging Face model directory; export it with "
                             "--format gguf, or export a run directory"));
  }
  absl::StatusOr<export_source> source = read_export_source(args);
  if (!source.ok())
    return fail("troupe export", exit_runtime_failure, std::string(source.status().message()));
  nlohmann::json summary = source->summary;
  summary["exported"] = args.out;
  if (args.format == "gguf") {
    absl::StatusOr<models::gguf::gguf_vocab> vocab =
        source->tokenizer_dir.empty()
            ? models::gguf::byte_vocab(source->hf.model.vocab)
            : models::gguf::vocab_of_tokenizer_dir(
                  source->tokenizer_dir, source->hf.model.vocab,
                  source->hf.bos_token_id >= 0 ? std::optional(source->hf.bos_token_id)
                                               : std::nullopt,
                  source->hf.eos_token_ids.empty() ? std::nullopt
                                                   : std::optional(source->hf.eos_token_ids[0]));
    if (!vocab.ok())
      return fail("troupe export", exit_runtime_failure, std::string(vocab.status().message()));
    const std::string name = std::filesystem::path(args.run_dir).filename().string();
    if (absl::Status s = models::gguf::write_gguf_model(args.out, source->hf, source->weights,
                                                        *vocab, *outtype, name);
        !s.ok()) {
      return fail("troupe export", exit_runtime_failure, absl::StrCat(args.out, ": ", s.message()));
    }
    summary["format"] = "gguf";
    summary["outtype"] = args.outtype;
    summary["architecture"] = models::gguf::gguf_architecture(source->hf.model);
    std::printf("%s\n", summary.dump().c_str());
    return exit_ok;
  }
  absl::StatusOr<exported_tokenizer> tokenizer = export_tokenizer(*source->checkpoint, args.out);
  if (!tokenizer.ok())
    return fail("troupe export", exit_runtime_failure, std::string(tokenizer.status().message()));
  source->hf.eos_token_ids = tokenizer->eos;
  if (absl::Status s = models::write_hf_model(args.out, source->hf, source->weights); !s.ok()) {
    return fail("troupe export", exit_runtime_failure, std::string(s.message()));
  }
  nlohmann::json files = {"model.safetensors", "config.json", "generation_config.json"};
  for (const std::string& file : tokenizer->files)
    files.push_back(file);
  summary["files"] = files;
  std::printf("%s\n", summary.dump().c_str());
  return exit_ok;
}

}  // namespace troupe::cli
