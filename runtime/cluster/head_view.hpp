#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "runtime/metrics/exposition.hpp"
#include "runtime/metrics/registry.hpp"

namespace troupe::cluster {

/// What the head knows, copied for readers on other threads (its HTTP endpoints): the status
/// and every live worker's latest metrics, as the head thread last published them (a few times
/// a second). Thread-safe.
class head_view {
 public:
  /// A worker's latest metrics text, by node; shared with the head thread, never copied there.
  using metrics_text = std::pair<std::string, std::shared_ptr<const std::string>>;

  /// `head_metrics`: the head process's own registry, read at each `metrics` call.
  explicit head_view(metrics::registry& head_metrics) : head_metrics_(head_metrics) {}

  /// Replaces what readers see: the status (head_logic::status_payload, msgpack) and the
  /// workers' metrics by node. Called by the head thread.
  void publish(std::string status_msgpack, std::vector<metrics_text> worker_metrics);

  /// What `troupe status --json` prints.
  [[nodiscard]] nlohmann::json status() const;

  /// The whole cluster's metrics as one exposition: the head's series labelled
  /// {node="head", role="head"}, each worker's {node="wN", role="worker"}.
  [[nodiscard]] metrics::merged_exposition metrics() const;

 private:
  metrics::registry& head_metrics_;
  mutable std::mutex mu_;
  std::string status_;
  std::vector<metrics_text> worker_metrics_;
};

}  // namespace troupe::cluster
