// `troupe eval`: a policy's greedy responses to an RLHF config's task prompts, scored by the
// task's rule: how far a stage of the alignment pipeline took the policy.

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "apps/cli/commands.hpp"
#include "apps/cli/data_task.hpp"
#include "apps/cli/task_sampling.hpp"
#include "nlohmann/json.hpp"

namespace troupe::cli {
int eval_command(const eval_args& args) {
  if (!args.text.empty()) return eval_perplexity_command(args);
  if (args.policy.empty()) {
    return fail("troupe eval", exit_usage_error,
                "--policy is required (or --text, to score a model's perplexity on a text)");
  }
  if (args.examples < 1)
    return fail("troupe eval", exit_usage_error, "--prompts must be at least 1");
  if (args.first < 0) return fail("troupe eval", exit_usage_error, "--first is negative");
  absl::StatusOr<data_task> task = data_task_of(args);
  if (!task.ok())
    return fail("troupe eval", exit_usage_error, std::string(task.status().message()));
  auto policy = load_task_policy(*task, args.policy, "--policy");
  if (!policy.ok())
    return fail("troupe eval", exit_usage_error, std::string(policy.status().message()));
  std::vector<std::string> prompts;
  for (int64_t i = args.first; i < args.first + args.examples; ++i)
    prompts.push_back(task->task->prompt(args.seed, i));
  auto responses = sample_responses(*policy->engine, *task->task, task->codec, prompts, 1,
                                    /*temperature=*/0.0, 0);
  if (!responses.ok())
    return fail("troupe eval", exit_runtime_failure, std::string(responses.status().message()));

  std::ofstream out;
  if (!args.out.empty()) {
    const std::filesystem::path path(args.out);
    std::error_code ec;
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
    out.open(path, std::ios::binary | std::ios::trunc);
    if (!out)
      return fail("troupe eval", exit_runtime_failure, absl::StrCat("cannot write ", args.out));
  }
  double sum = 0, perfect = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const task_response& r = (*responses)[p][0];
    sum += r.score;
    perfect += r.score >= 1.0 ? 1 : 0;
    if (out.is_open()) {
      // A response JSON cannot hold as text is written with its bytes replaced (U+FFFD).
      out << nlohmann::json{{"prompt", prompts[p]}, {"response", r.text}, {"score", r.score}}.dump(
                 -1, ' ', false, nlohmann::json::error_handler_t::replace)
          << '\n';
    }
  }
  if (out.is_open()) {
    out.close();
    if (!out)
      return fail("troupe eval", exit_runtime_failure, absl::StrCat("cannot write ", args.out));
  }
  const double n = static_cast<double>(prompts.size());
  nlohmann::json summary = {
      {"task", task->spec.name},      {"policy", args.policy}, {"prompts", args.examples},
      {"first", args.first},          {"seed", args.seed},     {"greedy_score_mean", sum / n},
      {"perfect_share", perfect / n}, {"best_score", 1.0}};
  if (!args.out.empty()) summary["out"] = args.out;
  std::printf("%s\n", summary.dump().c_str());
  return exit_ok;
}

}  // namespace troupe::cli
