#pragma once

// What the `troupe data` commands read from an RLHF config: its task (rlhf.task) and its model.

#include <memory>

#include "absl/status/statusor.h"
#include "apps/cli/commands.hpp"
#include "models/decoder/decoder_config.hpp"
#include "tasks/task_codec.hpp"
#include "tasks/text_task.hpp"

namespace troupe::cli {

/// The end of a task's response, as the RLHF app's rollout stops on it (rlhf_driver's
/// end_string).
inline constexpr const char* task_end_string = "\n";

struct data_task {
  tasks::task_spec spec;
  std::shared_ptr<const tasks::text_task> task;
  models::decoder_config model;
  /// How the task's text meets the model (a model.path's chat template frames each reply and
  /// ends it with its end of turn, so a response is written without task_end_string).
  tasks::task_codec codec;
};

/// The task of `args.config`'s `rlhf.task` (with its overrides; the default one when the section
/// names none) and the config's `model:`. INVALID_ARGUMENT for a config without an rlhf section,
/// naming the config and what to give.
[[nodiscard]] absl::StatusOr<data_task> data_task_of(const config_args& args);

}  // namespace troupe::cli
