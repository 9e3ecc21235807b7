#include "runtime/run/row_alerts.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace troupe::run {
namespace {

bool is_loss(const std::string& field) {
  return field == "loss" || absl::EndsWith(field, "_loss") || absl::EndsWith(field, "/loss");
}

bool is_throughput(const std::string& field) {
  return field == "tokens_per_s" || field == "perf/throughput";
}

bool is_collapse_watched(const std::string& field) {
  return field == "actor/entropy" || field == "response_length/mean";
}

// A field watched for a fall below a fraction of its median.
struct falling {
  bool (*applies)(const std::string& field);
  double fraction;
  const char* fraction_text;
  const char* kind;
  const char* verb;
  const char* cause;
};

constexpr falling watched[] = {
    {is_throughput, 0.5, "half", "throughput_drop", "fell to",
     "a slow or lost rank, or a busier machine"},
    {is_collapse_watched, 0.1, "a tenth", "collapse", "collapsed to",
     "the policy may be degenerating (see samples.jsonl)"},
};

double median_of(std::vector<double> values) {
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), mid, values.end());
  return *mid;
}

}  // namespace

std::optional<std::pair<double, double>> row_alerts::below_median(const std::string& field,
                                                                  double value, double fraction) {
  std::deque<double>& seen = history_[field];
  seen.push_back(value);
  if (seen.size() > max_history) seen.pop_front();
  if (seen.size() < min_history_ + recent) return std::nullopt;
  const auto split = seen.end() - static_cast<std::ptrdiff_t>(recent);
  const double now = median_of({split, seen.end()});
  const double before = median_of({seen.begin(), split});
  if (now < fraction * before) return std::make_pair(now, before);
  return std::nullopt;
}

std::vector<alert> row_alerts::observe(const nlohmann::json& row, const std::string& where) {
  std::vector<alert> out;
  const auto raise = [&](const std::string& kind, const std::string& field,
                         const std::string& message) {
    if (warned_.insert(field).second) out.push_back({kind, field, message});
  };
  for (const auto& [field, value] : row.items()) {
    if (is_loss(field) &&
        (value.is_null() || (value.is_number() && !std::isfinite(value.get<double>())))) {
      raise("not_a_number", field,
            absl::StrFormat("%s is not a number at %s: the run diverged (lower the learning "
                            "rate, or resume from an earlier checkpoint)",
                            field, where));
      continue;
    }
    if (!value.is_number()) continue;
    for (const falling& f : watched) {
      if (!f.applies(field)) continue;
      if (auto drop = below_median(field, value.get<double>(), f.fraction)) {
        raise(f.kind, field,
              absl::StrFormat("%s %s %.4g (the median of the last %d rows) at %s, below %s its "
                              "median before (%.4g): %s",
                              field, f.verb, drop->first, recent, where, f.fraction_text,
                              drop->second, f.cause));
      }
    }
  }
  return out;
}

void row_alerts::report(const nlohmann::json& row, event_log& events) {
  const std::string where =
      row.contains("step") ? absl::StrCat("step ", row["step"].dump()) : "this row";
  for (const alert& a : observe(row, where)) {
    events.emit(severity::warning, "alert", a.message, {{"kind", a.kind}, {"field", a.field}});
  }
}

}  // namespace troupe::run
