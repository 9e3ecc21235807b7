#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace troupe::run {

/// One curve of a chart: (x, y) points and a legend label.
struct chart_series {
  std::string label;
  std::vector<std::pair<double, double>> points;
};

/// A line chart: a title, the y axis's label, and its curves against step.
struct line_chart {
  std::string title;
  std::string y_label;
  std::vector<chart_series> series;
};

/// A standalone SVG of `charts` stacked top to bottom, each with axes and ticks, one polyline per
/// series (non-finite points are left out) and a legend. An error when a chart has no finite
/// point.
[[nodiscard]] absl::StatusOr<std::string> line_charts_svg(const std::vector<line_chart>& charts);

}  // namespace troupe::run
