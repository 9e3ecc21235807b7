#include "runtime/metrics/row_gauges.hpp"

#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace troupe::metrics {

std::string row_gauge_name(absl::string_view prefix, absl::string_view field) {
  // Prometheus' naming rules (promtool's lint) want units spelled out.
  static const std::map<std::string, std::string, std::less<>> units = {
      {"s", "seconds"},      {"sec", "seconds"},  {"ms", "milliseconds"}, {"us", "microseconds"},
      {"ns", "nanoseconds"}, {"b", "bytes"},      {"kb", "kilobytes"},    {"mb", "megabytes"},
      {"gb", "gigabytes"},   {"tb", "terabytes"}, {"pb", "petabytes"},    {"m", "minutes"},
      {"h", "hours"},        {"d", "days"}};
  std::string name;
  for (char c : field)
    name += absl::ascii_isalnum(c) ? absl::ascii_tolower(c) : '_';
  std::vector<std::string> parts = absl::StrSplit(name, '_');
  for (size_t i = 0; i < parts.size(); ++i) {
    auto it = units.find(parts[i]);
    if (it == units.end()) continue;
    parts[i] = it->second;
    if (i > 0 && parts[i - 1] == "per") parts[i].pop_back();  // tokens_per_second
  }
  return absl::StrCat(prefix, absl::StrJoin(parts, "_"));
}

void set_row_gauges(registry& r, absl::string_view prefix, const nlohmann::json& row) {
  for (const auto& [field, value] : row.items()) {
    if (!value.is_number()) continue;
    r.get_gauge(row_gauge_name(prefix, field), absl::StrCat("metrics.jsonl's ", field))
        .set(value.get<double>());
  }
}

}  // namespace troupe::metrics
