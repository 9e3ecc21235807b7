// The pretraining app as a user runs it: `troupe launch configs/pretrain_tiny.yaml` (the tiny GPT
// on the Debian fortunes text, batch 16 x 128), measured from the run's own metrics.jsonl.
// Paired repeats, each launching the app afresh:
//
// - app_tokens_per_s: one process, dp=1, every core; the median step's tokens/s (steps past the
//   first 5) against the PyTorch anchor (../shared/tools/ref_gpt_torch.py --threads 1, its
//   fastest setting on this machine), run right after.
// - app_dp2_scaling_efficiency: dp=2 on two local worker processes (one core each) against
//   dp=1 on one core: tokens/s(dp=2) / (2 x tokens/s(dp=1)).
// - app_checkpoint_stall: a dp=1 run checkpointing every 10 steps (the other runs do not);
//   per checkpoint, the time the trainer was blocked (the snapshot) against the time its writer
//   took to write, sync and hash the same files, which a synchronous checkpoint would block for.
//
//   pretrain_app_bench [--steps N] [--repeats N]

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "bench/bench_process.hpp"
#include "bench/bench_report.hpp"

namespace {

namespace fs = std::filesystem;
using troupe::bench::median;
using troupe::bench::read_command;
using troupe::bench::torch_python;

struct app_run {
  double tokens_per_s = 0;               // the median step's
  std::vector<double> stall_s, write_s;  // per checkpoint
};

// Launches the tiny config with `sets` and reads its metrics; nullopt when the run failed.
std::optional<app_run> launch(int steps, const std::vector<std::string>& sets) {
  const fs::path dir = fs::temp_directory_path() / ("troupe-app-bench-" + std::to_string(getpid()));
  fs::remove_all(dir);
  std::string cmd = TROUPE_BINARY " launch " TROUPE_SOURCE_DIR
                                  "/configs/pretrain_tiny.yaml --run-dir " +
                    dir.string() + " --set pretrain.train.steps=" + std::to_string(steps) +
                    " --set pretrain.train.warmup=5 --set pretrain.data.eval_every=0"
                    " --set pretrain.data.eval_windows=16";
  for (const auto& s : sets)
    cmd += " --set " + s;
  const auto summary = nlohmann::json::parse(read_command(cmd + " 2>/dev/null"), nullptr, false);
  if (!summary.is_object() || summary.value("status", "") != "succeeded") {
    std::fprintf(stderr, "pretrain_app_bench: the run failed: %s\n", summary.dump().c_str());
    return std::nullopt;
  }
  app_run r;
  std::vector<double> tokens_per_s;
  std::ifstream in(dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto row = nlohmann::json::parse(line);
    if (row.contains("loss") && row["step"].get<int>() > 5)
      tokens_per_s.push_back(row["tokens_per_s"]);
    if (row.contains("checkpoint")) {
      r.stall_s.push_back(row["checkpoint"]["stall_s"]);
      r.write_s.push_back(row["checkpoint"]["write_s"]);
    }
  }
  r.tokens_per_s = median(tokens_per_s);
  fs::remove_all(dir);
  return r;
}

double torch_tokens_per_s(int steps) {
  const auto out = nlohmann::json::parse(
      read_command(torch_python + TROUPE_SHARED_TOOLS "/ref_gpt_torch.py --threads 1 --steps " +
                   std::to_string(steps) + " 2>/dev/null"),
      nullptr, false);
  return out.is_object() ? out.value("tokens_per_s", 0.0) : 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace troupe::bench;
  int steps = 60, repeats = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc) {
      steps = std::stoi(argv[++i]);
    } else if (a == "--repeats" && i + 1 < argc) {
      repeats = std::stoi(argv[++i]);
    } else {
      return unknown_argument("pretrain_app_bench", a);
    }
  }
  std::vector<double> app, torch, dp1, dp2, stall, write;
  for (int r = 0; r < repeats; ++r) {
    const auto whole = launch(steps, {});
    const double reference = torch_tokens_per_s(steps);
    const auto one = launch(steps, {"pretrain.train.threads=1"});
    const auto two = launch(
        steps, {"pretrain.parallel.dp=2", "roles.trainer.count=2", "cluster.local_workers=2"});
    const auto saving = launch(steps, {"pretrain.checkpoint.every_steps=10"});
    if (!whole || !one || !two || !saving || reference <= 0) return 1;
    app.push_back(whole->tokens_per_s);
    torch.push_back(reference);
    dp1.push_back(one->tokens_per_s);
    dp2.push_back(two->tokens_per_s / 2);
    stall.insert(stall.end(), saving->stall_s.begin(), saving->stall_s.end());
    write.insert(write.end(), saving->write_s.begin(), saving->write_s.end());
  }
  report("pretrain_app_bench", "app_tokens_per_s", app, "tokens/s",
         "PyTorch 1.13 tiny GPT, 1 thread (ref_gpt_torch.py)", torch, better::higher,
         {{"steps", steps}});
  report("pretrain_app_bench", "app_dp2_scaling_efficiency", dp2, "tokens/s per process",
         "dp=1, one process, one core", dp1, better::higher, {{"steps", steps}});
  report("pretrain_app_bench", "app_checkpoint_stall", stall, "s",
         "the same files written, synced and hashed synchronously", write, better::lower,
         {{"checkpoints", stall.size()}});
  return 0;
}
