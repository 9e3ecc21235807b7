#pragma once

#include <mutex>
#include <string>
#include <vector>

#include <sys/types.h>

#include "runtime/actor/role_context.hpp"
#include "runtime/cluster/curve_keys.hpp"
#include "runtime/run/event_log.hpp"

namespace troupe::cluster {
class head_server;
}

namespace troupe::apps {

class worker_processes;

/// The job's workers as an autoscaled role sees them (actor::worker_scaler): more are started
/// as local worker processes (`cluster.local_workers` > 0) or asked for by running
/// `cluster.scale_command`; a drained one is told through the head to shut down.
///
/// The command runs through /bin/sh on every change of the count asked for, with
/// TROUPE_SCALE_FROM and TROUPE_SCALE_TO (the counts before and now) and TROUPE_HEAD (the head's
/// endpoint) in its environment, its output appended to `<log dir>/scale_command.log`. A shrink
/// runs it too, after the head told the retired workers to stop (a `kubectl scale` wants the
/// new count).
class worker_pool final : public actor::worker_scaler {
 public:
  struct options {
    std::string head;
    cluster::cluster_credentials credentials;
    std::string log_dir;
    std::vector<std::string> plugin_dirs;
    /// Start local worker processes (else run `scale_command`).
    bool local = false;
    std::string scale_command;
    /// The workers the job started with.
    int initial = 0;
  };

  /// `local` and `head` must outlive the pool or its close().
  worker_pool(options o, worker_processes& local, cluster::head_server& head,
              run::event_log& events);
  ~worker_pool() override;

  void scale_to(int count) override;
  void retire(const std::string& node, int count) override;
  void replace(const std::string& node) override;

  /// Collects ended workers and commands, reporting a command that failed. Called from the
  /// job's thread.
  void poll();

  /// From now on every call does nothing: the job ends.
  void close();

 private:
  // Asks for `count` workers instead of asked_ (with mu_ held).
  void ask(int count);
  // With mu_ held: starts `n` local worker processes, or runs the scale command from `from` to
  // `to` workers.
  void start_local(int n);
  void run_command(int from, int to);

  options options_;
  worker_processes& local_;
  cluster::head_server& head_;
  run::event_log& events_;
  std::mutex mu_;
  bool closed_ = false;
  int asked_;
  std::vector<pid_t> commands_;
};

}  // namespace troupe::apps
