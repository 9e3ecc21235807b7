#pragma once

// Commands every app's CAF-free driver returns besides its own: an event for the run's log, and
// a timer. (The drivers' actors carry them out the same way.)

#include <chrono>
#include <string>

#include "nlohmann/json.hpp"
#include "runtime/run/event_log.hpp"

namespace troupe::run {

/// An event for the run's log (events.jsonl, the progress line).
struct note {
  severity level;
  std::string kind;
  std::string message;
  nlohmann::json fields;
};

/// Call the driver's on_timer() after `after`.
struct wake_after {
  std::chrono::steady_clock::duration after;
};

}  // namespace troupe::run
