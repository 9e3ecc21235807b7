#include "runtime/cluster/head_logic.hpp"

#include <gtest/gtest.h>

#include "runtime/cluster/msgpack_view.hpp"

namespace troupe::cluster {
namespace {

using namespace std::chrono_literals;
using clock = head_logic::clock;

// A decoded frame the head sent, with its destination.
struct sent {
  std::string identity;
  received_envelope env;
  map_view payload() const { return map_view::of(env.payload, "payload").value(); }
};

class HeadLogicTest : public ::testing::Test {
 protected:
  HeadLogicTest() : t0_(clock::now()), head_(options(), t0_) {}

  // Built field by field: GCC 12 warns of an uninitialised string in a nested designated
  // initialiser of the credentials (a false positive).
  static head_options options() {
    head_options o;
    o.credentials.token = "s3cret";
    o.heartbeat_interval = 100ms;
    o.heartbeat_misses = 3;
    o.app_config = "app: pipeline\n";
    o.endpoint = "tcp://127.0.0.1:1";
    return o;
  }

  std::vector<sent> request(const std::string& identity, const std::string& type,
                            map_builder payload = {}, clock::duration at = 0ms) {
    envelope h;
    h.type = type;
    h.src = identity;
    h.corr = ++corr_;
    const std::string frame = encode(h, payload.bytes());
    auto env = decode(frame.data(), frame.size(), 1 << 20).value();
    return decoded(head_.on_request(identity, env, t0_ + at));
  }

  static std::vector<sent> decoded(const std::vector<head_logic::outgoing>& out) {
    std::vector<sent> result;
    for (const auto& o : out) {
      result.push_back({o.identity, decode(o.frame.data(), o.frame.size(), 1 << 20).value()});
    }
    return result;
  }

  std::string join(const std::string& identity, const std::string& endpoint) {
    auto out = request(
        identity, "join",
        std::move(map_builder().add("token", std::string("s3cret")).add("endpoint", endpoint)));
    EXPECT_EQ(out.at(0).env.header.type, "joined");
    return out.at(0).payload().get_string("node").value();
  }

  clock::time_point t0_;
  head_logic head_;
  uint64_t corr_ = 0;
};

TEST_F(HeadLogicTest, HelloNeedsNoToken) {
  auto out = request("c1", "hello");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].env.header.type, "hello");
  EXPECT_EQ(out[0].env.header.corr, corr_);
  EXPECT_EQ(out[0].payload().get_uint("version").value(), protocol_version);
}

TEST_F(HeadLogicTest, JoinWithoutTheTokenIsRefusedAndNoticed) {
  auto out =
      request("c1", "join", std::move(map_builder().add("endpoint", std::string("tcp://x"))));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].env.header.type, "error");
  EXPECT_EQ(out[0].payload().get_string("code").value(), "PERMISSION_DENIED");
  auto notices = head_.take_notices();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0].type, "join_refused");
  EXPECT_EQ(head_.members().alive().size(), 1u);  // the head only
}

// Node names of a list of member records.
std::vector<std::string> nodes_of(const msgpack::object* records) {
  std::vector<std::string> out;
  for (uint32_t i = 0; i < records->via.array.size; ++i)
    out.push_back(map_view::of(records->via.array.ptr[i], "member")->get_string("node").value());
  return out;
}

