// The NCCL communicator on the GPUs there are: single-rank operations, the bound on forming a
// group whose other rank never arrives, and the elastic path, an aborted group rebuilt at a new
// epoch: on one GPU for a single rank; with a lost rank in threads, one rank per GPU, on two or
// more; and with a killed or stopped rank in processes of their own, which may share one GPU
// (each process is its own NCCL "host", so a device machine's one GPU suffices).
// CTest label `gpu`; skips without a CUDA device.

#include "runtime/comm/nccl_communicator.hpp"

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "runtime/tensor/cuda_device.hpp"
#include "tests/support/proc_state.hpp"
#include "tests/support/rank_processes.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/wait.hpp"

namespace troupe::comm {
namespace {

using namespace std::chrono_literals;

class NcclCommunicator : public ::testing::Test {
 protected:
  void SetUp() override {
    auto devices = tensor::cuda_devices();
    if (!devices.ok() || devices->empty()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(NcclCommunicator, SingleRankOperations) {
  memory_store store;
  auto group = make_nccl_communicator(store, {.name = "solo", .rank = 0, .size = 1}, 0);
  ASSERT_TRUE(group.ok()) << group.status();
  tensor::tensor host = tensor::tensor::host({1000});
  for (int i = 0; i < 1000; ++i)
    host.data<float>()[i] = float(i);
  tensor::tensor data = *host.to(tensor::device::cuda(0));
  tensor::tensor out = *tensor::tensor::empty({1000}, tensor::dtype::f32, tensor::device::cuda(0));
  ASSERT_TRUE((*group)->allreduce(data, reduce_op::avg).ok());
  ASSERT_TRUE((*group)->allgather(data, out).ok());
  ASSERT_TRUE((*group)->broadcast(out, 0).ok());
  ASSERT_TRUE((*group)->barrier().ok());
  tensor::tensor back = *out.to(tensor::device::cpu());
  EXPECT_EQ(back.data<float>()[999], 999.0f);
  EXPECT_EQ((*group)->allreduce(host, reduce_op::sum).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(NcclCommunicator, AMissingRankFailsWithinTheTimeout) {
  memory_store store;
  const auto start = std::chrono::steady_clock::now();
  auto group = make_nccl_communicator(
      store, {.name = "pair", .rank = 0, .size = 2, .timeout = std::chrono::milliseconds(2000)}, 0);
  EXPECT_EQ(group.status().code(), absl::StatusCode::kDeadlineExceeded) << group.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
}

// A tensor of `n` copies of `value` on GPU `device`.
tensor::tensor filled(int64_t n, float value, int device) {
  tensor::tensor host = tensor::tensor::host({n});
  for (int64_t i = 0; i < n; ++i)
    host.data<float>()[i] = value;
  return *host.to(tensor::device::cuda(device));
}

float first_of(const tensor::tensor& t) {
  return (*t.to(tensor::device::cpu())).data<float>()[0];
}

// ncclCommAbort, then a new communicator: an aborted group refuses every later operation, and
// the group formed at the next epoch works.
TEST_F(NcclCommunicator, AnAbortedGroupRefusesWorkAndIsRebuiltAtTheNextEpoch) {
  memory_store store;
  auto old = make_nccl_communicator(store, {.name = "dp", .rank = 0, .size = 1, .epoch = 1}, 0);
  ASSERT_TRUE(old.ok()) << old.status();
  (*old)->abort("generation 2 replaces it");
  const absl::Status refused = (*old)->allreduce(filled(16, 1, 0), reduce_op::sum);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("generation 2 replaces it"), std::string::npos) << refused;
  auto rebuilt = make_nccl_communicator(store, {.name = "dp", .rank = 0, .size = 1, .epoch = 2}, 0);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  tensor::tensor t = filled(16, 3, 0);
  ASSERT_TRUE((*rebuilt)->allreduce(t, reduce_op::sum).ok());
  EXPECT_EQ(first_of(t), 3.0f);
}

// One rank per GPU; the last is lost (it never joins the second allreduce). The survivors'
// allreduce, blocked on it, is aborted from another thread (before or while it waits: released
// either way), and the survivors form the next epoch without it, where an allreduce and an
// exchange between neighbours work.
TEST_F(NcclCommunicator, SurvivorsOfALostRankAbortAndRegroup) {
  const int gpus = static_cast<int>(tensor::cuda_devices()->size());
  if (gpus < 2) GTEST_SKIP() << "a lost rank needs two GPUs or more; this machine has " << gpus;
  memory_store store;
  std::vector<std::unique_ptr<communicator>> first(gpus), second(gpus - 1);
  std::vector<std::thread> ranks;
  for (int r = 0; r < gpus; ++r) {
    ranks.emplace_back([&, r] {
      auto g =
          make_nccl_communicator(store, {.name = "dp", .rank = r, .size = gpus, .epoch = 1}, r);
      ASSERT_TRUE(g.ok()) << g.status();
      first[r] = std::move(*g);
      tensor::tensor t = filled(1024, 1, r);
      ASSERT_TRUE(first[r]->allreduce(t, reduce_op::sum).ok());
      EXPECT_EQ(first_of(t), static_cast<float>(gpus));
    });
  }
  for (auto& t : ranks)
    t.join();
  ranks.clear();
  for (int r = 0; r + 1 < gpus; ++r) {
    ranks.emplace_back(
        [&, r] { EXPECT_FALSE(first[r]->allreduce(filled(1 << 20, 1, r), reduce_op::sum).ok()); });
  }
  for (int r = 0; r + 1 < gpus; ++r)
    first[r]->abort("rank " + std::to_string(gpus - 1) + " was lost");
  for (auto& t : ranks)
    t.join();
  ranks.clear();
  const int world = gpus - 1;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      auto g =
          make_nccl_communicator(store, {.name = "dp", .rank = r, .size = world, .epoch = 2}, r);
      ASSERT_TRUE(g.ok()) << g.status();
      second[r] = std::move(*g);
      tensor::tensor t = filled(1024, 2, r);
      ASSERT_TRUE(second[r]->allreduce(t, reduce_op::sum).ok());
      EXPECT_EQ(first_of(t), 2.0f * world);
      if (world < 2) return;
      const int left = (r + world - 1) % world, right = (r + 1) % world;
      tensor::tensor out = filled(256, static_cast<float>(r), r), in = filled(256, -1, r);
      ASSERT_TRUE(second[r]->exchange({{out, left, 0}}, {{in, right, 0}}).ok());
      EXPECT_EQ(first_of(in), static_cast<float>(right));
    });
  }
  for (auto& t : ranks)
    t.join();
}

// Three rank processes (nccl_rank_main.cpp) and a head in this process, whose key-value store
// they rendezvous through. Each process has its own NCCL_HOSTID: NCCL then treats them as three
// hosts, which may share a GPU, joined by its socket transport on loopback.
class NcclRankProcesses : public NcclCommunicator {
 protected:
  static constexpr int kRanks = 3;

