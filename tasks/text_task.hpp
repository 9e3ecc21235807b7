#pragma once

// An RL task on byte text: its prompts, the rule that scores a response to one, and text for the
// policy's warm-up. `rlhf.task.name` picks one; the reward role of the same name scores it
// (roles.reward.impl), unless a plugin's rule does.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/config/schema.hpp"

namespace troupe::tasks {

/// `rlhf.task`.
struct task_spec {
  std::string name = "digit_completion";
  // digit_completion
  int max_number = 20;
  int max_diff = 3;
  int max_num_in_response = 5;
  // fortunes
  std::string path = "/usr/share/games/fortunes";
  int prompt_words = 3;
  int min_words = 5;
  int max_response = 64;
};

class text_task {
 public:
  virtual ~text_task() = default;

  /// Prompt `index` of the stream `seed`: the same pair always gives the same prompt, so a
  /// prompt cursor is all a resume needs.
  [[nodiscard]] virtual std::string prompt(uint64_t seed, int64_t index) const = 0;
  /// The score of `response` (without its end string) in [0, 1]; `ended` says whether it ended
  /// with the end string rather than running out of tokens.
  [[nodiscard]] virtual double reward(std::string_view prompt, std::string_view response,
                                      bool ended) const = 0;
  /// The longest prompt, in bytes.
  [[nodiscard]] virtual int max_prompt_bytes() const = 0;
  /// The longest response the task needs, its end string included.
  [[nodiscard]] virtual int max_response_bytes() const = 0;
  /// About `lines` lines of text for the warm-up (from a stream other than the RL prompts'):
  /// with `answers`, the task's own examples; without, its format only.
  [[nodiscard]] virtual std::string warmup_text(uint64_t seed, int lines, bool answers) const = 0;

  /// A supervised example: prompt `index` of a stream other than the RL prompts' (as the
  /// warm-up's) and the task's reference response, ended by the end string ("\n"): digit
  /// completion's answer (which scores 1), the rest of the fortune's first line.
  struct example {
    std::string prompt, response;
  };
  [[nodiscard]] virtual example example_at(uint64_t seed, int64_t index) const = 0;
};

/// `rlhf.task`'s keys (the RL app's section, and `troupe data`'s).
[[nodiscard]] config::object_schema<task_spec> task_schema();

/// The task `spec` names. INVALID_ARGUMENT for bad settings and unreadable files, saying
/// "KEY: what is wrong" with the setting attached (task_setting_of) for the caller to locate.
[[nodiscard]] absl::StatusOr<std::shared_ptr<const text_task>> make_task(const task_spec& spec);

/// INVALID_ARGUMENT "KEY: what", about the task's setting `key` (rlhf.task.KEY), which the
/// status carries.
[[nodiscard]] absl::Status task_setting_error(absl::string_view key, absl::string_view what);
/// The setting an error of task_setting_error is about, and what it says of it; nullopt for
/// another error.
struct task_setting_problem {
  std::string key, what;
};
[[nodiscard]] std::optional<task_setting_problem> task_setting_of(const absl::Status& status);

/// The longest response of the task `spec` names, its end string included (without reading
/// the task's files).
[[nodiscard]] int max_response_bytes(const task_spec& spec);

/// What the warm-up trains on, for `troupe check` ("the task's format-only text").
[[nodiscard]] std::string warmup_description(const task_spec& spec, bool answers);

/// The task names: digit_completion, fortunes.
[[nodiscard]] const std::vector<std::string>& task_names();

}  // namespace troupe::tasks
