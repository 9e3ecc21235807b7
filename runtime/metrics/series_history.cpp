#include "runtime/metrics/series_history.hpp"

#include <cmath>

#include "absl/strings/match.h"
#include "runtime/metrics/exposition.hpp"

namespace troupe::metrics {

void series_history::record(double t, absl::string_view exposition) {
  std::vector<sample> samples = parse_samples(exposition);
  std::lock_guard<std::mutex> lock(mu_);
  ++round_;
  for (sample& s : samples) {
    if (absl::EndsWith(s.name, "_bucket") && s.name != s.family) continue;
    auto it = series_.find(s.series);
    if (it == series_.end()) {
      if (series_.size() >= max_series_) {
        ++refused_;
        continue;
      }
      it = series_.try_emplace(s.series).first;
    }
    points& p = it->second;
    if (p.name.empty()) {
      p.family = s.family;
      p.name = s.name;
      p.labels = std::move(s.labels);
    }
    p.last_round = round_;
    if (p.t.size() < capacity_) {
      p.t.push_back(static_cast<float>(t));
      p.v.push_back(s.value);
    } else {
      p.t[p.next] = static_cast<float>(t);
      p.v[p.next] = s.value;
      p.next = (p.next + 1) % capacity_;
    }
  }
  std::erase_if(series_,
                [&](const auto& kv) { return round_ - kv.second.last_round >= capacity_; });
}

nlohmann::json series_history::of(absl::string_view name, size_t last) const {
  nlohmann::json out = {{"name", name}, {"series", nlohmann::json::array()}};
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [series, p] : series_) {
    if (p.family != name && p.name != name) continue;
    nlohmann::json points = nlohmann::json::array();
    const size_t skipped = last == 0 || last >= p.t.size() ? 0 : p.t.size() - last;
    for (size_t k = skipped; k < p.t.size(); ++k) {
      const size_t i = (p.next + k) % p.t.size();
      const double t = std::round(static_cast<double>(p.t[i]) * 1000) / 1000;  // to the ms
      points.push_back({t, std::isfinite(p.v[i]) ? nlohmann::json(p.v[i]) : nlohmann::json()});
    }
    nlohmann::json labels = nlohmann::json::object();
    for (const auto& [k, v] : p.labels)
      labels[k] = v;
    out["series"].push_back({{"series", series}, {"labels", labels}, {"points", points}});
  }
  return out;
}

std::vector<std::string> series_history::families() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [series, p] : series_)
    if (out.empty() || out.back() != p.family) out.push_back(p.family);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace troupe::metrics
