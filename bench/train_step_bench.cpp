// Tokens/s of one training step (forward + backward + AdamW) of the tiny GPT on the CPU, against
// the same model in PyTorch (../shared/tools/ref_gpt_torch.py, Debian python3-torch) run in the
// same session, one repeat of each back to back.
//
//   train_step_bench [--threads N] [--steps S] [--repeats R] [--torch-threads T] [--no-torch]

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_process.hpp"
#include "bench/bench_report.hpp"
#include "models/gpt/adamw_optimizer.hpp"
#include "models/gpt/gpt_cpu_batch.hpp"

namespace {

using namespace troupe;

struct options {
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  int steps = 20;
  int repeats = 3;
  int torch_threads = 1;  // PyTorch 1.13 is fastest on one thread here (ANCHORS.md)
  bool torch = true;
};

constexpr models::gpt_config tiny{256, 128, 4, 128, 4};
constexpr int batch = 16;

double troupe_tokens_per_s(const options& o, int threads) {
  models::gpt_layout layout(tiny, models::layer_range::all(tiny));
  std::vector<float> params(layout.total()), grads(layout.total());
  layout.initialize(params.data(), 1);
  models::adamw_optimizer opt(layout, 0, layout.total(), {});
  models::gpt_cpu_batch runner(layout, batch, threads);
  std::vector<int32_t> tokens(batch * tiny.ctx), targets(batch * tiny.ctx);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>((i * 2654435761u) >> 8) & 255;
    targets[i] = static_cast<int32_t>((i * 40503u + 7) >> 4) & 255;
  }
  auto step = [&] {
    std::memset(grads.data(), 0, grads.size() * sizeof(float));
    runner.run(params.data(), grads.data(), batch, tiny.ctx, tokens.data(), targets.data(),
               1.0f / (batch * tiny.ctx));
    opt.step(params.data(), grads.data(), 1e-3f, 1.0f);
  };
  for (int i = 0; i < 3; ++i)
    step();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < o.steps; ++i)
    step();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return o.steps * batch * tiny.ctx / s;
}

// Runs the PyTorch reference and reads its tokens_per_s; 0 when PyTorch is not installed.
double torch_tokens_per_s(const options& o) {
  const std::string cmd = bench::torch_python + TROUPE_SHARED_TOOLS "/ref_gpt_torch.py --threads " +
                          std::to_string(o.torch_threads) + " --steps " + std::to_string(o.steps) +
                          " 2>/dev/null";
  auto json = nlohmann::json::parse(bench::read_command(cmd), nullptr, false);
  return json.is_object() && json.contains("tokens_per_s") ? json["tokens_per_s"].get<double>() : 0;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (a == "--threads")
      o.threads = next();
    else if (a == "--steps")
      o.steps = next();
    else if (a == "--repeats")
      o.repeats = next();
    else if (a == "--torch-threads")
      o.torch_threads = next();
    else if (a == "--no-torch")
      o.torch = false;
    else {
      std::fprintf(stderr, "train_step_bench: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  std::vector<double> ours, torch, single;
  for (int r = 0; r < o.repeats; ++r) {
    ours.push_back(troupe_tokens_per_s(o, o.threads));
    single.push_back(troupe_tokens_per_s(o, 1));
    if (o.torch) torch.push_back(torch_tokens_per_s(o));
  }
  const nlohmann::json shape = {{"model", "gpt 4x128, 4 heads, ctx 128, vocab 256"},
                                {"batch", batch},
                                {"threads", o.threads}};
  if (o.torch && bench::median(torch) > 0) {
    bench::report("train_step_bench", "train_tokens_per_s", ours, "tokens/s",
                  "pytorch-1.13 (" + std::to_string(o.torch_threads) + " thread)", torch,
                  bench::better::higher, shape);
  } else if (o.torch) {
    std::fprintf(stderr,
                 "train_step_bench: PyTorch not found (apt-get install python3-torch); "
                 "reporting against troupe on one thread only\n");
  }
  bench::report("train_step_bench", "train_tokens_per_s_vs_one_thread", ours, "tokens/s",
                "troupe, 1 thread", single, bench::better::higher, shape);
  return 0;
}
