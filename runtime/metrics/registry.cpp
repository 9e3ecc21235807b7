#include "runtime/metrics/registry.hpp"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/metrics/exposition.hpp"

namespace troupe::metrics {
namespace {

std::string series_name(const std::string& name, const labels& l) {
  if (l.empty()) return name;
  std::string out = name + "{";
  for (size_t i = 0; i < l.size(); ++i) {
    absl::StrAppend(&out, i ? "," : "", l[i].first, "=\"", escape_label_value(l[i].second), "\"");
  }
  return out + "}";
}

std::string number(double v) {
  return absl::StrFormat("%.9g", v);
}

// `name{labels, le=...}`: a histogram's bucket series.
std::string bucket_name(const std::string& name, labels l, const std::string& le) {
  l.emplace_back("le", le);
  return series_name(name + "_bucket", l);
}

}  // namespace

histogram::histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      counts_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {}

void histogram::observe(double v) {
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  double sum = sum_.load(std::memory_order_relaxed);
  while (!sum_.compare_exchange_weak(sum, sum + v, std::memory_order_relaxed)) {
  }
}

uint64_t histogram::count() const {
  uint64_t n = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i)
    n += bucket(i);
  return n;
}

template <class M, class... Args>
M& registry::get(std::map<std::string, family<M>>& families, const std::string& name,
                 const std::string& help, const labels& l, const Args&... args) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& fam = families[name];
  if (fam.help.empty()) fam.help = help;
  auto& slot = fam.series[l];
  if (!slot) slot = std::make_unique<M>(args...);
  return *slot;
}

counter& registry::get_counter(const std::string& name, const std::string& help, const labels& l) {
  return get(counters_, name, help, l);
}

gauge& registry::get_gauge(const std::string& name, const std::string& help, const labels& l) {
  return get(gauges_, name, help, l);
}

histogram& registry::get_histogram(const std::string& name, const std::string& help,
                                   const std::vector<double>& bounds, const labels& l) {
  return get(histograms_, name, help, l, bounds);
}

std::shared_ptr<actor_stats> registry::actor(const std::string& actor) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = actors_[actor];
  if (!slot) slot = std::make_shared<actor_stats>();
  return slot;
}

std::vector<std::string> registry::actor_names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, stats] : actors_)
    names.push_back(name);
  return names;
}

