#pragma once

#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "runtime/run/event_log.hpp"

namespace troupe::run {

/// One warning about a run: what went wrong and where.
struct alert {
  std::string kind;     ///< "not_a_number", "throughput_drop" or "collapse"
  std::string field;    ///< the metrics.jsonl field, e.g. "loss"
  std::string message;  ///< for people: what, where, what it was before
};

/// Watches an app's metrics rows (the lines of metrics.jsonl) and warns once per field:
///
/// - a value that is NaN or infinite (JSON null, as nlohmann writes them) in a `loss` field;
/// - a throughput field (`tokens_per_s`, `perf/throughput`) whose last 5 values' median is below
///   half the median of its values before them;
/// - a collapse field (`actor/entropy`, `response_length/mean`) likewise below a tenth (RLHF's
///   entropy or response-length collapse).
///
/// The medians before cover the field's last 1,000 values and need `min_history` of them. The app
/// drivers report every row (docs/observability.md#alerts).
class row_alerts {
 public:
  explicit row_alerts(size_t min_history = 10) : min_history_(min_history) {}

  /// The alerts `row` raises (each field's first only); `where` names the row, e.g. "step 40".
  [[nodiscard]] std::vector<alert> observe(const nlohmann::json& row, const std::string& where);

  /// observe(), each alert a warning event `alert` ({kind, field}) in `events`, which the log
  /// and the terminal show; `where` is "step N" from the row's `step` field.
  void report(const nlohmann::json& row, event_log& events);

 private:
  // Adds `value` to `field`'s values; when the median of the last `recent` is below
  // `fraction` of the median of those before them, both medians.
  std::optional<std::pair<double, double>> below_median(const std::string& field, double value,
                                                        double fraction);

  static constexpr size_t recent = 5;  // one slow row (a checkpoint, an evaluation) is no drop
  static constexpr size_t max_history = 1000;
  size_t min_history_;
  std::map<std::string, std::deque<double>> history_;
  std::set<std::string> warned_;
};

}  // namespace troupe::run
