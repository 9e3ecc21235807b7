#include "actors/source_reader.hpp"

#include <memory>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/actor/messages.hpp"
#include "runtime/actor/system_config.hpp"

namespace troupe::actors {
namespace {

using namespace std::chrono_literals;

actor::source_batch numbered(uint64_t first, uint64_t count) {
  actor::source_batch batch;
  for (uint64_t seq = first; seq < first + count; ++seq)
    batch.items.push_back({seq, absl::StrCat("r", seq)});
  return batch;
}

TEST(RecordCollector, KeepsConsecutiveAnswersUntilAnEmptyOne) {
  record_collector c("src", 0);
  EXPECT_EQ(c.next(), 0u);
  EXPECT_EQ(c.ask(), 256u);
  EXPECT_FALSE(*c.take(numbered(0, 256)));
  EXPECT_EQ(c.next(), 256u);
  EXPECT_FALSE(*c.take(numbered(256, 3)));  // a short answer need not be the last
  EXPECT_TRUE(*c.take(numbered(259, 0)));
  ASSERT_EQ(c.records().size(), 259u);
  EXPECT_EQ(c.records()[258], "r258");
}

TEST(RecordCollector, MaxRecordsAsksForWhatIsLeftAndEndsThere) {
  record_collector c("src", 300);
  EXPECT_FALSE(*c.take(numbered(0, 256)));
  EXPECT_EQ(c.ask(), 44u);
  EXPECT_TRUE(*c.take(numbered(256, 44)));
  EXPECT_EQ(c.records().size(), 300u);
}

TEST(RecordCollector, AnAnswerOutOfPlaceOrTooLongNamesTheSource) {
  record_collector skipped("data.source corpus/0", 0);
  auto gap = skipped.take(numbered(1, 2));
  EXPECT_EQ(gap.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(gap.status().message(),
                                "data.source corpus/0 answered record 1 where record 0 belongs"))
      << gap.status();
  record_collector capped("src", 10);
  auto long_answer = capped.take(numbered(0, 11));
  EXPECT_TRUE(absl::StrContains(long_answer.status().message(),
                                "src answered 11 records to a request for 10 from record 0"))
      << long_answer.status();
}

class ReadRecordsTest : public ::testing::Test {
 protected:
  ReadRecordsTest() : cfg_(actor::make_system_config({.scheduler_threads = 2})), system_(*cfg_) {}

  std::unique_ptr<caf::actor_system_config> cfg_;
  caf::actor_system system_;
};

TEST_F(ReadRecordsTest, ReadsASourceFromRecordZeroToItsEnd) {
  auto source = system_.spawn([]() -> actor::source_actor::behavior_type {
    return {[](actor::next_atom, uint64_t first, uint32_t max) {
      return numbered(first, first >= 600 ? 0 : std::min<uint64_t>(max, 600 - first));
    }};
  });
  auto records = read_records(system_, source, "src", 0, 10s);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 600u);
  EXPECT_EQ(records->front(), "r0");
  EXPECT_EQ(records->back(), "r599");
  auto first_ten = read_records(system_, source, "src", 10, 10s);
  ASSERT_TRUE(first_ten.ok()) << first_ten.status();
  EXPECT_EQ(first_ten->size(), 10u);
  caf::anon_send_exit(source, caf::exit_reason::user_shutdown);
}

TEST_F(ReadRecordsTest, ASourceThatNeverAnswersTimesOutNamingIt) {
  // Holds every request unanswered for as long as the test runs.
  auto held = std::make_shared<std::vector<caf::typed_response_promise<actor::source_batch>>>();
  auto source = system_.spawn(
      [held](actor::source_actor::pointer self) -> actor::source_actor::behavior_type {
        return {[self, held](actor::next_atom, uint64_t, uint32_t) {
          held->push_back(self->make_response_promise<actor::source_batch>());
          return held->back();
        }};
      });
  auto records = read_records(system_, source, "data.source corpus/1 (source/slow)", 0, 50ms);
  EXPECT_EQ(records.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(records.status().message(),
            "data.source corpus/1 (source/slow) did not answer the request for records from 0 "
            "within 50 ms");
  caf::anon_send_exit(source, caf::exit_reason::user_shutdown);
}

TEST_F(ReadRecordsTest, ASourceThatIsGoneIsAnErrorNamingIt) {
  auto source = system_.spawn([]() -> actor::source_actor::behavior_type {
    return {[](actor::next_atom, uint64_t first, uint32_t) { return numbered(first, 0); }};
  });
  caf::scoped_actor waiter{system_};
  waiter->monitor(source);
  caf::anon_send_exit(source, caf::exit_reason::user_shutdown);
  waiter->receive([](const caf::down_msg&) {});
  auto records = read_records(system_, source, "src", 0, 10s);
  ASSERT_FALSE(records.ok());
  EXPECT_TRUE(absl::StrContains(records.status().message(),
                                "src did not answer the request for records from 0: "))
      << records.status();
}

}  // namespace
}  // namespace troupe::actors
