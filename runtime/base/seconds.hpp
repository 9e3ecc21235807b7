#pragma once

// Durations in seconds, the unit of troupe's metrics and log lines.

#include <chrono>

namespace troupe {

/// `d` in seconds.
template <class Rep, class Period>
[[nodiscard]] double seconds(std::chrono::duration<Rep, Period> d) {
  return std::chrono::duration<double>(d).count();
}

/// Seconds from `start` to now, on the steady clock.
[[nodiscard]] inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return seconds(std::chrono::steady_clock::now() - start);
}

}  // namespace troupe
