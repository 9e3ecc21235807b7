#include "apps/rlhf/rollout_pool.hpp"

#include <gtest/gtest.h>

namespace troupe::apps::rlhf {
namespace {

TEST(RolloutPool, TheFirstSyncFormsTheGroupAndAnUnchangedOneKeepsItsEpoch) {
  rollout_pool pool({"rollout/0", "rollout/1"});
  EXPECT_EQ(pool.begin_sync(), 1u);
  EXPECT_EQ(pool.begin_sync(), 1u);
  EXPECT_FALSE(pool.changed_since_sync());
  EXPECT_EQ(pool.members(), (std::vector<std::string>{"rollout/0", "rollout/1"}));
}

// Requests go round-robin; a lost worker's unfinished ones go to the others, and answers for
// requests it no longer holds are not counted.
TEST(RolloutPool, ALostWorkersUnfinishedRequestsGoToTheOthers) {
  rollout_pool pool({"rollout/0", "rollout/1", "rollout/2"});
  pool.begin_sync();
  const auto assigned = pool.assign({10, 11, 12, 13, 14, 15});
  EXPECT_EQ(assigned.at("rollout/1"), (std::vector<uint64_t>{11, 14}));
  EXPECT_TRUE(pool.finish("rollout/1", 11));
  EXPECT_FALSE(pool.finish("rollout/1", 12)) << "rollout/2 holds 12";
  bool known = false;
  const auto moved = pool.remove("rollout/1", &known);
  EXPECT_TRUE(known);
  EXPECT_TRUE(pool.changed_since_sync());
  size_t again = 0;
  for (const auto& r : moved) {
    EXPECT_NE(r.to, "rollout/1");
    for (uint64_t id : r.ids) {
      EXPECT_EQ(id, 14u) << "only the unfinished request moves";
      EXPECT_TRUE(pool.holds(r.to, id));
      ++again;
    }
  }
  EXPECT_EQ(again, 1u);
  EXPECT_FALSE(pool.holds("rollout/1", 14));
  EXPECT_EQ(pool.unfinished("rollout/1"), 0u);
  EXPECT_EQ(pool.begin_sync(), 2u) << "the next sync forms the group without it";
  EXPECT_EQ(pool.members().size(), 2u);
  pool.remove("nobody", &known);
  EXPECT_FALSE(known);
}

// A joiner waits for the next sync: it gets no request before it holds the current weights.
TEST(RolloutPool, AJoinerGetsRequestsOnlyAfterTheNextSync) {
  rollout_pool pool({"rollout/0"});
  pool.begin_sync();
  EXPECT_TRUE(pool.add("rollout/1"));
  EXPECT_FALSE(pool.add("rollout/1"));
  EXPECT_EQ(pool.assign({1, 2}).size(), 1u) << "only rollout/0 is in the group";
  EXPECT_EQ(pool.begin_sync(), 2u);
  const auto assigned = pool.assign({3, 4});
  EXPECT_EQ(assigned.at("rollout/1"), (std::vector<uint64_t>{4}));
  // A joiner lost before its first sync simply leaves.
  pool.add("rollout/2");
  bool known = false;
  EXPECT_TRUE(pool.remove("rollout/2", &known).empty());
  EXPECT_TRUE(known);
  EXPECT_EQ(pool.begin_sync(), 2u);
}

}  // namespace
}  // namespace troupe::apps::rlhf
