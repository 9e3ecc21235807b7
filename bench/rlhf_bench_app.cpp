// rlhf_bench's app part: `troupe launch configs/rlhf_{grpo,ppo}.yaml` as a user runs it, from
// scratch (no warm-up, no validation) for a few steps, measured from the run's metrics.jsonl.
//
// - {grpo,ppo}_step_split_s: the median step time and each phase's median (veRL's timing_s
//   names); the baseline is the step itself, so the ratio is the share of the step its named
//   phases account for (old_log_prob, ref and values run at once, and so do update_critic and
//   update_actor: the longest of each counts), 1 less what the controller spends between them.
// - {grpo,ppo}_rollout_tokens_per_s: generation inside RLHF (its tokens over timing_s/gen, which
//   includes sending the requests to the rollout worker's process and gathering the outputs)
//   against the serving engine alone (actors::inference_engine in this process, on the same
//   weights, the same requests: prompts, seeds, lengths and stop string) step by step. The runs
//   keep the policy's learning rate at 0, so that every step generates with the initial weights,
//   which the baseline then has too: both generate the same tokens, checked. Launch and baseline
//   alternate R / 2 times, and the medians pool their steps.
// - ppo_step_s: configs/rlhf_ppo.yaml's whole step with one PPO epoch (the shipped learning
//   rates) against the same step written in PyTorch (bench/ref_ppo_torch.py: the same model,
//   batch and response length, a KV cache for the generation), at its faster of 1 and 2 threads,
//   the two alternating repeat by repeat; and the same run one step off policy
//   (max_staleness 1) against it.

#include "bench/rlhf_bench_app.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "actors/inference_engine.hpp"
#include "apps/builtin_apps.hpp"
#include "apps/rlhf/rlhf_options.hpp"
#include "bench/bench_process.hpp"
#include "bench/bench_report.hpp"
#include "models/decoder/decoder_source.hpp"
#include "runtime/app/app_plan.hpp"
#include "runtime/plugin/plugin_loader.hpp"
#include "tasks/text_task.hpp"

namespace troupe::bench {
namespace {

namespace fs = std::filesystem;
using clock = std::chrono::steady_clock;

const std::vector<std::string> phases = {"gen",           "reward",       "old_log_prob",
                                         "ref",           "values",       "adv",
                                         "update_critic", "update_actor", "update_weights"};

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "rlhf_bench: %s\n", why.c_str());
  std::exit(1);
}

// The step rows (those with a score) of a launch of `config` with `sets`.
std::vector<nlohmann::json> launch(const std::string& config,
                                   const std::vector<std::string>& sets) {
  const fs::path dir =
      fs::temp_directory_path() / ("troupe-rlhf-bench-" + std::to_string(getpid()));
  fs::remove_all(dir);
  std::string cmd = std::string(TROUPE_BINARY) + " launch " + config + " --run-dir " + dir.string();
  for (const auto& s : sets)
    cmd += " --set " + s;
  const auto summary = nlohmann::json::parse(read_command(cmd + " 2>/dev/null"), nullptr, false);
  if (!summary.is_object() || summary.value("status", "") != "succeeded") {
    fail("the run of " + config + " failed: " + summary.dump());
  }
  std::vector<nlohmann::json> rows;
  for (auto& row : read_jsonl((dir / "metrics.jsonl").string())) {
    if (row.contains("critic/score/mean")) rows.push_back(std::move(row));
  }
  fs::remove_all(dir);
  return rows;
}

