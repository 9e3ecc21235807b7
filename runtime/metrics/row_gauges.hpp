#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "runtime/metrics/registry.hpp"

namespace troupe::metrics {

/// The gauge name of a metrics.jsonl field: `prefix` and the field in lower case with every
/// other character than a letter or digit as `_`, and abbreviated units spelled out, as
/// Prometheus' naming rules want: ("troupe_rl_", "critic/score/mean") ->
/// "troupe_rl_critic_score_mean", ("troupe_train_", "tokens_per_s") ->
/// "troupe_train_tokens_per_second", ("troupe_rl_", "timing_s/gen") ->
/// "troupe_rl_timing_seconds_gen".
[[nodiscard]] std::string row_gauge_name(absl::string_view prefix, absl::string_view field);

/// Sets one gauge per numeric field of an app's metrics row (a line of metrics.jsonl), so that
/// the head's /metrics and the dashboard show what the app reports: the training loss as
/// troupe_train_loss, RLHF's critic/score/mean as troupe_rl_critic_score_mean.
void set_row_gauges(registry& r, absl::string_view prefix, const nlohmann::json& row);

}  // namespace troupe::metrics
