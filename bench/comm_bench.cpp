// Bus bandwidth of allreduce, allgather and reduce_scatter on 2 processes over loopback TCP, from
// 4 KiB to 64 MiB: troupe's Gloo communicator (rendezvous through a head) against raw Gloo
// (FileStore rendezvous; gloo::allreduce, gloo::allgather and ReduceScatterHalvingDoubling) in the
// same processes, alternating, repeat by repeat. Bus bandwidth follows NCCL's convention
// (allreduce moves 2 (P-1)/P of the bytes, the others (P-1)/P of the larger buffer).
//
//   comm_bench [--repeats R] [--max-mib M]
// The parent starts a head and runs itself twice as the ranks (--rank R --head ENDPOINT --dir D).

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench_report.hpp"
#include "runtime/cluster/head_server.hpp"
#include "runtime/comm/gloo_communicator.hpp"

namespace {

using namespace troupe;
constexpr int world = 2;

double seconds(const std::function<void()>& fn, int iters) {
  fn();  // warm: buffers registered, caches hot
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i)
    fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
}

void check(const absl::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "comm_bench: %s\n", std::string(s.message()).c_str());
    std::exit(1);
  }
}

int run_rank(int rank, const std::string& head, const std::string& dir, int repeats, int max_mib) {
  gloo::rendezvous::FileStore file_store(dir);
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto raw = std::make_shared<gloo::rendezvous::Context>(rank, world);
  raw->connectFullMesh(file_store, device);
  uint32_t raw_tag = 1;
  // Gloo's reduce-scatter is an algorithm object that binds buffers to the pairs it is built on,
  // which slows their other traffic; it gets a context of its own.
  gloo::rendezvous::PrefixStore rs_store("reduce_scatter", file_store);
  auto raw_rs_context = std::make_shared<gloo::rendezvous::Context>(rank, world);
  raw_rs_context->connectFullMesh(rs_store, device);

  auto store = comm::head_store::connect(head, {.token = "bench"});
  check(store.status());
  auto group =
      comm::make_gloo_communicator(**store, {.name = "bench", .rank = rank, .size = world});
  check(group.status());
  comm::communicator& ours = **group;

  for (size_t bytes = 4096; bytes <= (size_t{1} << 20) * max_mib; bytes *= 4) {
    const int64_t n = bytes / sizeof(float);
    const int iters = static_cast<int>(std::clamp<size_t>((size_t{16} << 20) / bytes, 3, 100));
    tensor::tensor a = tensor::tensor::host({n}), big = tensor::tensor::host({n * world});
    // reduce_scatter writes its chunk over the start of its input, the copy-free form a
    // gradient bucket uses (the raw baseline leaves it in the same place).
    const tensor::tensor part = *a.narrow(0, 0, n / world);
    std::unique_ptr<gloo::ReduceScatterHalvingDoubling<float>> raw_rs;  // built on first use
    struct op {
      const char* name;
      double factor;  // bus bytes per buffer byte
      std::function<void()> troupe, gloo;
    };
    const op ops[] = {
        {"allreduce", 2.0 * (world - 1) / world,
         [&] { check(ours.allreduce(a, comm::reduce_op::sum)); },
         [&] {
           gloo::AllreduceOptions o(raw);
           o.setOutput(a.data<float>(), n);
           o.setReduceFunction([](void* c, const void* x, const void* y, size_t k) {
             float* out = static_cast<float*>(c);
             for (size_t i = 0; i < k; ++i) {
               out[i] = static_cast<const float*>(x)[i] + static_cast<const float*>(y)[i];
             }
           });
           o.setTag(raw_tag++);
           gloo::allreduce(o);
         }},
        {"allgather", double(world - 1) / world, [&] { check(ours.allgather(a, big)); },
         [&] {
           gloo::AllgatherOptions o(raw);
           o.setInput(a.data<float>(), n);
           o.setOutput(big.data<float>(), n * world);
           o.setTag(raw_tag++);
           gloo::allgather(o);
         }},
        {"reduce_scatter", double(world - 1) / world,
         [&] { check(ours.reduce_scatter(a, part, comm::reduce_op::sum)); },
         [&] {
           if (!raw_rs) {
             raw_rs = std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(
                 raw_rs_context, std::vector<float*>{a.data<float>()}, static_cast<int>(n),
                 std::vector<int>(world, static_cast<int>(n / world)));
           }
           raw_rs->run();
         }},
    };
    for (const op& o : ops) {
      // The buffer whose size the row names: allgather's output, the others' input.
      const double buffer = std::string(o.name) == "allgather" ? bytes * world : bytes;
      std::vector<double> t_ours, t_raw;
      for (int r = 0; r < repeats; ++r) {
        t_raw.push_back(o.factor * buffer / seconds(o.gloo, iters) / 1e9);
        t_ours.push_back(o.factor * buffer / seconds(o.troupe, iters) / 1e9);
      }
      if (rank == 0) {
        bench::report(
            "comm_bench", std::string(o.name) + "_bus_bandwidth", t_ours, "GB/s", "raw gloo", t_raw,
            bench::better::higher,
            {{"bytes", static_cast<size_t>(buffer)}, {"ranks", world}, {"iterations", iters}});
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int rank = -1, repeats = 15, max_mib = 64;
  std::string head, dir;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--rank")
      rank = std::stoi(v);
    else if (k == "--head")
      head = v;
    else if (k == "--dir")
      dir = v;
    else if (k == "--repeats")
      repeats = std::stoi(v);
    else if (k == "--max-mib")
      max_mib = std::stoi(v);
    else
      return bench::unknown_argument("comm_bench", k);
  }
  if (rank >= 0) return run_rank(rank, head, dir, repeats, max_mib);

  zmq::context_t context(1);
  metrics::registry metrics;
  run::event_log events;
  auto server = cluster::head_server::start(
      context, "tcp://127.0.0.1:0",
      {.credentials = {.token = "bench"}, .app_config = {}, .endpoint = {}, .metrics_text = {}},
      1 << 20, metrics, events);
  check(server.status());
  const std::string store_dir =
      (std::filesystem::temp_directory_path() / ("comm_bench." + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(store_dir);
  std::vector<pid_t> children;
  for (int r = 0; r < world; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      const std::string rank_arg = std::to_string(r), reps = std::to_string(repeats),
                        mib = std::to_string(max_mib);
      execl("/proc/self/exe", argv[0], "--rank", rank_arg.c_str(), "--head",
            (*server)->endpoint().c_str(), "--dir", store_dir.c_str(), "--repeats", reps.c_str(),
            "--max-mib", mib.c_str(), nullptr);
      _exit(127);
    }
    children.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::filesystem::remove_all(store_dir);
  return failed ? 1 : 0;
}
