#pragma once

#include <set>
#include <string>
#include <vector>

#include "runtime/metrics/exposition.hpp"
#include "runtime/run/event_log.hpp"
#include "runtime/run/row_alerts.hpp"

namespace troupe::run {

/// Watches the cluster's merged metrics (the head samples them every second) and warns once
/// when an actor becomes stuck (troupe_actor_stuck 1: a handler, or a trainer group's
/// collective operation, past health.stuck_after_s), naming the actor, its node and how long;
/// warned again only after it recovered.
class stuck_alerts {
 public:
  /// The alerts of this sample of the metrics: kind "stuck_actor", or "stuck_collective" for a
  /// trainer's group (an actor named ..._group).
  [[nodiscard]] std::vector<alert> observe(const std::vector<metrics::sample>& samples);

  /// observe(), each alert a warning event `alert` ({kind, node, actor}) in `events`.
  void report(const std::vector<metrics::sample>& samples, event_log& events);

 private:
  std::set<std::string> stuck_;  // "node actor" flagged stuck at the last look
};

}  // namespace troupe::run