std::string registry::prometheus_text() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [name, fam] : counters_) {
    absl::StrAppend(&out, "# HELP ", name, " ", fam.help, "\n# TYPE ", name, " counter\n");
    for (const auto& [l, c] : fam.series) {
      absl::StrAppend(&out, series_name(name, l), " ", c->value(), "\n");
    }
  }
  for (const auto& [name, fam] : gauges_) {
    absl::StrAppend(&out, "# HELP ", name, " ", fam.help, "\n# TYPE ", name, " gauge\n");
    for (const auto& [l, g] : fam.series) {
      absl::StrAppend(&out, series_name(name, l), " ", number(g->value()), "\n");
    }
  }
  for (const auto& [name, fam] : histograms_) {
    absl::StrAppend(&out, "# HELP ", name, " ", fam.help, "\n# TYPE ", name, " histogram\n");
    for (const auto& [l, h] : fam.series) {
      uint64_t cumulative = 0;
      for (size_t i = 0; i <= h->bounds().size(); ++i) {
        cumulative += h->bucket(i);
        const std::string le = i == h->bounds().size() ? "+Inf" : number(h->bounds()[i]);
        absl::StrAppend(&out, bucket_name(name, l, le), " ", cumulative, "\n");
      }
      absl::StrAppend(&out, series_name(name + "_sum", l), " ", number(h->sum()), "\n",
                      series_name(name + "_count", l), " ", cumulative, "\n");
    }
  }
  if (actors_.empty()) return out;
  absl::StrAppend(&out,
                  "# HELP troupe_actor_messages_total Messages handled by the actor.\n"
                  "# TYPE troupe_actor_messages_total counter\n");
  for (const auto& [actor, s] : actors_) {
    absl::StrAppend(&out, series_name("troupe_actor_messages_total", {{"actor", actor}}), " ",
                    s->messages(), "\n");
  }
  absl::StrAppend(&out,
                  "# HELP troupe_actor_mailbox_depth Messages waiting in the actor's mailbox "
                  "(sampled).\n# TYPE troupe_actor_mailbox_depth gauge\n");
  for (const auto& [actor, s] : actors_) {
    absl::StrAppend(&out, series_name("troupe_actor_mailbox_depth", {{"actor", actor}}), " ",
                    s->mailbox_depth(), "\n");
  }
  absl::StrAppend(&out,
                  "# HELP troupe_actor_handler_age_seconds How long the handler now running has "
                  "run (0: idle).\n# TYPE troupe_actor_handler_age_seconds gauge\n");
  std::vector<double> ages;
  for (const auto& [actor, s] : actors_) {
    ages.push_back(s->handler_age_seconds());
    absl::StrAppend(&out, series_name("troupe_actor_handler_age_seconds", {{"actor", actor}}), " ",
                    number(ages.back()), "\n");
  }
  absl::StrAppend(&out,
                  "# HELP troupe_actor_stuck 1 while the actor's handler has run longer than "
                  "health.stuck_after_s.\n# TYPE troupe_actor_stuck gauge\n");
  size_t i = 0;
  for (const auto& [actor, s] : actors_) {
    absl::StrAppend(&out, series_name("troupe_actor_stuck", {{"actor", actor}}), " ",
                    ages[i++] > stuck_after_s_.load() ? 1 : 0, "\n");
  }
  absl::StrAppend(&out,
                  "# HELP troupe_actor_handle_seconds Time spent handling one message.\n"
                  "# TYPE troupe_actor_handle_seconds histogram\n");
  for (const auto& [actor, s] : actors_) {
    uint64_t cumulative = 0;
    for (int i = 0; i < actor_stats::bucket_count; ++i) {
      cumulative += s->bucket(i);
      const std::string le = i + 1 == actor_stats::bucket_count
                                 ? "+Inf"
                                 : number(actor_stats::bucket_bound_seconds(i));
      absl::StrAppend(
          &out, series_name("troupe_actor_handle_seconds_bucket", {{"actor", actor}, {"le", le}}),
          " ", cumulative, "\n");
    }
    absl::StrAppend(&out, series_name("troupe_actor_handle_seconds_sum", {{"actor", actor}}), " ",
                    number(s->busy_nanos() * 1e-9), "\n",
                    series_name("troupe_actor_handle_seconds_count", {{"actor", actor}}), " ",
                    cumulative, "\n");
  }
  return out;
}

nlohmann::json registry::to_json() const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json out = {{"counters", nlohmann::json::object()},
                        {"gauges", nlohmann::json::object()},
                        {"histograms", nlohmann::json::object()},
                        {"actors", nlohmann::json::object()}};
  for (const auto& [name, fam] : counters_) {
    for (const auto& [l, c] : fam.series)
      out["counters"][series_name(name, l)] = c->value();
  }
  for (const auto& [name, fam] : gauges_) {
    for (const auto& [l, g] : fam.series)
      out["gauges"][series_name(name, l)] = g->value();
  }
  for (const auto& [name, fam] : histograms_) {
    for (const auto& [l, h] : fam.series) {
      nlohmann::json buckets = nlohmann::json::array();
      uint64_t cumulative = 0;
      for (size_t i = 0; i <= h->bounds().size(); ++i) {
        cumulative += h->bucket(i);
        buckets.push_back(
            {i == h->bounds().size() ? nlohmann::json("+Inf") : nlohmann::json(h->bounds()[i]),
             cumulative});
      }
      out["histograms"][series_name(name, l)] = {
          {"count", cumulative}, {"sum", h->sum()}, {"buckets", buckets}};
    }
  }
  for (const auto& [actor, s] : actors_) {
    out["actors"][actor] = {{"messages", s->messages()},
                            {"busy_seconds", s->busy_nanos() * 1e-9},
                            {"max_handle_seconds", s->max_nanos() * 1e-9},
                            {"mailbox_depth", s->mailbox_depth()},
                            {"mailbox_depth_max", s->mailbox_depth_max()}};
  }
  return out;
}

}  // namespace troupe::metrics
