#include "runtime/comm/gloo_communicator.hpp"

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/comm/collective_queue.hpp"
#include "tests/support/proc_state.hpp"
#include "tests/support/rank_processes.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/wait.hpp"

namespace troupe::comm {
namespace {

using namespace std::chrono_literals;

// A head in this process, whose key-value store the rank processes rendezvous through.
class GlooCommunicatorTest : public ::testing::Test {
 protected:
  void SetUp() override { head_.start(); }

  std::unique_ptr<testing::subprocess> start_rank(int rank, int size, const std::string& scenario,
                                                  int timeout_ms, int epoch = 0) {
    return std::make_unique<testing::subprocess>(std::vector<std::string>{
        TROUPE_GLOO_RANK, "--head", head_.endpoint(), "--token", "secret", "--rank",
        std::to_string(rank), "--size", std::to_string(size), "--timeout-ms",
        std::to_string(timeout_ms), "--epoch", std::to_string(epoch), "--scenario", scenario});
  }

  // Rank 0 sends rank 1 twice what the kernel can hold between them. Rank 1 is stopped before
  // the payload moves, so when `victim` is SIGKILLed (rank 1 is continued if it survives) the
  // transfer is cut mid-payload. The survivor must fail with the peer's loss at once, not sleep
  // out the two-minute timeout.
  void expect_a_cut_transfer_fails(int victim) {
    auto sender = start_rank(0, 2, "mid_transfer", 120000);
    auto receiver = start_rank(1, 2, "mid_transfer", 120000);
    auto store = head_store::connect(head_.endpoint(), {.token = "secret"});
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->wait("posted", 30s).ok()) << "rank 1's receive was never posted";
    receiver->signal(SIGSTOP);
    ASSERT_TRUE(testing::wait_until([&] { return testing::proc_state(receiver->pid()) == 'T'; }));
    ASSERT_TRUE((*store)->set("go", "1").ok());
    // Payload bytes wait in the stopped receiver's socket: the send is under way, and cannot end.
    ASSERT_TRUE(testing::wait_until([&] {
      return testing::most_unread_tcp_bytes(receiver->pid()) > 4096;
    })) << "no payload reached rank 1";
    (victim == 0 ? sender : receiver)->signal(SIGKILL);
    if (victim == 0) receiver->signal(SIGCONT);
    const testing::process_result result = (victim == 0 ? receiver : sender)->wait(60s);
    ASSERT_FALSE(result.timed_out)
        << "rank " << 1 - victim << " hung after rank " << victim << " was killed mid-transfer";
    EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
    EXPECT_EQ(testing::report_of(result).value("transfer", ""), "UNAVAILABLE") << result.out;
  }

  // Four ranks; the last is SIGKILLed while the others are blocked in `scenario`'s collective,
  // which it never joins. Every survivor must end long before the group's two-minute timeout,
  // and none dies of SIGPIPE; `check` looks at each one's report.
  void expect_survivors_of_a_kill(
      const char* scenario,
      const std::function<void(int rank, const nlohmann::json& report)>& check) {
    std::vector<std::unique_ptr<testing::subprocess>> ranks;
    for (int r = 0; r < 4; ++r)
      ranks.push_back(start_rank(r, 4, scenario, 120000));
    auto store = head_store::connect(head_.endpoint(), {.token = "secret"});
    ASSERT_TRUE(store.ok()) << store.status();
    for (int r = 0; r < 3; ++r)
      ASSERT_TRUE((*store)->wait("entered/" + std::to_string(r), 30s).ok()) << r;
    ranks[3]->signal(SIGKILL);
    for (int r = 0; r < 3; ++r) {
      const testing::process_result result = ranks[r]->wait(60s);
      ASSERT_FALSE(result.timed_out) << "rank " << r << " hung after its peer was killed";
      EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
      check(r, testing::report_of(result));
    }
  }

