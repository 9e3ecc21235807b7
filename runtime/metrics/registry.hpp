#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "runtime/metrics/actor_stats.hpp"

namespace troupe::metrics {

/// Label pairs of one time series, e.g. {{"role", "trainer"}}.
using labels = std::vector<std::pair<std::string, std::string>>;

/// A monotonically increasing count; safe to bump from any thread.
class counter {
 public:
  void inc(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  [[nodiscard]] uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

/// A value that goes up and down; safe to set from any thread.
class gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  [[nodiscard]] double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

/// Counts of observed values in fixed buckets (Prometheus' histogram: each bucket counts the
/// values <= its upper bound, the last one is +Inf), with their sum; safe from any thread.
class histogram {
 public:
  /// `bounds`: the buckets' upper bounds, increasing (+Inf is implied).
  explicit histogram(std::vector<double> bounds);

  void observe(double v);
  [[nodiscard]] const std::vector<double>& bounds() const { return bounds_; }
  /// Values in bucket i alone (not cumulative); i == bounds().size() is the +Inf bucket.
  [[nodiscard]] uint64_t bucket(size_t i) const {
    return counts_[i].load(std::memory_order_relaxed);
  }
  [[nodiscard]] uint64_t count() const;
  [[nodiscard]] double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<double> sum_{0};
};

/// The process's metrics: named families of labelled counters, gauges and histograms, plus the
/// per-actor message statistics that every troupe actor keeps. Registration takes a lock; updating
/// a metric never does. Exported as Prometheus text and as JSON.
class registry {
 public:
  /// The counter `name{labels}`, created on first use. References stay valid for the registry's
  /// lifetime.
  counter& get_counter(const std::string& name, const std::string& help, const labels& l = {});

  /// The gauge `name{labels}`, created on first use.
  gauge& get_gauge(const std::string& name, const std::string& help, const labels& l = {});

  /// The histogram `name{labels}` with buckets `bounds`, created on first use (the bounds of
  /// the first call win).
  histogram& get_histogram(const std::string& name, const std::string& help,
                           const std::vector<double>& bounds, const labels& l = {});

  /// The statistics of the actor named `actor` (e.g. "trainer/3"), created on first use. A
  /// restarted actor gets the same object, so its counts continue.
  std::shared_ptr<actor_stats> actor(const std::string& actor);

  /// How long a handler may run before its actor is exported as stuck (health.stuck_after_s).
  void set_stuck_after(double seconds) { stuck_after_s_.store(seconds); }

  /// Names of all actors with statistics.
  [[nodiscard]] std::vector<std::string> actor_names() const;

  /// Prometheus text exposition format (version 0.0.4).
  [[nodiscard]] std::string prometheus_text() const;

  /// {"counters": {"name{k=v}": n}, "gauges": {...}, "histograms": {"name{k=v}": {"count",
  /// "sum", "buckets": [[le, cumulative count]...]}}, "actors": {"name": {...}}}.
  [[nodiscard]] nlohmann::json to_json() const;

 private:
  template <class M>
  struct family {
    std::string help;
    std::map<labels, std::unique_ptr<M>> series;
  };

  template <class M, class... Args>
  M& get(std::map<std::string, family<M>>& families, const std::string& name,
         const std::string& help, const labels& l, const Args&... args);

  mutable std::mutex mu_;
  std::map<std::string, family<counter>> counters_;
  std::map<std::string, family<gauge>> gauges_;
  std::map<std::string, family<histogram>> histograms_;
  std::map<std::string, std::shared_ptr<actor_stats>> actors_;
  std::atomic<double> stuck_after_s_{10};
};

}  // namespace troupe::metrics
