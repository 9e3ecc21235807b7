// app: rlhf's weight sync: the policy's weights from rank 0 to 2 rollout workers (3 ranks as
// threads of this process, loopback TCP). troupe's sync (actors::broadcast_weights: buckets of
// 32 MiB over its Gloo communicator, each in pieces that pass along a chain of the ranks and that
// every rank feeds to the XXH3-128 checksum a receiver acknowledges while the transfer has them
// in the cache) against, in the same run and alternating repeat by repeat, raw Gloo broadcasting
// the same bytes in one call (target ratio >= 0.9), and raw Gloo broadcasting them tensor by
// tensor, as OpenRLHF does. A sync takes milliseconds and single ones spread several-fold on a
// shared machine, so it is repeated S times (300 by default); each is timed between two
// in-process barriers, which use neither contender's connections.
//
// Then the app itself (bench/rlhf_bench_app.cpp): the step's split into phases and the
// rollout's throughput inside RLHF against the serving engine alone, for PPO and GRPO, and
// PPO's whole step against the same step in PyTorch (bench/ref_ppo_torch.py), each R / 2 times.
//
//   rlhf_bench [--repeats R] [--steps S] [--sync-repeats S] [--only sync|app]
#include <barrier>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/device.h>

#include "actors/weight_sync.hpp"
#include "bench/bench_report.hpp"
#include "bench/rlhf_bench_app.hpp"
#include "models/decoder/decoder_layout.hpp"
#include "runtime/comm/gloo_communicator.hpp"

namespace {

using namespace troupe;
using clock = std::chrono::steady_clock;
constexpr int world = 3;  // the policy's rank 0 and two rollout workers

void check(const absl::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "rlhf_bench: %s\n", std::string(s.message()).c_str());
    std::exit(1);
  }
}

// Paired repeats: ours[i] and theirs[i] back to back.
struct pairs {
  std::vector<double> ours, theirs;
};

void run_sync(const models::decoder_config& config, int repeats, const char* name) {
  const models::decoder_layout layout(config, models::layer_range::all(config));
  const int64_t n = layout.total();
  // The parameters' sizes in layout order (they are contiguous): what a per-tensor sync sends.
  std::vector<int64_t> sizes;
  {
    std::vector<float> zeros(n);
    for (const auto& [tensor_name, t] : layout.to_named(zeros.data()).tensors)
      sizes.push_back(t.numel());
  }
  comm::memory_store store;
  gloo::rendezvous::HashStore raw_store;
  pairs whole, per_tensor;
  std::barrier meet(world);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < world; ++rank) {
    ranks.emplace_back([&, rank] {
      auto group =
          comm::make_gloo_communicator(store, {.name = "sync", .rank = rank, .size = world});
      check(group.status());
      gloo::transport::tcp::attr attr;
      attr.hostname = "127.0.0.1";
      auto raw = std::make_shared<gloo::rendezvous::Context>(rank, world);
      auto device = gloo::transport::tcp::CreateDevice(attr);
      raw->connectFullMesh(raw_store, device);
      tensor::tensor weights = tensor::tensor::host({n});
      if (rank == 0) layout.initialize(weights.data<float>(), 1);
      uint32_t tag = 1;
      const auto raw_broadcast = [&](float* data, int64_t count) {
        gloo::BroadcastOptions o(raw);
        o.setOutput(data, static_cast<size_t>(count));
        o.setRoot(0);
        o.setTag(tag++);
        gloo::broadcast(o);
      };
      const auto timed = [&](const std::function<void()>& fn) {
        meet.arrive_and_wait();
        const auto start = clock::now();
        fn();
        meet.arrive_and_wait();
        return std::chrono::duration<double>(clock::now() - start).count();
      };
      const auto sync = [&] {
        check(actors::broadcast_weights(**group, weights, int64_t{32} << 20, 0).status());
      };
      // Each baseline is paired with the sync in its own rounds, so that nothing else runs
      // between a pair's two; which goes first alternates, so that neither always follows the
      // other. The first round warms up.
      const auto paired = [&](pairs& into, const std::function<void()>& theirs) {
        for (int r = 0; r <= repeats; ++r) {
          double ours_s = 0, theirs_s = 0;
          if (r % 2 == 0) {
            ours_s = timed(sync);
            theirs_s = timed(theirs);
          } else {
            theirs_s = timed(theirs);
            ours_s = timed(sync);
          }
          if (rank == 0 && r > 0) {
            into.ours.push_back(ours_s);
            into.theirs.push_back(theirs_s);
          }
        }
      };
      paired(whole, [&] { raw_broadcast(weights.data<float>(), n); });
      paired(per_tensor, [&] {
        int64_t offset = 0;
        for (int64_t size : sizes) {
          raw_broadcast(weights.data<float>() + offset, size);
          offset += size;
        }
      });
    });
  }
  for (auto& r : ranks)
    r.join();
  const double mb = static_cast<double>(n) * sizeof(float) / 1e6;
  const nlohmann::json extra = {{"model", name},
                                {"params", n},
                                {"tensors", sizes.size()},
                                {"megabytes", mb},
                                {"receivers", world - 1}};
  bench::report("rlhf_bench", "weight_sync_s", whole.ours, "s", "raw gloo::broadcast, one call",
                whole.theirs, bench::better::lower, extra);
  bench::report("rlhf_bench", "weight_sync_s", per_tensor.ours, "s",
                "raw gloo::broadcast per tensor (OpenRLHF)", per_tensor.theirs,
                bench::better::lower, extra);
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 7, steps = 8, sync_repeats = 300;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--repeats" && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--sync-repeats" && i + 1 < argc) {
      sync_repeats = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--steps" && i + 1 < argc) {
      steps = std::max(2, std::atoi(argv[++i]));
    } else if (arg == "--only" && i + 1 < argc &&
               (std::string(argv[i + 1]) == "sync" || std::string(argv[i + 1]) == "app")) {
      only = argv[++i];
    } else {
      return bench::unknown_argument("rlhf_bench", arg);
    }
  }
  if (only != "app") {
    run_sync({256, 128, 4, 128, 4}, sync_repeats, "quickstart (4 layers, dim 128)");
    run_sync({256, 256, 8, 384, 6}, sync_repeats, "8 layers, dim 384");
  }
  if (only != "sync") bench::run_rlhf_app_benchmarks(steps, std::max(1, repeats / 2));
  return 0;
}