  void SetUp() override {
    NcclCommunicator::SetUp();
    if (IsSkipped()) return;
    ASSERT_NO_FATAL_FAILURE(head_.start());
    auto store = head_store::connect(head_.endpoint(), {.token = testing::store_head::token});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  // The helper beside this test's binary (the device bundle), else where the build put it.
  static std::string helper() {
    const auto beside = std::filesystem::read_symlink("/proc/self/exe").parent_path() / "nccl_rank";
    return std::filesystem::exists(beside) ? beside.string() : std::string(TROUPE_NCCL_RANK);
  }

  void start_ranks(const std::string& scenario) {
    const int gpus = static_cast<int>(tensor::cuda_devices()->size());
    for (int r = 0; r < kRanks; ++r) {
      ranks_.push_back(std::make_unique<testing::subprocess>(
          std::vector<std::string>{helper(), "--head", head_.endpoint(), "--token",
                                   testing::store_head::token, "--rank", std::to_string(r),
                                   "--size", std::to_string(kRanks), "--timeout-ms", "20000",
                                   "--device", std::to_string(r % gpus), "--scenario", scenario},
          std::vector<std::string>{"NCCL_HOSTID=troupe-nccl-test-rank-" + std::to_string(r),
                                   "NCCL_SOCKET_IFNAME=lo", "NCCL_IB_DISABLE=1",
                                   "NCCL_DEBUG=WARN"}));
    }
    for (int r = 0; r + 1 < kRanks; ++r)
      ASSERT_TRUE(store_->wait("entered/" + std::to_string(r), 120s).ok())
          << "rank " << r << " never reached its second allreduce: " << ranks_[r]->wait(1s).out
          << ranks_[r]->stderr_so_far();
  }

  // The survivors were released from the lost rank's allreduce (by the abort, or by NCCL
  // seeing the peer's sockets close: not by the group's timeout, DEADLINE_EXCEEDED) and did
  // their work at epoch 2 without it.
  void expect_survivors_regrouped(const std::vector<std::string>& released_as) {
    for (int r = 0; r + 1 < kRanks; ++r) {
      const testing::process_result result = ranks_[r]->wait(120s);
      ASSERT_FALSE(result.timed_out) << "rank " << r << " was not released: " << result.err;
      EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
      const nlohmann::json report = testing::report_of(result);
      const std::string code = report.value("allreduce", "");
      EXPECT_NE(std::find(released_as.begin(), released_as.end(), code), released_as.end())
          << result.out;
      EXPECT_TRUE(report.contains("regrouped_ms")) << result.out;
    }
  }

  testing::store_head head_;
  std::unique_ptr<head_store> store_;
  std::vector<std::unique_ptr<testing::subprocess>> ranks_;
};

// SIGKILL of the last rank while the others wait in an allreduce it never joins.
TEST_F(NcclRankProcesses, SurvivorsOfAKilledRankAbortAndRegroup) {
  ASSERT_NO_FATAL_FAILURE(start_ranks("peer_killed"));
  ranks_[kRanks - 1]->signal(SIGKILL);
  ASSERT_TRUE(store_->set("abort", "1").ok());  // the membership change
  expect_survivors_regrouped({"ABORTED", "UNAVAILABLE", "FAILED_PRECONDITION"});
}

// SIGSTOP: no socket error ever comes, so only the abort releases the survivors. Continued
// after they have regrouped and gone, the stopped rank's old group refuses to complete.
TEST_F(NcclRankProcesses, SurvivorsOfAStoppedRankAreReleasedByTheAbortAndItIsFenced) {
  ASSERT_NO_FATAL_FAILURE(start_ranks("peer_stopped"));
  ASSERT_TRUE(testing::wait_until(
      [&] { return testing::proc_state(ranks_[kRanks - 1]->pid()) == 'T'; }, 60s));
  ASSERT_TRUE(store_->set("abort", "1").ok());
  expect_survivors_regrouped({"ABORTED", "FAILED_PRECONDITION"});
  ranks_[kRanks - 1]->signal(SIGCONT);
  const testing::process_result fenced = ranks_[kRanks - 1]->wait(120s);
  ASSERT_FALSE(fenced.timed_out) << "the continued rank hung";
  EXPECT_EQ(fenced.exit_code, 0) << fenced.out << fenced.err;
  EXPECT_NE(testing::report_of(fenced).value("allreduce", "OK"), "OK") << fenced.out;
}

}  // namespace
}  // namespace troupe::comm
