#include "runtime/cluster/membership.hpp"

#include <gtest/gtest.h>

namespace troupe::cluster {
namespace {

using namespace std::chrono_literals;

TEST(Membership, JoinsBumpTheEpochAndGetFreshIds) {
  membership m(500ms, 4);
  const auto t0 = membership::clock::now();
  m.add_head("tcp://h", "host", 1, {}, t0);
  EXPECT_EQ(m.epoch(), 1u);
  EXPECT_EQ(m.join("tcp://a", "host", 2, {.cores = 2}, t0).id, "w1");
  EXPECT_EQ(m.join("tcp://b", "host", 3, {}, t0).id, "w2");
  EXPECT_EQ(m.epoch(), 3u);
  EXPECT_EQ(m.alive().size(), 3u);
  EXPECT_EQ(m.find("w1")->res.cores, 2u);
}

TEST(Membership, SilentMembersDieAndNeverComeBack) {
  membership m(500ms, 4);
  const auto t0 = membership::clock::now();
  m.add_head("tcp://h", "", 0, {}, t0);
  m.join("tcp://a", "", 0, {}, t0);
  m.join("tcp://b", "", 0, {}, t0);
  EXPECT_TRUE(m.heartbeat("w2", t0 + 1500ms).ok());
  EXPECT_TRUE(m.detect_failures(t0 + 1900ms).empty());
  EXPECT_EQ(m.detect_failures(t0 + 2100ms), std::vector<std::string>{"w1"});
  EXPECT_EQ(m.find("w1")->state, member_state::dead);
  EXPECT_EQ(m.find("w1")->removed_epoch, 4u);
  auto back = m.heartbeat("w1", t0 + 2200ms);
  EXPECT_EQ(back.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(back.message().find("declared dead at epoch 4"), absl::string_view::npos);
  EXPECT_EQ(m.heartbeat("nobody", t0).code(), absl::StatusCode::kNotFound);
  // The head is never declared dead.
  EXPECT_EQ(m.find("head")->state, member_state::alive);
}

TEST(Membership, LeavingAndLocatingActors) {
  membership m(500ms, 4);
  const auto t0 = membership::clock::now();
  m.add_head("tcp://h", "", 0, {}, t0);
  m.join("tcp://a", "", 0, {}, t0);
  ASSERT_TRUE(m.set_actors("w1", {"rot/0", "rot/1"}).ok());
  EXPECT_EQ(m.locate("rot/1")->id, "w1");
  EXPECT_EQ(m.locate("rot/2"), nullptr);
  ASSERT_TRUE(m.leave("w1").ok());
  EXPECT_EQ(m.locate("rot/1"), nullptr);
  EXPECT_FALSE(m.leave("w1").ok());
  EXPECT_EQ(m.heartbeat("w1", t0).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace troupe::cluster
