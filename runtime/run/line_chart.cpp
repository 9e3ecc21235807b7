#include "runtime/run/line_chart.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace troupe::run {
namespace {

constexpr double width = 720, height = 420, left = 70, right = 20, top = 40, bottom = 50;
const char* const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd"};

std::string escape(const std::string& text) {
  return absl::StrReplaceAll(text, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}});
}

// About five round tick values covering [lo, hi].
std::vector<double> ticks(double lo, double hi) {
  const double span = hi - lo > 0 ? hi - lo : 1.0;
  const double raw = span / 5, magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / magnitude < 2   ? 2 * magnitude
                      : raw / magnitude < 5 ? 5 * magnitude
                                            : 10 * magnitude;
  std::vector<double> out;
  for (double t = std::ceil(lo / step) * step; t <= hi + 1e-9 * span; t += step)
    out.push_back(t);
  return out;
}

// One chart's elements, its top at `offset`.
absl::StatusOr<std::string> chart_elements(const line_chart& chart, double offset) {
  const std::vector<chart_series>& series = chart.series;
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  }
  if (!std::isfinite(x0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("chart '", chart.title, "': no finite point to draw"));
  }
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  const double pad = 0.05 * (y1 - y0);
  y0 -= pad, y1 += pad;
  auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * (width - left - right); };
  auto py = [&](double y) { return top + (y1 - y) / (y1 - y0) * (height - top - bottom); };

  std::string svg = absl::StrFormat(
      "<g transform=\"translate(0 %g)\">\n<text x=\"%g\" y=\"24\" font-size=\"15\">%s</text>\n",
      offset, left, escape(chart.title));
  for (double t : ticks(x0, x1)) {
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
                          px(t), top, px(t), height - bottom, px(t), height - bottom + 18, t);
  }
  for (double t : ticks(y0, y1)) {
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                          left, py(t), width - right, py(t), left - 6, py(t) + 4, t);
  }
  absl::StrAppendFormat(&svg,
                        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">step</text>\n"
                        "<text x=\"16\" y=\"%.1f\" transform=\"rotate(-90 16 %.1f)\" "
                        "text-anchor=\"middle\">%s</text>\n",
                        (left + width - right) / 2, height - 10, (top + height - bottom) / 2,
                        (top + height - bottom) / 2, escape(chart.y_label));
  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = colors[i % 4];
    std::string points;
    for (const auto& [x, y] : series[i].points) {
      if (std::isfinite(x) && std::isfinite(y)) {
        absl::StrAppendFormat(&points, "%.1f,%.1f ", px(x), py(y));
      }
    }
    absl::StrAppendFormat(&svg,
                          "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
                          "points=\"%s\"/>\n<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"3\" "
                          "fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                          color, points, width - right - 150, top + 10 + 16.0 * i, color,
                          width - right - 132, top + 15 + 16.0 * i, escape(series[i].label));
  }
  svg += "</g>\n";
  return svg;
}

}  // namespace

absl::StatusOr<std::string> line_charts_svg(const std::vector<line_chart>& charts) {
  if (charts.empty()) return absl::InvalidArgumentError("no chart to draw");
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n",
      width, height * static_cast<double>(charts.size()));
  for (size_t i = 0; i < charts.size(); ++i) {
    absl::StatusOr<std::string> elements =
        chart_elements(charts[i], height * static_cast<double>(i));
    if (!elements.ok()) return elements.status();
    svg += *elements;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace troupe::run
