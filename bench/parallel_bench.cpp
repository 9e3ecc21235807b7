// The memory wall's trade-offs on the 8-layer model (dim 256, 8 heads, ctx 128, vocab 256),
// measured on one rank in the same run (issue 18's parallel_bench):
//
// - activation_checkpointing_{blocks,every_2}: the activations a rank holds for backward at its
//   batch (gpt_cpu_batch::activation_bytes: the residual stream, one segment's blocks, the head)
//   against keeping every block's (target <= 0.3 with blocks), and the step time (forward,
//   backward and AdamW) against it (target <= 1.4x), alternating repeat by repeat.
//
//   parallel_bench [--repeats R] [--steps S] [--threads T]

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_report.hpp"
#include "models/gpt/adamw_optimizer.hpp"
#include "models/gpt/gpt_cpu_batch.hpp"

namespace {

using namespace troupe;

constexpr models::gpt_config model{256, 128, 8, 256, 8};
constexpr int batch = 8;

// One configuration of a rank: its model replicas with `segment` (0: no checkpointing).
struct rank_model {
  rank_model(int threads, int segment)
      : layout(model, models::layer_range::all(model)),
        params(layout.total()),
        grads(layout.total()),
        optimizer(layout, 0, layout.total(), {}),
        runner(layout, batch, threads, segment),
        tokens(batch * model.ctx),
        targets(batch * model.ctx) {
    layout.initialize(params.data(), 1);
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = static_cast<int32_t>((i * 2654435761u) >> 8) & 255;
      targets[i] = static_cast<int32_t>((i * 40503u + 7) >> 4) & 255;
    }
  }

  // Seconds per step over `steps` steps.
  double step_s(int steps) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) {
      std::memset(grads.data(), 0, grads.size() * sizeof(float));
      runner.run(params.data(), grads.data(), batch, model.ctx, tokens.data(), targets.data(),
                 1.0f / (batch * model.ctx));
      optimizer.step(params.data(), grads.data(), 1e-4f, 1.0f);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
           steps;
  }

  models::gpt_layout layout;
  std::vector<float> params, grads;
  models::adamw_optimizer optimizer;
  models::gpt_cpu_batch runner;
  std::vector<int32_t> tokens, targets;
};

void activation_checkpointing(int threads, int steps, int repeats) {
  rank_model none(threads, 0);
  for (const auto& [name, segment] : {std::pair{"blocks", 1}, {"every_2", 2}}) {
    rank_model checkpointed(threads, segment);
    none.step_s(1), checkpointed.step_s(1);  // warm up
    std::vector<double> ours, theirs;
    for (int r = 0; r < repeats; ++r) {
      if (r % 2 == 0) {
        ours.push_back(checkpointed.step_s(steps));
        theirs.push_back(none.step_s(steps));
      } else {
        theirs.push_back(none.step_s(steps));
        ours.push_back(checkpointed.step_s(steps));
      }
    }
    const nlohmann::json extra = {{"layers", model.layers}, {"dim", model.dim},
                                  {"batch", batch},         {"ctx", model.ctx},
                                  {"threads", threads},     {"segment", segment}};
    const double mine = static_cast<double>(checkpointed.runner.activation_bytes()) / 1e6;
    const double full = static_cast<double>(none.runner.activation_bytes()) / 1e6;
    const nlohmann::json memory = {
        {"bench", "parallel_bench"},
        {"metric", std::string("activation_checkpointing_") + name + "_activation_mb"},
        {"value", mine},
        {"unit", "MB"},
        {"baseline", "every block's activations kept"},
        {"baseline_value", full},
        {"ratio", full / mine}};
    std::printf("%s\n", memory.dump().c_str());
    bench::report("parallel_bench", std::string("activation_checkpointing_") + name + "_step_s",
                  ours, "s", "every block's activations kept", theirs, bench::better::lower,
                  extra);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5, steps = 3;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--repeats" && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--steps" && i + 1 < argc) {
      steps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--threads" && i + 1 < argc) {
      threads = std::max(1, std::atoi(argv[++i]));
    } else {
      return bench::unknown_argument("parallel_bench", arg);
    }
  }
  activation_checkpointing(threads, steps, repeats);
  return 0;
}
