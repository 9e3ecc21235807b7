// `troupe quantize MODEL_DIR --bits 8|4 --out DIR`: a Hugging Face model's block weights
// quantized as serve.engine.quantization quantizes them (lm_head kept f32, as GPTQ keeps it),
// written as a GPTQ checkpoint that `troupe serve DIR` (and transformers, vLLM) load.

#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "apps/cli/commands.hpp"
#include "models/decoder/decoder_source.hpp"
#include "models/decoder/quantized_weights.hpp"
#include "models/hf/gptq_weights.hpp"
#include "models/hf/hf_config.hpp"
#include "nlohmann/json.hpp"

namespace troupe::cli {
namespace {

namespace fs = std::filesystem;

// The files a model directory has besides its weights and configs (the tokenizer's, the chat
// template): copied beside the quantized weights.
bool is_weights_or_config(const fs::path& p) {
  const std::string name = p.filename().string();
  return p.extension() == ".safetensors" || name == "model.safetensors.index.json" ||
         name == "config.json" || name == "generation_config.json";
}

}  // namespace

int quantize_command(const quantize_args& args) {
  const char* command = "troupe quantize";
  if (args.group_size < 0) return fail(command, exit_usage_error, "--group-size is negative");
  if (!models::is_hf_model_dir(args.model)) {
    return fail(command, exit_usage_error,
                absl::StrCat(args.model,
                             " is not a Hugging Face model directory (config.json and "
                             "model.safetensors); `troupe export RUN_DIR --out DIR` writes one"));
  }
  std::error_code ec;
  if (fs::exists(args.out) && !fs::is_empty(args.out, ec)) {
    return fail(command, exit_usage_error,
                absl::StrCat("--out ", args.out, " is not empty: choose a new directory"));
  }
  auto hf = models::load_hf_config(args.model);
  if (!hf.ok()) return fail(command, exit_usage_error, std::string(hf.status().message()));
  if (hf->quantization) {
    return fail(
        command, exit_usage_error,
        absl::StrCat(args.model, " is already quantized (GPTQ int", hf->quantization->bits, ")"));
  }
  const models::decoder_layout layout(hf->model, models::layer_range::all(hf->model));
  auto params = models::read_hf_params(layout, args.model);
  if (!params.ok()) return fail(command, exit_usage_error, std::string(params.status().message()));
  // One group size for every layer, as config.json can say only one.
  const int group = args.group_size > 0 ? args.group_size : args.bits == 8 ? 0 : 128;
  auto quantized = models::quantized_weights::quantize(layout, params->data(), {args.bits, group});
  if (!quantized.ok()) {
    return fail(command, exit_usage_error,
                absl::StrCat(quantized.status().message(), " (--group-size)"));
  }
  models::hf_model_config out = *hf;
  out.quantization = models::gptq_quantization{args.bits, group};
  if (absl::Status s = models::write_gptq_model(args.out, out, layout, params->data(), **quantized);
      !s.ok()) {
    return fail(command, exit_runtime_failure, std::string(s.message()));
  }
  std::vector<std::string> copied;
  for (const auto& entry : fs::directory_iterator(args.model, ec)) {
    if (!entry.is_regular_file() || is_weights_or_config(entry.path())) continue;
    fs::copy_file(entry.path(), fs::path(args.out) / entry.path().filename(),
                  fs::copy_options::overwrite_existing, ec);
    if (ec) {
      return fail(command, exit_runtime_failure,
                  absl::StrCat("cannot copy ", entry.path().string(), ": ", ec.message()));
    }
    copied.push_back(entry.path().filename().string());
  }
  const nlohmann::json summary = {
      {"model", args.model},
      {"out", args.out},
      {"weights", models::weight_quantization{args.bits, group}.describe()},
      {"quantized_mb", static_cast<double>((*quantized)->bytes()) / 1e6},
      {"model_safetensors_mb",
       static_cast<double>(fs::file_size(fs::path(args.out) / "model.safetensors", ec)) / 1e6},
      {"copied", copied}};
  std::printf("%s\n", summary.dump().c_str());
  return exit_ok;
}

}  // namespace troupe::cli
