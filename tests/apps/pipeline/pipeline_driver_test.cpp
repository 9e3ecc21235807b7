#include "apps/pipeline/pipeline_driver.hpp"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace troupe::apps {
namespace {

template <class T>
std::vector<T> only(const std::vector<pipeline_driver::command>& cmds) {
  std::vector<T> out;
  for (const auto& c : cmds) {
    if (auto* x = std::get_if<T>(&c)) out.push_back(*x);
  }
  return out;
}

actor::source_batch items(uint64_t first, int n, int64_t total) {
  actor::source_batch b;
  b.total = total;
  for (int i = 0; i < n; ++i)
    b.items.push_back({first + i, absl::StrCat("p", first + i)});
  return b;
}

// A driver whose one stage "st" has `actors` actors, all started.
pipeline_driver with_actors(const pipeline_options& o, int actors) {
  pipeline_driver d(o, {{"st"}});
  for (int i = 0; i < actors; ++i)
    (void)d.on_stage_actor(0, i);
  return d;
}

pipeline_options options(int max_in_flight = 8, int batch = 4, int max_attempts = 3) {
  pipeline_options o;
  o.flow = {"src", "st", "sink"};
  o.max_in_flight = max_in_flight;
  o.batch = batch;
  o.max_attempts = max_attempts;
  return o;
}

TEST(PipelineDriver, DirectSourceToSinkDeliversInOrderAndFinishes) {
  pipeline_driver d(options(), {});
  auto pulls = only<pipeline_driver::pull>(d.start());
  ASSERT_EQ(pulls.size(), 1u);
  EXPECT_EQ(pulls[0].first, 0u);
  EXPECT_EQ(pulls[0].max, 4u);
  auto cmds = d.on_batch(items(0, 2, 2));
  auto delivered = only<pipeline_driver::deliver>(cmds);
  ASSERT_EQ(delivered.size(), 2u);
  EXPECT_EQ(delivered[0].item.seq, 0u);
  ASSERT_EQ(only<pipeline_driver::pull>(cmds).size(), 1u);
  EXPECT_EQ(only<pipeline_driver::pull>(cmds)[0].first, 2u);
  (void)d.on_batch(items(2, 0, 2));  // exhausted
  EXPECT_TRUE(only<pipeline_driver::finish>(d.on_delivered()).empty());
  EXPECT_EQ(only<pipeline_driver::finish>(d.on_delivered()).size(), 1u);
  EXPECT_EQ(d.delivered(), 2u);
  EXPECT_EQ(d.total(), 2);
}

TEST(PipelineDriver, OneItemPerStageActorAndOrderedDelivery) {
  pipeline_driver d = with_actors(options(8, 8), 2);
  (void)d.start();
  auto cmds = d.on_batch(items(0, 3, 3));
  auto sent = only<pipeline_driver::dispatch>(cmds);
  ASSERT_EQ(sent.size(), 2u);  // two actors, one item each; the third waits
  EXPECT_NE(sent[0].instance, sent[1].instance);
  // Item 1 finishes first: it may not overtake item 0 at the sink.
  cmds = d.on_processed(0, sent[1].instance, sent[1].generation, {1, "P1"});
  EXPECT_TRUE(only<pipeline_driver::deliver>(cmds).empty());
  auto third = only<pipeline_driver::dispatch>(cmds);
  ASSERT_EQ(third.size(), 1u);
  EXPECT_EQ(third[0].item.seq, 2u);
  cmds = d.on_processed(0, sent[0].instance, sent[0].generation, {0, "P0"});
  auto delivered = only<pipeline_driver::deliver>(cmds);
  ASSERT_EQ(delivered.size(), 2u);
  EXPECT_EQ(delivered[0].item.payload, "P0");
  EXPECT_EQ(delivered[1].item.payload, "P1");
}

TEST(PipelineDriver, BoundsItemsInFlight) {
  pipeline_driver d = with_actors(options(4, 4), 1);
  (void)d.start();
  auto cmds = d.on_batch(items(0, 4, 100));
  EXPECT_TRUE(only<pipeline_driver::pull>(cmds).empty());  // 4 in flight: no more pulls
  auto sent = only<pipeline_driver::dispatch>(cmds);
  cmds = d.on_processed(0, sent[0].instance, sent[0].generation, {0, "x"});
  EXPECT_TRUE(
      only<pipeline_driver::pull>(cmds).empty());  // processed but not yet accepted by the sink
  cmds = d.on_delivered();
  auto pulls = only<pipeline_driver::pull>(cmds);
  ASSERT_EQ(pulls.size(), 1u);
  EXPECT_EQ(pulls[0].first, 4u);
  EXPECT_EQ(pulls[0].max, 1u);
}

TEST(PipelineDriver, RetriesAFailedItemOnAnotherActor) {
  pipeline_driver d = with_actors(options(), 2);
  (void)d.start();
  auto sent = only<pipeline_driver::dispatch>(d.on_batch(items(0, 1, 1)));
  ASSERT_EQ(sent.size(), 1u);
  auto retry = only<pipeline_driver::dispatch>(
      d.on_process_error(0, sent[0].instance, sent[0].generation, 0, absl::InternalError("boom")));
  ASSERT_EQ(retry.size(), 1u);
  EXPECT_NE(retry[0].instance, sent[0].instance);
  EXPECT_EQ(d.retries(), 1u);
  EXPECT_TRUE(d.failure().ok());
}

TEST(PipelineDriver, FailsAfterMaxAttempts) {
  pipeline_driver d = with_actors(options(8, 4, 2), 1);
  (void)d.start();
  auto sent = only<pipeline_driver::dispatch>(d.on_batch(items(0, 1, 1)));
  sent = only<pipeline_driver::dispatch>(
      d.on_process_error(0, 0, sent[0].generation, 0, absl::InternalError("boom")));
  ASSERT_EQ(sent.size(), 1u);
  auto cmds = d.on_process_error(0, 0, sent[0].generation, 0, absl::InternalError("boom again"));
  EXPECT_TRUE(cmds.empty());
  EXPECT_EQ(d.failure().message(),
            "item 0 failed 2 attempts at stage 'st'; last error: boom again");
}

TEST(PipelineDriver, ADeadActorIsNotTheItemsFaultAndIsUsedAgainAfterRestart) {
  pipeline_driver d = with_actors(options(8, 4, 1), 1);
  (void)d.start();
  auto sent = only<pipeline_driver::dispatch>(d.on_batch(items(0, 1, 1)));
  // Unavailable: the actor was already dead. No attempt is charged, nothing is sent.
  auto cmds = d.on_process_error(0, 0, sent[0].generation, 0, absl::UnavailableError("down"));
  EXPECT_TRUE(d.failure().ok());
  EXPECT_TRUE(only<pipeline_driver::dispatch>(cmds).empty());
  auto resent = only<pipeline_driver::dispatch>(d.on_stage_actor(0, 0));
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(resent[0].item.seq, 0u);
  EXPECT_EQ(resent[0].generation, sent[0].generation + 1);
}

TEST(PipelineDriver, AnswersFromAReplacedActorDoNotFreeItsSuccessor) {
  pipeline_driver d = with_actors(options(8, 8), 1);
  (void)d.start();
  auto first = only<pipeline_driver::dispatch>(d.on_batch(items(0, 2, 2)));
  ASSERT_EQ(first.size(), 1u);
  // The actor is replaced while item 0 is out: its successor takes item 1 at once.
  auto second = only<pipeline_driver::dispatch>(d.on_stage_actor(0, 0));
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].item.seq, 1u);
  EXPECT_EQ(second[0].generation, first[0].generation + 1);
  // The old actor's late error for item 0 must not free the successor, busy with item 1.
  auto cmds = d.on_process_error(0, 0, first[0].generation, 0, absl::InternalError("died"));
  EXPECT_TRUE(only<pipeline_driver::dispatch>(cmds).empty());
  // Once item 1 is done, item 0 gets its retry.
  auto retry =
      only<pipeline_driver::dispatch>(d.on_processed(0, 0, second[0].generation, {1, "P1"}));
  ASSERT_EQ(retry.size(), 1u);
  EXPECT_EQ(retry[0].item.seq, 0u);
}

