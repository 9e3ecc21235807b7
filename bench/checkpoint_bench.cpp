// Checkpoint stall: how long a trainer is blocked per checkpoint when an async_writer persists
// its state (the snapshot copy and the hand-over), against writing the same bytes synchronously
// (safetensors + fsync + sha256), in the same run. The state is the tiny GPT's weights and AdamW
// moments. Target (pretraining issue): at least 5x less stall.
//
//   checkpoint_bench [--repeats R] [--dir DIR]

#include <chrono>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "bench/bench_report.hpp"
#include "models/decoder/decoder_layout.hpp"
#include "runtime/checkpoint/async_writer.hpp"

namespace {

using namespace troupe;
using clock = std::chrono::steady_clock;

double seconds_since(clock::time_point start) {
  return std::chrono::duration<double>(clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 7;
  std::string root =
      (std::filesystem::temp_directory_path() / ("checkpoint_bench." + std::to_string(getpid())))
          .string();
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--repeats")
      repeats = std::atoi(argv[i + 1]);
    else if (k == "--dir")
      root = argv[i + 1];
    else
      return bench::unknown_argument("checkpoint_bench", k);
  }
  const models::decoder_config tiny{256, 128, 4, 128, 4};
  const models::decoder_layout layout(tiny, models::layer_range::all(tiny));
  std::vector<float> params(layout.total());
  layout.initialize(params.data(), 1);
  tensor::named_tensors model = layout.to_named(params.data());
  tensor::named_tensors optimizer;
  for (const char* name : {"m", "v"}) {
    tensor::tensor t = tensor::tensor::host({layout.total()});
    for (int64_t i = 0; i < layout.total(); ++i)
      t.data<float>()[i] = params[i] * 0.5f;
    optimizer.tensors.emplace_back(name, t);
  }
  const size_t bytes = 3 * layout.total() * sizeof(float);

  checkpoint::checkpoint_store store(root);
  std::vector<double> stall, sync;
  {
    checkpoint::async_writer writer(store);
    // A trainer recycles the previous snapshot's memory once its write is done.
    tensor::named_tensors last_model, last_optimizer;
    for (int r = 0; r < repeats; ++r) {
      // Asynchronous: the trainer's blocked time is the snapshot and the hand-over.
      auto start = clock::now();
      auto m = checkpoint::snapshot(model, std::move(last_model));
      auto o = checkpoint::snapshot(optimizer, std::move(last_optimizer));
      if (!m.ok() || !o.ok()) return 1;
      last_model = *m;
      last_optimizer = *o;
      auto f1 = writer.stage(2 * r, "model.safetensors", *std::move(m));
      auto f2 = writer.stage(2 * r, "optimizer-rank0.safetensors", *std::move(o));
      stall.push_back(seconds_since(start) * 1e3);
      if (!f1.get().ok() || !f2.get().ok()) return 1;  // let it finish before timing the baseline
      // Synchronous: the trainer waits for the files to be on disk.
      start = clock::now();
      if (!store.stage(2 * r + 1, "model.safetensors", model).ok() ||
          !store.stage(2 * r + 1, "optimizer-rank0.safetensors", optimizer).ok()) {
        return 1;
      }
      sync.push_back(seconds_since(start) * 1e3);
    }
  }
  std::filesystem::remove_all(root);
  bench::report("checkpoint_bench", "trainer_stall_per_checkpoint", stall, "ms",
                "synchronous write + fsync + sha256", sync, bench::better::lower,
                {{"bytes", bytes}});
  return 0;
}
