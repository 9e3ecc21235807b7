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
class actor_stats {
 public:
  /// Histogram bucket upper bounds: 1 us, 4 us, 16 us, ... 4 s (powers of 4), then +Inf.
  static constexpr int bucket_count = 13;
  static constexpr double bucket_bound_seconds(int i) {
    double b = 1e-6;
    for (int k = 0; k < i; ++k)
      b *= 4;
    return b;
  }

  /// Marks the start of handling a message, at cycle_clock tick `start`.
  void begin(uint64_t start) { handler_start_.store(start, std::memory_order_relaxed); }

  /// Records one handled message that took `nanos` to process.
  void record(uint64_t nanos) {
    handler_start_.store(0, std::memory_order_relaxed);
    bump(messages_);
    add(busy_nanos_, nanos);
    bump(buckets_[bucket_of(nanos)]);
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

  /// The cycle_clock tick at which the handler now running started; 0 when idle.
  [[nodiscard]] uint64_t handler_start() const {
    return handler_start_.load(std::memory_order_relaxed);
  }

  /// Seconds the handler now running has run; 0 when idle.
  [[nodiscard]] double handler_age_seconds() const {
    const uint64_t start = handler_start();
    const uint64_t now = cycle_clock::now();
    if (start == 0 || now < start) return 0;
    return static_cast<double>(now - start) * cycle_clock::nanos_per_tick() * 1e-9;
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

  std::atomic<uint64_t> handler_start_{0};
  std::atomic<uint64_t> messages_{0};
  std::atomic<uint64_t> busy_nanos_{0};
  std::atomic<uint64_t> max_nanos_{0};
  std::atomic<uint64_t> mailbox_depth_{0};
  std::atomic<uint64_t> mailbox_depth_max_{0};
  std::array<std::atomic<uint64_t>, bucket_count> buckets_{};
};

}  // namespace troupe::metrics
