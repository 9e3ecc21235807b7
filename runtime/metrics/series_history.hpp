#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace troupe::metrics {

/// The recent history of every series of an exposition, sampled now and then (the head does it
/// every second), for charts: the last `capacity` points of each series. Histogram buckets are
/// not kept (their _sum and _count are). At most `max_series` series are kept (charts of more
/// would not be read, and each costs its points' memory): a series beyond them is not recorded,
/// and counted (`refused`). Thread-safe.
class series_history {
 public:
  explicit series_history(size_t capacity = 600, size_t max_series = 50000)
      : capacity_(capacity), max_series_(max_series) {}

  /// Records every sample of `exposition` (Prometheus text) at `t` seconds. A series missing
  /// from it (its node gone) keeps its points until it has not been seen for `capacity`
  /// samples.
  void record(double t, absl::string_view exposition);

  /// The points of every series of the family or metric `name`, the last `last` of each (0:
  /// all kept): {"name", "series": [{"series": "name{labels}", "labels": {k: v}, "points":
  /// [[t, v]...]}]}. NaN and infinite values are null.
  [[nodiscard]] nlohmann::json of(absl::string_view name, size_t last = 0) const;

  /// The names of the families recorded.
  [[nodiscard]] std::vector<std::string> families() const;
  /// Samples of series not recorded because `max_series` were kept already.
  [[nodiscard]] uint64_t refused() const {
    std::lock_guard<std::mutex> lock(mu_);
    return refused_;
  }

 private:
  struct points {
    std::string family;
    std::string name;
    std::vector<std::pair<std::string, std::string>> labels;
    std::vector<float> t;  // a ring of capacity_ once full, oldest at `next`
    std::vector<double> v;
    size_t next = 0;
    uint64_t last_round = 0;
  };

  size_t capacity_;
  size_t max_series_;
  mutable std::mutex mu_;
  uint64_t refused_ = 0;
  std::map<std::string, points> series_;  // by "name{labels}"
  uint64_t round_ = 0;
};

}  // namespace troupe::metrics
