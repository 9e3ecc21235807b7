#include "runtime/run/event_log.hpp"

#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.hpp"

namespace troupe::run {
namespace {

TEST(EventLog, WritesOneJsonObjectPerLine) {
  testing::temp_dir dir;
  const std::string path = dir.file("events.jsonl");
  {
    auto log = event_log::open(path);
    ASSERT_TRUE(log.ok()) << log.status();
    (*log)->emit(severity::info, "started", "hello", {{"actors", 3}});
    (*log)->emit(severity::warning, "actor_failed", "a/0 failed");
  }
  std::ifstream in(path);
  std::string line;
  std::vector<nlohmann::json> events;
  while (std::getline(in, line))
    events.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["event"], "started");
  EXPECT_EQ(events[0]["actors"], 3);
  EXPECT_EQ(events[0]["severity"], "info");
  EXPECT_EQ(events[1]["severity"], "warning");
  EXPECT_GE(events[1]["t"].get<double>(), events[0]["t"].get<double>());
}

TEST(EventLog, NotifiesListenersFromManyThreads) {
  event_log log;
  int seen = 0;
  log.add_listener([&seen](const nlohmann::json&) { ++seen; });  // called under the log's lock
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&log] {
      for (int i = 0; i < 250; ++i)
        log.emit(severity::debug, "tick", "");
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(seen, 1000);
}

TEST(EventLog, UnwritablePathIsAnError) {
  auto log = event_log::open("/nonexistent-dir/events.jsonl");
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find("/nonexistent-dir/events.jsonl"), absl::string_view::npos);
}

}  // namespace
}  // namespace troupe::run