// The engine alone on RL step `step`'s requests: the responses' tokens (their end included: the
// requests keep the stop string in the output, as RLHF counts them) and seconds.
std::pair<int64_t, double> engine_alone(const apps::rlhf::rlhf_options& o, int workers,
                                        const models::decoder_layout& layout,
                                        const std::vector<float>& params,
                                        const apps::rlhf::rlhf_driver& driver, int64_t step) {
  auto engine = actors::inference_engine::create(
      layout, params.data(), apps::rlhf::rollout_engine_options(o, layout.config(), workers));
  if (!engine.ok()) fail(std::string(engine.status().message()));
  const auto start = clock::now();
  for (auto& r : driver.step_requests(step)) {
    if (absl::Status s = (*engine)->add(std::move(r)); !s.ok()) fail(std::string(s.message()));
  }
  int64_t tokens = 0;
  while (!(*engine)->idle()) {
    auto events = (*engine)->step();
    if (!events.ok()) fail(std::string(events.status().message()));
    for (const auto& e : *events)
      tokens += static_cast<int64_t>(e.tokens.size());
  }
  return {tokens, std::chrono::duration<double>(clock::now() - start).count()};
}

// `repeats` launches of configs/rlhf_<name>.yaml, each followed by the engine alone on its steps'
// requests, so that a minute in which this machine runs slower falls on both sides.
void bench_config(const std::string& name, int steps, int repeats) {
  const std::string config = std::string(TROUPE_SOURCE_DIR) + "/configs/rlhf_" + name + ".yaml";
  const std::vector<std::string> sets = {
      "rlhf.warmup.steps=0", "rlhf.trainer.test_freq=0", "rlhf.actor.lr=0",
      "rlhf.trainer.total_training_steps=" + std::to_string(steps)};

  // The same config, loaded as the launch loaded it, gives the baseline its requests.
  actor::role_registry registry;
  if (!apps::register_builtins(registry).ok()) fail("the built-in roles do not register");
  plugin::plugin_loader plugins;
  auto plan = app::load_app_plan({config, sets}, registry, plugins);
  if (!plan.ok()) fail(std::string(plan.status().message()));
  const auto& o = *static_cast<const apps::rlhf::rlhf_options*>(plan->app_options.get());
  const models::decoder_config model = models::decoder_config_of(plan->spec.model).value();
  const int workers = plan->find_role("rollout")->spec.count;  // the engine's threads follow it
  auto task = tasks::make_task(o.task);
  if (!task.ok()) fail(std::string(task.status().message()));
  const apps::rlhf::rlhf_driver driver(
      apps::rlhf::schedule_of(o, model.ctx), apps::rlhf::algorithm_of(o),
      apps::rlhf::kl_controller_of(o),
      {[t = *task](uint64_t seed, int64_t index) { return t->prompt(seed, index); }},
      [] { return clock::now(); });

  const models::decoder_layout layout(model, models::layer_range::all(model));
  std::vector<float> params(layout.total());
  layout.initialize(params.data(), static_cast<uint64_t>(o.seed));  // the policy's initial weights
  std::vector<double> step_s, ours, alone;
  std::map<std::string, std::vector<double>> split;
  double covered = 0;
  int64_t mismatched = 0;
  const int rows_per_step = o.data.train_batch_size * o.rollout.n;
  for (int r = 0; r < repeats; ++r) {
    const std::vector<nlohmann::json> rows = launch(config, sets);
    if (static_cast<int>(rows.size()) != steps) fail(config + ": not every step has a row");
    for (int s = 2; s <= steps; ++s) {  // the first step warms up
      const nlohmann::json& row = rows[s - 1];
      step_s.push_back(row["timing_s/step"]);
      for (const auto& p : phases) {
        if (row.contains("timing_s/" + p)) split[p].push_back(row["timing_s/" + p]);
      }
      const auto [tokens, seconds] = engine_alone(o, workers, layout, params, driver, s);
      const double rl_tokens = row["response_length/mean"].get<double>() * rows_per_step;
      mismatched += std::llround(rl_tokens) != tokens;
      ours.push_back(static_cast<double>(tokens) / row["timing_s/gen"].get<double>());
      alone.push_back(static_cast<double>(tokens) / seconds);
    }
  }
  // old_log_prob, ref and values run at once, and so do the updates: the longest of each counts.
  nlohmann::json phase_medians = nlohmann::json::object();
  double forwards = 0, updates = 0;
  for (const auto& [p, xs] : split) {
    phase_medians[p] = median(xs);
    if (p == "old_log_prob" || p == "ref" || p == "values") {
      forwards = std::max(forwards, median(xs));
    } else if (p == "update_critic" || p == "update_actor") {
      updates = std::max(updates, median(xs));
    } else {
      covered += median(xs);
    }
  }
  covered += forwards + updates;
  const nlohmann::json line = {{"bench", "rlhf_bench"},
                               {"metric", name + "_step_split_s"},
                               {"value", median(step_s)},
                               {"unit", "s"},
                               {"baseline", "the step, timing_s/step"},
                               {"baseline_value", median(step_s)},
                               {"ratio", covered / median(step_s)},
                               {"repeats", step_s.size()},
                               {"timing_s", phase_medians}};
  std::printf("%s\n", line.dump().c_str());
  report("rlhf_bench", name + "_rollout_tokens_per_s", ours, "tokens/s",
         "the serving engine alone, same requests and weights", alone, better::higher,
         {{"sequences_per_step", rows_per_step},
          {"response_length", apps::rlhf::response_length(o)},
          {"steps_with_other_tokens", mismatched}});
}

}  // namespace

