// The alignment pipeline's training steps against PyTorch (issue 19): a reward model's step
// (Bradley-Terry on a scalar head) and a DPO step (TRL's sigmoid loss on summed response
// log-probs, the reference's precomputed) on troupe's trainer, against the same steps in
// PyTorch (bench/ref_align_torch.py, Debian python3-torch: its faster of 1 and 2 threads) on the
// same model and batch, `configs/align/{rm,dpo}.yaml`'s: a GPT of 2 layers, dim 64, 4 heads,
// ctx 32; 16 pairs (32 sequences) a step. Each repeat measures both, alternating; a step's time
// is the median over `--steps` steps after a warm-up step.
//
//   align_bench [--steps 30] [--repeats 3] [--pairs 16] [--threads N]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "actors/trainer.hpp"
#include "bench/bench_process.hpp"
#include "bench/bench_report.hpp"

namespace {

using namespace troupe;

const models::decoder_config shape{256, 32, 2, 64, 4};
constexpr int prompt_bytes = 10;

struct options {
  int steps = 30, repeats = 3, pairs = 16;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
};

// `pairs` pairs of random bytes, each sequence of a random length past the prompt: a reward
// model's batch (each row scored at its last token) or DPO's (trained on the response).
actor::token_batch make_pairs(int pairs, bool dpo) {
  std::mt19937 rng(1);
  actor::token_batch b;
  b.batch = 2 * pairs;
  b.ctx = shape.ctx;
  b.tokens.resize(static_cast<size_t>(b.batch) * b.ctx);
  b.targets.assign(b.tokens.size(), -1);
  for (auto& t : b.tokens)
    t = static_cast<int32_t>(rng() % 256);
  for (int row = 0; row < b.batch; ++row) {
    const int length = prompt_bytes + 2 + static_cast<int>(rng() % (shape.ctx - prompt_bytes - 1));
    int32_t* targets = b.targets.data() + static_cast<size_t>(row) * b.ctx;
    const int32_t* tokens = b.tokens.data() + static_cast<size_t>(row) * b.ctx;
    if (dpo) {
      for (int t = prompt_bytes - 1; t < length - 1; ++t)
        targets[t] = tokens[t + 1];
    } else {
      targets[length - 1] = row % 2 == 0 ? 1 : 0;
    }
  }
  if (dpo) b.reference_logps.assign(b.batch, -40.0f);
  b.global_targets = pairs;
  return b;
}

// The median step time of troupe's trainer on the reward model's or DPO's batch.
double troupe_step_s(const options& o, bool dpo) {
  const models::decoder_layout layout(shape, models::layer_range::all(shape),
                                      dpo ? models::decoder_head::lm : models::decoder_head::value);
  actors::trainer_options t;
  t.global_batch = 2 * o.pairs;
  t.threads = o.threads;
  t.lr = {1e-3f, 0, 1 << 20, 1.0f};
  t.grad_clip = 1.0f;
  if (dpo) t.preference = kernels::preference_options{};
  auto trainer = actors::trainer::create(layout, t, nullptr);
  if (!trainer.ok()) return 0;
  const actor::token_batch batch = make_pairs(o.pairs, dpo);
  if (!(*trainer)->step(batch).ok()) return 0;  // warm-up
  std::vector<double> times;
  for (int s = 0; s < o.steps; ++s) {
    const auto start = std::chrono::steady_clock::now();
    if (!(*trainer)->step(batch).ok()) return 0;
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return bench::median(times);
}

// PyTorch's step times {reward model, DPO} with `threads` threads; {0, 0} without PyTorch.
std::pair<double, double> torch_step_s(const options& o, int threads) {
  const std::string cmd = bench::torch_python + TROUPE_SOURCE_DIR "/bench/ref_align_torch.py" +
                          std::string(" --threads ") + std::to_string(threads) + " --steps " +
                          std::to_string(o.steps) + " --pairs " + std::to_string(o.pairs) +
                          " 2>/dev/null";
  const auto json = nlohmann::json::parse(bench::read_command(cmd), nullptr, false);
  if (!json.is_object() || !json.contains("dpo_step_s")) return {0, 0};
  return {json["rm_step_s"].get<double>(), json["dpo_step_s"].get<double>()};
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (a == "--steps") {
      o.steps = next();
    } else if (a == "--repeats") {
      o.repeats = next();
    } else if (a == "--pairs") {
      o.pairs = next();
    } else if (a == "--threads") {
      o.threads = next();
    } else {
      return bench::unknown_argument("align_bench", a);
    }
  }
  std::vector<double> rm, dpo, torch_rm, torch_dpo;
  for (int r = 0; r < o.repeats; ++r) {
    rm.push_back(troupe_step_s(o, false));
    dpo.push_back(troupe_step_s(o, true));
    const auto one = torch_step_s(o, 1), two = torch_step_s(o, 2);
    const auto faster = [](double x, double y) { return x > 0 && y > 0 ? std::min(x, y) : x + y; };
    torch_rm.push_back(faster(one.first, two.first));
    torch_dpo.push_back(faster(one.second, two.second));
  }
  const nlohmann::json extra = {{"model", "gpt 2x64, 4 heads, ctx 32, vocab 256"},
                                {"pairs", o.pairs},
                                {"threads", o.threads}};
  if (bench::median(torch_dpo) == 0) {
    std::fprintf(stderr, "align_bench: PyTorch not found (apt-get install python3-torch)\n");
    return 1;
  }
  const std::string baseline = "pytorch-1.13, the same step (faster of 1 and 2 threads)";
  bench::report("align_bench", "reward_model_step_s", rm, "s", baseline, torch_rm,
                bench::better::lower, extra);
  bench::report("align_bench", "dpo_step_s", dpo, "s", baseline, torch_dpo, bench::better::lower,
                extra);
  return 0;
}
