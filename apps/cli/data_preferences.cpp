// `troupe data preferences`: preference pairs of an RLHF config's task, sampled from a policy
// and ranked by the task's rule (a simulated annotator standing in for people).

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "actors/inference_engine.hpp"
#include "apps/cli/commands.hpp"
#include "apps/cli/data_task.hpp"
#include "models/gpt/gpt_source.hpp"
#include "nlohmann/json.hpp"

namespace troupe::cli {
namespace {

int fail(int code, const std::string& message) {
  std::fprintf(stderr, "troupe data preferences: %s\n", message.c_str());
  return code;
}

// One sampled response: its text (the end string included when it ended), its score, and
// whether JSON can hold it (a policy may sample bytes that are not UTF-8; such a response is
// left out rather than written altered).
struct scored {
  std::string text;
  double score = 0;
  bool writable = true;
};

bool is_utf8(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

// `samples` responses to each of `prompts`, from `engine`, each scored by `task`.
absl::StatusOr<std::vector<std::vector<scored>>> sample(actors::inference_engine& engine,
                                                        const tasks::text_task& task,
                                                        const std::vector<std::string>& prompts,
                                                        const preferences_args& args) {
  std::vector<std::vector<scored>> out(prompts.size(), std::vector<scored>(args.samples));
  std::map<uint64_t, std::pair<std::string, bool>> generated;  // by id: text, ended
  const auto id_of = [&](size_t p, int k) { return p * static_cast<uint64_t>(args.samples) + k; };
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (int k = 0; k < args.samples; ++k) {
      actor::generation_request r;
      r.id = id_of(p, k);
      for (const char c : prompts[p])
        r.prompt.push_back(static_cast<uint8_t>(c));
      r.temperature = static_cast<float>(args.temperature);
      r.seed = args.seed * 0x9e3779b97f4a7c15ull + r.id;  // a sampling stream per response
      r.max_tokens = task.max_response_bytes();
      r.stop = {std::string(task_end_string)};
      r.stream = false;
      TROUPE_RETURN_IF_ERROR(engine.add(std::move(r)));
    }
  }
  while (!engine.idle()) {
    TROUPE_ASSIGN_OR_RETURN(std::vector<actor::generation_event> events, engine.step());
    for (const auto& e : events) {
      auto& [text, ended] = generated[e.id];
      for (int32_t t : e.tokens)
        text.push_back(static_cast<char>(t));
      if (e.finished) ended = e.reason == actor::finish_reason::stop;
    }
  }
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (int k = 0; k < args.samples; ++k) {
      const auto& [text, ended] = generated[id_of(p, k)];
      std::string full = ended ? text + std::string(task_end_string) : text;
      const bool writable = is_utf8(full);
      out[p][k] = {std::move(full), task.reward(prompts[p], text, ended), writable};
    }
  }
  return out;
}

// Writes the pair of each prompt (its best and its worst writable response; none when they
// tie) to `path`; returns the pairs written, the chosen and the rejected responses' mean scores,
// and the responses left out for bytes JSON cannot hold.
struct written {
  int64_t pairs = 0, not_utf8 = 0;
  double chosen = 0, rejected = 0;
};
absl::StatusOr<written> write_pairs(const std::string& path,
                                    const std::vector<std::string>& prompts,
                                    const std::vector<std::vector<scored>>& responses) {
  const std::filesystem::path out(path);
  std::error_code ec;
  if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path(), ec);
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  if (!file) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  written w;
  for (size_t p = 0; p < prompts.size(); ++p) {
    std::vector<scored> kept;
    for (const scored& s : responses[p]) {
      if (s.writable) kept.push_back(s);
      w.not_utf8 += s.writable ? 0 : 1;
    }
    if (kept.size() < 2) continue;
    const auto by_score = [](const scored& a, const scored& b) { return a.score < b.score; };
    const auto [worst, best] = std::minmax_element(kept.begin(), kept.end(), by_score);
    if (best->score <= worst->score) continue;  // a tie says nothing
    file << nlohmann::json{{"prompt", prompts[p]},
                           {"chosen", best->text},
                           {"rejected", worst->text}}
                .dump()
         << '\n';
    ++w.pairs;
    w.chosen += best->score;
    w.rejected += worst->score;
  }
  file.close();
  if (!file) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  if (w.pairs > 0) w.chosen /= w.pairs, w.rejected /= w.pairs;
  return w;
}

}  // namespace

int data_preferences_command(const preferences_args& args) {
  if (args.examples < 1) return fail(exit_usage_error, "--prompts must be at least 1");
  if (args.samples < 2) return fail(exit_usage_error, "--samples must be at least 2: a pair");
  if (args.held_out_prompts < 0) return fail(exit_usage_error, "--held-out-prompts is negative");
  absl::StatusOr<data_task> task = data_task_of(args);
  if (!task.ok()) return fail(exit_usage_error, std::string(task.status().message()));
  const models::gpt_layout layout(task->model, models::layer_range::all(task->model));
  absl::StatusOr<std::vector<float>> params =
      models::read_gpt_weights(layout, args.policy, "--policy");
  if (!params.ok()) return fail(exit_usage_error, std::string(params.status().message()));
  actors::inference_engine::options o;
  o.scheduler.ctx = task->model.ctx;
  o.scheduler.max_sequences = 64;
  o.scheduler.max_batch_tokens = 1024;
  o.kv_blocks = 64 * ((task->model.ctx + o.block_size - 1) / o.block_size);
  o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto engine = actors::inference_engine::create(layout, params->data(), o);
  if (!engine.ok()) return fail(exit_runtime_failure, std::string(engine.status().message()));

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
    auto responses = sample(**engine, *task->task, prompts, args);
    if (!responses.ok())
      return fail(exit_runtime_failure, std::string(responses.status().message()));
    absl::StatusOr<written> w = write_pairs(path, prompts, *responses);
    if (!w.ok()) return fail(exit_runtime_failure, std::string(w.status().message()));
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
