#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "caf/all.hpp"
#include "runtime/actor/role_actor.hpp"
#include "runtime/metrics/registry.hpp"
#include "runtime/run/event_log.hpp"

namespace troupe::app {
struct app_plan;
}

namespace troupe::comm {
class rendezvous_store;
}

namespace troupe::actor {

/// Changes how many worker processes a job has, for an app that sizes itself by load (serving's
/// autoscaling). The job runner implements it; actors call it from their threads, and each call
/// returns at once (processes start, and commands run, in the background).
class worker_scaler {
 public:
  virtual ~worker_scaler() = default;
  /// The job wants `count` workers: start (or ask for) the ones missing.
  virtual void scale_to(int count) = 0;
  /// Stops worker node `node`, whose work has drained; the job then wants `count` workers.
  virtual void retire(const std::string& node, int count) = 0;
  /// Worker node `node` was lost (its process died or its host went): start, or ask for, one
  /// in its place, as Ray Serve's controller replaces a crashed replica.
  virtual void replace(const std::string& node) = 0;
};

/// The parts of a job-unique actor name: "rot13/2" -> ("rot13", 2). A name without a numeric
/// index after its last '/' is its own role, index 0.
struct actor_name_parts {
  std::string role;
  int index = 0;
};
[[nodiscard]] inline actor_name_parts parse_actor_name(absl::string_view name) {
  const size_t slash = name.rfind('/');
  int index = 0;
  if (slash == absl::string_view::npos || !absl::SimpleAtoi(name.substr(slash + 1), &index)) {
    return {std::string(name), 0};
  }
  return {std::string(name.substr(0, slash)), index};
}

/// What a role factory gets to spawn one actor: the actor system, the actor's identity, and the
/// job's collaborators.
struct role_context {
  caf::actor_system& system;
  metrics::registry& metrics;
  run::event_log& events;
  /// The whole resolved app; app drivers read their roles from it.
  const app::app_plan& plan;
  /// The role's name ("rot13"); the app driver's role is named "app".
  std::string role;
  /// Which of the role's `count` actors this is.
  int index = 0;
  /// The cores this process offers (its worker's `--resources cores`, by default the machine's;
  /// a launch's local workers split the machine among them); 0: not said (one process alone).
  int cores = 0;
  /// The job's run directory, where the app driver writes its outputs; empty on workers and in
  /// tests without one.
  std::string run_dir;
  /// Opens a store through which actors of this job, in any of its processes, rendezvous to form
  /// communicator groups: the head's key-value store in a cluster, one store shared inside this
  /// process otherwise.
  std::function<absl::StatusOr<std::shared_ptr<comm::rendezvous_store>>()> rendezvous;
  /// The address this process's peers reach it at: its node's (a worker's `--bind`, the head's
  /// `cluster.listen` host). Data-plane groups (Gloo) listen there.
  std::string host = "127.0.0.1";
  /// Whether spawn() gives the actor a thread of its own (caf::detached): for an instance that
  /// a blocking caller reads in place, as a trainer rank reads pretraining's data.source.
  bool detached = false;
  /// Starts and stops the job's workers (an app whose factory `autoscales`, on the head); null
  /// when nothing can.
  worker_scaler* scaler = nullptr;

  /// The job-unique actor name, "role/index".
  [[nodiscard]] std::string actor_name() const { return absl::StrCat(role, "/", index); }

  /// Spawns an instrumented troupe actor whose behavior `init` makes; its statistics are kept
  /// in `metrics` under `actor_name()`.
  template <class Handle, class State = no_state>
  Handle spawn(typename role_actor<Handle, State>::init_fn init) {
    if (detached) {
      return system.spawn<role_actor<Handle, State>, caf::detached>(metrics.actor(actor_name()),
                                                                    std::move(init));
    }
    return system.spawn<role_actor<Handle, State>>(metrics.actor(actor_name()), std::move(init));
  }
};

}  // namespace troupe::actor
