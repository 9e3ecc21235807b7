// One rank of a Gloo group for gloo_communicator_test: joins through the head's key-value store,
// runs a scenario and prints one JSON line with what happened. Exit 0 when every check held.
//
//   gloo_rank --head tcp://127.0.0.1:PORT --token T --rank R --size N --timeout-ms MS
//             --epoch E --scenario every_op|stall|peer_killed|peer_killed_in_broadcast|
//                                  peer_stopped|mid_transfer

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/comm/gloo_communicator.hpp"

namespace {

using namespace troupe;
using host_tensor = tensor::tensor;

// Rank r's value at index i: distinct per rank and index, exact in f32.
float value(int r, int64_t i) {
  return static_cast<float>((r + 1) * 1000 + i % 997);
}

absl::Status expect(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

// Every operation at odd sizes, checked against the values each rank must end up with.
absl::Status every_op(comm::communicator& c) {
  const int P = c.size(), r = c.rank();
  for (int64_t n : {1, 7, 1000, 33333, 300001}) {
    host_tensor t = host_tensor::host({n});
    for (int64_t i = 0; i < n; ++i)
      t.data<float>()[i] = value(r, i);
    TROUPE_RETURN_IF_ERROR(c.allreduce(t, comm::reduce_op::sum));
    for (int64_t i = 0; i < n; ++i) {
      float want = 0;
      for (int q = 0; q < P; ++q)
        want += value(q, i);
      TROUPE_RETURN_IF_ERROR(
          expect(t.data<float>()[i] == want, absl::StrCat("allreduce n=", n, " i=", i)));
    }
    for (int64_t i = 0; i < n; ++i)
      t.data<float>()[i] = value(r, i);
    TROUPE_RETURN_IF_ERROR(c.allreduce(t, comm::reduce_op::avg));
    float want0 = 0;
    for (int q = 0; q < P; ++q)
      want0 += value(q, 0);
    TROUPE_RETURN_IF_ERROR(
        expect(std::abs(t.data<float>()[0] - want0 / P) < 1e-3, "allreduce avg"));

    host_tensor in = host_tensor::host({n * P}), out = host_tensor::host({n});
    for (int64_t i = 0; i < n * P; ++i)
      in.data<float>()[i] = value(r, i);
    TROUPE_RETURN_IF_ERROR(c.reduce_scatter(in, out, comm::reduce_op::sum));
    for (int64_t i = 0; i < n; ++i) {
      float want = 0;
      for (int q = 0; q < P; ++q)
        want += value(q, r * n + i);
      TROUPE_RETURN_IF_ERROR(
          expect(out.data<float>()[i] == want, absl::StrCat("reduce_scatter n=", n, " i=", i)));
    }

    host_tensor mine = host_tensor::host({n}), all = host_tensor::host({n * P});
    for (int64_t i = 0; i < n; ++i)
      mine.data<float>()[i] = value(r, i);
    TROUPE_RETURN_IF_ERROR(c.allgather(mine, all));
    for (int q = 0; q < P; ++q) {
      for (int64_t i = 0; i < n; i += 13) {
        TROUPE_RETURN_IF_ERROR(
            expect(all.data<float>()[q * n + i] == value(q, i), absl::StrCat("allgather n=", n)));
      }
    }

    const int root = static_cast<int>(n % P);
    for (int64_t i = 0; i < n; ++i)
      t.data<float>()[i] = value(r, i);
    TROUPE_RETURN_IF_ERROR(c.broadcast(t, root));  // 300001 floats pass along in two pieces
    for (int64_t i = 0; i < n; ++i) {
      TROUPE_RETURN_IF_ERROR(
          expect(t.data<float>()[i] == value(root, i), absl::StrCat("broadcast n=", n, " i=", i)));
    }

    // In pieces of 7 (or 4099) floats, the last shorter: reported in order, covering the
    // buffer, and on a receiver each piece has arrived when it is reported.
    const int piece_root = static_cast<int>((n + 1) % P);
    const int64_t piece = (n <= 1000 ? 7 : 4099) * int64_t{sizeof(float)};
    for (int64_t i = 0; i < n; ++i)
      t.data<float>()[i] = value(r, i);
    int64_t covered = 0;
    bool arrived = true;
    TROUPE_RETURN_IF_ERROR(
        c.broadcast_in_pieces(t, piece_root, piece, [&](int64_t offset, int64_t bytes) {
          arrived = arrived && offset == covered && bytes > 0 && bytes <= piece;
          covered = offset + bytes;
          for (int64_t i = offset / 4; r != piece_root && i < (offset + bytes) / 4; ++i)
            arrived = arrived && t.data<float>()[i] == value(piece_root, i);
        }));
    TROUPE_RETURN_IF_ERROR(expect(arrived && covered == n * int64_t{sizeof(float)},
                                  absl::StrCat("broadcast in pieces n=", n)));
    for (int64_t i = 0; i < n; ++i) {
      TROUPE_RETURN_IF_ERROR(expect(t.data<float>()[i] == value(piece_root, i),
                                    absl::StrCat("broadcast in pieces n=", n, " i=", i)));
    }

    // A ring of send/recv: each rank passes its values to the right.
    host_tensor got = host_tensor::host({n});
    for (int64_t i = 0; i < n; ++i)
      t.data<float>()[i] = value(r, i);
    const int right = (r + 1) % P, left = (r + P - 1) % P;
    if (r % 2 == 0) {
      TROUPE_RETURN_IF_ERROR(c.send(t, right, 5));
      TROUPE_RETURN_IF_ERROR(c.recv(got, left, 5));
    } else {
      TROUPE_RETURN_IF_ERROR(c.recv(got, left, 5));
      TROUPE_RETURN_IF_ERROR(c.send(t, right, 5));
    }
    TROUPE_RETURN_IF_ERROR(expect(got.data<float>()[n / 2] == value(left, n / 2), "send/recv"));

    // An exchange: each rank sends its values to every other rank and pulls a piece from each,
    // all posted at once (blocking sends in this pattern would deadlock), two tags per pair.
    std::vector<comm::transfer> sends, recvs;
    std::vector<host_tensor> pulled;
    for (int q = 0; q < P; ++q) {
      if (q == r) continue;
      for (uint32_t tag : {1u, 2u}) {
        host_tensor out = host_tensor::host({n});
        for (int64_t i = 0; i < n; ++i)
          out.data<float>()[i] = value(r, i) + static_cast<float>(tag * 100000 + q);
        sends.push_back({out, q, tag});
        pulled.push_back(host_tensor::host({n}));
        recvs.push_back({pulled.back(), q, tag});
      }
    }
    TROUPE_RETURN_IF_ERROR(c.exchange(sends, recvs));
    for (const comm::transfer& in : recvs) {
      const float want = value(in.peer, n - 1) + static_cast<float>(in.tag * 100000 + r);
      TROUPE_RETURN_IF_ERROR(expect(in.data.data<float>()[n - 1] == want,
                                    absl::StrCat("exchange from ", in.peer, " tag ", in.tag)));
    }
  }
  host_tensor ints = host_tensor::host({5}, tensor::dtype::i32);
  for (int i = 0; i < 5; ++i)
    ints.data<int32_t>()[i] = r * i;
  TROUPE_RETURN_IF_ERROR(c.allreduce(ints, comm::reduce_op::sum));
  TROUPE_RETURN_IF_ERROR(expect(ints.data<int32_t>()[4] == 4 * P * (P - 1) / 2, "i32 allreduce"));
  // bf16: small integers are exact, so sums and averages compare exactly.
  host_tensor bf = host_tensor::host({4 * P}, tensor::dtype::bf16);
  for (int i = 0; i < 4 * P; ++i)
    bf.data<tensor::bf16>()[i] = tensor::bf16(float(r + i));
  TROUPE_RETURN_IF_ERROR(c.allreduce(bf, comm::reduce_op::avg));
  const float mean_rank = (P - 1) / 2.0f;
  TROUPE_RETURN_IF_ERROR(expect(static_cast<float>(bf.data<tensor::bf16>()[3]) == 3 + mean_rank,
                                "bf16 allreduce avg"));
  for (int i = 0; i < 4 * P; ++i)
    bf.data<tensor::bf16>()[i] = tensor::bf16(float(r + i));
  host_tensor bf_out = host_tensor::host({4}, tensor::dtype::bf16);
  TROUPE_RETURN_IF_ERROR(c.reduce_scatter(bf, bf_out, comm::reduce_op::sum));
  TROUPE_RETURN_IF_ERROR(expect(
      static_cast<float>(bf_out.data<tensor::bf16>()[1]) == P * (4 * r + 1) + P * (P - 1) / 2,
      "bf16 reduce_scatter"));
  TROUPE_RETURN_IF_ERROR(
      expect(c.allreduce(ints, comm::reduce_op::avg).code() == absl::StatusCode::kInvalidArgument,
             "i32 avg refused"));
  return c.barrier();
}

// The last rank is lost while the others are inside an allreduce it never joins: SIGKILLed by
// the test (peer_killed), or it stops itself (peer_stopped) and the test then writes "abort",
// which the survivors' watchers turn into abort() calls, as a membership change would. Each
// survivor reports how its allreduce ended; a stopped rank that is continued reports its own.
// With `broadcast` (killed only) the survivors broadcast from rank 1 instead, along the chain
// 1, 2, ..., last, 0: the lost rank is in its middle, and only the root may finish (its sends
// can all have left).
absl::Status peer_lost(comm::communicator& c, comm::rendezvous_store& store, bool stopped,
                       bool broadcast, const std::string& head, const std::string& token,
                       nlohmann::json& report) {
  using namespace std::chrono_literals;
  const bool victim = c.rank() == c.size() - 1;
  host_tensor t = host_tensor::host({1 << 20});
  if (victim && !stopped) return store.wait("never", 5min).status();  // killed while waiting
  if (victim) {
    std::raise(SIGSTOP);
    // Continued: the survivors have moved on; this rank's group must refuse to go on.
    const absl::Status s = c.allreduce(t, comm::reduce_op::sum);
    report["allreduce"] = absl::StatusCodeToString(s.code());
    return s.ok() ? absl::InternalError("a fenced rank's allreduce succeeded") : absl::OkStatus();
  }
  std::thread watcher;
  if (stopped) {
    auto watch_store = comm::head_store::connect(head, {.token = token});
    if (!watch_store.ok()) return watch_store.status();
    watcher = std::thread([&c, ws = std::shared_ptr<comm::head_store>(std::move(*watch_store))] {
      if (ws->wait("abort", 2min).ok()) c.abort("the last rank stopped");
    });
  }
  TROUPE_RETURN_IF_ERROR(store.set(absl::StrCat("entered/", c.rank()), "1"));
  const auto start = std::chrono::steady_clock::now();
  const char* operation = broadcast ? "broadcast" : "allreduce";
  const absl::Status s =
      broadcast ? c.broadcast(t, /*root=*/1) : c.allreduce(t, comm::reduce_op::sum);
  report["elapsed_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - start)
                             .count();
  report[operation] = absl::StatusCodeToString(s.code());
  report["message"] = s.message();
  if (watcher.joinable()) watcher.join();
  // Alive until every survivor is done: a process that exits closes its sockets, which would
  // wake its peers for it.
  TROUPE_RETURN_IF_ERROR(store.set(absl::StrCat("done/", c.rank()), "1"));
  for (int r = 0; r + 1 < c.size(); ++r)
    TROUPE_RETURN_IF_ERROR(store.wait(absl::StrCat("done/", r), 3min).status());
  return s.ok() && !(broadcast && c.rank() == 1)
             ? absl::InternalError(
                   absl::StrCat("the ", operation, " succeeded without the last rank"))
             : absl::OkStatus();
}

// Bytes the kernel can hold between two connected sockets on loopback while the receiver reads
// nothing: the largest receive buffer TCP grows to, and the largest send buffer (Gloo sets
// SO_SNDBUF, which the kernel doubles up to twice wmem_max; TCP's own growth stops at tcp_wmem).
absl::StatusOr<int64_t> bytes_the_kernel_holds() {
  int64_t tcp_rmem[3], tcp_wmem[3], wmem_max;
  std::ifstream rmem("/proc/sys/net/ipv4/tcp_rmem"), wmem("/proc/sys/net/ipv4/tcp_wmem"),
      wmax("/proc/sys/net/core/wmem_max");
  if (!(rmem >> tcp_rmem[0] >> tcp_rmem[1] >> tcp_rmem[2]) ||
      !(wmem >> tcp_wmem[0] >> tcp_wmem[1] >> tcp_wmem[2]) || !(wmax >> wmem_max)) {
    return absl::FailedPreconditionError(
        "cannot read /proc/sys/net/ipv4/tcp_rmem, tcp_wmem or /proc/sys/net/core/wmem_max");
  }
  return tcp_rmem[2] + std::max(tcp_wmem[2], 2 * wmem_max);
}

// Rank 0 sends rank 1 twice what the kernel can hold between them. Rank 1's exchange posts its
// receive, then sends rank 0 a marker (an exchange posts receives first), so once rank 0 has the
// marker the receive is posted; rank 0 then says "posted" and sends once the test says "go".
// The test stops rank 1 in between, so that no more than the kernel holds moves until it kills
// one of the two: the transfer is cut mid-payload. Each rank reports how its side ended.
absl::Status mid_transfer(comm::communicator& c, comm::rendezvous_store& store,
                          nlohmann::json& report) {
  using namespace std::chrono_literals;
  const absl::StatusOr<int64_t> held = bytes_the_kernel_holds();
  if (!held.ok()) return held.status();
  host_tensor payload = host_tensor::host({2 * *held / 4});
  host_tensor marker = host_tensor::host({1});
  absl::Status s;
  if (c.rank() == 1) {
    s = c.exchange({{marker, 0, 1}}, {{payload, 0, 2}});
  } else {
    TROUPE_RETURN_IF_ERROR(c.recv(marker, 1, 1));
    TROUPE_RETURN_IF_ERROR(store.set("posted", "1"));
    TROUPE_RETURN_IF_ERROR(store.wait("go", 1min).status());
    s = c.send(payload, 1, 2);
  }
  report["transfer"] = absl::StatusCodeToString(s.code());
  report["message"] = s.message();
  return s.ok() ? absl::InternalError("the transfer completed though it was cut")
                : absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  std::string head, token, scenario = "every_op";
  comm::group_options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--head")
      head = v;
    else if (k == "--token")
      token = v;
    else if (k == "--rank")
      options.rank = std::stoi(v);
    else if (k == "--size")
      options.size = std::stoi(v);
    else if (k == "--timeout-ms")
      options.timeout = std::chrono::milliseconds(std::stoi(v));
    else if (k == "--scenario")
      scenario = v;
    else if (k == "--epoch")
      options.epoch = std::stoull(v);
  }
  nlohmann::json report = {{"rank", options.rank}, {"scenario", scenario}};
  auto finish = [&](const absl::Status& s) {
    report["ok"] = s.ok();
    if (!s.ok())
      report["error"] = {{"code", absl::StatusCodeToString(s.code())}, {"message", s.message()}};
    std::printf("%s\n", report.dump().c_str());
    return s.ok() ? 0 : 1;
  };
  auto store = comm::head_store::connect(head, {.token = token});
  if (!store.ok()) return finish(store.status());
  const auto start = std::chrono::steady_clock::now();
  auto group = comm::make_gloo_communicator(**store, options);
  auto elapsed_ms = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start)
        .count();
  };
  if (!group.ok()) {
    report["elapsed_ms"] = elapsed_ms();
    return finish(group.status());
  }
  if (scenario == "stall") {  // rank 1 joins but never calls: rank 0's allreduce must time out
    if (options.rank == 1) {
      // Stays in the group, silent, until rank 0 is done (its connections stay open).
      return finish((*store)->wait("stall/done", std::chrono::minutes(1)).status());
    }
    host_tensor t = host_tensor::host({1024});
    const auto op_start = std::chrono::steady_clock::now();
    absl::Status s = (*group)->allreduce(t, comm::reduce_op::sum);
    report["elapsed_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now() - op_start)
                               .count();
    report["then"] = absl::StatusCodeToString((*group)->barrier().code());  // the group is failed
    if (absl::Status done = (*store)->set("stall/done", "1"); !done.ok()) return finish(done);
    return finish(s);
  }
  if (scenario == "mid_transfer") return finish(mid_transfer(**group, **store, report));
  if (scenario == "peer_killed" || scenario == "peer_killed_in_broadcast" ||
      scenario == "peer_stopped") {
    return finish(peer_lost(**group, **store, scenario == "peer_stopped",
                            scenario == "peer_killed_in_broadcast", head, token, report));
  }
  return finish(every_op(**group));
}
