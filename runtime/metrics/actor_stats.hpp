#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>

#include "runtime/metrics/cycle_clock.hpp"

namespace troupe::metrics {

/// Per-actor message statistics, written by the actor itself on every message and read
/// concurrently by the health monitor and metric exporters.
///
/// There is exactly one writer (an actor runs on one thread at a time), so updates are plain
/// relaxed load/store pairs instead of read-modify-write atomics: the hot path stays a few
/// nanoseconds, and readers see values that are at worst one message old.
///
/// What is exact and what is sampled: every message is counted, and the start of the one
/// running is marked on the coarse clock (its age is right to a few milliseconds). Durations
/// (busy time, the histogram, the maximum) come from the messages that are timed: every one
/// while the last timed one took at least `time_all_above_nanos`, and one in `sampling_stride`
/// otherwise, each standing for the messages it was picked among (its weight). The stride is
/// chosen before the message runs, so the estimates are unbiased; an actor with long handlers
/// (a trainer's step) is timed exactly, and one with sub-microsecond handlers pays for the cycle
/// counter once in 16 messages.
class actor_stats {
 public:
  static constexpr uint64_t sampling_stride = 16;
  static constexpr uint64_t time_all_above_nanos = 20000;

  /// Histogram bucket upper bounds: 1 us, 4 us, 16 us, ... 4 s (powers of 4), then +Inf.
  static constexpr int bucket_count = 13;
  static constexpr double bucket_bound_seconds(int i) {
    double b = 1e-6;
    for (int k = 0; k < i; ++k)
      b *= 4;
    return b;
  }

  /// Marks the start of handling a message, at coarse_clock time `start` (now). Returns whether
  /// to time it (then end it with `record_timed`, else with `record_untimed`).
  bool begin(uint64_t start = coarse_clock::now()) {
    handler_start_.store(start, std::memory_order_relaxed);
    if (countdown_ == 0) return true;
    --countdown_;
    return false;
  }

  /// Ends a message that `begin` chose to time; it took `nanos`.
  void record_timed(uint64_t nanos) {
    record(nanos, stride_);
    stride_ = nanos >= time_all_above_nanos ? 1 : sampling_stride;
    countdown_ = stride_ - 1;
  }

  /// Ends a message that `begin` chose not to time.
  void record_untimed() {
    handler_start_.store(0, std::memory_order_relaxed);
    bump(messages_);
  }

  /// Records one handled message that took `nanos` (every message timed: a communicator's
  /// operations), standing for `weight` messages' durations.
  void record(uint64_t nanos, uint64_t weight = 1) {
    handler_start_.store(0, std::memory_order_relaxed);
    bump(messages_);
    add(busy_nanos_, nanos * weight);
    add(buckets_[bucket_of(nanos)], weight);
    if (nanos > max_nanos_.load(std::memory_order_relaxed)) {
      max_nanos_.store(nanos, std::memory_order_relaxed);
    }
  }

  /// Records a mailbox depth sample.
  void record_mailbox_depth(uint64_t depth) {
    mailbox_depth_.store(depth, std::memory_order_relaxed);
    if (depth > mailbox_depth_max_.load(std::memory_order_relaxed)) {
      mailbox_depth_max_.store(depth, std::memory_order_relaxed);
    }
  }

  /// The coarse_clock time at which the handler now running started; 0 when idle.
  [[nodiscard]] uint64_t handler_start() const {
    return handler_start_.load(std::memory_order_relaxed);
  }

  /// Seconds the handler now running has run (to the coarse clock's few milliseconds); 0 when
  /// idle.
  [[nodiscard]] double handler_age_seconds() const {
    const uint64_t start = handler_start();
    const uint64_t now = coarse_clock::now();
    if (start == 0 || now < start) return 0;
    return static_cast<double>(now - start) * 1e-9;
  }
  [[nodiscard]] uint64_t messages() const { return messages_.load(std::memory_order_relaxed); }
  [[nodiscard]] uint64_t busy_nanos() const { return busy_nanos_.load(std::memory_order_relaxed); }
  [[nodiscard]] uint64_t max_nanos() const { return max_nanos_.load(std::memory_order_relaxed); }
  [[nodiscard]] uint64_t bucket(int i) const { return buckets_[i].load(std::memory_order_relaxed); }
  [[nodiscard]] uint64_t mailbox_depth() const {
    return mailbox_depth_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] uint64_t mailbox_depth_max() const {
    return mailbox_depth_max_.load(std::memory_order_relaxed);
  }

  /// The bucket index of a duration: 0 for <= 1 us, then one per factor of 4, capped at +Inf.
  static constexpr int bucket_of(uint64_t nanos) {
    if (nanos <= 1000) return 0;
    const int i = (std::bit_width((nanos - 1) / 1000) + 1) / 2;
    return i < bucket_count - 1 ? i : bucket_count - 1;
  }

 private:
  static void bump(std::atomic<uint64_t>& a) { add(a, 1); }
  static void add(std::atomic<uint64_t>& a, uint64_t n) {
    a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

  // The writer's own: which messages to time.
  uint64_t stride_ = 1;
  uint64_t countdown_ = 0;

  std::atomic<uint64_t> handler_start_{0};
  std::atomic<uint64_t> messages_{0};
  std::atomic<uint64_t> busy_nanos_{0};
  std::atomic<uint64_t> max_nanos_{0};
  std::atomic<uint64_t> mailbox_depth_{0};
  std::atomic<uint64_t> mailbox_depth_max_{0};
  std::array<std::atomic<uint64_t>, bucket_count> buckets_{};
};

}  // namespace troupe::metrics
