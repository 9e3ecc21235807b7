// The quickstart's training recipe run by the pretraining logic directly (no actors): the tiny
// GPT on the Debian fortunes text, 600 steps of 16 x 128 tokens, AdamW (weight decay 0.1), peak
// learning rate 4e-3 with 30 warmup steps then cosine decay to 10%, clipping at 1.0; the last 5%
// of the text held out. Reports the held-out loss against the PyTorch reference the pretraining
// issue quotes for the same recipe (2.69 nats per byte), and the training tokens/s.
//
//   pretrain_bench [--steps N] [--data PATH] [--threads N]

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "actors/trainer.hpp"
#include "bench/bench_report.hpp"

int main(int argc, char** argv) {
  using namespace troupe;
  int steps = 600, threads = static_cast<int>(std::thread::hardware_concurrency());
  std::string data = "/usr/share/games/fortunes";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--steps")
      steps = std::atoi(argv[i + 1]);
    else if (k == "--data")
      data = argv[i + 1];
    else if (k == "--threads")
      threads = std::atoi(argv[i + 1]);
    else
      return bench::unknown_argument("pretrain_bench", k);
  }
  const models::decoder_config tiny{256, 128, 4, 128, 4};
  auto corpus = actors::text_corpus::load(data, 0.05, tiny.ctx);
  if (!corpus.ok()) {
    std::fprintf(stderr, "pretrain_bench: %s\n", std::string(corpus.status().message()).c_str());
    return 1;
  }
  const models::decoder_layout layout(tiny, models::layer_range::all(tiny));
  actors::trainer_options options;
  options.global_batch = 16;
  options.threads = threads;
  options.lr = {4e-3f, 30, steps, 0.1f};
  options.adamw.weight_decay = 0.1f;
  options.grad_clip = 1.0f;
  auto trainer = actors::trainer::create(layout, options, nullptr);
  auto loader = actors::data_loader::create(*corpus, tiny.ctx, 16, 0, 1, 1);
  if (!trainer.ok() || !loader.ok()) return 1;
  const auto start = std::chrono::steady_clock::now();
  double last_loss = 0;
  for (int s = 0; s < steps; ++s) {
    auto report = (*trainer)->step(loader->next());
    if (!report.ok()) return 1;
    last_loss = report->loss;
    if ((s + 1) % 100 == 0) std::fprintf(stderr, "step %d loss %.4f\n", s + 1, last_loss);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto val = (*trainer)->evaluate(loader->validation(16, 1 << 30));
  if (!val.ok()) return 1;
  const double reference = 2.69;
  nlohmann::json line = {{"bench", "pretrain_bench"},
                         {"metric", "held_out_loss"},
                         {"value", *val},
                         {"unit", "nats/byte"},
                         {"baseline", "pytorch reference, same recipe (pretraining issue)"},
                         {"baseline_value", reference},
                         {"ratio", reference / *val},
                         {"steps", steps},
                         {"train_loss", last_loss},
                         {"tokens_per_s", steps * 16.0 * tiny.ctx / seconds},
                         {"seconds", seconds}};
  std::printf("%s\n", line.dump().c_str());
  return 0;
}
