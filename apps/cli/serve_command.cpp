// `troupe serve MODEL_DIR`: vLLM's shorthand for serving a Hugging Face model directory.

#include <filesystem>

#include "apps/cli/commands.hpp"
#include "apps/serve/serve_options.hpp"
#include "nlohmann/json.hpp"

namespace troupe::cli {
namespace {

// The config `troupe serve` runs; `speculative` is --speculative-config's object.
std::string serve_config_text(const serve_args& args, const nlohmann::json& speculative) {
  nlohmann::json model = {{"path", std::filesystem::absolute(args.model).string()}};
  if (args.max_model_len) model["ctx"] = *args.max_model_len;
  nlohmann::json serve = {{"host", args.host},
                          {"port", args.port},
                          {"model_name", args.served_model_name.value_or(args.model)}};
  if (args.quantization) serve["engine"]["quantization"] = *args.quantization;
  if (!speculative.is_null()) serve["engine"]["speculative_config"] = speculative;
  const nlohmann::json config = {
      {"app", "serve"},
      // One worker process per engine; `troupe worker --join` adds more while it runs.
      {"cluster", {{"local_workers", args.workers}}},
      {"model", model},
      {"roles",
       {{"worker",
         {{"kind", "inference_worker"}, {"impl", "gpt"}, {"elastic", {{"min", 1}, {"max", 64}}}}}}},
      {"serve", serve}};
  return config.dump(2) + "\n";  // JSON is YAML
}

}  // namespace

int serve_command(const serve_args& args) {
  nlohmann::json speculative;
  if (args.speculative_config) {
    speculative = nlohmann::json::parse(*args.speculative_config, nullptr, false);
    if (!speculative.is_object()) {
      return fail("troupe serve", exit_usage_error,
                  "--speculative-config is not a JSON object; give one such as "
                  "'{\"method\": \"ngram\", \"num_speculative_tokens\": 4}'");
    }
  }
  // The directory before the config, so that what is wrong is said in its own terms.
  config::model_spec model;
  model.path = args.model;
  model.ctx = args.max_model_len;
  if (absl::Status s = apps::check_served_model(model); !s.ok()) {
    return fail("troupe serve", exit_usage_error, std::string(s.message()));
  }
  launch_args launch;
  launch.config = "troupe serve " + args.model;
  launch.config_text = serve_config_text(args, speculative);
  launch.overrides = args.overrides;
  launch.plugin_dirs = args.plugin_dirs;
  launch.run_dir = args.run_dir;
  return launch_command(launch);
}

}  // namespace troupe::cli
