#pragma once

// The one way a test waits for something another thread or process does: poll the event itself,
// with a bound that only turns a bug into a failure instead of a hang (docs/testing.md).

#include <chrono>
#include <thread>

namespace troupe::testing {

/// Polls `done` until it is true or `limit` has passed; whether it became true.
template <class F>
bool wait_until(F done, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace troupe::testing
