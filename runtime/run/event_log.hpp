#pragma once

#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace troupe::run {

/// How much an event matters to a person watching the run.
enum class severity { debug, info, warning, error };

/// The run's structured event stream: one JSON object per line in `events.jsonl`
/// (`{"t": seconds since start, "event": type, "severity": ..., "message": ..., ...fields}`),
/// also handed to listeners such as the progress display and the log file.
///
/// Thread-safe: actors on any scheduler thread emit directly.
class event_log {
 public:
  using listener = std::function<void(const nlohmann::json& event)>;

  /// An event log that writes to `path` (created or truncated).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<event_log>> open(const std::string& path);

  /// An event log that only notifies listeners (tests, tools).
  event_log();
  ~event_log();
  event_log(const event_log&) = delete;
  event_log& operator=(const event_log&) = delete;

  /// Records one event. `message` is the human-readable line; `fields` are extra JSON members.
  void emit(severity level, absl::string_view type, absl::string_view message,
            nlohmann::json fields = nlohmann::json::object());

  /// Records an event that another process emitted (already a JSON object with "event",
  /// "severity" and "message"); its time is replaced by this log's.
  void forward(nlohmann::json event);

  /// Adds a listener, called under the log's lock for every later event.
  void add_listener(listener fn);

  /// Seconds since the log was created.
  [[nodiscard]] double elapsed_seconds() const;

 private:
  // Writes and notifies; mu_ held.
  void write(const nlohmann::json& event);

  std::mutex mu_;
  std::FILE* file_ = nullptr;
  std::chrono::steady_clock::time_point start_;
  std::vector<listener> listeners_;
};

/// "debug", "info", "warning" or "error".
[[nodiscard]] const char* to_string(severity level);

}  // namespace troupe::run
