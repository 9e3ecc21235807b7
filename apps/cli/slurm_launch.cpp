// `troupe launch CONFIG --slurm` (docs/launch.md#slurm): under srun, the task with SLURM_PROCID 0
// runs the head and the app, and the others join it as workers, through a rendezvous file in
// the submit directory.

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "apps/cli/commands.hpp"
#include "apps/cli/slurm_task.hpp"
#include "runtime/cluster/cluster_file.hpp"
#include "runtime/cluster/zmq_util.hpp"

namespace troupe::cli {
namespace {

int run_head_task(const app::app_plan& plan, const launch_args& args, const slurm_task& task) {
  const auto& spec = plan.spec.cluster;
  auto credentials = head_credentials(spec, "");
  if (!credentials.ok()) {
    std::fprintf(stderr, "%s\n", std::string(credentials.status().message()).c_str());
    return exit_usage_error;
  }
  // The per-machine file, and the job's rendezvous file through which its other tasks join.
  cluster::head_cluster_file files(credentials->token,
                                   slurm_rendezvous_path(task.submit_dir, task.job_id));
  std::fprintf(stderr, "troupe launch --slurm: job %s, %d tasks; this one (on %s) runs the head\n",
               task.job_id.c_str(), task.ntasks, task.node.c_str());
  return run_job(plan, args.config, args.run_dir,
                 [&](const run::run_dir& dir) -> std::optional<apps::cluster_options> {
                   return apps::cluster_options{
                       .listen = spec.listen,
                       .credentials = *credentials,
                       .local_workers = 0,
                       .min_workers = std::max(spec.min_workers, task.ntasks - 1),
                       .joining_workers = task.ntasks - 1,
                       .log_dir = dir.path().string(),
                       .plugin_dirs = args.plugin_dirs,
                       .on_listening = [&](const std::string& endpoint) {
                         if (absl::Status s = files.listening(endpoint); !s.ok()) {
                           std::fprintf(stderr,
                                        "troupe launch --slurm: %s; the other tasks cannot join\n",
                                        std::string(s.message()).c_str());
                         }
                       }};
                 });
}

}  // namespace

int join_slurm_job(const std::string& rendezvous_path, std::chrono::seconds wait,
                   worker_args worker) {
  auto rendezvous = cluster::read_head_file(rendezvous_path, wait);
  if (!rendezvous.ok()) {
    std::fprintf(stderr, "troupe worker: %s%s\n",
                 std::string(rendezvous.status().message()).c_str(),
                 absl::IsDeadlineExceeded(rendezvous.status())
                     ? ": the head's task (SLURM_PROCID 0) did not write it (cluster.join_wait_s); "
                       "see its output for why"
                     : "");
    return exit_runtime_failure;
  }
  auto bind = cluster::local_address_towards(rendezvous->endpoint);
  if (!bind.ok()) {
    std::fprintf(stderr, "troupe worker: %s\n", std::string(bind.status().message()).c_str());
    return exit_runtime_failure;
  }
  worker.join = rendezvous->endpoint;
  worker.token = rendezvous->token;
  worker.bind_host = *bind;
  // scancel signals every task at once: the head stops the job (draining or checkpointing, as on
  // Ctrl-C) and then its workers, so a worker leaves only with its head.
  worker.stop_with_head = true;
  return worker_command(worker);
}

int slurm_launch_command(const launch_args& args) {
  auto task = slurm_task_from([](const char* name) { return std::getenv(name); });
  if (!task.ok()) {
    std::fprintf(stderr, "troupe launch: %s\n", std::string(task.status().message()).c_str());
    return exit_usage_error;
  }
  if (task->ntasks == 1) {  // a job of one task is a launch on its node, local workers and all
    launch_args alone = args;
    alone.slurm = false;
    return launch_command(alone);
  }
  roles_and_plugins env(args.plugin_dirs);
  auto plan = load_launch_plan(env, args);
  if (!plan.ok()) {
    std::fprintf(stderr, "%s\n", std::string(plan.status().message()).c_str());
    return exit_usage_error;
  }
  if (task->head()) return run_head_task(*plan, args, *task);
  worker_args worker;
  worker.keys = plan->spec.cluster.keys;
  worker.plugin_dirs = args.plugin_dirs;
  if (task->cpus_per_task > 0) worker.resources = absl::StrCat("cores=", task->cpus_per_task);
  return join_slurm_job(slurm_rendezvous_path(task->submit_dir, task->job_id),
                        std::chrono::seconds(plan->spec.cluster.join_wait_s), std::move(worker));
}

}  // namespace troupe::cli
