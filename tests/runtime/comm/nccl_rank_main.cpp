// One rank of an NCCL group for nccl_communicator_test, in a process of its own: joins through
// the head's key-value store, loses the group's last rank, regroups without it and prints one
// JSON line with what happened. Exit 0 when every check held.
//
//   nccl_rank --head tcp://127.0.0.1:PORT --token T --rank R --size N --timeout-ms MS
//             --device D --scenario peer_killed|peer_stopped
//
// The test gives each process its own NCCL_HOSTID, so that ranks sharing a GPU (a device
// machine has one) are told apart: NCCL refuses two ranks of one host on one device, and
// ranks of different hosts talk over its socket transport (loopback here).
//
// The scenario, as the elastic trainer lives it (docs/elastic.md):
//   1. epoch 1: the N ranks form "dp" and sum their values once;
//   2. the last rank is lost while the others are inside their next allreduce: SIGKILLed by the
//      test (peer_killed), or it stops itself (peer_stopped, no socket error ever comes);
//   3. the test writes "abort", which each survivor's watcher turns into abort(), as a
//      membership change does: the blocked allreduce is released and ncclCommAbort'ed;
//   4. epoch 2: the N-1 survivors form "dp" again and sum, exchange and broadcast on it;
//   5. a stopped rank, continued after the survivors are gone, finds its group unusable.

#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/comm/nccl_communicator.hpp"

namespace {

using namespace troupe;
using namespace std::chrono_literals;

absl::Status expect(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

absl::StatusOr<tensor::tensor> filled(int64_t n, float value, int device) {
  tensor::tensor host = tensor::tensor::host({n});
  for (int64_t i = 0; i < n; ++i)
    host.data<float>()[i] = value;
  return host.to(tensor::device::cuda(device));
}

absl::StatusOr<float> first_of(const tensor::tensor& t) {
  TROUPE_ASSIGN_OR_RETURN(tensor::tensor host, t.to(tensor::device::cpu()));
  return host.data<float>()[0];
}

// Step 1: every rank contributes rank + 1.
absl::Status first_sum(comm::communicator& c, int device) {
  TROUPE_ASSIGN_OR_RETURN(tensor::tensor t, filled(4096, float(c.rank() + 1), device));
  TROUPE_RETURN_IF_ERROR(c.allreduce(t, comm::reduce_op::sum));
  TROUPE_ASSIGN_OR_RETURN(float got, first_of(t));
  const int n = c.size();
  return expect(got == float(n * (n + 1) / 2), absl::StrCat("epoch 1 allreduce gave ", got));
}

// Step 4: the survivors' new group sums, passes values around its ring and broadcasts.
absl::Status regrouped_work(comm::communicator& c, int device) {
  const int n = c.size(), r = c.rank();
  TROUPE_ASSIGN_OR_RETURN(tensor::tensor t, filled(1 << 16, 2, device));
  TROUPE_RETURN_IF_ERROR(c.allreduce(t, comm::reduce_op::sum));
  TROUPE_ASSIGN_OR_RETURN(float sum, first_of(t));
  TROUPE_RETURN_IF_ERROR(expect(sum == 2.0f * n, absl::StrCat("epoch 2 allreduce gave ", sum)));
  if (n >= 2) {
    const int left = (r + n - 1) % n, right = (r + 1) % n;
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor out, filled(256, float(r), device));
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor in, filled(256, -1, device));
    TROUPE_RETURN_IF_ERROR(c.exchange({{out, left, 0}}, {{in, right, 0}}));
    TROUPE_ASSIGN_OR_RETURN(float got, first_of(in));
    TROUPE_RETURN_IF_ERROR(expect(got == float(right), absl::StrCat("exchange gave ", got)));
  }
  TROUPE_ASSIGN_OR_RETURN(tensor::tensor b, filled(1000, float(r + 10), device));
  TROUPE_RETURN_IF_ERROR(c.broadcast(b, n - 1));
  TROUPE_ASSIGN_OR_RETURN(float got, first_of(b));
  return expect(got == float(n - 1 + 10), absl::StrCat("broadcast gave ", got));
}

