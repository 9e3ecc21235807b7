// `troupe eval MODEL_DIR --text FILE`: a Hugging Face model's perplexity on a held-out text, in
// f32 and with its block weights quantized as `serve.engine.quantization` quantizes them (a GPTQ
// checkpoint: as it is, key "gptq"): how a quantization is accepted (docs/serve.md "Quantized
// weights"). The quantized model is scored by the training forward on its dequantized weights,
// which is the model the quantized decoder computes
// (tests/models/decoder/quantized_decoder_test.cpp).

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "apps/cli/commands.hpp"
#include "models/decoder/decoder_source.hpp"
#include "models/decoder/quantized_weights.hpp"
#include "models/decoder/text_perplexity.hpp"
#include "models/hf/gptq_weights.hpp"
#include "models/hf/hf_config.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "nlohmann/json.hpp"

namespace troupe::cli {

int eval_perplexity_command(const eval_args& args) {
  const char* command = "troupe eval";
  const std::string& dir = args.config;
  std::vector<models::weight_quantization> quantizations;
  for (const std::string& q : args.quantizations) {
    if (q == "none") continue;
    if (q != "int8" && q != "int4") {
      return fail(command, exit_usage_error,
                  absl::StrCat("--quantization ", q, ": choose int8, int4 or none"));
    }
    quantizations.push_back(
        models::weight_quantization::serving(q == "int8" ? 8 : 4, args.group_size));
  }
  if (args.window < 0 || args.max_tokens < 0 || args.group_size < 0) {
    return fail(command, exit_usage_error, "--window, --max-tokens and --group-size are >= 0");
  }
  if (!models::is_hf_model_dir(dir)) {
    return fail(command, exit_usage_error,
                absl::StrCat(dir,
                             " is not a Hugging Face model directory (config.json, "
                             "model.safetensors, tokenizer.json); `troupe export RUN_DIR --out "
                             "DIR` writes one from a run"));
  }
  std::ifstream in(args.text, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return fail(command, exit_usage_error, absl::StrCat("cannot read --text ", args.text));

  auto config = models::load_hf_config(dir);
  if (!config.ok()) return fail(command, exit_usage_error, std::string(config.status().message()));
  const models::decoder_layout layout(config->model, models::layer_range::all(config->model));
  // A GPTQ checkpoint is scored as the model of its dequantized weights (what serving it
  // computes), and not quantized again.
  absl::StatusOr<std::vector<float>> params;
  if (config->quantization) {
    auto gptq = models::read_gptq_model(layout, dir, *config);
    if (!gptq.ok()) return fail(command, exit_usage_error, std::string(gptq.status().message()));
    gptq->quantized->dequantize_into(gptq->params.data());
    params = std::move(gptq->params);
    quantizations.clear();
  } else {
    params = models::read_hf_params(layout, dir);
  }
  if (!params.ok()) return fail(command, exit_usage_error, std::string(params.status().message()));
  auto tokenizer = tokenizers::tokenizer::load(dir + "/tokenizer.json");
  if (!tokenizer.ok())
    return fail(command, exit_usage_error, std::string(tokenizer.status().message()));
  std::vector<int32_t> tokens = (*tokenizer)->encode(text.str(), /*add_special_tokens=*/false);
  if (args.max_tokens > 0 && static_cast<int64_t>(tokens.size()) > args.max_tokens)
    tokens.resize(args.max_tokens);
  const int window = args.window > 0 ? args.window : std::min(config->model.ctx, 1024);
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  auto f32 = models::text_perplexity(layout, params->data(), tokens, window, threads);
  if (!f32.ok()) {
    return fail(command, exit_usage_error,
                absl::StrCat("--text ", args.text, ": ", f32.status().message()));
  }
  nlohmann::json perplexity = {{config->quantization ? "gptq" : "f32", f32->value}},
                 increase = nlohmann::json::object(), weights = nlohmann::json::object();
  for (const models::weight_quantization& q : quantizations) {
    const std::string name = absl::StrCat("int", q.bits);
    auto quantized = models::quantized_weights::quantize(layout, params->data(), q);
    if (!quantized.ok()) {
      return fail(command, exit_usage_error,
                  absl::StrCat(std::string(quantized.status().message()), " (--group-size)"));
    }
    std::vector<float> dequantized = *params;
    (*quantized)->dequantize_into(dequantized.data());
    auto score = models::text_perplexity(layout, dequantized.data(), tokens, window, threads);
    if (!score.ok())
      return fail(command, exit_runtime_failure, std::string(score.status().message()));
    perplexity[name] = score->value;
    increase[name] = score->value / f32->value - 1;
    weights[name] = q.describe();
  }
  const nlohmann::json summary = {{"model", dir},
                                  {"text", args.text},
                                  {"tokens", tokens.size()},
                                  {"scored", f32->scored},
                                  {"windows", f32->windows},
                                  {"window", window},
                                  {"perplexity", perplexity},
                                  {"increase", increase},
                                  {"weights", weights}};
  std::printf("%s\n", summary.dump().c_str());
  return exit_ok;
}

}  // namespace troupe::cli