TEST_F(HeadLogicTest, JoinsHandOutIdsAndConfigAndTellTheWatchers) {
  // w1 watches (as the head's own node does); w2 and w3 learn of members when they need them.
  auto out = request("c1", "join",
                     std::move(map_builder()
                                   .add("token", std::string("s3cret"))
                                   .add("endpoint", std::string("tcp://w1"))
                                   .add("watch", true)));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].payload().get_string("node").value(), "w1");
  EXPECT_EQ(out[0].payload().get_string("config").value(), "app: pipeline\n");
  // No head yet: the head's node agent has not joined (see below).
  EXPECT_EQ(nodes_of(out[0].payload().find("members")), (std::vector<std::string>{"w1"}));
  out = request("c2", "join",
                std::move(map_builder()
                              .add("token", std::string("s3cret"))
                              .add("endpoint", std::string("tcp://w2"))));
  ASSERT_EQ(out.size(), 1u);  // the reply; the watchers hear of it at the next tick
  // A node that does not watch gets the head (once its node joined) and itself, not the list: a
  // storm of n joins costs O(n).
  EXPECT_EQ(nodes_of(out[0].payload().find("members")), (std::vector<std::string>{"w2"}));
  request("c3", "join",
          std::move(map_builder()
                        .add("token", std::string("s3cret"))
                        .add("endpoint", std::string("tcp://w3"))));
  // One push to the watcher, however many joins came since the last tick, with their records.
  auto pushed = decoded(head_.on_tick(t0_ + 10ms));
  ASSERT_EQ(pushed.size(), 1u);
  EXPECT_EQ(pushed[0].identity, "c1");
  EXPECT_EQ(pushed[0].env.header.type, "members");
  EXPECT_EQ(pushed[0].env.header.epoch, 4u);
  EXPECT_TRUE(pushed[0].payload().find("delta")->via.boolean);
  EXPECT_EQ(nodes_of(pushed[0].payload().find("members")),
            (std::vector<std::string>{"w1", "w2", "w3"}));
  EXPECT_TRUE(head_.on_tick(t0_ + 15ms).empty());  // nothing changed since

  // A departure goes to every live member, so that all of them refuse the departed one.
  request("c2", "leave");
  pushed = decoded(head_.on_tick(t0_ + 20ms));
  ASSERT_EQ(pushed.size(), 2u);
  EXPECT_EQ(pushed[0].identity, "c1");
  EXPECT_EQ(pushed[1].identity, "c3");
  for (const auto& p : pushed) {
    const msgpack::object* records = p.payload().find("members");
    ASSERT_EQ(nodes_of(records), std::vector<std::string>{"w2"});
    EXPECT_EQ(map_view::of(records->via.array.ptr[0], "m")->get_string("state").value(), "left");
  }

  // What a node asks of a member it has not met.
  out = request("c3", "member", std::move(map_builder().add("node", std::string("w1"))));
  ASSERT_EQ(out.at(0).env.header.type, "member");
  EXPECT_EQ(out[0].payload().get_string("endpoint").value(), "tcp://w1");
  EXPECT_EQ(out[0].payload().get_string("state").value(), "alive");
  out = request("c3", "member", std::move(map_builder().add("node", std::string("w2"))));
  EXPECT_EQ(out.at(0).payload().get_string("state").value(), "left");
  out = request("c3", "member", std::move(map_builder().add("node", std::string("w9"))));
  ASSERT_EQ(out.at(0).env.header.type, "error");
  EXPECT_EQ(out[0].payload().get_string("code").value(), "NOT_FOUND");
  EXPECT_NE(out[0].payload().get_string("message").value().find("no member is called 'w9'"),
            std::string::npos);
  // Only members may ask.
  out = request(
      "c9", "member",
      std::move(map_builder().add("token", std::string("s3cret")).add("node", std::string("w1"))));
  EXPECT_EQ(out.at(0).payload().get_string("code").value(), "PERMISSION_DENIED");
}

