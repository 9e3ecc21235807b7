#pragma once

// Whether two processes read the same std::chrono::steady_clock, so that a time point one of
// them sends is a time point on the other's clock too.

#include <chrono>
#include <cstdint>
#include <string>

namespace troupe {

/// The identity of this process's steady clock (CLOCK_MONOTONIC): the running kernel's boot id
/// and the process's time-namespace offsets. Processes with the same identity read the same
/// clock; empty where it cannot be told (then it matches nothing).
[[nodiscard]] const std::string& steady_clock_domain();

/// `t` as nanoseconds since the steady clock's epoch, for a message.
[[nodiscard]] inline int64_t steady_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

/// A time point that process `domain` sent as `ns` (steady_ns), on this process's steady
/// clock when the two share it; else `fallback`.
[[nodiscard]] std::chrono::steady_clock::time_point steady_time_from(
    const std::string& domain, int64_t ns, std::chrono::steady_clock::time_point fallback);

}  // namespace troupe
