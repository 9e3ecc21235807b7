#include "runtime/run/event_feed.hpp"

#include <gtest/gtest.h>

#include "runtime/run/event_log.hpp"

namespace troupe::run {
namespace {

TEST(EventFeed, NumbersEventsAndKeepsTheLastOnes) {
  event_feed feed(2);
  event_log log;
  log.add_listener([&feed](const nlohmann::json& e) { feed.add(e); });
  log.emit(severity::info, "a", "first");
  log.emit(severity::info, "b", "second");
  log.emit(severity::info, "c", "third");
  const auto kept = feed.after(0);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].id, 2u);
  EXPECT_EQ(nlohmann::json::parse(kept[1].json)["event"], "c");
  EXPECT_EQ(feed.after(2).size(), 1u);
  EXPECT_TRUE(feed.after(3).empty());
}

TEST(EventFeed, CallsItsWatchersWhileTheyLive) {
  event_feed feed;
  int calls = 0;
  auto watcher = std::make_shared<const std::function<void()>>([&] { ++calls; });
  feed.watch(watcher);
  feed.add({{"event", "joined"}});
  EXPECT_EQ(calls, 1);
  watcher.reset();
  feed.add({{"event", "left"}});
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(feed.after(0).size(), 2u);
}

}  // namespace
}  // namespace troupe::run