  testing::store_head head_;
};

TEST_F(GlooCommunicatorTest, EveryOperationOnTwoThreeAndFourProcesses) {
  for (int size : {2, 3, 4}) {
    std::vector<std::unique_ptr<testing::subprocess>> ranks;
    // Each size forms the group at its own epoch, as a job does after membership changes.
    for (int r = 0; r < size; ++r)
      ranks.push_back(start_rank(r, size, "every_op", 20000, size));
    for (int r = 0; r < size; ++r) {
      const testing::process_result result = ranks[r]->wait(60s);
      ASSERT_FALSE(result.timed_out) << "size " << size << " rank " << r;
      EXPECT_EQ(result.exit_code, 0)
          << "size " << size << " rank " << r << ": " << result.out << result.err;
    }
  }
}

TEST_F(GlooCommunicatorTest, AMissingRankFailsTheRendezvousWithinTheTimeout) {
  auto r0 = start_rank(0, 3, "every_op", 1500);
  auto r1 = start_rank(1, 3, "every_op", 1500);  // rank 2 never starts
  for (auto* p : {r0.get(), r1.get()}) {
    const testing::process_result result = p->wait(20s);
    ASSERT_FALSE(result.timed_out);
    const nlohmann::json report = testing::report_of(result);
    EXPECT_EQ(report.value("ok", true), false);
    EXPECT_EQ(report["error"].value("code", ""), "DEADLINE_EXCEEDED") << result.out;
    EXPECT_LT(report.value("elapsed_ms", 1e9), 6000) << result.out;
  }
}

TEST_F(GlooCommunicatorTest, ARankThatNeverCallsTimesTheOperationOut) {
  auto r0 = start_rank(0, 2, "stall", 1500);
  auto r1 = start_rank(1, 2, "stall", 1500);
  const testing::process_result result = r0->wait(20s);
  ASSERT_FALSE(result.timed_out);
  const nlohmann::json report = testing::report_of(result);
  EXPECT_EQ(report.value("ok", true), false);
  EXPECT_EQ(report["error"].value("code", ""), "DEADLINE_EXCEEDED") << result.out;
  EXPECT_GE(report.value("elapsed_ms", 0), 1400);
  EXPECT_LT(report.value("elapsed_ms", 1e9), 4000);
  EXPECT_EQ(report.value("then", ""), "FAILED_PRECONDITION");  // a failed group refuses work
}

// Gloo's ring would wake only the dead rank's two neighbours: every survivor's allreduce must
// fail with the peer's loss (not a timeout).
TEST_F(GlooCommunicatorTest, AKilledRankFailsEverySurvivorsCollectiveAtOnce) {
  expect_survivors_of_a_kill("peer_killed", [](int, const nlohmann::json& report) {
    EXPECT_EQ(report.value("allreduce", ""), "UNAVAILABLE") << report;
  });
}

// A broadcast from rank 1 passes along 1, 2, 3, 0: rank 2's pieces for the dead rank 3 stay
// queued and rank 0's would come from it, so both fail with the loss; the root's sends may all
// have left (then it finishes: whether every rank has the bytes is the caller's to check, as
// the weight sync's checksums do).
TEST_F(GlooCommunicatorTest, AKilledRankInABroadcastsChainFailsTheRanksAfterItAtOnce) {
  expect_survivors_of_a_kill("peer_killed_in_broadcast",
                             [](int rank, const nlohmann::json& report) {
                               if (rank != 1) {
                                 EXPECT_EQ(report.value("broadcast", ""), "UNAVAILABLE") << report;
                               }
                             });
}

// Debian's Gloo fails a pair's pending transfers when its connection breaks, but not the receive
// it is in the middle of nor a send it still has queued: without the ring's watch receive these
// two survivors slept out the group's two-minute timeout (and AKilledRank... above flaked so).
TEST_F(GlooCommunicatorTest, AReceiveCutMidPayloadFailsWithThePeersLoss) {
  expect_a_cut_transfer_fails(/*victim=*/0);  // the sender
}

TEST_F(GlooCommunicatorTest, ASendCutMidPayloadFailsWithThePeersLoss) {
  expect_a_cut_transfer_fails(/*victim=*/1);  // the receiver
}

// The last rank stops itself (SIGSTOP: no socket error ever reaches its peers). The survivors'
// allreduces are released by abort(), not by the two-minute timeout; continued, the stopped
// rank finds its group gone and its allreduce fails instead of completing with stale peers.
TEST_F(GlooCommunicatorTest, AbortReleasesSurvivorsOfAStoppedRankAndFencesIt) {
  std::vector<std::unique_ptr<testing::subprocess>> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.push_back(start_rank(r, 3, "peer_stopped", 120000));
  auto store = head_store::connect(head_.endpoint(), {.token = "secret"});
  ASSERT_TRUE(store.ok()) << store.status();
  for (int r = 0; r < 2; ++r)
    ASSERT_TRUE((*store)->wait("entered/" + std::to_string(r), 30s).ok()) << r;
  ASSERT_TRUE(testing::wait_until([&] { return testing::proc_state(ranks[2]->pid()) == 'T'; }));
  ASSERT_TRUE((*store)->set("abort", "1").ok());
  for (int r = 0; r < 2; ++r) {
    const testing::process_result result = ranks[r]->wait(60s);
    ASSERT_FALSE(result.timed_out) << "rank " << r << " was not released by the abort";
    EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
    const nlohmann::json report = testing::report_of(result);
    // ABORTED when the abort woke it, FAILED_PRECONDITION in the (microsecond) window where the
    // abort came between "entered" and the allreduce's start: released either way.
    EXPECT_TRUE(report.value("allreduce", "") == "ABORTED" ||
                report.value("allreduce", "") == "FAILED_PRECONDITION")
        << result.out;
    EXPECT_NE(report.value("message", "").find("the last rank stopped"), std::string::npos)
        << result.out;
  }
  ranks[2]->signal(SIGCONT);
  const testing::process_result fenced = ranks[2]->wait(60s);
  ASSERT_FALSE(fenced.timed_out) << "the continued rank hung";
  EXPECT_EQ(fenced.exit_code, 0) << fenced.out << fenced.err;
  EXPECT_EQ(testing::report_of(fenced).value("allreduce", ""), "UNAVAILABLE") << fenced.out;
}

// An abort wakes an operation that waits for a peer that never takes part. The operation runs
// on a thread of its own, and the abort comes once that thread sleeps: the only wait on its
// way is the one for the peer (no lock it takes is contended, and the group's failure check
// comes before), so the abort finds it waiting. A woken operation ends long before the
// group's timeout. Both a receive and a collective (whose waits are the ring's) are tried.
TEST(GlooCommunicator, AbortWakesAWaitingReceiveAndAWaitingCollective) {
  // The buffers are made here: the operation's thread allocates nothing before its check.
  const tensor::tensor small = tensor::tensor::host({16}), large = tensor::tensor::host({1 << 18});
  const std::vector<std::pair<std::string, std::function<absl::Status(communicator&)>>> ops = {
      {"recv", [&](communicator& c) { return c.recv(small, 1); }},
      {"allreduce", [&](communicator& c) { return c.allreduce(large, reduce_op::sum); }},
  };
  for (const auto& [name, op] : ops) {
    memory_store store;
    std::unique_ptr<communicator> a, b;
    const group_options options{.name = "pair", .size = 2, .timeout = 60s};
    std::thread other([&] {
      group_options o = options;
      o.rank = 1;
      auto g = make_gloo_communicator(store, o);
      ASSERT_TRUE(g.ok()) << g.status();
      b = std::move(*g);
    });
    auto g = make_gloo_communicator(store, options);
    other.join();
    ASSERT_TRUE(g.ok()) << g.status();
    a = std::move(*g);

    const auto start = std::chrono::steady_clock::now();
    std::atomic<pid_t> tid{0};
    absl::Status s;
    std::thread waiting([&] {
      tid = static_cast<pid_t>(syscall(SYS_gettid));
      s = op(*a);  // rank 1 never takes part
    });
    ASSERT_TRUE(testing::wait_until([&] {
      return tid != 0 && testing::proc_state(getpid(), tid) == 'S';
    })) << name
        << " never waited";
    a->abort("membership changed");
    waiting.join();
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << name << ": " << s;
    EXPECT_NE(s.message().find("membership changed"), std::string::npos) << name << ": " << s;
    EXPECT_LT(std::chrono::steady_clock::now() - start, 30s) << name << " was not woken";
    EXPECT_EQ(a->barrier().code(), absl::StatusCode::kFailedPrecondition);
  }
}

// A group waiting for a rank that will not come (it was lost after the membership was sent)
// ends when its cancel hook says so, long before the timeout.
TEST(GlooCommunicator, AFormingGroupEndsWhenCancelled) {
  memory_store store;
  int asked = 0;
  const group_options options{.name = "moot", .size = 2, .timeout = 60s, .cancelled = [&] {
                                return ++asked == 3;
                              }};  // moot at the 3rd look
  const auto start = std::chrono::steady_clock::now();
  auto g = make_gloo_communicator(store, options);  // rank 1 never comes
  EXPECT_EQ(g.status().code(), absl::StatusCode::kCancelled) << g.status();
  EXPECT_EQ(asked, 3);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

// A store through which a rank publishes its address and then hangs: its waits block until the
// test releases them, so the rank never connects (a worker lost between the two).
class publish_then_hang_store final : public rendezvous_store {
 public:
  explicit publish_then_hang_store(rendezvous_store& shared) : shared_(shared) {}
  absl::Status set(const std::string& key, const std::string& value) override {
    return shared_.set(key, value);
  }
  absl::StatusOr<std::string> wait(const std::string& key, std::chrono::milliseconds) override {
    std::unique_lock lock(mutex_);
    released_cv_.wait(lock, [&] { return released_; });
    return absl::DeadlineExceededError(absl::StrCat("hung rank: ", key));
  }
  void release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    released_cv_.notify_all();
  }

 private:
  rendezvous_store& shared_;
  std::mutex mutex_;
  std::condition_variable released_cv_;
  bool released_ = false;
};

// A rank that published its address and never connected: its peer's forming ends within the
// group's timeout, on the listening side of the pair too (Gloo waits five times the context's
// timeout for a peer to connect). Which side of the pair listens depends on the two addresses,
// so the hung rank alternates between 0 and 1 over ten groups: each side is tested with
// certainty but for 2^-9.
TEST(GlooCommunicator, FormingEndsWithinTheTimeoutWhenAPeerPublishedAndNeverConnected) {
  constexpr auto timeout = 400ms;
  for (int i = 0; i < 10; ++i) {
    memory_store store;
    publish_then_hang_store hanging(store);
    const int hung = i % 2;
    const auto options = [&](int rank) {
      return group_options{
          .name = "half", .rank = rank, .size = 2, .epoch = uint64_t(i), .timeout = timeout};
    };
    std::thread lost([&] { (void)make_gloo_communicator(hanging, options(hung)); });
    const auto start = std::chrono::steady_clock::now();
    auto g = make_gloo_communicator(store, options(1 - hung));
    const auto took = std::chrono::steady_clock::now() - start;
    hanging.release();
    lost.join();
    // The connecting side is done at once (the peer's listener accepted); the listening side
    // fails when the timeout ends.
    if (!g.ok()) {
      EXPECT_EQ(g.status().code(), absl::StatusCode::kDeadlineExceeded) << g.status();
      EXPECT_NE(g.status().message().find("a rank did not arrive"), std::string::npos)
          << g.status();
    }
    EXPECT_LT(took, 3 * timeout) << "group " << i << ": " << g.status();
  }
}

// Two ranks (threads) queue all-reduces of three buckets of one buffer and compute meanwhile.
TEST(CollectiveQueue, RunsQueuedAllReducesInOrderAndReportsTheFirstError) {
  memory_store store;
  const auto rank_main = [&](int rank, std::vector<float>* result, absl::Status* after_abort) {
    auto g = make_gloo_communicator(store, {.name = "queue", .rank = rank, .size = 2});
    ASSERT_TRUE(g.ok()) << g.status();
    tensor::tensor buffer = tensor::tensor::host({1000});
    for (int i = 0; i < 1000; ++i)
      buffer.data<float>()[i] = static_cast<float>(i * (rank + 1));
    collective_queue queue(**g);
    for (auto [begin, end] : {std::pair{600, 1000}, {200, 600}, {0, 200}}) {
      queue.allreduce(*buffer.narrow(0, begin, end - begin), reduce_op::sum);
    }
    ASSERT_TRUE(queue.wait().ok());
    result->assign(buffer.data<float>(), buffer.data<float>() + 1000);
    // After an abort, the queue reports the failure once and skips the rest.
    (*g)->abort("test abort");
    queue.allreduce(*buffer.narrow(0, 0, 10), reduce_op::sum);
    queue.allreduce(*buffer.narrow(0, 10, 10), reduce_op::sum);
    *after_abort = queue.wait();
    EXPECT_TRUE(queue.wait().ok()) << "the error is reported once";
  };
  std::vector<float> r0, r1;
  absl::Status s0, s1;
  std::thread other(rank_main, 1, &r1, &s1);
  rank_main(0, &r0, &s0);
  other.join();
  ASSERT_EQ(r0.size(), 1000u);
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(r0[i], 3.0f * i) << i;
  EXPECT_EQ(r0, r1);
  EXPECT_FALSE(s0.ok());
  EXPECT_NE(s0.message().find("test abort"), std::string::npos) << s0;
}

TEST(GlooCommunicator, BadArgumentsAreErrorsBeforeAnyTraffic) {
  memory_store store;
  EXPECT_EQ(make_gloo_communicator(store, {.rank = 2, .size = 2}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto g = make_gloo_communicator(store, {.name = "solo", .rank = 0, .size = 1});
  ASSERT_TRUE(g.ok()) << g.status();
  tensor::tensor t = tensor::tensor::host({4}), wrong = tensor::tensor::host({3});
  EXPECT_EQ((*g)->send(t, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*g)->broadcast(t, 5).code(), absl::StatusCode::kInvalidArgument);
  const auto no_piece = [](int64_t, int64_t) {};
  EXPECT_EQ((*g)->broadcast_in_pieces(t, 0, 0, no_piece).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*g)->broadcast_in_pieces(t, 1, 4, no_piece).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<std::pair<int64_t, int64_t>> pieces;  // a group of one still reports its pieces
  EXPECT_TRUE(
      (*g)->broadcast_in_pieces(
              t, 0, 6, [&](int64_t offset, int64_t bytes) { pieces.emplace_back(offset, bytes); })
          .ok());
  EXPECT_EQ(pieces, (std::vector<std::pair<int64_t, int64_t>>{{0, 6}, {6, 6}, {12, 4}}));
  EXPECT_EQ((*g)->allgather(t, wrong).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*g)->reduce_scatter(t, wrong, reduce_op::sum).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*g)->exchange({{t, 0, 1}}, {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*g)->exchange({}, {{t, 3, 1}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*g)->exchange({}, {}).ok());
  EXPECT_TRUE((*g)->allreduce(t, reduce_op::sum).ok());
}

}  // namespace
}  // namespace troupe::comm
