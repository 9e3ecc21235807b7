#include "runtime/run/event_feed.hpp"

#include <future>

#include <gtest/gtest.h>

#include "runtime/run/event_log.hpp"

namespace troupe::run {
namespace {

using namespace std::chrono_literals;

TEST(EventFeed, NumbersEventsAndKeepsTheLastOnes) {
  event_feed feed(2);
  event_log log;
  log.add_listener([&feed](const nlohmann::json& e) { feed.add(e); });
  log.emit(severity::info, "a", "first");
  log.emit(severity::info, "b", "second");
  log.emit(severity::info, "c", "third");
  const auto kept = feed.after(0, 0ms);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].id, 2u);
  EXPECT_EQ(nlohmann::json::parse(kept[1].json)["event"], "c");
  EXPECT_EQ(feed.after(2, 0ms).size(), 1u);
  EXPECT_TRUE(feed.after(3, 0ms).empty());
}

TEST(EventFeed, AReaderWaitsForTheNextEvent) {
  event_feed feed;
  auto waiting = std::async(std::launch::async, [&] { return feed.after(0, 30s); });
  ASSERT_EQ(waiting.wait_for(0ms), std::future_status::timeout);
  feed.add({{"event", "joined"}});
  ASSERT_EQ(waiting.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(waiting.get().size(), 1u);
}

TEST(EventFeed, ClosingWakesAReaderWithNothing) {
  event_feed feed;
  auto waiting = std::async(std::launch::async, [&] { return feed.after(0, 30s); });
  feed.close();
  ASSERT_EQ(waiting.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(waiting.get().empty());
}

}  // namespace
}  // namespace troupe::run
