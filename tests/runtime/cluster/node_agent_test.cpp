#include "runtime/cluster/node_agent.hpp"

#include <future>

#include <gtest/gtest.h>

#include "runtime/actor/messages.hpp"
#include "runtime/actor/status_bridge.hpp"
#include "runtime/actor/system_config.hpp"
#include "runtime/cluster/head_server.hpp"
#include "runtime/cluster/message_codec.hpp"
#include "tests/support/wait.hpp"

namespace troupe::cluster {
namespace {

using testing::wait_until;

using namespace std::chrono_literals;
using echo_actor = caf::typed_actor<caf::replies_to<actor::ping_atom, int32_t>::with<int32_t>>;

// A head and two nodes, each node with its own actor system, all in this process on loopback.
// With troupe's scheduler ("stealing") the nodes' idle workers receive the peers' frames; with
// CAF's work sharing the node agents' threads do.
class NodeAgentTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto head = head_server::start(
        context_, "tcp://127.0.0.1:0",
        {.credentials = {.token = "t"}, .heartbeat_interval = 100ms, .heartbeat_misses = 5},
        1 << 20, metrics_, events_);
    ASSERT_TRUE(head.ok()) << head.status();
    head_ = std::move(*head);
    a_ = start(*system_a_);
    b_ = start(*system_b_);
    ASSERT_TRUE(a_ && b_);
  }

  void TearDown() override {
    a_.reset();
    b_.reset();
    head_.reset();
  }

  std::unique_ptr<node_agent> start(caf::actor_system& system, bool watch = false,
                                    bool as_head = false) {
    auto agent = node_agent::start(context_, system,
                                   {.head = head_->endpoint(),
                                    .credentials = {.token = "t"},
                                    .as_head = as_head,
                                    .watch_members = watch,
                                    .max_frame_bytes = max_frame,
                                    .join_timeout = 5s,
                                    .request_timeout = 5s},
                                   metrics_);
    EXPECT_TRUE(agent.ok()) << agent.status();
    return agent.ok() ? std::move(*agent) : nullptr;
  }

  // A third node, with an actor system of its own (members destroyed from the last).
  struct extra_node {
    std::unique_ptr<caf::actor_system_config> cfg;
    std::unique_ptr<caf::actor_system> system;
    std::unique_ptr<node_agent> agent;
  };
  extra_node start_extra(bool watch, bool as_head = false) {
    extra_node n;
    n.cfg = actor::make_system_config({.scheduler_threads = 2, .scheduler_policy = GetParam()});
    n.system = std::make_unique<caf::actor_system>(*n.cfg);
    n.agent = start(*n.system, watch, as_head);
    return n;
  }

  // The state in which `n` knows member `id`, or nullopt when it does not know it.
  static std::optional<member_state> known_as(const node_agent& n, const std::string& id) {
    for (const auto& p : n.peers()) {
      if (p.node == id) return p.state;
    }
    return std::nullopt;
  }

  // Publishes `name` on node a: an actor that hands over the value of the first ping it gets.
  std::future<int32_t> publish_first_ping(const std::string& name) {
    auto got = std::make_shared<std::promise<int32_t>>();
    a_->publish(name, system_a_->spawn([got](caf::event_based_actor* self) -> caf::behavior {
      return {[self, got](actor::ping_atom, int32_t x) {
        got->set_value(x);
        self->quit();
      }};
    }));
    return got->get_future();
  }

  // Publishes "collector/0" on node a: an actor that keeps the values of the pings it gets, in
  // order, and counts them.
  struct collector {
    caf::actor actor;
    std::shared_ptr<std::vector<int32_t>> values;
    std::shared_ptr<std::atomic<int>> count;
  };
  collector publish_collector() {
    auto values = std::make_shared<std::vector<int32_t>>();
    auto count = std::make_shared<std::atomic<int>>(0);
    auto actor = system_a_->spawn([values, count](caf::event_based_actor*) -> caf::behavior {
      return {[values, count](actor::ping_atom, int32_t x) {
        values->push_back(x);
        count->fetch_add(1, std::memory_order_release);
      }};
    });
    a_->publish("collector/0", actor);
    return {actor, values, count};
  }

