#include "runtime/cluster/kv_store.hpp"

#include <gtest/gtest.h>

namespace troupe::cluster {
namespace {

using clock = kv_store::clock;

TEST(KvStore, SetGetAdd) {
  kv_store kv;
  EXPECT_FALSE(kv.get("a").has_value());
  ASSERT_TRUE(kv.set("a", "1").ok());
  EXPECT_EQ(kv.get("a"), "1");
  EXPECT_EQ(kv.add("a", 4)->value, 5);
  EXPECT_EQ(kv.add("fresh", -2)->value, -2);
  ASSERT_TRUE(kv.set("text", "abc").ok());
  EXPECT_EQ(kv.add("text", 1).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(kv.set("", "x").ok());
  EXPECT_FALSE(kv.set(std::string(2000, 'k'), "x").ok());
  ASSERT_TRUE(kv.set("job/b", "2").ok());
  ASSERT_TRUE(kv.set("job/a", "1").ok());
  ASSERT_TRUE(kv.set("jobs", "x").ok());
  EXPECT_EQ(kv.with_prefix("job/"),
            (std::vector<std::pair<std::string, std::string>>{{"job/a", "1"}, {"job/b", "2"}}));
}

TEST(KvStore, WaitersAreReleasedBySetAndAddOrExpire) {
  kv_store kv;
  const auto t0 = clock::now();
  auto v = kv.wait("gloo/0", 1, t0 + std::chrono::seconds(5));
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->has_value());
  (void)kv.wait("gloo/0", 2, t0 + std::chrono::seconds(5));
  (void)kv.wait("count", 3, t0 + std::chrono::seconds(5));
  (void)kv.wait("never", 4, t0 + std::chrono::seconds(1));
  EXPECT_EQ(kv.waiting(), 4u);
  EXPECT_EQ(kv.set("gloo/0", "id").value(), (std::vector<kv_store::waiter_id>{1, 2}));
  EXPECT_EQ(kv.add("count", 1)->woken, std::vector<kv_store::waiter_id>{3});
  EXPECT_TRUE(kv.expire(t0).empty());
  EXPECT_EQ(kv.expire(t0 + std::chrono::seconds(2)), std::vector<kv_store::waiter_id>{4});
  EXPECT_EQ(kv.waiting(), 0u);
  // A key that exists answers at once.
  EXPECT_EQ(kv.wait("gloo/0", 5, t0)->value(), "id");
}

TEST(KvStore, CancelledWaitersAreForgotten) {
  kv_store kv;
  (void)kv.wait("k", 1, clock::now() + std::chrono::seconds(5));
  kv.cancel(1);
  EXPECT_TRUE(kv.set("k", "v")->empty());
}

}  // namespace
}  // namespace troupe::cluster
