#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace troupe::run {

/// The run's recent events for live readers (the head's `/api/events`): an event_log listener
/// keeps the last `capacity` events, numbered from 1, and readers wait for the ones after the
/// last they saw. Thread-safe.
class event_feed {
 public:
  explicit event_feed(size_t capacity = 2000) : capacity_(capacity) {}

  /// One event as its number and its JSON text.
  struct entry {
    uint64_t id;
    std::string json;
  };

  /// Adds an event (the event_log listener).
  void add(const nlohmann::json& event);

  /// The events numbered after `after` still kept, waiting up to `timeout` for one if there is
  /// none yet; empty if none came (or the feed was closed).
  [[nodiscard]] std::vector<entry> after(uint64_t after, std::chrono::milliseconds timeout);

  /// Wakes every waiting reader and makes later waits return at once.
  void close();

 private:
  size_t capacity_;
  std::mutex mu_;
  std::condition_variable added_;
  std::deque<entry> events_;
  uint64_t last_id_ = 0;
  bool closed_ = false;
};

}  // namespace troupe::run