TEST(PipelineDriver, NothingHappensBeforeStart) {
  pipeline_driver d(options(), {{"st"}});
  EXPECT_TRUE(d.on_stage_actor(0, 0).empty());
  EXPECT_TRUE(d.on_source_replaced().empty());
  EXPECT_EQ(only<pipeline_driver::pull>(d.start()).size(), 1u);
}

TEST(PipelineDriver, StagesWaitForTheirActorsAndGrow) {
  pipeline_driver d(options(8, 8), {{"st"}});
  (void)d.start();
  auto cmds = d.on_batch(items(0, 3, 3));
  EXPECT_TRUE(only<pipeline_driver::dispatch>(cmds).empty());  // no stage actor yet
  auto first = only<pipeline_driver::dispatch>(d.on_stage_actor(0, 0));
  ASSERT_EQ(first.size(), 1u);
  // An elastic stage gains actor 1: it takes work at once.
  auto second = only<pipeline_driver::dispatch>(d.on_stage_actor(0, 1));
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].instance, 1);
  (void)d.on_processed(0, 1, second[0].generation, {second[0].item.seq, "x"});
  (void)d.on_processed(0, 0, first[0].generation, {first[0].item.seq, "y"});
  EXPECT_EQ(d.processed_by(), (std::map<std::string, uint64_t>{{"st/0", 1}, {"st/1", 1}}));
}

TEST(PipelineDriver, SourceErrorsAreRetriedAndUnavailableSourcesAwaited) {
  pipeline_driver d(options(8, 4, 2), {});
  (void)d.start();
  EXPECT_TRUE(only<pipeline_driver::pull>(d.on_pull_error(absl::UnavailableError("down"))).empty());
  EXPECT_EQ(only<pipeline_driver::pull>(d.on_source_replaced()).size(), 1u);
  EXPECT_EQ(
      only<pipeline_driver::pull>(d.on_pull_error(absl::DeadlineExceededError("slow"))).size(), 1u);
  (void)d.on_pull_error(absl::DeadlineExceededError("slow"));
  EXPECT_EQ(d.failure().message(), "the source failed 2 times in a row; last error: slow");
}

TEST(PipelineDriver, RejectsASourceThatSkipsItems) {
  pipeline_driver d(options(), {});
  (void)d.start();
  (void)d.on_batch(items(1, 1, 1));
  EXPECT_EQ(d.failure().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace troupe::apps