// The median step of `steps` steps of PyTorch's PPO (bench/ref_ppo_torch.py) on `threads`.
double torch_ppo_step_s(int steps, int threads) {
  const auto out = nlohmann::json::parse(
      read_command(torch_python + TROUPE_SOURCE_DIR "/bench/ref_ppo_torch.py --steps " +
                   std::to_string(steps) + " --threads " + std::to_string(threads) +
                   " 2>/dev/null"),
      nullptr, false);
  if (!out.is_object()) {
    fail(
        "bench/ref_ppo_torch.py printed no result: is python3-torch installed (scripts/setup.sh)?");
  }
  return out["step_s"];
}

// The median step (the first left out) of configs/rlhf_ppo.yaml with one PPO epoch, from
// scratch, with `sets`.
double ppo_step_s(int steps, std::vector<std::string> sets) {
  sets.insert(sets.end(),
              {"rlhf.warmup.steps=0", "rlhf.trainer.test_freq=0", "rlhf.actor.ppo_epochs=1",
               "rlhf.trainer.total_training_steps=" + std::to_string(steps)});
  const auto rows = launch(std::string(TROUPE_SOURCE_DIR) + "/configs/rlhf_ppo.yaml", sets);
  std::vector<double> step_s;
  for (size_t s = 1; s < rows.size(); ++s)  // the first step warms up
    step_s.push_back(rows[s]["timing_s/step"]);
  return median(step_s);
}

// PPO's step against PyTorch's, and one step off policy (rlhf.async.max_staleness 1: the next
// step's generation overlaps this step's updates) against synchronous.
void bench_ppo_against_torch(int steps, int repeats) {
  std::vector<double> ours, torch, async;
  for (int r = 0; r < repeats; ++r) {
    ours.push_back(ppo_step_s(steps, {}));
    torch.push_back(std::min(torch_ppo_step_s(steps, 1), torch_ppo_step_s(steps, 2)));
    async.push_back(ppo_step_s(steps, {"rlhf.async.max_staleness=1"}));
  }
  report("rlhf_bench", "ppo_step_s", ours, "s",
         "PyTorch 1.13, the same PPO step (bench/ref_ppo_torch.py), its faster of 1 and 2 threads",
         torch, better::lower, {{"steps", steps}, {"ppo_epochs", 1}, {"sequences", 256}});
  report("rlhf_bench", "ppo_step_s_one_step_off_policy", async, "s",
         "the synchronous step (max_staleness 0)", ours, better::lower, {{"steps", steps}});
}

void run_rlhf_app_benchmarks(int steps, int repeats) {
  bench_config("grpo", steps, repeats);
  bench_config("ppo", steps, repeats);
  bench_ppo_against_torch(steps, repeats);
}

}  // namespace troupe::bench
