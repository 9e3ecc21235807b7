#include "runtime/cluster/peer_inbox.hpp"

#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/cluster/zmq_util.hpp"

namespace troupe::cluster {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

class PeerInboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    zmq::socket_t router(context_, zmq::socket_type::router);
    configure_socket(router, 1 << 20);
    auto endpoint = bind_socket(router, "tcp://127.0.0.1:0");
    ASSERT_TRUE(endpoint.ok()) << endpoint.status();
    inbox_ = std::make_unique<peer_inbox>(
        std::move(router), [this](const std::vector<zmq::message_t>& frames, caf::execution_unit*) {
          ASSERT_EQ(frames.size(), 2u);  // the sender's routing id, then the frame
          received_.push_back(frames[1].to_string());
        });
    dealer_.connect(*endpoint);
  }

  // Polls until `count` frames arrived (bounded).
  void receive(size_t count) {
    const auto deadline = clock::now() + 5s;
    while (received_.size() < count && clock::now() < deadline)
      (void)inbox_->poll(nullptr, 50ms);
    ASSERT_EQ(received_.size(), count);
  }

  // Another thread waits in the inbox for `timeout` (retrying while this one holds it).
  std::future<void> hold_in_background(std::chrono::milliseconds timeout) {
    return std::async(std::launch::async, [this, timeout] {
      const auto deadline = clock::now() + 5s;
      while (!inbox_->poll(nullptr, timeout) && clock::now() < deadline) {
      }
    });
  }

  // True once a poll here is refused: the other thread is in the inbox.
  bool wait_until_held() {
    const auto deadline = clock::now() + 5s;
    while (clock::now() < deadline) {
      if (!inbox_->poll(nullptr, 0ms)) return true;
      std::this_thread::sleep_for(1ms);
    }
    return false;
  }

  zmq::context_t context_;
  zmq::socket_t dealer_{context_, zmq::socket_type::dealer};
  std::unique_ptr<peer_inbox> inbox_;
  std::vector<std::string> received_;
};

TEST_F(PeerInboxTest, HandlesEveryFrameInOrder) {
  for (int i = 0; i < 50; ++i)
    ASSERT_TRUE(send(dealer_, {std::to_string(i)}).ok());
  receive(50);
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(received_[i], std::to_string(i));
}

TEST_F(PeerInboxTest, OneThreadAtATimeAndWakeEndsAWait) {
  // The only way the other thread's 10 s wait ends early is wake().
  auto holder = hold_in_background(10s);
  ASSERT_TRUE(wait_until_held());  // meanwhile, every poll here returned false at once
  const auto t0 = clock::now();
  inbox_->wake();
  ASSERT_EQ(holder.wait_for(5s), std::future_status::ready);
  EXPECT_LT(clock::now() - t0, 5s);
  EXPECT_TRUE(inbox_->poll(nullptr, 0ms));  // free again
}

TEST_F(PeerInboxTest, ARefusedPollIsReportedOnce) {
  EXPECT_FALSE(inbox_->take_refused());
  EXPECT_TRUE(inbox_->poll(nullptr, 0ms));  // free: not refused
  EXPECT_FALSE(inbox_->take_refused());
  auto holder = hold_in_background(10s);
  ASSERT_TRUE(wait_until_held());  // refused at least once
  EXPECT_TRUE(inbox_->take_refused());
  EXPECT_FALSE(inbox_->take_refused());
  inbox_->wake();
  ASSERT_EQ(holder.wait_for(5s), std::future_status::ready);
}

TEST_F(PeerInboxTest, CloseWaitsForTheHolderAndRefusesLaterPolls) {
  auto holder = hold_in_background(10s);
  ASSERT_TRUE(wait_until_held());
  const auto t0 = clock::now();
  inbox_->close();
  EXPECT_LT(clock::now() - t0, 5s);
  ASSERT_EQ(holder.wait_for(5s), std::future_status::ready);
  EXPECT_FALSE(inbox_->poll(nullptr, 0ms));
  EXPECT_FALSE(inbox_->poll(nullptr, 0ms));
}

}  // namespace
}  // namespace troupe::cluster
