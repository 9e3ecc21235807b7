#include "runtime/actor/messages.hpp"

#include <gtest/gtest.h>

#include "runtime/actor/system_config.hpp"

namespace troupe::actor {
namespace {

// Every message type is inspectable: it serializes and reads back unchanged. The control plane
// between processes relies on this, and plugins' custom messages ride on it.
class MessagesTest : public ::testing::Test {
 protected:
  MessagesTest() : cfg_(make_system_config({.scheduler_threads = 1})), system_(*cfg_) {}

  template <class T>
  T round_trip(T value) {
    std::vector<char> buf;
    caf::binary_serializer sink{system_, buf};
    EXPECT_FALSE(sink(value));
    T out;
    caf::binary_deserializer source{system_, buf};
    EXPECT_FALSE(source(out));
    return out;
  }

  std::unique_ptr<caf::actor_system_config> cfg_;
  caf::actor_system system_;
};

TEST_F(MessagesTest, RoundTrip) {
  auto item = round_trip(work_item{7, "payload"});
  EXPECT_EQ(item.seq, 7u);
  EXPECT_EQ(item.payload, "payload");

  auto batch = round_trip(source_batch{{{1, "a"}, {2, "b"}}, 10});
  ASSERT_EQ(batch.items.size(), 2u);
  EXPECT_EQ(batch.items[1].payload, "b");
  EXPECT_EQ(batch.total, 10);

  auto report = round_trip(sink_report{3, 42, "fnv1a64:0"});
  EXPECT_EQ(report.bytes, 42u);
  EXPECT_EQ(report.digest, "fnv1a64:0");

  auto custom = round_trip(custom_message{"my_plugin.hello", {1, 2, 3}});
  EXPECT_EQ(custom.type, "my_plugin.hello");
  EXPECT_EQ(custom.bytes, (std::vector<uint8_t>{1, 2, 3}));

  auto result = round_trip(job_result{false, "", "boom"});
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.error, "boom");
}

TEST_F(MessagesTest, TypesAreRegisteredByName) {
  EXPECT_EQ(system_.types().portable_name(caf::make_rtti_pair<work_item>()),
            "troupe::actor::work_item");
  EXPECT_EQ(system_.types().portable_name(caf::make_rtti_pair<custom_message>()),
            "troupe::actor::custom_message");
}

}  // namespace
}  // namespace troupe::actor
