#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace troupe::cluster {

/// The head's key-value store for rendezvous (Gloo and NCCL ids, barriers): set, get, atomic
/// add, and wait-for-key with a deadline. No sockets, no clock: the head's loop passes time in.
class kv_store {
 public:
  using clock = std::chrono::steady_clock;
  /// Identifies a waiting request to the caller (the head maps it to a client and corr).
  using waiter_id = uint64_t;

  /// Keys longer than this are refused.
  static constexpr size_t max_key_bytes = 1024;

  /// Stores `value` under `key`; returns the waiters this releases (they can now `get` it).
  [[nodiscard]] absl::StatusOr<std::vector<waiter_id>> set(absl::string_view key,
                                                           std::string value);

  /// The value under `key`, if any.
  [[nodiscard]] std::optional<std::string> get(absl::string_view key) const;

  /// Adds `delta` to the integer under `key` (missing counts as 0) and returns the new value,
  /// with the waiters this releases. Fails if the key holds something that is not an integer.
  struct add_result {
    int64_t value;
    std::vector<waiter_id> woken;
  };
  [[nodiscard]] absl::StatusOr<add_result> add(absl::string_view key, int64_t delta);

  /// The value under `key` if present; otherwise registers `waiter` until `deadline`.
  [[nodiscard]] absl::StatusOr<std::optional<std::string>> wait(absl::string_view key,
                                                                waiter_id waiter,
                                                                clock::time_point deadline);

  /// Removes and returns the waiters whose deadline has passed.
  [[nodiscard]] std::vector<waiter_id> expire(clock::time_point now);

  /// Drops `waiter` (its client went away).
  void cancel(waiter_id waiter);

  [[nodiscard]] size_t size() const { return values_.size(); }
  /// Every key starting with `prefix` and its value, in key order.
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> with_prefix(
      absl::string_view prefix) const;
  [[nodiscard]] size_t waiting() const;

 private:
  struct waiter {
    waiter_id id;
    clock::time_point deadline;
  };
  static absl::Status check_key(absl::string_view key);
  std::vector<waiter_id> wake(const std::string& key);

  std::map<std::string, std::string, std::less<>> values_;
  std::map<std::string, std::vector<waiter>, std::less<>> waiters_;
};

}  // namespace troupe::cluster
