#include "actors/state_transfer.hpp"

#include <map>
#include <set>

#include <gtest/gtest.h>

namespace troupe::actors {
namespace {

constexpr int64_t total = 1001;  // not a multiple of any world size below

// Carries the plan out on simulated members: every piece must come from a member that holds it
// (a current one, over its ranges in the basis world `basis_ranks`), and every member's new
// buffers must be filled over the new world's ranges, each element exactly once. Returns the number
// of distinct peers each member received from.
std::vector<int> carry_out(const std::vector<member_state>& members, int basis_ranks, int64_t steps,
                           const state_split& split, const std::vector<state_piece>& plan) {
  const int m = static_cast<int>(members.size());
  auto holds = [&](int j, state_buffer b, int64_t i) {
    const member_state& s = members[j];
    if (s.basis_rank < 0 || s.steps != steps) return false;
    if (b == state_buffer::params) return true;
    const state_split::range r = b == state_buffer::moments
                                     ? split.moments(s.basis_rank, basis_ranks)
                                     : split.replica(s.basis_rank, basis_ranks);
    return i >= r.begin && i < r.end;
  };
  std::map<std::tuple<int, state_buffer, int64_t>, int> writes;
  std::vector<std::set<int>> peers(m);
  for (const state_piece& p : plan) {
    for (int64_t i = p.begin; i < p.end; ++i) {
      EXPECT_TRUE(holds(p.from, p.from_buffer, i)) << "member " << p.from << " does not hold " << i;
      ++writes[{p.to, p.to_buffer, i}];
    }
    if (p.from != p.to) peers[p.to].insert(p.from);
  }
  for (int j = 0; j < m; ++j) {
    for (state_buffer b : {state_buffer::params, state_buffer::moments, state_buffer::replica}) {
      const state_split::range r = b == state_buffer::params    ? state_split::range{0, total}
                                   : b == state_buffer::moments ? split.moments(j, m)
                                                                : split.replica(j, m);
      for (int64_t i = r.begin; i < r.end; ++i) {
        auto it = writes.find({j, b, i});
        EXPECT_TRUE(it != writes.end() && it->second == 1)
            << "member " << j << " buffer " << static_cast<int>(b) << " element " << i;
      }
    }
  }
  std::vector<int> counts;
  for (const auto& p : peers)
    counts.push_back(static_cast<int>(p.size()));
  return counts;
}

const state_split zero1_replicas{total, true, true};
const state_split zero1{total, true, false};
const state_split zero0{total, false, false};

TEST(StateTransfer, ShardRangesCoverTheBufferAndReplicasAreTheNextRanks) {
  int64_t covered = 0;
  for (int r = 0; r < 3; ++r) {
    covered += zero1.moments(r, 3).end - zero1.moments(r, 3).begin;
    EXPECT_EQ(zero1_replicas.replica(r, 3).begin, zero1.moments((r + 1) % 3, 3).begin);
  }
  EXPECT_EQ(covered, total);
  EXPECT_EQ(zero1.replica(0, 3).end, 0);           // no replicas asked for
  EXPECT_EQ(zero1_replicas.replica(0, 1).end, 0);  // alone: nobody to lose the shard to
  EXPECT_EQ(zero0.moments(2, 3).end, total);
}

TEST(StateTransfer, ALostRanksShardComesFromItsReplica) {
  for (int lost = 0; lost < 3; ++lost) {
    std::vector<member_state> members;
    for (int r = 0; r < 3; ++r)
      if (r != lost) members.push_back({r, 7});
    auto plan = plan_state_transfer(members, 3, 7, zero1_replicas);
    ASSERT_TRUE(plan.ok()) << plan.status();
    carry_out(members, 3, 7, zero1_replicas, *plan);
  }
}

TEST(StateTransfer, WithoutAReplicaALostShardAsksForACheckpoint) {
  auto plan = plan_state_transfer({{0, 7}, {2, 7}}, 3, 7, zero1);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(plan.status().message().find("shard of rank 1"), std::string::npos) << plan.status();
  // A rank and the one keeping its replica lost together.
  plan = plan_state_transfer({{0, 7}, {3, 7}}, 4, 7, zero1_replicas);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition) << plan.status();
  // Two losses that are not neighbours leave every shard somewhere.
  std::vector<member_state> members = {{1, 7}, {3, 7}};
  plan = plan_state_transfer(members, 4, 7, zero1_replicas);
  ASSERT_TRUE(plan.ok()) << plan.status();
  carry_out(members, 4, 7, zero1_replicas, *plan);
}

TEST(StateTransfer, AJoinerPullsItsStateFromSeveralPeersAtOnce) {
  for (const state_split& split : {zero0, zero1, zero1_replicas}) {
    std::vector<member_state> members = {{0, 4}, {1, 4}, {-1, -1}};
    auto plan = plan_state_transfer(members, 2, 4, split);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const std::vector<int> peers = carry_out(members, 2, 4, split, *plan);
    EXPECT_EQ(peers[2], 2) << "the joiner pulls from both survivors";
  }
}

TEST(StateTransfer, ZeroZeroBringsABehindRankForwardAndRefusesOneAhead) {
  std::vector<member_state> members = {{0, 5}, {1, 6}, {2, 6}};
  auto plan = plan_state_transfer(members, 3, 6, zero0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  carry_out(members, 3, 6, zero0, *plan);
  EXPECT_EQ(plan_state_transfer(members, 3, 5, zero0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A ZeRO shard cannot be brought forward: the step is rolled back on every rank instead.
  EXPECT_EQ(plan_state_transfer(members, 3, 6, zero1_replicas).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(StateTransfer, InconsistentMembersAreErrors) {
  EXPECT_EQ(plan_state_transfer({{0, 1}, {0, 1}}, 2, 1, zero0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(plan_state_transfer({{2, 1}}, 2, 1, zero0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(plan_state_transfer({{-1, -1}, {-1, -1}}, 2, 1, zero0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(StateTransfer, AnUnchangedGroupCopiesWithinEachRank) {
  std::vector<member_state> members = {{0, 3}, {1, 3}, {2, 3}};
  auto plan = plan_state_transfer(members, 3, 3, zero1_replicas);
  ASSERT_TRUE(plan.ok());
  for (const state_piece& p : *plan)
    EXPECT_EQ(p.from, p.to);
  carry_out(members, 3, 3, zero1_replicas, *plan);
}

}  // namespace
}  // namespace troupe::actors
