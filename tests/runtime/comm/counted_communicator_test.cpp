#include "runtime/comm/counted_communicator.hpp"

#include <future>

#include <gtest/gtest.h>

#include "tests/support/wait.hpp"

namespace troupe::comm {
namespace {

// A group of one whose operations succeed, or fail once `failing` is set.
class fake_group final : public communicator {
 public:
  explicit fake_group(bool* failing) : failing_(failing) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  uint64_t epoch() const override { return 3; }
  absl::Status allreduce(const tensor::tensor&, reduce_op) override { return result(); }
  absl::Status reduce_scatter(const tensor::tensor&, const tensor::tensor&, reduce_op) override {
    return result();
  }
  absl::Status allgather(const tensor::tensor&, const tensor::tensor&) override { return result(); }
  absl::Status broadcast(const tensor::tensor&, int) override { return result(); }
  absl::Status send(const tensor::tensor&, int, uint32_t) override { return result(); }
  absl::Status recv(const tensor::tensor&, int, uint32_t) override { return result(); }
  absl::Status exchange(const std::vector<transfer>&, const std::vector<transfer>&) override {
    return result();
  }
  absl::Status barrier() override { return result(); }
  void abort(const std::string&) override {}

 private:
  absl::Status result() const {
    return *failing_ ? absl::DeadlineExceededError("a rank did not come") : absl::OkStatus();
  }
  bool* failing_;
};

TEST(CountedCommunicator, EveryOperationIsAMessageOfTheGroup) {
  metrics::registry r;
  bool failing = false;
  auto group = counted(std::make_unique<fake_group>(&failing), r, "trainer/0/dp_group");
  EXPECT_EQ(group->epoch(), 3u);
  ASSERT_TRUE(group->barrier().ok());
  ASSERT_TRUE(group->allreduce(tensor::tensor(), reduce_op::sum).ok());
  failing = true;
  EXPECT_EQ(group->broadcast(tensor::tensor(), 0).code(), absl::StatusCode::kDeadlineExceeded);
  const auto stats = r.actor("trainer/0/dp_group");
  EXPECT_EQ(stats->messages(), 3u);
  EXPECT_EQ(stats->handler_start(), 0u);  // none in progress
}

// The default broadcast_in_pieces (the fake has none of its own) reports every piece after a
// whole broadcast, and none when the broadcast failed; the counted group forwards it as one
// message.
TEST(CountedCommunicator, ABroadcastInPiecesReportsThePiecesAfterTheBroadcast) {
  metrics::registry r;
  bool failing = false;
  auto group = counted(std::make_unique<fake_group>(&failing), r, "rollout/0/sync");
  const tensor::tensor data = tensor::tensor::host({5});  // 20 bytes
  std::vector<std::pair<int64_t, int64_t>> pieces;
  const auto record = [&](int64_t offset, int64_t bytes) { pieces.emplace_back(offset, bytes); };
  ASSERT_TRUE(group->broadcast_in_pieces(data, 0, 8, record).ok());
  EXPECT_EQ(pieces, (std::vector<std::pair<int64_t, int64_t>>{{0, 8}, {8, 8}, {16, 4}}));
  EXPECT_EQ(group->broadcast_in_pieces(data, 0, 0, record).code(),
            absl::StatusCode::kInvalidArgument);
  failing = true;
  pieces.clear();
  EXPECT_EQ(group->broadcast_in_pieces(data, 0, 8, record).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(pieces.empty());
  EXPECT_EQ(r.actor("rollout/0/sync")->messages(), 3u);
}

// An operation still waiting (here: a barrier no other rank joins) shows its age.
TEST(CountedCommunicator, AnOperationInProgressShowsHowLongItHasWaited) {
  metrics::registry r;
  std::promise<void> entered;
  std::promise<void> release;
  class waiting_group final : public communicator {
   public:
    waiting_group(std::promise<void>* entered, std::shared_future<void> release)
        : entered_(entered), release_(std::move(release)) {}
    int rank() const override { return 0; }
    int size() const override { return 2; }
    uint64_t epoch() const override { return 0; }
    absl::Status allreduce(const tensor::tensor&, reduce_op) override { return {}; }
    absl::Status reduce_scatter(const tensor::tensor&, const tensor::tensor&, reduce_op) override {
      return {};
    }
    absl::Status allgather(const tensor::tensor&, const tensor::tensor&) override { return {}; }
    absl::Status broadcast(const tensor::tensor&, int) override { return {}; }
    absl::Status send(const tensor::tensor&, int, uint32_t) override { return {}; }
    absl::Status recv(const tensor::tensor&, int, uint32_t) override { return {}; }
    absl::Status exchange(const std::vector<transfer>&, const std::vector<transfer>&) override {
      return {};
    }
    absl::Status barrier() override {
      entered_->set_value();
      release_.wait();
      return {};
    }
    void abort(const std::string&) override {}

   private:
    std::promise<void>* entered_;
    std::shared_future<void> release_;
  };
  auto group = counted(std::make_unique<waiting_group>(&entered, release.get_future().share()), r,
                       "g/0/dp_group");
  auto waiting = std::async(std::launch::async, [&] { return group->barrier(); });
  entered.get_future().wait();
  EXPECT_NE(r.actor("g/0/dp_group")->handler_start(), 0u);
  ASSERT_TRUE(
      testing::wait_until([&] { return r.actor("g/0/dp_group")->handler_age_seconds() > 0; }));
  r.set_stuck_after(1e-12);
  EXPECT_NE(r.prometheus_text().find("troupe_actor_stuck{actor=\"g/0/dp_group\"} 1\n"),
            std::string::npos);
  release.set_value();
  EXPECT_TRUE(waiting.get().ok());
  EXPECT_EQ(r.actor("g/0/dp_group")->messages(), 1u);
}

}  // namespace
}  // namespace troupe::comm
