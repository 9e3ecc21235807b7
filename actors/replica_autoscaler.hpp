#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/config/app_spec.hpp"

namespace troupe::actors {

/// Serving's autoscaler, without CAF: Ray Serve's default policy over the router's figures.
///
/// - Each control tick the router gives the requests ongoing (queued or running) and its
///   workers. The wanted count is ceil(mean ongoing / target_ongoing_requests) within
///   [min, max], the mean over the ticks of the last look_back_period_s.
/// - The target changes only once the wish has held, without a break, for upscale_delay_s
///   (more) or downscale_delay_s (fewer); it then takes the wanted count of that tick.
/// - With min 0, the target goes from 1 to 0 after downscale_to_zero_delay_s (and only from
///   1: a larger target goes down to 1 first). At 0, a request starts one worker at once
///   (Ray Serve's cold start). While no worker is there the target does not go down.
/// - Workers beyond the target are drained, the ones with the fewest requests first (then the
///   newest): they take no new requests and are retired once their last request ends, so no
///   request is lost. A drained worker serves again if the target rises before it is retired.
class replica_autoscaler {
 public:
  using clock = std::chrono::steady_clock;

  /// One worker, as the router sees it.
  struct replica {
    std::string name;
    /// Requests it runs.
    int64_t ongoing = 0;
    bool draining = false;
    /// When it joined, in the router's order: the larger, the newer.
    uint64_t joined = 0;
  };

  /// What the router does now.
  struct decision {
    /// The target at the first tick and whenever it changes: the job asks for this many
    /// workers.
    std::optional<int> scale_to;
    /// Workers that take no new requests from now on.
    std::vector<std::string> drain;
    /// Draining workers that serve again.
    std::vector<std::string> undrain;
    /// Drained workers with nothing left: their processes stop.
    std::vector<std::string> retire;
    /// The requests ongoing, averaged over look_back_period_s: what the wish was made of.
    double mean_ongoing = 0;
  };

  /// `initial` workers are asked for at the start (clamped to [min, max]).
  replica_autoscaler(config::autoscale_spec spec, int initial);

  /// ceil(ongoing / target_ongoing_requests) within [min, max].
  [[nodiscard]] int wanted(double ongoing) const;

  /// One control tick.
  [[nodiscard]] decision step(clock::time_point now, int64_t ongoing,
                              const std::vector<replica>& replicas);

  [[nodiscard]] int target() const { return target_; }

 private:
  config::autoscale_spec spec_;
  int target_;
  bool started_ = false;
  // The ticks of the last look_back_period_s: when, and the requests ongoing.
  std::deque<std::pair<clock::time_point, int64_t>> recent_;
  int64_t recent_sum_ = 0;
  // Since when more (or fewer) workers have been wanted, without a break.
  std::optional<clock::time_point> up_since_, down_since_;
};

}  // namespace troupe::actors
