#include "runtime/cluster/peer_link.hpp"

#include <future>

#include <gtest/gtest.h>

#include "caf/all.hpp"
#include "runtime/actor/system_config.hpp"
#include "runtime/cluster/zmq_util.hpp"

namespace troupe::cluster {
namespace {

using namespace std::chrono_literals;

// A link to a ROUTER on loopback that the test reads frames from.
class PeerLinkTest : public ::testing::Test {
 protected:
  std::shared_ptr<peer_link> connect(peer_link::limits limits) {
    zmq::socket_t dealer(context_, zmq::socket_type::dealer);
    configure_socket(dealer, 1 << 20);
    dealer.connect(endpoint_);
    return std::make_shared<peer_link>(std::move(dealer), limits, lost_);
  }

  // The next frame's bytes, or "" if none comes within `timeout`.
  std::string next_frame(std::chrono::milliseconds timeout = 5s) {
    zmq::pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, timeout);
    auto frames = try_recv(router_);
    if (!frames.ok() || frames->size() != 2) return "";
    return (*frames)[1].to_string();
  }

  // Runs `body` as one job on troupe's scheduler and waits for it (not for the job's end).
  void in_a_job(std::function<void()> body) {
    auto done = std::make_shared<std::promise<void>>();
    auto a = system_.spawn([body, done](caf::event_based_actor* self) -> caf::behavior {
      return {[=](int32_t) {
        body();
        done->set_value();
        self->quit();
      }};
    });
    caf::anon_send(a, int32_t{0});
    ASSERT_EQ(done->get_future().wait_for(10s), std::future_status::ready);
  }

  zmq::context_t context_;
  zmq::socket_t router_ = [this] {
    zmq::socket_t s(context_, zmq::socket_type::router);
    configure_socket(s, 1 << 20);
    return s;
  }();
  std::string endpoint_ = bind_socket(router_, "tcp://127.0.0.1:0").value();
  metrics::registry metrics_;
  metrics::counter& lost_ = metrics_.get_counter("lost", "", {});
  std::unique_ptr<caf::actor_system_config> cfg_ =
      actor::make_system_config({.scheduler_threads = 2});
  caf::actor_system system_{*cfg_};
};

TEST_F(PeerLinkTest, OutsideAJobEachEnvelopeLeavesAtOnce) {
  auto link = connect({});
  ASSERT_TRUE(link->send("one").ok());
  ASSERT_TRUE(link->send("two").ok());
  EXPECT_EQ(next_frame(), "one");
  EXPECT_EQ(next_frame(), "two");
}

TEST_F(PeerLinkTest, AJobsEnvelopesLeaveTogetherWhenItEnds) {
  auto link = connect({});
  std::string seen_during_job = "unset";
  in_a_job([&] {
    ASSERT_TRUE(link->send("a").ok());
    ASSERT_TRUE(link->send("b").ok());
    ASSERT_TRUE(link->send("c").ok());
    seen_during_job = next_frame(100ms);
  });
  EXPECT_EQ(seen_during_job, "");  // nothing left while the job ran
  EXPECT_EQ(next_frame(), "abc");
  EXPECT_EQ(next_frame(100ms), "");
}

TEST_F(PeerLinkTest, AFullBatchLeavesBeforeTheJobEnds) {
  auto link = connect({.max_frame_bytes = 1 << 20, .batch_envelopes = 4});
  in_a_job([&] {
    for (char c = 'a'; c < 'k'; ++c)
      ASSERT_TRUE(link->send(std::string(1, c)).ok());
  });
  EXPECT_EQ(next_frame(), "abcd");
  EXPECT_EQ(next_frame(), "efgh");
  EXPECT_EQ(next_frame(), "ij");
}

TEST_F(PeerLinkTest, AFrameNeverGrowsPastTheReceiversLimit) {
  auto link = connect({.max_frame_bytes = 10});
  in_a_job([&] {
    ASSERT_TRUE(link->send("12345678").ok());
    ASSERT_TRUE(link->send("abc").ok());  // 11 bytes together: the first leaves alone
  });
  EXPECT_EQ(next_frame(), "12345678");
  EXPECT_EQ(next_frame(), "abc");
}

TEST_F(PeerLinkTest, ANodeThreadFlushSendsWhatALongJobGathered) {
  auto link = connect({});
  std::string seen_during_job;
  in_a_job([&] {
    ASSERT_TRUE(link->send("x").ok());
    std::thread node_thread([&] { link->flush(); });
    node_thread.join();
    seen_during_job = next_frame();
  });
  EXPECT_EQ(seen_during_job, "x");
  EXPECT_EQ(next_frame(100ms), "");  // the job's end finds nothing left
}

// A DEALER connected nowhere cannot send: the caller of an immediate send gets the error; what a
// job gathered is counted as lost.
TEST_F(PeerLinkTest, EnvelopesThatCannotLeaveAreReportedOrCounted) {
  zmq::socket_t dealer(context_, zmq::socket_type::dealer);
  configure_socket(dealer, 1 << 20);
  auto link = std::make_shared<peer_link>(std::move(dealer), peer_link::limits{}, lost_);
  EXPECT_FALSE(link->send("alone").ok());
  EXPECT_EQ(lost_.value(), 0);
  in_a_job([&] {
    EXPECT_TRUE(link->send("a").ok());
    EXPECT_TRUE(link->send("b").ok());
  });
  // The job's end comes just after the handler that `in_a_job` waits for.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (lost_.value() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(lost_.value(), 2);
}

}  // namespace
}  // namespace troupe::cluster
