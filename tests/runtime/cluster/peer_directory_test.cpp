#include "runtime/cluster/peer_directory.hpp"

#include <gtest/gtest.h>

namespace troupe::cluster {
namespace {

peer alive(const std::string& node) {
  return {.node = node, .endpoint = "tcp://10.0.0.1:" + node};
}

peer dead(const std::string& node) {
  return {.node = node, .endpoint = "tcp://10.0.0.1:" + node, .state = member_state::dead};
}

std::function<std::string()> bytes(const std::string& s) {
  return [s] { return s; };
}

TEST(PeerDirectory, EnvelopesToAnUnknownMemberWaitForTheHeadsAnswerThenLeaveInOrder) {
  peer_directory d;
  auto first = d.outgoing("w2", "a");
  EXPECT_EQ(first.what, peer_directory::decision::held);
  EXPECT_TRUE(first.ask_head);
  auto second = d.outgoing("w2", "b");
  EXPECT_EQ(second.what, peer_directory::decision::held);
  EXPECT_FALSE(second.ask_head) << "one question per member";

  auto r = d.learn("w2", alive("w2"));
  EXPECT_TRUE(r.alive);
  EXPECT_EQ(r.record.endpoint, "tcp://10.0.0.1:w2");
  EXPECT_EQ(r.outgoing, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.incoming.empty());

  auto now = d.outgoing("w2", "c");
  ASSERT_EQ(now.what, peer_directory::decision::pass);
  EXPECT_EQ(now.record->endpoint, "tcp://10.0.0.1:w2");
}

TEST(PeerDirectory, EnvelopesFromAnUnknownMemberWaitUntilTheHeldOnesAreDelivered) {
  peer_directory d;
  auto first = d.incoming("w3", bytes("x"));
  EXPECT_EQ(first.what, peer_directory::decision::held);
  EXPECT_TRUE(first.ask_head);
  EXPECT_EQ(d.incoming("w3", bytes("y")).what, peer_directory::decision::held);

  auto r = d.learn("w3", alive("w3"));
  ASSERT_TRUE(r.alive);
  EXPECT_EQ(r.incoming, (std::vector<std::string>{"x", "y"}));
  // While those are delivered, a newer one must not overtake them: it waits too.
  EXPECT_EQ(d.incoming("w3", bytes("z")).what, peer_directory::decision::held);
  EXPECT_EQ(d.opened("w3"), std::vector<std::string>{"z"});
  EXPECT_TRUE(d.opened("w3").empty());
  EXPECT_EQ(d.incoming("w3", bytes("after")).what, peer_directory::decision::pass);
}

TEST(PeerDirectory, AMemberTheHeadDoesNotKnowIsRefusedAndWhatWaitedIsDropped) {
  peer_directory d;
  (void)d.outgoing("w9", "a");
  (void)d.incoming("w9", bytes("x"));
  (void)d.incoming("w9", bytes("y"));
  auto r = d.learn("w9", std::nullopt);
  EXPECT_FALSE(r.alive);
  EXPECT_TRUE(r.outgoing.empty());
  EXPECT_EQ(r.dropped_incoming, 2u);
  // A departed member stays known as such and is refused without asking again.
  (void)d.outgoing("w8", "a");
  (void)d.learn("w8", peer{.node = "w8", .state = member_state::left});
  const auto refused = d.outgoing("w8", "b");
  EXPECT_EQ(refused.what, peer_directory::decision::refused);
  EXPECT_NE(refused.why.message().find("w8 is not a live member (left)"), std::string::npos)
      << refused.why;
  EXPECT_EQ(d.incoming("w8", bytes("z")).what, peer_directory::decision::refused);
}

TEST(PeerDirectory, MadeUpSendersAreBoundedAndNotKept) {
  peer_directory d;
  for (size_t i = 0; i < peer_directory::max_asking; ++i)
    ASSERT_TRUE(d.incoming("fake" + std::to_string(i), bytes("x")).ask_head);
  const auto refused = d.incoming("one-more", bytes("x"));
  EXPECT_EQ(refused.what, peer_directory::decision::refused);
  EXPECT_NE(refused.why.message().find("being asked about"), std::string::npos) << refused.why;
  // The head knows none of them: nothing stays, and new names may be asked about again.
  for (size_t i = 0; i < peer_directory::max_asking; ++i)
    EXPECT_EQ(d.learn("fake" + std::to_string(i), std::nullopt).dropped_incoming, 1u);
  EXPECT_TRUE(d.known().empty());
  EXPECT_TRUE(d.incoming("one-more", bytes("x")).ask_head);
}

TEST(PeerDirectory, APushedDeathFencesAMemberThisNodeNeverTalkedTo) {
  peer_directory d;
  (void)d.apply({alive("head"), alive("w1")}, 2, false);
  const auto events = d.apply({dead("w7")}, 5, true);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "dead");
  EXPECT_EQ(events[0].node, "w7");
  EXPECT_EQ(events[0].epoch, 5u);
  EXPECT_EQ(d.incoming("w7", bytes("zombie")).what, peer_directory::decision::refused);
  EXPECT_EQ(d.outgoing("w7", "a").what, peer_directory::decision::refused);
}

TEST(PeerDirectory, ADeathPushedWhileTheHeadIsAskedDropsWhatWaitedAndTheLateAnswerChangesNothing) {
  peer_directory d;
  (void)d.outgoing("w4", "a");
  (void)d.incoming("w4", bytes("x"));
  size_t dropped = 0;
  const auto events = d.apply({dead("w4")}, 6, true, &dropped);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "dead");
  EXPECT_EQ(dropped, 1u);
  // The answer was sent before the death: it must not bring the member back.
  const auto late = d.learn("w4", alive("w4"));
  EXPECT_FALSE(late.was_asked);
  EXPECT_FALSE(late.alive);
  EXPECT_TRUE(late.outgoing.empty());
  EXPECT_EQ(d.outgoing("w4", "b").what, peer_directory::decision::refused);
}

TEST(PeerDirectory, AWatcherSeesJoinsAndDeathsOfMembersItKnew) {
  peer_directory d;
  EXPECT_TRUE(d.apply({alive("head"), dead("w0")}, 3, false).empty())
      << "the join's list is the starting point, not news";
  auto joined = d.apply({alive("w1"), alive("w2")}, 4, true);
  ASSERT_EQ(joined.size(), 2u);
  EXPECT_EQ(joined[0].kind, "joined");
  EXPECT_EQ(joined[1].node, "w2");
  auto left = d.apply({peer{.node = "w1", .state = member_state::left}}, 5, true);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].kind, "left");
  EXPECT_TRUE(d.apply({peer{.node = "w1", .state = member_state::left}}, 5, true).empty());
  EXPECT_EQ(d.known().size(), 4u);
}

TEST(PeerDirectory, TooManyEnvelopesWaitingForOneMemberAreRefusedWithWhy) {
  peer_directory d;
  for (size_t i = 0; i < peer_directory::max_waiting; ++i)
    ASSERT_EQ(d.outgoing("w5", "m").what, peer_directory::decision::held);
  const auto refused = d.outgoing("w5", "m");
  EXPECT_EQ(refused.what, peer_directory::decision::refused);
  EXPECT_NE(refused.why.message().find("wait for the head"), std::string::npos) << refused.why;
}

}  // namespace
}  // namespace troupe::cluster
