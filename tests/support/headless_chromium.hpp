#pragma once

// Debian's chromium, headless, for the dashboard's browser tests: loopback only, nothing fetched
// from elsewhere (the page has everything it needs).

#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/subprocess.hpp"

namespace troupe::testing {

/// Loads `url` in headless chromium with `what` ("--dump-dom" prints the page as its scripts
/// left it on stdout; "--screenshot=FILE" writes a PNG). Console messages go to stderr as
/// "CONSOLE" lines. Virtual time lets the page's fetches and scripts finish first.
inline process_result headless_chromium(
    const std::string& url, const std::string& what,
    std::chrono::milliseconds timeout = std::chrono::minutes(2)) {
  return run({"/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu",
              "--enable-logging=stderr", "--v=0", "--virtual-time-budget=30000",
              "--window-size=1280,1400", what, url},
             timeout);
}

/// Checks a dashboard page as `--dump-dom` left it: finished drawing (`?once`), showing each of
/// `shown`, at least `min_charts` curves and none without points, and nothing logged to the
/// console.
inline void expect_dashboard(const process_result& dom, const std::vector<std::string>& shown,
                             size_t min_charts) {
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  EXPECT_NE(dom.out.find("data-ready=\"1\""), std::string::npos) << "the page never finished:\n"
                                                                 << dom.out << dom.err;
  for (const std::string& s : shown)
    EXPECT_NE(dom.out.find(s), std::string::npos) << s << " missing from the page";
  size_t charts = 0;
  const std::regex chart("data-points=\"([0-9]+)\"");
  for (auto it = std::sregex_iterator(dom.out.begin(), dom.out.end(), chart);
       it != std::sregex_iterator(); ++it, ++charts) {
    EXPECT_GT(std::stoi((*it)[1]), 0) << "a curve without points";
  }
  EXPECT_GE(charts, min_charts) << "curves drawn";
  EXPECT_EQ(dom.err.find("CONSOLE"), std::string::npos) << "the page logged:\n" << dom.err;
}

}  // namespace troupe::testing
