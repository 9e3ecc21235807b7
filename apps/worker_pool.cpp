#include "apps/worker_pool.hpp"

#include <csignal>

#include <sys/wait.h>

#include "absl/strings/str_cat.h"
#include "apps/worker_processes.hpp"
#include "runtime/cluster/head_server.hpp"

namespace troupe::apps {

worker_pool::worker_pool(options o, worker_processes& local, cluster::head_server& head,
                         run::event_log& events)
    : options_(std::move(o)),
      local_(local),
      head_(head),
      events_(events),
      asked_(options_.initial) {}

worker_pool::~worker_pool() {
  close();
  for (pid_t pid : commands_) {  // a command still running ends with the job
    kill(-pid, SIGTERM);
    waitpid(pid, nullptr, 0);
  }
}

void worker_pool::close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
}

void worker_pool::scale_to(int count) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || count == asked_) return;
  ask(count);
}

void worker_pool::retire(const std::string& node, int count) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  head_.retire(node, "autoscaling: the job needs fewer workers");
  if (count != asked_) ask(count);
}

void worker_pool::replace(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  events_.emit(run::severity::info, "worker_replaced",
               absl::StrCat("worker node ", node, " was lost: ",
                            options_.local ? "a new worker process starts in its place"
                                           : "cluster.scale_command asks for one in its place"),
               {{"node", node}});
  if (options_.local) {
    start_local(1);
  } else {
    run_command(asked_ - 1, asked_);
  }
}

void worker_pool::ask(int count) {
  const int from = asked_;
  asked_ = count;
  if (!options_.local) {
    run_command(from, count);
  } else if (count > from) {  // the router retires the drained workers one by one
    start_local(count - from);
  }
}

void worker_pool::start_local(int n) {
  if (absl::Status s = local_.start(n, options_.head, options_.credentials, options_.log_dir,
                                    options_.plugin_dirs);
      !s.ok()) {
    events_.emit(run::severity::error, "scale_failed",
                 absl::StrCat("cannot start a worker process: ", s.message()),
                 {{"error", std::string(s.message())}});
  }
}

void worker_pool::run_command(int from, int count) {
  const std::string log = absl::StrCat(options_.log_dir, "/scale_command.log");
  auto pid = start_child({"/bin/sh", "-c", options_.scale_command},
                         environment_with({absl::StrCat("TROUPE_SCALE_FROM=", from),
                                           absl::StrCat("TROUPE_SCALE_TO=", count),
                                           absl::StrCat("TROUPE_HEAD=", options_.head)}),
                         log, true);
  if (!pid.ok()) {
    events_.emit(run::severity::error, "scale_failed",
                 absl::StrCat("cannot run cluster.scale_command: ", pid.status().message()),
                 {{"error", std::string(pid.status().message())}});
    return;
  }
  commands_.push_back(*pid);
  events_.emit(run::severity::info, "scale_command",
               absl::StrCat("cluster.scale_command asks for ", count, " workers (from ", from,
                            "); its output goes to ", log),
               {{"from", from}, {"to", count}, {"log", log}});
}

void worker_pool::poll() {
  std::lock_guard<std::mutex> lock(mu_);
  local_.reap_exited();
  std::erase_if(commands_, [this](pid_t pid) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) != pid) return false;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      const std::string log = absl::StrCat(options_.log_dir, "/scale_command.log");
      events_.emit(run::severity::error, "scale_failed",
                   absl::StrCat("cluster.scale_command failed (",
                                WIFEXITED(status) ? absl::StrCat("exit code ", WEXITSTATUS(status))
                                                  : std::string("killed by a signal"),
                                "); see ", log),
                   {{"log", log}});
    }
    return true;
  });
}

}  // namespace troupe::apps
