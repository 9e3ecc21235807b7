#pragma once

#include <chrono>
#include <cstdint>

#include "runtime/config/environment.hpp"

namespace troupe::run {

/// Paces a loop's units of work (an inference engine's iterations, a training run's steps, a
/// test stage's items) by the test hooks, so that a test holds work in flight by construction
/// instead of hoping that a workload is long enough, and can simulate a slower machine:
/// - hold: the loop asks may_start() before each unit. While the hold file exists, this pacer
///   starts at most as many units as the file says (none when it is empty or not a count); the
///   loop asks again `recheck` later. Removing the file releases every held loop.
/// - slowdown: after a unit that took `t`, the loop pauses pause_after(t) = (slowdown - 1) * t,
///   as if it ran on a machine `slowdown` times slower.
/// Without hooks (the default) may_start() is always true and pause_after() is zero.
class work_pacer {
 public:
  /// How long a held loop waits before it asks again.
  static constexpr std::chrono::milliseconds recheck{5};

  work_pacer() = default;
  explicit work_pacer(config::test_hooks hooks) : hooks_(std::move(hooks)) {}

  /// Whether the next unit may start now; counts it when it may.
  [[nodiscard]] bool may_start();

  /// The pause after a unit that took `took`, so that it lasts `slowdown` times as long.
  [[nodiscard]] std::chrono::nanoseconds pause_after(std::chrono::nanoseconds took) const;

  /// Units started so far.
  [[nodiscard]] int64_t started() const { return started_; }

 private:
  config::test_hooks hooks_;
  int64_t started_ = 0;
};

}  // namespace troupe::run
