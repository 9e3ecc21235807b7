#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace troupe::apps {

/// One curve of a loss plot: (step, loss) points and a legend label.
struct loss_series {
  std::string label;
  std::vector<std::pair<double, double>> points;
};

/// A standalone SVG line chart of loss against step: axes with ticks, one polyline per series
/// (non-finite losses are left out), a legend. An error when no series has a finite point.
[[nodiscard]] absl::StatusOr<std::string> loss_plot_svg(const std::vector<loss_series>& series,
                                                        const std::string& title);

}  // namespace troupe::apps
