#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include <signal.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "apps/cli/commands.hpp"
#include "apps/cli/progress_display.hpp"
#include "apps/job_runner.hpp"
#include "runtime/app/app_plan.hpp"
#include "runtime/base/status.hpp"
#include "runtime/cluster/cluster_file.hpp"
#include "runtime/run/run_dir.hpp"
#include "spdlog/sinks/basic_file_sink.h"
#include "spdlog/spdlog.h"

namespace troupe::cli {
namespace {

std::atomic<bool> stop_requested{false};

extern "C" void on_stop_signal(int) {
  stop_requested.store(true);
}

// The first Ctrl-C (or SIGTERM) stops the job gracefully; SA_RESETHAND makes a second one kill.
void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

spdlog::level::level_enum log_level(const std::string& severity) {
  if (severity == "debug") return spdlog::level::debug;
  if (severity == "warning") return spdlog::level::warn;
  if (severity == "error") return spdlog::level::err;
  return spdlog::level::info;
}

int exit_code_of(apps::job_outcome::status s) {
  switch (s) {
    case apps::job_outcome::status::succeeded:
      return exit_ok;
    case apps::job_outcome::status::interrupted:
      return exit_interrupted;
    case apps::job_outcome::status::failed:
      return exit_runtime_failure;
  }
  return exit_runtime_failure;
}

// Waits for the job's actors to stop; if one is stuck inside a handler past the grace period,
// says so and ends the process anyway (the summary is already printed).
void shut_down(std::unique_ptr<apps::job_runner> runner, int code) {
  constexpr auto grace = std::chrono::seconds(10);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, grace, [&] { return done; })) {
      std::fprintf(stderr, "troupe: actors did not stop within %lld s; exiting anyway\n",
                   static_cast<long long>(grace.count()));
      std::fflush(nullptr);
      _exit(code);
    }
  });
  runner.reset();
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  watchdog.join();
}

}  // namespace

int run_job(const app::app_plan& plan, const std::string& config_name,
            const std::optional<std::string>& requested_dir, const cluster_setup& cluster_for) {
  auto dir = run::run_dir::create(requested_dir, plan.spec.app);
  if (!dir.ok()) {
    std::fprintf(stderr, "troupe: %s\n", std::string(dir.status().message()).c_str());
    return exit_usage_error;
  }
  auto events = run::event_log::open(dir->file("events.jsonl").string());
  if (!events.ok()) {
    std::fprintf(stderr, "troupe: %s\n", std::string(events.status().message()).c_str());
    return exit_runtime_failure;
  }
  if (auto s = dir->write_file("config.yaml", plan.resolved_yaml()); !s.ok()) {
    std::fprintf(stderr, "troupe: %s\n", std::string(s.message()).c_str());
    return exit_runtime_failure;
  }

  auto log = std::make_shared<spdlog::logger>(
      "troupe",
      std::make_shared<spdlog::sinks::basic_file_sink_mt>(dir->file("troupe.log").string()));
  log->set_level(spdlog::level::debug);
  log->flush_on(spdlog::level::warn);
  progress_display display(stderr, isatty(STDERR_FILENO) != 0);
  (*events)->add_listener([&display, log](const nlohmann::json& e) {
    if (e.value("event", std::string()) != "progress") {
      log->log(log_level(e.value("severity", std::string())), "{}: {}",
               e.value("event", std::string()), e.value("message", std::string()));
    }
    display.on_event(e);
  });
  (*events)->emit(run::severity::info, "launch",
                  absl::StrCat("launching ", plan.spec.app, " from ", config_name, " in ",
                               dir->path().string()),
                  {{"config", config_name}, {"run_dir", dir->path().string()}});

  metrics::registry metrics;
  install_stop_handlers();
  auto runner = std::make_unique<apps::job_runner>(plan, metrics, **events, dir->path().string(),
                                                   cluster_for(*dir));
  const apps::job_outcome outcome = runner->run(stop_requested);
  display.finish();

  nlohmann::json summary = {{"app", plan.spec.app},
                            {"status", apps::to_string(outcome.result)},
                            {"run_dir", dir->path().string()},
                            {"elapsed_s", (*events)->elapsed_seconds()}};
  if (!outcome.error.empty()) summary["error"] = outcome.error;
  for (const auto& [key, value] : outcome.summary.items()) {
    if (!summary.contains(key)) summary[key] = value;
  }
  const std::string line = summary.dump();
  (void)dir->write_file("summary.json", line + "\n");
  (void)dir->write_file("metrics.json", metrics.to_json().dump(2) + "\n");
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  log->flush();

  const int code = exit_code_of(outcome.result);
  shut_down(std::move(runner), code);
  return code;
}

absl::StatusOr<app::app_plan> load_launch_plan(roles_and_plugins& env, const launch_args& args) {
  TROUPE_ASSIGN_OR_RETURN(app::app_plan plan, env.load(args));
  if (!args.resume) return plan;
  bool resumable = false;
  for (const auto& f : plan.app_entry->factory.options->describe())
    resumable = resumable || f.key == "resume";
  if (!resumable) {
    return absl::InvalidArgumentError(absl::StrCat("--resume: app '", plan.spec.app,
                                                   "' cannot resume; apps that checkpoint "
                                                   "(such as pretrain) can"));
  }
  if (!std::filesystem::is_directory(*args.resume)) {
    return absl::NotFoundError(absl::StrCat("--resume ", *args.resume, ": no such directory"));
  }
  config_args resumed = args;
  resumed.overrides.push_back(absl::StrCat(
      plan.spec.app,
      ".resume=", nlohmann::json(std::filesystem::absolute(*args.resume).string()).dump()));
  return env.load(resumed);
}

int launch_command(const launch_args& args) {
  if (args.slurm) return slurm_launch_command(args);
  roles_and_plugins env(args.plugin_dirs);
  auto plan = load_launch_plan(env, args);
  if (!plan.ok()) {
    std::fprintf(stderr, "%s\n", std::string(plan.status().message()).c_str());
    return exit_usage_error;
  }
  const auto& spec = plan->spec.cluster;
  auto credentials = head_credentials(spec, "");
  if (!credentials.ok()) {
    std::fprintf(stderr, "%s\n", std::string(credentials.status().message()).c_str());
    return exit_usage_error;
  }
  // More workers on this machine join with `troupe worker --join ENDPOINT` alone (under CURVE,
  // with --keys).
  cluster::head_cluster_file file(credentials->token);
  return run_job(*plan, args.config, args.run_dir,
                 [&](const run::run_dir& dir) -> std::optional<apps::cluster_options> {
                   // A scale command starts the workers of a job without local ones.
                   if (spec.local_workers == 0 && spec.scale_command.empty()) return std::nullopt;
                   return apps::cluster_options{
                       .listen = spec.listen,
                       .credentials = *credentials,
                       .local_workers = spec.local_workers,
                       .min_workers = std::max(
                           {spec.min_workers, spec.local_workers, spec.local_workers > 0 ? 0 : 1}),
                       .log_dir = dir.path().string(),
                       .plugin_dirs = args.plugin_dirs,
                       .on_listening = [&file](const std::string& e) { (void)file.listening(e); }};
                 });
}

}  // namespace troupe::cli
