// `troupe data preferences`: preference pairs of an RLHF config's task, sampled from a policy
// and ranked by the task's rule (a simulated annotator standing in for people).

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "apps/cli/commands.hpp"
#include "apps/cli/data_task.hpp"
#include "apps/cli/task_sampling.hpp"
#include "nlohmann/json.hpp"

namespace troupe::cli {
namespace {

// Writes the pair of each prompt (its best and its worst writable response; none when they
// tie) to `path`; returns the pairs written, the chosen and the rejected responses' mean scores,
// and the responses left out for bytes JSON cannot hold.
struct written {
  int64_t pairs = 0, not_utf8 = 0;
  double chosen = 0, rejected = 0;
};
absl::StatusOr<written> write_pairs(const std::string& path,
                                    const std::vector<std::string>& prompts,
                                    const std::vector<std::vector<task_response>>& responses,
                                    const preferences_args& args, int64_t first) {
  const std::filesystem::path out(path);
  std::error_code ec;
  if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path(), ec);
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  if (!file) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  written w;
  for (size_t p = 0; p < prompts.size(); ++p) {
    std::vector<task_response> kept;  // a response JSON cannot hold is left out, not altered
    for (const task_response& r : responses[p]) {
      const bool writable = is_utf8(r.text);
      if (writable) kept.push_back(r);
      w.not_utf8 += writable ? 0 : 1;
    }
    if (kept.size() < 2) continue;
    const auto by_score = [](const task_response& a, const task_response& b) {
      return a.score < b.score;
    };
    const auto best = std::max_element(kept.begin(), kept.end(), by_score);
    std::vector<const task_response*> worse;
    for (const task_response& r : kept)
      if (r.score < best->score) worse.push_back(&r);
    if (worse.empty()) continue;  // a tie says nothing
    // The worst, or (UltraFeedback's binarisation) one of the worse at random, the same for the
    // same prompt and seed.
    const task_response* rejected =
        args.rejected == "worst"
            ? *std::min_element(worse.begin(), worse.end(),
                                [](const task_response* a, const task_response* b) {
                                  return a->score < b->score;
                                })
            : worse[std::mt19937_64(args.seed * 0x9e3779b97f4a7c15ull + first + p)() %
                    worse.size()];
    file << nlohmann::json{{"prompt", prompts[p]},
                           {"chosen", best->text},
                           {"rejected", rejected->text}}
                .dump()
         << '\n';
    ++w.pairs;
    w.chosen += best->score;
    w.rejected += rejected->score;
  }
  file.close();
  if (!file) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  if (w.pairs > 0) w.chosen /= w.pairs, w.rejected /= w.pairs;
  return w;
}

}  // namespace

int data_preferences_command(const preferences_args& args) {
  if (args.examples < 1)
    return fail("troupe data preferences", exit_usage_error, "--prompts must be at least 1");
  if (args.samples < 2)
    return fail("troupe data preferences", exit_usage_error,
                "--samples must be at least 2: a pair");
  if (args.held_out_prompts < 0)
    return fail("troupe data preferences", exit_usage_error, "--held-out-prompts is negative");
  if (args.rejected != "worst" && args.rejected != "random") {
    return fail("troupe data preferences", exit_usage_error,
                absl::StrCat("--rejected is '", args.rejected, "'; it is worst or random"));
  }
  absl::StatusOr<data_task> task = data_task_of(args);
  if (!task.ok())
    return fail("troupe data preferences", exit_usage_error, std::string(task.status().message()));
  auto policy = load_task_policy(*task, args.policy, "--policy");
  if (!policy.ok())
    return fail("troupe data preferences", exit_usage_error,
                std::string(policy.status().message()));

  nlohmann::json summary = {{"format", "pairs"},
                            {"task", task->spec.name},
                            {"samples", args.samples},
                            {"policy", args.policy}};
  // The training prompts are [0, examples) of the --seed stream, the held-out ones the next.
  for (const auto& [path, first, count] :
       {std::tuple{args.out, int64_t{0}, args.examples},
        std::tuple{args.held_out, args.examples, args.held_out_prompts}}) {
    if (path.empty() || count == 0) continue;
    std::vector<std::string> prompts;
    for (int64_t i = first; i < first + count; ++i)
      prompts.push_back(task->task->prompt(args.seed, i));
    auto responses = sample_responses(*policy->engine, *task->task, task->codec, prompts,
                                      args.samples, args.temperature, args.seed);
    if (!responses.ok())
      return fail("troupe data preferences", exit_runtime_failure,
                  std::string(responses.status().message()));
    absl::StatusOr<written> w = write_pairs(path, prompts, *responses, args, first);
    if (!w.ok())
      return fail("troupe data preferences", exit_runtime_failure,
                  std::string(w.status().message()));
    summary[path == args.out ? "out" : "held_out"] = {{"path", path},
                                                      {"prompts", count},
                                                      {"pairs", w->pairs},
                                                      {"chosen_score_mean", w->chosen},
                                                      {"rejected_score_mean", w->rejected},
                                                      {"responses_not_utf8", w->not_utf8}};
  }
  std::printf("%s\n", summary.dump().c_str());
  return exit_ok;
}

}  // namespace troupe::cli
