#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/config/app_spec.hpp"

namespace troupe::actors {

/// Serving's autoscaler, without CAF: Ray Serve's default policy over the router's figures.
///
/// - Each control tick the router gives the requests ongoing (queued or running) and its
///   workers. The wanted count is ceil(ongoing / target_ongoing_requests), within [min, max].
/// - The target changes only once the wish has held, without a break, for upscale_delay_s
///   (more) or downscale_delay_s (fewer); it then takes the wanted count of that tick.
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
  };

  /// `initial` workers are asked for at the start (clamped to [min, max]).
  replica_autoscaler(config::autoscale_spec spec, int initial);

  /// ceil(ongoing / target_ongoing_requests) within [min, max].
  [[nodiscard]] int wanted(int64_t ongoing) const;

  /// One control tick.
  [[nodiscard]] decision step(clock::time_point now, int64_t ongoing,
                              const std::vector<replica>& replicas);

  [[nodiscard]] int target() const { return target_; }

 private:
  config::autoscale_spec spec_;
  int target_;
  bool started_ = false;
  // Since when more (or fewer) workers have been wanted, without a break.
  std::optional<clock::time_point> up_since_, down_since_;
};

}  // namespace troupe::actors