// A worker that joined before the head's own node agent is not told of the head until the agent
// joins (the head's record named the head server, where the worker's answers to the head's node
// were lost when the node's first message came before the push); then it learns the node's
// endpoint from the push, or by asking when that message comes first.
TEST_F(HeadLogicTest, TheHeadsNodeEndpointReachesWorkersThatJoinedBeforeIt) {
  auto out = request("c1", "join",
                     std::move(map_builder()
                                   .add("token", std::string("s3cret"))
                                   .add("endpoint", std::string("tcp://w1"))));
  EXPECT_EQ(nodes_of(out.at(0).payload().find("members")), std::vector<std::string>{"w1"});
  const auto ask_about_head = [&] {
    return request("c1", "member", std::move(map_builder().add("node", std::string("head"))));
  };
  out = ask_about_head();
  ASSERT_EQ(out.at(0).env.header.type, "error");
  EXPECT_EQ(out[0].payload().get_string("code").value(), "UNAVAILABLE");
  EXPECT_NE(out[0].payload().get_string("message").value().find("has not joined yet"),
            std::string::npos);
  (void)head_.on_tick(t0_ + 5ms);
  out = request("h", "join",
                std::move(map_builder()
                              .add("token", std::string("s3cret"))
                              .add("endpoint", std::string("tcp://head-node"))
                              .add("head", true)
                              .add("watch", true)));
  ASSERT_EQ(out.at(0).payload().get_string("node").value(), "head");
  auto pushed = decoded(head_.on_tick(t0_ + 10ms));
  ASSERT_EQ(pushed.size(), 2u);  // the head's node and the worker
  ASSERT_EQ(pushed[1].identity, "c1");
  const msgpack::object* records = pushed[1].payload().find("members");
  ASSERT_EQ(nodes_of(records), std::vector<std::string>{"head"});
  EXPECT_EQ(map_view::of(records->via.array.ptr[0], "m")->get_string("endpoint").value(),
            "tcp://head-node");
  out = ask_about_head();
  ASSERT_EQ(out.at(0).env.header.type, "member");
  EXPECT_EQ(out[0].payload().get_string("endpoint").value(), "tcp://head-node");
}

TEST_F(HeadLogicTest, ClientsThatDidNotJoinNeedTheTokenForEverything) {
  EXPECT_EQ(request("c1", "status")[0].payload().get_string("code").value(), "PERMISSION_DENIED");
  EXPECT_EQ(request("c1", "heartbeat")[0].payload().get_string("code").value(),
            "PERMISSION_DENIED");
  auto out = request("c1", "status", std::move(map_builder().add("token", std::string("s3cret"))));
  EXPECT_EQ(out[0].env.header.type, "status");
  EXPECT_EQ(head_.take_rejections(),
            (std::vector<std::string>{"unauthenticated", "unauthenticated"}));
}

// What a job publishes under "job/" in the store is part of the status, by name.
TEST_F(HeadLogicTest, StatusShowsWhatTheJobPublishes) {
  join("c1", "tcp://w1");
  request("c1", "kv.set",
          std::move(map_builder()
                        .add("key", std::string("job/trainer_group"))
                        .add_bin("value", R"({"generation":2})")));
  request("c1", "kv.set",
          std::move(map_builder().add("key", std::string("jobless")).add_bin("value", "x")));
  auto out = request("c1", "status");
  ASSERT_EQ(out[0].env.header.type, "status");
  const msgpack::object* job = out[0].payload().find("job");
  ASSERT_NE(job, nullptr);
  ASSERT_EQ(job->type, msgpack::type::MAP);
  ASSERT_EQ(job->via.map.size, 1u);
  EXPECT_EQ(job->via.map.ptr[0].key.as<std::string>(), "trainer_group");
  EXPECT_EQ(job->via.map.ptr[0].val.as<std::string>(), R"({"generation":2})");
}

TEST_F(HeadLogicTest, UnknownTypesAreRefusedAndCounted) {
  auto out = request("c1", "frobnicate");
  EXPECT_EQ(out[0].payload().get_string("code").value(), "UNIMPLEMENTED");
  EXPECT_EQ(head_.take_rejections(), std::vector<std::string>{"unknown_type"});
}

TEST_F(HeadLogicTest, SilentMembersAreDeclaredDeadAndRefusedAfterwards) {
  join("c1", "tcp://w1");
  join("c2", "tcp://w2");
  EXPECT_EQ(request("c2", "heartbeat", {}, 250ms)[0].env.header.type, "heartbeat.ok");
  auto out = decoded(head_.on_tick(t0_ + 350ms));
  ASSERT_EQ(out.size(), 1u);  // members push to w2 only
  EXPECT_EQ(out[0].identity, "c2");
  auto notices = head_.take_notices();
  ASSERT_EQ(notices.back().type, "member_dead");
  EXPECT_EQ(notices.back().node, "w1");
  auto refused = request("c1", "heartbeat", {}, 400ms);
  EXPECT_EQ(refused[0].payload().get_string("code").value(), "FAILED_PRECONDITION");
}

