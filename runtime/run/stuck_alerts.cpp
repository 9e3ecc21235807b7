#include "runtime/run/stuck_alerts.hpp"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace troupe::run {
namespace {

std::string label(const metrics::sample& s, const std::string& name) {
  for (const auto& [k, v] : s.labels)
    if (k == name) return v;
  return "";
}

}  // namespace

std::vector<alert> stuck_alerts::observe(const std::vector<metrics::sample>& samples) {
  std::map<std::string, double> age;  // by "node actor"
  for (const auto& s : samples) {
    if (s.name == "troupe_actor_handler_age_seconds") {
      age[absl::StrCat(label(s, "node"), " ", label(s, "actor"))] = s.value;
    }
  }
  std::vector<alert> out;
  std::set<std::string> now;
  for (const auto& s : samples) {
    if (s.name != "troupe_actor_stuck" || s.value < 1) continue;
    const std::string node = label(s, "node");
    const std::string actor = label(s, "actor");
    const std::string key = absl::StrCat(node, " ", actor);
    now.insert(key);
    if (stuck_.count(key) > 0) continue;
    const bool group = absl::EndsWith(actor, "_group");
    out.push_back(
        {group ? "stuck_collective" : "stuck_actor", key,
         group ? absl::StrFormat("%s on %s has waited %.1f s in a collective operation: a rank "
                                 "of its group stopped (troupe top shows which is not stuck)",
                                 actor, node, age[key])
               : absl::StrFormat("%s on %s has been in one handler for %.1f s (past "
                                 "health.stuck_after_s)",
                                 actor, node, age[key])});
  }
  stuck_ = std::move(now);
  return out;
}

void stuck_alerts::report(const std::vector<metrics::sample>& samples, event_log& events) {
  for (const alert& a : observe(samples)) {
    const size_t space = a.field.find(' ');
    events.emit(severity::warning, "alert", a.message,
                {{"kind", a.kind},
                 {"node", a.field.substr(0, space)},
                 {"actor", a.field.substr(space + 1)}});
  }
}

}  // namespace troupe::run