  // A raw connection to node a's ROUTER, as a peer's DEALER.
  zmq::socket_t raw_peer_connection() {
    zmq::socket_t dealer(context_, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.connect(a_->endpoint());
    return dealer;
  }

  // Waits until the nodes have refused `n` frames or envelopes for `reason`.
  bool rejections_reach(const char* reason, uint64_t n) {
    return wait_until([&] {
      return metrics_
                 .get_counter("troupe_rejected_frames_total", "",
                              {{"where", "node"}, {"reason", reason}})
                 .value() == n;
    });
  }

  static constexpr size_t max_frame = 1 << 20;
  zmq::context_t context_;
  metrics::registry metrics_;
  run::event_log events_;
  std::unique_ptr<caf::actor_system_config> cfg_a_ =
      actor::make_system_config({.scheduler_threads = 2, .scheduler_policy = GetParam()});
  std::unique_ptr<caf::actor_system_config> cfg_b_ =
      actor::make_system_config({.scheduler_threads = 2, .scheduler_policy = GetParam()});
  std::unique_ptr<caf::actor_system> system_a_ = std::make_unique<caf::actor_system>(*cfg_a_);
  std::unique_ptr<caf::actor_system> system_b_ = std::make_unique<caf::actor_system>(*cfg_b_);
  std::unique_ptr<head_server> head_;
  std::unique_ptr<node_agent> a_;
  std::unique_ptr<node_agent> b_;
};

TEST_P(NodeAgentTest, RemoteRequestResponseLooksLocal) {
  auto echo = system_a_->spawn([]() -> echo_actor::behavior_type {
    return {[](actor::ping_atom, int32_t x) { return x + 1; }};
  });
  a_->publish("echo/0", caf::actor_cast<caf::actor>(echo));
  auto remote = caf::actor_cast<echo_actor>(b_->remote("echo/0", a_->id()));
  caf::scoped_actor self{*system_b_};
  for (int32_t i = 0; i < 100; ++i) {
    self->request(remote, 5s, actor::ping_atom_v, i)
        .receive([i](int32_t y) { EXPECT_EQ(y, i + 1); },
                 [](caf::error& e) { FAIL() << caf::to_string(e); });
  }
  // Who received the frames: the idle scheduler workers under troupe's scheduler (the node
  // thread's drain between its turns may take a few), the node thread alone under CAF's.
  const double on_workers =
      metrics_.get_counter("troupe_peer_frames_total", "", {{"thread", "worker"}}).value();
  const double on_node =
      metrics_.get_counter("troupe_peer_frames_total", "", {{"thread", "node"}}).value();
  EXPECT_GE(on_workers + on_node, 200);  // 100 requests, 100 responses
  if (GetParam() == "stealing") {
    EXPECT_GT(on_workers, 0);  // how many depends on which thread runs first (remote_bench)
  } else {
    EXPECT_EQ(on_workers, 0);
  }
  // The head knows where the actor lives.
  ASSERT_TRUE(wait_until([&] { return b_->resolve("echo/0", 1s).ok(); }));
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
}

// Nodes that do not watch learn of a peer from the head the first time they send to it or hear
// from it; a node that watches knows every member.
TEST_P(NodeAgentTest, ANodeMeetsAPeerThroughTheHeadOnFirstContact) {
  // No node agent of the head joined here: its record (the head server's) is not handed out.
  EXPECT_EQ(known_as(*b_, "head"), std::nullopt);
  EXPECT_EQ(known_as(*b_, b_->id()), member_state::alive);
  EXPECT_EQ(known_as(*b_, a_->id()), std::nullopt);
  EXPECT_EQ(known_as(*a_, b_->id()), std::nullopt);
  auto echo = system_a_->spawn([]() -> echo_actor::behavior_type {
    return {[](actor::ping_atom, int32_t x) { return x * 2; }};
  });
  a_->publish("echo/0", caf::actor_cast<caf::actor>(echo));
  auto remote = caf::actor_cast<echo_actor>(b_->remote("echo/0", a_->id()));
  caf::scoped_actor self{*system_b_};
  self->request(remote, 5s, actor::ping_atom_v, int32_t{21})
      .receive([](int32_t y) { EXPECT_EQ(y, 42); },
               [](caf::error& e) { FAIL() << caf::to_string(e); });
  EXPECT_EQ(known_as(*b_, a_->id()), member_state::alive);  // to send the request
  EXPECT_EQ(known_as(*a_, b_->id()), member_state::alive);  // to deliver it
  auto watcher = start_extra(true);
  ASSERT_TRUE(watcher.agent);
  EXPECT_EQ(watcher.agent->peers().size(), 3u);  // a, b and itself, from the join
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
}

// The head's own node agent may join after the workers (as remote_bench's does), and call a
// worker at once, before the head's next tick pushes its record: the worker, never told of the
// head's record while it named the head server, asks for it and answers the head's node (its
// answers went into the head server's socket, and the call timed out).
TEST_P(NodeAgentTest, AWorkerThatJoinedBeforeTheHeadsNodeAnswersIt) {
  auto echo = system_b_->spawn([]() -> echo_actor::behavior_type {
    return {[](actor::ping_atom, int32_t x) { return x + 1; }};
  });
  b_->publish("echo/0", caf::actor_cast<caf::actor>(echo));
  auto head_node = start_extra(false, /*as_head=*/true);
  ASSERT_TRUE(head_node.agent);
  auto remote = caf::actor_cast<echo_actor>(head_node.agent->remote("echo/0", b_->id()));
  caf::scoped_actor self{*head_node.system};
  self->request(remote, 5s, actor::ping_atom_v, int32_t{41})
      .receive([](int32_t y) { EXPECT_EQ(y, 42); },
               [](caf::error& e) { FAIL() << caf::to_string(e); });
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
}

// Before the head's node agent joins (none does here), a call to an actor on the head's node
// fails at once with the head's reason, not as a call to a dead member.
TEST_P(NodeAgentTest, ACallToTheHeadsNodeBeforeItJoinedFailsSayingSo) {
  auto remote = caf::actor_cast<echo_actor>(b_->remote("echo/0", "head"));
  caf::scoped_actor self{*system_b_};
  self->request(remote, 5s, actor::ping_atom_v, int32_t{1})
      .receive([](int32_t) { FAIL() << "expected an error"; },
               [](caf::error& e) {
                 const absl::Status s = actor::to_status(e);
                 EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
                 EXPECT_NE(s.message().find("node head is not a member: the head's node agent "
                                            "has not joined yet"),
                           absl::string_view::npos)
                     << s;
               });
}

// A member that left is refused by every node, also by one that never talked to it (the
// departure is pushed to all), both ways.
TEST_P(NodeAgentTest, ADepartedMemberIsRefusedByANodeThatNeverMetIt) {
  auto c = start_extra(false);
  ASSERT_TRUE(c.agent);
  const std::string gone = c.agent->id();
  c.agent.reset();  // leaves
  ASSERT_TRUE(wait_until([&] { return known_as(*a_, gone) == member_state::left; }));
  auto content = encode_message(caf::make_message(actor::ping_atom_v, int32_t{1}).content());
  ASSERT_TRUE(content.ok()) << content.status();
  envelope h{.type = "actor.send", .src = gone, .dst = "collector/0"};
  auto dealer = raw_peer_connection();
  dealer.send(zmq::buffer(encode(h, *content)), zmq::send_flags::none);
  EXPECT_TRUE(rejections_reach("not_a_member", 1));
  auto remote = caf::actor_cast<echo_actor>(a_->remote("echo/0", gone));
  caf::scoped_actor self{*system_a_};
  self->request(remote, 5s, actor::ping_atom_v, int32_t{1})
      .receive([](int32_t) { FAIL() << "expected an error"; },
               [&](caf::error& e) {
                 const absl::Status s = actor::to_status(e);
                 EXPECT_NE(s.message().find(gone), absl::string_view::npos) << s;
               });
}

// With every scheduler worker of node A stuck in a long handler, a request to a detached actor
// there is still received (the node thread drains the ROUTER between its turns) and answered.
TEST_P(NodeAgentTest, RequestsArriveWhileEveryWorkerIsBusy) {
  auto echo = system_a_->spawn<caf::detached>([]() -> echo_actor::behavior_type {
    return {[](actor::ping_atom, int32_t x) { return x + 1; }};
  });
  a_->publish("echo/0", caf::actor_cast<caf::actor>(echo));
  // Two busy actors, one per worker; each spins until released (at most 10 s).
  auto started = std::make_shared<std::atomic<int>>(0);
  auto release = std::make_shared<std::atomic<bool>>(false);
  std::vector<caf::actor> busy;
  for (int i = 0; i < 2; ++i) {
    busy.push_back(system_a_->spawn([started, release](caf::event_based_actor*) -> caf::behavior {
      return {[started, release](int32_t) {
        started->fetch_add(1);
        const auto until = std::chrono::steady_clock::now() + 10s;
        while (!release->load() && std::chrono::steady_clock::now() < until) {
        }
      }};
    }));
    caf::anon_send(busy.back(), int32_t{0});
  }
  ASSERT_TRUE(wait_until([&] { return started->load() == 2; })) << "the workers never got busy";
  auto remote = caf::actor_cast<echo_actor>(b_->remote("echo/0", a_->id()));
  caf::scoped_actor self{*system_b_};
  // Answered within the request's 5 s, so while both workers still spin (they stop only when
  // released below, or after 10 s).
  self->request(remote, 5s, actor::ping_atom_v, int32_t{41})
      .receive([](int32_t y) { EXPECT_EQ(y, 42); },
               [](caf::error& e) { FAIL() << caf::to_string(e); });
  EXPECT_GE(metrics_.get_counter("troupe_peer_frames_total", "", {{"thread", "node"}}).value(), 1);
  release->store(true);
  for (const auto& b : busy)
    caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
}

TEST_P(NodeAgentTest, OrderIsKeptPerSenderAndReceiver) {
  const auto [collector, received, count] = publish_collector();
  auto remote = b_->remote("collector/0", a_->id());
  const auto frames_so_far = [&] {
    return metrics_.get_counter("troupe_peer_frames_total", "", {{"thread", "worker"}}).value() +
           metrics_.get_counter("troupe_peer_frames_total", "", {{"thread", "node"}}).value();
  };
  // A first message, so that the nodes know each other (the burst would otherwise wait for the
  // head's answer and leave batched however it was sent).
  caf::anon_send(remote, actor::ping_atom_v, int32_t{-1});
  ASSERT_TRUE(wait_until([&] { return count->load(std::memory_order_acquire) == 1; }));
  const double frames_before = frames_so_far();
  auto sender = system_b_->spawn([remote](caf::event_based_actor* self) -> caf::behavior {
    for (int32_t i = 0; i < 2000; ++i)
      self->send(remote, actor::ping_atom_v, i);
    return {};
  });
  ASSERT_TRUE(wait_until([&] { return count->load(std::memory_order_acquire) == 2001; }));
  for (int32_t i = 0; i < 2000; ++i)
    ASSERT_EQ((*received)[i + 1], i);
  // Sent in one job on troupe's scheduler, the messages travel several to a frame.
  const double frames = frames_so_far() - frames_before;
  if (GetParam() == "stealing") {
    EXPECT_LE(frames, 2000 / 8);
  } else {
    EXPECT_GE(frames, 2000);
  }
  caf::anon_send_exit(collector, caf::exit_reason::user_shutdown);
}

// A burst to a peer the sender has not met waits for the head's answer, then arrives in order,
// and so do the receiver's messages held until it met the sender.
TEST_P(NodeAgentTest, ABurstToAPeerNotMetYetArrivesInOrder) {
  const auto [collector, received, count] = publish_collector();
  auto remote = b_->remote("collector/0", a_->id());
  auto sender = system_b_->spawn([remote](caf::event_based_actor* self) -> caf::behavior {
    for (int32_t i = 0; i < 3000; ++i)
      self->send(remote, actor::ping_atom_v, i);
    return {};
  });
  ASSERT_TRUE(wait_until([&] { return count->load(std::memory_order_acquire) == 3000; }));
  for (int32_t i = 0; i < 3000; ++i)
    ASSERT_EQ((*received)[i], i);
  caf::anon_send_exit(collector, caf::exit_reason::user_shutdown);
}

// A message sent by a handler that then runs on for long leaves while it still runs (the node
// thread sends what a job gathered at its next turn), not when the job ends.
TEST_P(NodeAgentTest, AMessageFromALongJobLeavesBeforeTheJobEnds) {
  auto arrived = std::make_shared<std::atomic<bool>>(false);
  auto collector = system_a_->spawn([arrived](caf::event_based_actor*) -> caf::behavior {
    return {[arrived](actor::ping_atom, int32_t) { arrived->store(true); }};
  });
  a_->publish("collector/0", collector);
  auto remote = b_->remote("collector/0", a_->id());
  auto arrived_during_job = std::make_shared<std::promise<bool>>();
  auto sender = system_b_->spawn(
      [remote, arrived, arrived_during_job](caf::event_based_actor* self) -> caf::behavior {
        return {[=](int32_t) {
          self->send(remote, actor::ping_atom_v, int32_t{1});
          const auto until = std::chrono::steady_clock::now() + 5s;
          while (!arrived->load() && std::chrono::steady_clock::now() < until) {
          }
          arrived_during_job->set_value(arrived->load());
          self->quit();
        }};
      });
  auto during = arrived_during_job->get_future();
  caf::anon_send(sender, int32_t{0});
  ASSERT_EQ(during.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(during.get());
  caf::anon_send_exit(collector, caf::exit_reason::user_shutdown);
}

// A peer's frame holds envelopes back to back; garbage after good ones is refused and counted,
// the good ones are delivered.
TEST_P(NodeAgentTest, GarbageAfterGoodEnvelopesInAFrameIsRefusedAlone) {
  auto value = publish_first_ping("collector/0");
  auto content = encode_message(caf::make_message(actor::ping_atom_v, int32_t{7}).content());
  ASSERT_TRUE(content.ok()) << content.status();
  envelope h{.type = "actor.send", .src = b_->id(), .dst = "collector/0", .epoch = b_->epoch()};
  const std::string frame = encode(h, *content) + "\xc1\xc1";  // 0xc1: never valid msgpack
  auto dealer = raw_peer_connection();
  dealer.send(zmq::buffer(frame), zmq::send_flags::none);
  ASSERT_EQ(value.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(value.get(), 7);
  EXPECT_TRUE(rejections_reach("malformed", 1));
}

// What a node refuses from a peer connection is counted by reason, and the connection's later
// traffic is still delivered.
TEST_P(NodeAgentTest, RefusedPeerFramesAreCountedByReason) {
  auto value = publish_first_ping("collector/0");
  auto content = encode_message(caf::make_message(actor::ping_atom_v, int32_t{9}).content());
  ASSERT_TRUE(content.ok()) << content.status();
  const envelope good{
      .type = "actor.send", .src = b_->id(), .dst = "collector/0", .epoch = b_->epoch()};
  envelope unknown = good, stranger = good, other_version = good;
  unknown.type = "actor.teleport";
  stranger.src = "w-nobody";
  other_version.v = 9;
  auto dealer = raw_peer_connection();
  for (const envelope& h : {unknown, stranger, other_version}) {
    dealer.send(zmq::buffer(encode(h, *content)), zmq::send_flags::none);
  }
  dealer.send(zmq::str_buffer("two"), zmq::send_flags::sndmore);  // not one frame
  dealer.send(zmq::str_buffer("frames"), zmq::send_flags::none);
  // Over the node's limit, under the 4x where ZeroMQ itself would drop the connection.
  dealer.send(zmq::buffer(std::string(2 * max_frame, 'x')), zmq::send_flags::none);
  dealer.send(zmq::buffer(encode(good, *content)), zmq::send_flags::none);
  ASSERT_EQ(value.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(value.get(), 9);
  for (const char* reason :
       {"unknown_type", "not_a_member", "bad_version", "malformed", "oversized"}) {
    EXPECT_TRUE(rejections_reach(reason, 1)) << reason;
  }
}

TEST_P(NodeAgentTest, UnknownActorsAnswerWithAnError) {
  auto remote = caf::actor_cast<echo_actor>(b_->remote("nobody/0", a_->id()));
  caf::scoped_actor self{*system_b_};
  self->request(remote, 5s, actor::ping_atom_v, 1)
      .receive([](int32_t) { FAIL() << "expected an error"; },
               [&](caf::error& e) {
                 EXPECT_EQ(actor::to_status(e).message(),
                           "no actor 'nobody/0' on node " + a_->id());
               });
}

TEST_P(NodeAgentTest, MessagesThatCannotTravelFailAtTheSender) {
  auto remote = b_->remote("x/0", a_->id());
  caf::scoped_actor self{*system_b_};
  self->request(remote, 5s, actor::actor_update{"y", {}})
      .receive([]() { FAIL() << "expected an error"; },
               [](caf::error& e) {
                 EXPECT_NE(actor::to_status(e).message().find("no wire form"),
                           absl::string_view::npos);
               });
}

TEST_P(NodeAgentTest, ANodeThatLeavesFailsItsPendingRequestsAndProxies) {
  // An actor that never answers, so the request is pending when its node goes; the node goes
  // once the request has arrived.
  std::promise<void> arrived;
  auto silent = system_a_->spawn([&arrived]() -> echo_actor::behavior_type {
    return {[&arrived](actor::ping_atom, int32_t) -> caf::result<int32_t> {
      arrived.set_value();
      return caf::delegated<int32_t>();
    }};
  });
  a_->publish("silent/0", caf::actor_cast<caf::actor>(silent));
  auto remote = caf::actor_cast<echo_actor>(b_->remote("silent/0", a_->id()));
  caf::scoped_actor self{*system_b_};
  self->monitor(remote);
  const std::string gone = a_->id();
  std::thread leaver([&] {
    arrived.get_future().wait_for(10s);
    a_->stop();
  });
  self->request(remote, 10s, actor::ping_atom_v, 1)
      .receive([](int32_t) { FAIL() << "expected an error"; },
               [&](caf::error& e) {
                 const absl::Status s = actor::to_status(e);
                 EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
                 EXPECT_NE(s.message().find("node " + gone + " left"), absl::string_view::npos)
                     << s;
               });
  self->receive([&](caf::down_msg& down) {
    EXPECT_NE(actor::to_status(down.reason).message().find(gone), absl::string_view::npos);
  });
  leaver.join();
  caf::anon_send_exit(silent, caf::exit_reason::user_shutdown);
}

TEST_P(NodeAgentTest, AJoinWithoutTheTokenIsRefused) {
  auto bad = node_agent::start(
      context_, *system_b_,
      {.head = head_->endpoint(), .credentials = {.token = "wrong"}, .join_timeout = 5s}, metrics_);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(bad.status().message().find("missing or wrong cluster token"), absl::string_view::npos);
}

INSTANTIATE_TEST_SUITE_P(Schedulers, NodeAgentTest, ::testing::Values("stealing", "sharing"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace troupe::cluster
