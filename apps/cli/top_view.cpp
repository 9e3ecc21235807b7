#include "apps/cli/top_view.hpp"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace troupe::cli {
namespace {

// The latest non-null value of each series of an /api/series answer, by "node actor".
std::map<std::string, double> latest_by_actor(const nlohmann::json& series) {
  std::map<std::string, double> out;
  for (const auto& s : series.value("series", nlohmann::json::array())) {
    const auto& points = s["points"];
    for (auto it = points.rbegin(); it != points.rend(); ++it) {
      if ((*it)[1].is_number()) {
        out[absl::StrCat(s["labels"].value("node", ""), " ", s["labels"].value("actor", ""))] =
            (*it)[1].get<double>();
        break;
      }
    }
  }
  return out;
}

// The rate over the last (up to) five seconds of a counter's points.
double recent_rate(const nlohmann::json& points) {
  if (points.size() < 2) return 0;
  const auto& b = points.back();
  const auto& a = points[points.size() >= 6 ? points.size() - 6 : 0];
  if (!a[1].is_number() || !b[1].is_number()) return 0;
  const double dt = b[0].get<double>() - a[0].get<double>();
  return dt > 0 ? (b[1].get<double>() - a[1].get<double>()) / dt : 0;
}

}  // namespace

const std::vector<std::string>& top_figure_families() {
  static const std::vector<std::string> families = {"troupe_train_step",
                                                    "troupe_train_loss",
                                                    "troupe_train_val_loss",
                                                    "troupe_train_tokens_per_second",
                                                    "troupe_rl_step",
                                                    "troupe_rl_critic_score_mean",
                                                    "troupe_rl_actor_reward_kl_penalty",
                                                    "troupe_rl_response_length_mean",
                                                    "troupe_serve_queue_depth",
                                                    "troupe_serve_running_sequences",
                                                    "troupe_serve_kv_blocks_in_use"};
  return families;
}

std::vector<top_snapshot::actor_row> top_actor_rows(const nlohmann::json& messages,
                                                    const nlohmann::json& mailbox,
                                                    const nlohmann::json& age,
                                                    const nlohmann::json& stuck) {
  const auto mailbox_of = latest_by_actor(mailbox);
  const auto age_of = latest_by_actor(age);
  const auto stuck_of = latest_by_actor(stuck);
  std::vector<top_snapshot::actor_row> rows;
  for (const auto& s : messages.value("series", nlohmann::json::array())) {
    top_snapshot::actor_row r;
    r.node = s["labels"].value("node", "");
    r.actor = s["labels"].value("actor", "");
    const std::string key = absl::StrCat(r.node, " ", r.actor);
    const auto& points = s["points"];
    if (!points.empty() && points.back()[1].is_number()) r.messages = points.back()[1];
    r.per_second = recent_rate(points);
    if (auto it = mailbox_of.find(key); it != mailbox_of.end()) r.mailbox = it->second;
    if (auto it = age_of.find(key); it != age_of.end()) r.handler_age_s = it->second;
    if (auto it = stuck_of.find(key); it != stuck_of.end()) r.stuck = it->second > 0;
    rows.push_back(std::move(r));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    if (a.stuck != b.stuck) return a.stuck;
    return a.per_second > b.per_second;
  });
  return rows;
}

std::string render_top(const top_snapshot& s, size_t max_actors) {
  const auto members = s.status.value("members", nlohmann::json::array());
  std::string out = absl::StrFormat("troupe top  epoch %d, %d members\n\n",
                                    s.status.value("epoch", int64_t{0}), members.size());
  absl::StrAppend(&out, absl::StrFormat("%-6s %-6s %-10s %-16s %-8s %s\n", "NODE", "STATE",
                                        "HEARTBEAT", "HOST", "PID", "ACTORS"));
  for (const auto& m : members) {
    const std::string heartbeat =
        m.value("head", false) ? "-" : absl::StrCat(m.value("heartbeat_age_ms", 0), " ms");
    absl::StrAppend(&out, absl::StrFormat("%-6s %-6s %-10s %-16s %-8d %d\n", m.value("node", ""),
                                          m.value("state", ""), heartbeat, m.value("host", ""),
                                          m.value("pid", int64_t{0}),
                                          m.value("actors", nlohmann::json::array()).size()));
  }
  if (!s.figures.empty()) {
    absl::StrAppend(&out, "\n");
    for (const auto& [name, value] : s.figures)
      absl::StrAppend(&out, absl::StrFormat("%-36s %.6g\n", name, value));
  }
  absl::StrAppend(&out, "\n",
                  absl::StrFormat("%-6s %-28s %10s %10s %8s %10s\n", "NODE", "ACTOR", "MESSAGES",
                                  "MSG/S", "MAILBOX", "IN HANDLER"));
  for (size_t i = 0; i < s.actors.size() && i < max_actors; ++i) {
    const auto& a = s.actors[i];
    absl::StrAppend(&out,
                    absl::StrFormat("%-6s %-28s %10.0f %10.1f %8.0f %10s%s\n", a.node, a.actor,
                                    a.messages, a.per_second, a.mailbox,
                                    a.handler_age_s > 0 ? absl::StrFormat("%.1f s", a.handler_age_s)
                                                        : std::string("-"),
                                    a.stuck ? "  STUCK" : ""));
  }
  if (s.actors.size() > max_actors) {
    absl::StrAppend(&out, absl::StrFormat("... and %d more\n", s.actors.size() - max_actors));
  }
  return out;
}

}  // namespace troupe::cli