struct run_options {
  std::string head, token, scenario;
  comm::group_options group;
  int device = 0;
};

int64_t ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start)
      .count();
}

absl::Status run(const run_options& o, nlohmann::json& report) {
  TROUPE_ASSIGN_OR_RETURN(auto store, comm::head_store::connect(o.head, {.token = o.token}));
  comm::group_options first = o.group;
  first.epoch = 1;
  TROUPE_ASSIGN_OR_RETURN(auto group, comm::make_nccl_communicator(*store, first, o.device));
  TROUPE_RETURN_IF_ERROR(first_sum(*group, o.device));
  report["epoch1"] = "summed";

  const bool stopped = o.scenario == "peer_stopped";
  TROUPE_ASSIGN_OR_RETURN(tensor::tensor big, filled(1 << 22, 1, o.device));
  if (group->rank() == group->size() - 1) {
    if (!stopped) return store->wait("never", 5min).status();  // killed while it waits
    std::raise(SIGSTOP);
    // Continued once the survivors have regrouped and left: the old group must not work.
    const absl::Status s = group->allreduce(big, comm::reduce_op::sum);
    report["allreduce"] = absl::StatusCodeToString(s.code());
    report["message"] = s.message();
    return expect(!s.ok(), "a fenced rank's allreduce succeeded");
  }

  // A survivor: the watcher aborts the group when the test says the membership changed.
  // (A key written before the watcher waits for it is found at once.)
  TROUPE_ASSIGN_OR_RETURN(auto watch_store, comm::head_store::connect(o.head, {.token = o.token}));
  TROUPE_RETURN_IF_ERROR(store->set(absl::StrCat("entered/", group->rank()), "1"));
  std::thread watcher([&group, ws = std::move(watch_store), size = o.group.size] {
    if (ws->wait("abort", 3min).ok()) group->abort(absl::StrCat("rank ", size - 1, " was lost"));
  });
  auto start = std::chrono::steady_clock::now();
  const absl::Status lost = group->allreduce(big, comm::reduce_op::sum);
  report["released_ms"] = ms_since(start);
  report["allreduce"] = absl::StatusCodeToString(lost.code());
  report["message"] = lost.message();
  watcher.join();  // the test writes "abort" in every scenario
  TROUPE_RETURN_IF_ERROR(expect(!lost.ok(), "the allreduce succeeded without the last rank"));
  group.reset();

  comm::group_options second = o.group;
  second.epoch = 2;
  second.size = o.group.size - 1;
  start = std::chrono::steady_clock::now();
  TROUPE_ASSIGN_OR_RETURN(auto rebuilt, comm::make_nccl_communicator(*store, second, o.device));
  TROUPE_RETURN_IF_ERROR(regrouped_work(*rebuilt, o.device));
  report["regrouped_ms"] = ms_since(start);
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  run_options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--head")
      o.head = v;
    else if (k == "--token")
      o.token = v;
    else if (k == "--rank")
      o.group.rank = std::stoi(v);
    else if (k == "--size")
      o.group.size = std::stoi(v);
    else if (k == "--timeout-ms")
      o.group.timeout = std::chrono::milliseconds(std::stoi(v));
    else if (k == "--device")
      o.device = std::stoi(v);
    else if (k == "--scenario")
      o.scenario = v;
  }
  o.group.name = "dp";
  nlohmann::json report = {{"rank", o.group.rank}, {"scenario", o.scenario}};
  const absl::Status s = run(o, report);
  report["ok"] = s.ok();
  if (!s.ok())
    report["error"] = {{"code", absl::StatusCodeToString(s.code())}, {"message", s.message()}};
  std::printf("%s\n", report.dump().c_str());
  std::fflush(stdout);
  return s.ok() ? 0 : 1;
}
