#include "tasks/text_task.hpp"

#include <map>
#include <mutex>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/status.hpp"
#include "tasks/digit_completion.hpp"
#include "tasks/fortune_lines.hpp"

namespace troupe::tasks {

const std::vector<std::string>& task_names() {
  static const std::vector<std::string> names = {"digit_completion", "fortunes"};
  return names;
}

namespace {

// The payload of task_setting_error's statuses: the setting's key.
constexpr absl::string_view setting_payload = "troupe/rlhf.task setting";

digit_completion_options digit_options(const task_spec& spec) {
  return {spec.max_number, spec.max_diff, spec.max_num_in_response};
}

}  // namespace

int max_response_bytes(const task_spec& spec) {
  if (spec.name == "fortunes") return spec.max_response;
  return digit_completion(digit_options(spec)).max_response_bytes();
}

std::string warmup_description(const task_spec& spec, bool answers) {
  if (spec.name == "fortunes") return "the fortunes themselves";
  return answers ? "the task's answers" : "the task's format-only text";
}

absl::Status task_setting_error(absl::string_view key, absl::string_view what) {
  absl::Status s = absl::InvalidArgumentError(absl::StrCat(key, ": ", what));
  s.SetPayload(setting_payload, absl::Cord(key));
  return s;
}

std::optional<task_setting_problem> task_setting_of(const absl::Status& status) {
  const auto key = status.GetPayload(setting_payload);  // absl::optional<absl::Cord>
  if (!key) return std::nullopt;
  task_setting_problem p{std::string(*key), std::string(status.message())};
  if (absl::StartsWith(p.what, p.key + ": ")) p.what.erase(0, p.key.size() + 2);
  return p;
}

absl::StatusOr<std::shared_ptr<const text_task>> make_task(const task_spec& spec) {
  if (spec.name != "fortunes") {
    const digit_completion_options o = digit_options(spec);
    TROUPE_RETURN_IF_ERROR(digit_completion::validate(o));
    return std::make_shared<const digit_completion>(o);
  }
  // The fortunes and their dictionary (megabytes) are read once per process, however many of
  // its roles (the plan check, the policy's warm-up, the reward, the controller) ask: a task is
  // immutable, so they share it.
  static std::mutex mutex;
  static auto* loaded = new std::map<std::string, std::shared_ptr<const text_task>>();
  const std::string key = absl::StrCat(spec.path, "\n", spec.prompt_words, "\n", spec.min_words,
                                       "\n", spec.max_response);
  std::lock_guard lock(mutex);
  if (auto it = loaded->find(key); it != loaded->end()) return it->second;
  TROUPE_ASSIGN_OR_RETURN(fortune_lines task, fortune_lines::load(spec));
  auto shared = std::make_shared<const fortune_lines>(std::move(task));
  loaded->emplace(key, shared);
  return shared;
}

config::object_schema<task_spec> task_schema() {
  config::object_schema<task_spec> s;
  s.add("name", &task_spec::name)
      .one_of(task_names())
      .help("the task and its rule reward: digit_completion, or fortunes (text)");
  s.add("max_number", &task_spec::max_number).range(1, 1000000).help("numbers are modulo this");
  s.add("max_diff", &task_spec::max_diff).range(1, 1000000).help("the largest difference");
  s.add("max_num_in_response", &task_spec::max_num_in_response)
      .range(1, 9)
      .help("the most numbers an answer has");
  s.add("path", &task_spec::path)
      .help("fortunes: a fortune file, or a directory of them (records between \"%\" lines)");
  s.add("prompt_words", &task_spec::prompt_words)
      .range(1, 8)
      .help("fortunes: the words of a fortune's first line that make the prompt");
  s.add("min_words", &task_spec::min_words)
      .range(1, 64)
      .help("fortunes: a response counts at least this many words (a shorter line scores less)");
  s.add("max_response", &task_spec::max_response)
      .range(2, 4096)
      .help("fortunes: the longest response (the rest of the line and its newline), in bytes");
  return s;
}

}  // namespace troupe::tasks
