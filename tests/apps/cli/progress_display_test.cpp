#include "apps/cli/progress_display.hpp"

#include <cstdio>

#include <gtest/gtest.h>

namespace troupe::cli {
namespace {

TEST(RenderBar, WithAndWithoutTotal) {
  EXPECT_EQ(render_bar(50, 100, "items", 0, 10), "[#####-----]  50% 50/100 items");
  EXPECT_EQ(render_bar(25000, -1, "items", 12345, 10), "25.0k items  12.3k items/s");
  EXPECT_EQ(render_bar(3, 4, "steps", 0, 0), " 75% 3/4 steps");
  EXPECT_EQ(render_bar(100, 700, "steps", 4, 0), " 14% 100/700 steps  4 steps/s  ETA 2m30s");
}

TEST(RenderBar, RemainingTimes) {
  EXPECT_EQ(eta(41.6), "42s");
  EXPECT_EQ(eta(185), "3m05s");
  EXPECT_EQ(eta(3720), "1h02m");
}

std::string shown(bool live, const std::vector<nlohmann::json>& events) {
  char* buf = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&buf, &size);
  {
    progress_display d(out, live);
    for (const auto& e : events)
      d.on_event(e);
    d.finish();
  }
  std::fclose(out);
  std::string text(buf, size);
  std::free(buf);
  return text;
}

TEST(ProgressDisplay, PlainOutputForLogs) {
  const std::string text = shown(
      false,
      {
          {{"t", 0.0}, {"event", "progress"}, {"done", 0}, {"total", 10}},
          {{"t", 1.0}, {"event", "progress"}, {"done", 5}, {"total", 10}},  // within 5 s: skipped
          {{"t", 2.0},
           {"event", "actor_failed"},
           {"severity", "warning"},
           {"message", "a/0 failed"}},
          {{"t", 3.0}, {"event", "tick"}, {"severity", "debug"}, {"message", "hidden"}},
          {{"t", 4.0},
           {"event", "progress"},
           {"done", 10},
           {"total", 10},
           {"detail", "loss 2.500"}},
      });
  EXPECT_EQ(text,
            "[    0.0s] progress:   0% 0/10 items\n"
            "[    2.0s] warning: a/0 failed\n"
            "[    4.0s] progress: 100% 10/10 items  2 items/s  loss 2.500\n");
}

TEST(ProgressDisplay, LiveBarIsRedrawnInPlace) {
  const std::string text = shown(
      true, {
                {{"t", 0.0}, {"event", "progress"}, {"done", 1}, {"total", 2}},
                {{"t", 1.0}, {"event", "job_started"}, {"severity", "info"}, {"message", "hi"}},
            });
  EXPECT_NE(text.find("\r\033[K["), std::string::npos);
  EXPECT_NE(text.find("hi\n"), std::string::npos);
  EXPECT_EQ(text.substr(text.size() - 4), "\r\033[K");  // finish() clears the bar
}

}  // namespace
}  // namespace troupe::cli
