#include "actors/digest_sink.hpp"

#include <gtest/gtest.h>

namespace troupe::actors {
namespace {

TEST(DigestSink, DigestDependsOnOrderAndBoundaries) {
  digest_sink a, b, c;
  ASSERT_TRUE(a.consume(0, "ab").ok());
  ASSERT_TRUE(a.consume(1, "c").ok());
  ASSERT_TRUE(b.consume(0, "a").ok());
  ASSERT_TRUE(b.consume(1, "bc").ok());
  ASSERT_TRUE(c.consume(0, "ab").ok());
  ASSERT_TRUE(c.consume(1, "c").ok());
  EXPECT_NE(a.report().digest, b.report().digest);
  EXPECT_EQ(a.report().digest, c.report().digest);
  EXPECT_EQ(a.report().items, 2u);
  EXPECT_EQ(a.report().bytes, 3u);
}

TEST(DigestSink, KnownValue) {
  digest_sink empty;
  EXPECT_EQ(empty.report().digest, "fnv1a64:cbf29ce484222325");
  digest_sink one;
  ASSERT_TRUE(one.consume(0, "").ok());
  // FNV-1a of the single byte 0x00.
  EXPECT_EQ(one.report().digest, "fnv1a64:af63bd4c8601b7df");
}

TEST(DigestSink, RejectsOutOfOrderItems) {
  digest_sink s;
  auto status = s.consume(1, "x");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            "digest sink received item 1 but expected item 0; items must arrive in sequence order");
}

}  // namespace
}  // namespace troupe::actors