TEST_F(HeadLogicTest, KeyValueStoreWithWaiters) {
  join("c1", "tcp://w1");
  (void)head_.on_tick(t0_);  // the join's members push
  auto waiting =
      request("c1", "kv.wait", std::move(map_builder().add("key", std::string("nccl/id"))));
  EXPECT_TRUE(waiting.empty());  // answered when the key appears
  const uint64_t wait_corr = corr_;
  auto out = request("c2", "kv.set",
                     std::move(map_builder()
                                   .add("token", std::string("s3cret"))
                                   .add("key", std::string("nccl/id"))
                                   .add_bin("value", "\x01\x02")));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].identity, "c1");
  EXPECT_EQ(out[0].env.header.corr, wait_corr);
  EXPECT_EQ(out[0].payload().get_bytes("value").value(), "\x01\x02");
  EXPECT_EQ(out[1].env.header.type, "kv.ok");

  out = request("c1", "kv.add",
                std::move(map_builder().add("key", std::string("n")).add("delta", 3)));
  EXPECT_EQ(out[0].payload().get_int("value", 0).value(), 3);
  out = request("c1", "kv.get", std::move(map_builder().add("key", std::string("missing"))));
  EXPECT_EQ(out[0].payload().get_string("code").value(), "NOT_FOUND");

  (void)request("c1", "kv.wait",
                std::move(map_builder().add("key", std::string("late")).add("timeout_ms", 50)));
  auto expired = decoded(head_.on_tick(t0_ + 60ms));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].payload().get_string("code").value(), "DEADLINE_EXCEEDED");
}

TEST_F(HeadLogicTest, ActorsAreLocatedOnTheirMember) {
  join("c1", "tcp://w1");
  (void)request("c1", "actors",
                std::move(map_builder().add("actors", std::vector<std::string>{"rot/0"})));
  auto out = request("c1", "resolve", std::move(map_builder().add("name", std::string("rot/0"))));
  EXPECT_EQ(out[0].payload().get_string("node").value(), "w1");
  EXPECT_EQ(out[0].payload().get_string("endpoint").value(), "tcp://w1");
  out = request("c1", "resolve", std::move(map_builder().add("name", std::string("rot/9"))));
  EXPECT_EQ(out[0].payload().get_string("code").value(), "NOT_FOUND");
}

TEST_F(HeadLogicTest, ShutdownReachesEveryWorker) {
  join("c1", "tcp://w1");
  join("c2", "tcp://w2");
  auto out = decoded(head_.shutdown("done"));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].env.header.type, "shutdown");
  EXPECT_EQ(out[0].payload().get_string("reason").value(), "done");
}

TEST_F(HeadLogicTest, RetireStopsOneWorkerAndCountsItAsDeparted) {
  const std::string w1 = join("c1", "tcp://w1");
  const std::string w2 = join("c2", "tcp://w2");
  (void)head_.take_notices();
  auto out = decoded(head_.retire(w2, "fewer workers"));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].identity, "c2");
  EXPECT_EQ(out[0].env.header.type, "shutdown");
  EXPECT_EQ(out[0].payload().get_string("reason").value(), "fewer workers");
  EXPECT_EQ(head_.members().find(w2)->state, member_state::left);
  EXPECT_EQ(head_.members().find(w1)->state, member_state::alive);
  auto notices = head_.take_notices();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0].type, "member_left");
  // The next tick tells the others; a second retire, or one of an unknown node, does nothing.
  EXPECT_FALSE(decoded(head_.on_tick(t0_ + 10ms)).empty());
  EXPECT_TRUE(head_.retire(w2, "again").empty());
  EXPECT_TRUE(head_.retire("w99", "unknown").empty());
}

}  // namespace
}  // namespace troupe::cluster
