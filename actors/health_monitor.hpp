#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "runtime/config/app_spec.hpp"
#include "runtime/metrics/registry.hpp"

namespace troupe::actors {

/// Whether an actor answers.
enum class liveness { alive, unresponsive, dead };

[[nodiscard]] const char* to_string(liveness l);

/// The health monitor's bookkeeping, without CAF: liveness per actor from ping results, kept in
/// the metrics registry as `troupe_actor_up`, `troupe_actor_ping_seconds` and
/// `troupe_actor_missed_pings_total` (message counts, handling time and mailbox depth are kept
/// by the actors themselves, see metrics::actor_stats).
///
///   alive --`unresponsive_after` missed pings in a row--> unresponsive --pong--> alive
///   alive / unresponsive --down--> dead --track (restarted)--> alive
class health_monitor {
 public:
  /// A liveness change, for the event log, with what the actor's own statistics say.
  struct change {
    std::string actor;
    liveness from;
    liveness to;
    int missed_in_a_row;
    uint64_t mailbox_depth;
    /// How long the actor has been inside its current handler; 0 when it is idle.
    double in_handler_seconds;
  };

  /// Also tells `metrics` when a handler makes its actor stuck (health.stuck_after_s).
  health_monitor(const config::health_spec& spec, metrics::registry& metrics)
      : spec_(spec), metrics_(metrics) {
    metrics_.set_stuck_after(spec.stuck_after_s);
  }

  /// Starts (or, after a restart, resumes) watching `actor`.
  void track(const std::string& actor);

  /// `actor` answered a ping after `rtt`.
  void pong(const std::string& actor, std::chrono::nanoseconds rtt);

  /// `actor` did not answer a ping in time.
  void missed(const std::string& actor);

  /// `actor` terminated.
  void down(const std::string& actor);

  /// Actors to ping on the next round (everyone not dead).
  [[nodiscard]] std::vector<std::string> pingable() const;

  /// The current liveness of `actor` (dead when unknown).
  [[nodiscard]] liveness status(const std::string& actor) const;

  /// Changes since the last call.
  [[nodiscard]] std::vector<change> take_changes();

 private:
  struct entry {
    liveness state = liveness::alive;
    int missed_in_a_row = 0;
  };
  void set(const std::string& actor, entry& e, liveness to);

  config::health_spec spec_;
  metrics::registry& metrics_;
  std::map<std::string, entry> actors_;
  std::vector<change> changes_;
};

}  // namespace troupe::actors
