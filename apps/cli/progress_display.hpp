#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace troupe::cli {

/// Shows a run's events to the person at the terminal. On a terminal, `progress` events drive a
/// live bar redrawn in place, and other events print above it; otherwise progress becomes a
/// plain line every few seconds; a progress event's `detail` (say, the loss) follows the bar.
/// Debug events are not shown (they are in events.jsonl).
///
/// Register `on_event` as an event_log listener; the log serializes the calls.
class progress_display {
 public:
  progress_display(std::FILE* out, bool live) : out_(out), live_(live) {}

  void on_event(const nlohmann::json& event);

  /// Removes the live bar, so that what follows starts on a clean line.
  void finish();

 private:
  void show_progress(const nlohmann::json& event);
  void clear_bar();

  std::FILE* out_;
  bool live_;
  bool bar_visible_ = false;
  double last_plain_t_ = -1e9;
  double rate_t0_ = -1;
  double rate_done0_ = 0;
  std::string last_bar_;
};

/// "42s", "3m05s", "1h02m": a remaining time.
[[nodiscard]] std::string eta(double seconds);

/// Renders a bar such as "[########------------]  42% 2100/5000 items  3.1k items/s  ETA 1s".
[[nodiscard]] std::string render_bar(double done, double total, absl::string_view unit, double rate,
                                     int width);

}  // namespace troupe::cli
