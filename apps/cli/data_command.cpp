#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "apps/cli/commands.hpp"
#include "apps/cli/data_task.hpp"
#include "models/decoder/decoder_source.hpp"
#include "nlohmann/json.hpp"
#include "runtime/base/status.hpp"
#include "runtime/config/app_spec.hpp"
#include "runtime/config/document.hpp"
#include "runtime/config/parse_context.hpp"
#include "tasks/text_task.hpp"

namespace troupe::cli {
absl::StatusOr<data_task> data_task_of(const config_args& args) {
  TROUPE_ASSIGN_OR_RETURN(config::document doc, config::document::load_file(args.config));
  for (const auto& assignment : args.overrides)
    TROUPE_RETURN_IF_ERROR(doc.apply_override(assignment));
  const YAML::Node& root = doc.root();
  const YAML::Node absent(YAML::NodeType::Undefined);
  const YAML::Node rlhf = root.IsMap() ? root["rlhf"] : absent;
  const YAML::Node task = rlhf.IsDefined() && rlhf.IsMap() ? rlhf["task"] : absent;
  if (!rlhf.IsDefined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.config,
                     " has no rlhf section: name an RLHF config (configs/rlhf_ppo.yaml), whose "
                     "task (rlhf.task) the data is of"));
  }
  data_task out;
  config::diagnostics diag;
  const config::parse_context ctx(doc, diag);
  if (task.IsDefined() &&
      !tasks::task_schema().parse(task, ctx.child("rlhf").child("task"), out.spec)) {
    return diag.status();
  }
  config::app_spec spec;
  if (!config::app_spec_schema().parse(root, ctx, spec)) return diag.status();
  TROUPE_ASSIGN_OR_RETURN(out.model, models::decoder_config_of(spec.model));
  TROUPE_ASSIGN_OR_RETURN(out.codec, tasks::task_codec_of(spec.model, task_end_string));
  absl::StatusOr<std::shared_ptr<const tasks::text_task>> made = tasks::make_task(out.spec);
  if (!made.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("rlhf.task: ", made.status().message()));
  }
  out.task = *std::move(made);
  return out;
}

int data_sft_command(const data_args& args) {
  if (args.examples < 1)
    return fail("troupe data sft", exit_usage_error, "--examples must be at least 1");
  absl::StatusOr<data_task> data = data_task_of(args);
  if (!data.ok())
    return fail("troupe data sft", exit_usage_error, std::string(data.status().message()));

  const std::filesystem::path out(args.out);
  std::error_code ec;
  if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path(), ec);
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  if (!file)
    return fail("troupe data sft", exit_runtime_failure, absl::StrCat("cannot write ", args.out));
  for (int64_t i = 0; i < args.examples; ++i) {
    tasks::text_task::example e = data->task->example_at(args.seed, i);
    if (data->codec.chat_model() && absl::EndsWith(e.response, task_end_string)) {
      e.response.resize(e.response.size() - std::string_view(task_end_string).size());
    }
    // Bytes that are not UTF-8 (fortunes are Latin-1 in places) show as U+FFFD.
    file << nlohmann::json{{"prompt", e.prompt}, {"response", e.response}}.dump(
                -1, ' ', false, nlohmann::json::error_handler_t::replace)
         << '\n';
  }
  file.close();
  if (!file)
    return fail("troupe data sft", exit_runtime_failure, absl::StrCat("cannot write ", args.out));
  std::printf("%s\n", nlohmann::json{{"format", "sft"},
                                     {"task", data->spec.name},
                                     {"examples", args.examples},
                                     {"out", args.out}}
                          .dump()
                          .c_str());
  return exit_ok;
}

}  // namespace troupe::cli
