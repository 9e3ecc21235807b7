// Data-parallel scaling of the tiny GPT's training step: dp=2 on two processes (one core each,
// Gloo over loopback, the group formed through a head) against dp=1 on one process and one core,
// at the same global batch of 16 x 128 tokens, in the same run. Scaling efficiency =
// tokens/s(dp=2) / (2 x tokens/s(dp=1)). For scale: PyTorch DDP (gloo) does about 10,500 tokens/s
// here with 2 processes (ANCHORS.md).
//
//   dp_scaling_bench [--steps N] [--zero 0|1|2]
// The parent starts a head and runs itself twice as the ranks (--rank R --head ENDPOINT).

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "actors/trainer.hpp"
#include "bench/bench_report.hpp"
#include "runtime/cluster/head_server.hpp"
#include "runtime/comm/gloo_communicator.hpp"

namespace {

using namespace troupe;
const models::decoder_config tiny{256, 128, 4, 128, 4};

std::string text() {
  std::string t;
  for (int i = 0; t.size() < 400000; ++i) {
    t += "fortune " + std::to_string(i * 7919 % 10007) + ": the quick brown fox jumps\n";
  }
  return t;
}

// Tokens/s of `steps` steps (after 3 warm-up steps) on this rank of a group of `ranks`.
double tokens_per_s(comm::communicator* group, int ranks, int rank, int threads, int steps,
                    int zero, const actors::text_corpus& corpus) {
  const models::decoder_layout layout(tiny, models::layer_range::all(tiny));
  actors::trainer_options options;
  options.global_batch = 16;
  options.threads = threads;
  options.lr = {1e-3f, 10, steps, 0.1f};
  options.zero = static_cast<actors::zero_stage>(zero);
  auto trainer = *actors::trainer::create(layout, options, group);
  auto loader = *actors::data_loader::create(corpus, tiny.ctx, 16, rank, ranks, 1);
  for (int s = 0; s < 3; ++s)
    (void)trainer->step(loader.next());
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) {
    auto report = trainer->step(loader.next());
    if (!report.ok()) {
      std::fprintf(stderr, "dp_scaling_bench: rank %d: %s\n", rank,
                   std::string(report.status().message()).c_str());
      std::exit(1);
    }
  }
  return steps * 16.0 * tiny.ctx /
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  int rank = -1, steps = 30, zero = 0, epoch = 0;
  std::string head, text_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--rank")
      rank = std::stoi(v);
    else if (k == "--head")
      head = v;
    else if (k == "--steps")
      steps = std::stoi(v);
    else if (k == "--zero")
      zero = std::stoi(v);
    else if (k == "--text")
      text_path = v;
    else if (k == "--epoch")
      epoch = std::stoi(v);
    else
      return bench::unknown_argument("dp_scaling_bench", k);
  }
  if (rank >= 0) {  // one rank of the dp=2 group
    auto corpus = *actors::text_corpus::load(text_path, 0.05, tiny.ctx);
    auto store = comm::head_store::connect(head, {.token = "bench"});
    auto group = comm::make_gloo_communicator(
        **store, {.name = "dp", .rank = rank, .size = 2, .epoch = static_cast<uint64_t>(epoch)});
    if (!group.ok()) {
      std::fprintf(stderr, "dp_scaling_bench: %s\n", std::string(group.status().message()).c_str());
      return 1;
    }
    const double tps = tokens_per_s(group->get(), 2, rank, 1, steps, zero, corpus);
    if (rank == 0) std::printf("%f\n", tps);
    return 0;
  }
  const std::string text_path_own = "/tmp/dp_scaling_bench." + std::to_string(getpid()) + ".txt";
  {
    FILE* f = std::fopen(text_path_own.c_str(), "w");
    const std::string t = text();
    std::fwrite(t.data(), 1, t.size(), f);
    std::fclose(f);
  }
  auto corpus = *actors::text_corpus::load(text_path_own, 0.05, tiny.ctx);
  zmq::context_t context(1);
  metrics::registry metrics;
  run::event_log events;
  auto server = cluster::head_server::start(
      context, "tcp://127.0.0.1:0", {.credentials = {.token = "bench"}}, 1 << 20, metrics, events);
  if (!server.ok()) return 1;
  std::vector<double> dp1, dp2;
  for (int repeat = 0; repeat < 3; ++repeat) {
    dp1.push_back(tokens_per_s(nullptr, 1, 0, 1, steps, 0, corpus));
    int out[2];
    if (pipe(out) != 0) return 1;
    std::vector<pid_t> children;
    for (int r = 0; r < 2; ++r) {
      const pid_t pid = fork();
      if (pid == 0) {
        if (r == 0) dup2(out[1], STDOUT_FILENO);
        // Each repeat forms its group at a new epoch, so it never meets the last one's addresses.
        const std::string rank_arg = std::to_string(r), steps_arg = std::to_string(steps),
                          zero_arg = std::to_string(zero), epoch_arg = std::to_string(repeat);
        execl("/proc/self/exe", argv[0], "--rank", rank_arg.c_str(), "--head",
              (*server)->endpoint().c_str(), "--steps", steps_arg.c_str(), "--zero",
              zero_arg.c_str(), "--text", text_path_own.c_str(), "--epoch", epoch_arg.c_str(),
              nullptr);
        _exit(127);
      }
      children.push_back(pid);
    }
    close(out[1]);
    char buf[64] = {};
    const ssize_t n = read(out[0], buf, sizeof buf - 1);
    close(out[0]);
    for (pid_t pid : children)
      waitpid(pid, nullptr, 0);
    if (n <= 0) {
      std::fprintf(stderr, "dp_scaling_bench: rank 0 reported nothing\n");
      return 1;
    }
    dp2.push_back(std::atof(buf) / 2.0);  // per process, against one process at dp=1
  }
  std::remove(text_path_own.c_str());
  bench::report(
      "dp_scaling_bench", "dp2_scaling_efficiency", dp2, "tokens/s per process",
      "dp=1, one process, one core", dp1, bench::better::higher,
      {{"zero", zero}, {"global_batch", 16}, {"dp2_tokens_per_s", 2 * bench::median(dp2)}});
  return 0;
}
