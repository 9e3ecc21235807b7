#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace troupe::run {

/// The run's recent events for live readers (the head's `/api/events`): an event_log listener
/// keeps the last `capacity` events, numbered from 1; a reader takes the ones after the last it
/// saw, and may watch for more. Thread-safe.
class event_feed {
 public:
  explicit event_feed(size_t capacity = 2000) : capacity_(capacity) {}

  /// One event as its number and its JSON text.
  struct entry {
    uint64_t id;
    std::string json;
  };

  /// Adds an event (the event_log listener), then calls the watchers.
  void add(const nlohmann::json& event);

  /// The events numbered after `after` still kept (none: empty).
  [[nodiscard]] std::vector<entry> after(uint64_t after);

  /// Calls `*watcher` (which must not wait) after each event added, for as long as it lives.
  void watch(std::weak_ptr<const std::function<void()>> watcher);

 private:
  size_t capacity_;
  std::mutex mu_;
  std::deque<entry> events_;
  uint64_t last_id_ = 0;
  std::vector<std::weak_ptr<const std::function<void()>>> watchers_;
};

}  // namespace troupe::run
