#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "runtime/metrics/registry.hpp"

namespace troupe::metrics {

/// A label value as Prometheus text writes it: backslash, double quote and newline escaped.
[[nodiscard]] std::string escape_label_value(absl::string_view v);

/// One process's Prometheus text exposition (registry::prometheus_text), with the labels that
/// say whose it is, e.g. {{"node", "w1"}, {"role", "worker"}}.
struct exposition_source {
  labels identity;
  std::string text;
};

/// What merge_expositions made of its sources.
struct merged_exposition {
  std::string text;
  /// Lines that were neither a comment nor a well-formed sample (a peer's text is outside
  /// input), dropped.
  size_t dropped_lines = 0;
};

/// The sources as one exposition, as a Prometheus federation endpoint serves them: each family
/// once, with the HELP and TYPE of the first source that has it, followed by its series from every
/// source in order, each with the source's identity labels first. A series that carries an
/// identity label already keeps it as `exported_<name>` (Prometheus' honor_labels: false). A
/// family without TYPE is `untyped`.
[[nodiscard]] merged_exposition merge_expositions(const std::vector<exposition_source>& sources);

/// One sample of an exposition.
struct sample {
  std::string family;      ///< e.g. "troupe_actor_handle_seconds" for its "_bucket" series
  std::string series;      ///< the metric name and labels as written, e.g. `x_total{actor="a/0"}`
  std::string name;        ///< the metric name alone, e.g. "troupe_actor_handle_seconds_bucket"
  metrics::labels labels;  ///< unescaped
  double value = 0;
};

/// The well-formed samples of `text`, in order (others are skipped).
[[nodiscard]] std::vector<sample> parse_samples(absl::string_view text);

}  // namespace troupe::metrics
