#pragma once

// Debian's chromium, headless, for the dashboard's browser tests: loopback only, nothing fetched
// from elsewhere (the page has everything it needs).

#include <regex>
#include <string>
#include <vector>

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

/// The number of points of each chart a dashboard page drew (its data-points attributes).
inline std::vector<int> chart_points(const std::string& dom) {
  std::vector<int> out;
  const std::regex chart("data-points=\"([0-9]+)\"");
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), chart); it != std::sregex_iterator();
       ++it) {
    out.push_back(std::stoi((*it)[1]));
  }
  return out;
}

}  // namespace troupe::testing
