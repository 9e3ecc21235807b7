// Tokens/s of one training step (forward + backward + AdamW) on the CPU, against the same model
// in PyTorch (Debian python3-torch) run in the same session, one repeat of each back to back:
// the tiny GPT (../shared/tools/ref_gpt_torch.py, PyTorch on --torch-threads), and the
// quickstart's Llama shape (bench/ref_llama_torch.py, written from HF's LlamaForCausalLM; the
// baseline is PyTorch's best configuration, the faster of one and two threads in each repeat).
//
//   train_step_bench [--model gpt|llama|all] [--threads N] [--steps S] [--repeats R]
//                    [--torch-threads T] [--no-torch]

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_process.hpp"
#include "bench/bench_report.hpp"
#include "models/decoder/adamw_optimizer.hpp"
#include "models/decoder/decoder_cpu_batch.hpp"

namespace {

using namespace troupe;

struct options {
  std::string model = "all";
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  int steps = 20;
  int repeats = 3;
  int torch_threads = 1;  // PyTorch 1.13 is fastest on one thread here (ANCHORS.md)
  bool torch = true;
};

constexpr int batch = 16;

// A model the bench times, and its PyTorch twin's command line (without --threads).
struct bench_model {
  std::string name, description;
  models::decoder_config config;
  std::string torch_command;
};

bench_model gpt_model(const options& o) {
  return {"gpt", "gpt 4x128, 4 heads, ctx 128, vocab 256",
          models::decoder_config{256, 128, 4, 128, 4},
          TROUPE_SHARED_TOOLS "/ref_gpt_torch.py --steps " + std::to_string(o.steps)};
}

// configs/quickstart_llama.yaml's model.
bench_model llama_model(const options& o) {
  models::decoder_config c{2048, 128, 4, 128, 4};
  c.family = models::decoder_family::llama;
  c.kv_heads = 2;
  c.ffn = 352;
  return {"llama", "llama 4x128, 4 heads on 2 kv heads, ffn 352, ctx 128, vocab 2048", c,
          TROUPE_SOURCE_DIR "/bench/ref_llama_torch.py --steps " + std::to_string(o.steps)};
}

double troupe_tokens_per_s(const options& o, const models::decoder_config& tiny, int threads) {
  models::decoder_layout layout(tiny, models::layer_range::all(tiny));
  std::vector<float> params(layout.total()), grads(layout.total());
  layout.initialize(params.data(), 1);
  models::adamw_optimizer opt(layout, 0, layout.total(), {});
  models::decoder_cpu_batch runner(layout, batch, threads);
  std::vector<int32_t> tokens(batch * tiny.ctx), targets(batch * tiny.ctx);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>(((i * 2654435761u) >> 8) % tiny.vocab);
    targets[i] = static_cast<int32_t>(((i * 40503u + 7) >> 4) % tiny.vocab);
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

// Runs a PyTorch reference on `threads` and reads its tokens_per_s; 0 when PyTorch is not
// installed.
double torch_tokens_per_s(const bench_model& m, int threads) {
  const std::string cmd = bench::torch_python + m.torch_command + " --threads " +
                          std::to_string(threads) + " 2>/dev/null";
  auto json = nlohmann::json::parse(bench::read_command(cmd), nullptr, false);
  return json.is_object() && json.contains("tokens_per_s") ? json["tokens_per_s"].get<double>() : 0;
}

void run(const options& o, const bench_model& m) {
  const bool best_of_threads = m.name == "llama";
  std::vector<double> ours, torch, single;
  for (int r = 0; r < o.repeats; ++r) {
    ours.push_back(troupe_tokens_per_s(o, m.config, o.threads));
    single.push_back(troupe_tokens_per_s(o, m.config, 1));
    if (!o.torch) continue;
    double t = torch_tokens_per_s(m, best_of_threads ? 1 : o.torch_threads);
    if (best_of_threads) t = std::max(t, torch_tokens_per_s(m, 2));
    torch.push_back(t);
  }
  const nlohmann::json shape = {{"model", m.description}, {"batch", batch}, {"threads", o.threads}};
  const std::string bench_name =
      m.name == "gpt" ? "train_step_bench" : "train_step_bench_" + m.name;
  if (o.torch && bench::median(torch) > 0) {
    bench::report(bench_name, "train_tokens_per_s", ours, "tokens/s",
                  best_of_threads ? std::string("pytorch-1.13 (the faster of 1 and 2 threads)")
                                  : "pytorch-1.13 (" + std::to_string(o.torch_threads) + " thread)",
                  torch, bench::better::higher, shape);
  } else if (o.torch) {
    std::fprintf(stderr,
                 "train_step_bench: PyTorch not found (apt-get install python3-torch); "
                 "reporting against troupe on one thread only\n");
  }
  bench::report(bench_name, "train_tokens_per_s_vs_one_thread", ours, "tokens/s",
                "troupe, 1 thread", single, bench::better::higher, shape);
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (a == "--model" && i + 1 < argc)
      o.model = argv[++i];
    else if (a == "--threads")
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
  if (o.model != "gpt" && o.model != "llama" && o.model != "all") {
    std::fprintf(stderr, "train_step_bench: --model is gpt, llama or all, not '%s'\n",
                 o.model.c_str());
    return 2;
  }
  if (o.model != "llama") run(o, gpt_model(o));
  if (o.model != "gpt") run(o, llama_model(o));
  return 0;
}
