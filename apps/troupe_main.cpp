// The troupe command line: launch apps from YAML configs, validate configs, list plugins.

#include <cstdio>

#include "CLI/CLI.hpp"
#include "apps/cli/commands.hpp"

namespace {

// Commands that arrive with the Cluster issue; reserved so their names keep their meaning.
int reserved(const char* command) {
  std::fprintf(stderr,
               "troupe %s: multi-process clusters (head, worker, status) are not part of this "
               "build yet; run apps in one process with `troupe launch CONFIG`\n",
               command);
  return troupe::cli::exit_usage_error;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace troupe::cli;
  CLI::App app{"troupe: an actor runtime for pretraining, RLHF and serving"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every command");

  launch_args launch;
  auto* launch_cmd = app.add_subcommand("launch", "Run an app from a YAML config");
  launch_cmd->add_option("config", launch.config, "App config (YAML)")->required();
  launch_cmd->add_option("--set", launch.overrides, "Override a config value: key.path=value");
  launch_cmd->add_option("--run-dir", launch.run_dir,
                         "Run directory (default: runs/<app>-<date>-<time>)");
  launch_cmd->add_option("--plugin-dir", launch.plugin_dirs, "Extra plugin directory");

  config_args check;
  auto* check_cmd = app.add_subcommand("check", "Validate a config without running it");
  check_cmd->add_option("config", check.config, "App config (YAML)")->required();
  check_cmd->add_option("--set", check.overrides, "Override a config value: key.path=value");
  check_cmd->add_option("--plugin-dir", check.plugin_dirs, "Extra plugin directory");

  std::vector<std::string> plugin_dirs;
  bool plugins_json = false;
  auto* plugins_cmd = app.add_subcommand("plugins", "Inspect plugins");
  plugins_cmd->require_subcommand(1);
  auto* list_cmd = plugins_cmd->add_subcommand("list", "List plugins and every role they add");
  list_cmd->add_option("--plugin-dir", plugin_dirs, "Extra plugin directory");
  list_cmd->add_flag("--json", plugins_json, "Print JSON");

  bool version_json = false;
  auto* version_cmd = app.add_subcommand("version", "Show versions and CUDA devices");
  version_cmd->add_flag("--json", version_json, "Print JSON");

  auto* head_cmd = app.add_subcommand("head", "Start a cluster head (reserved)");
  auto* worker_cmd = app.add_subcommand("worker", "Start a worker (reserved)");
  auto* status_cmd = app.add_subcommand("status", "Show a cluster's state (reserved)");
  for (auto* cmd : {head_cmd, worker_cmd, status_cmd})
    cmd->allow_extras();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? exit_ok : exit_usage_error;
  }

  if (*launch_cmd) return launch_command(launch);
  if (*check_cmd) return check_command(check);
  if (*list_cmd) return plugins_list_command(plugin_dirs, plugins_json);
  if (*version_cmd) return version_command(version_json);
  if (*head_cmd) return reserved("head");
  if (*worker_cmd) return reserved("worker");
  if (*status_cmd) return reserved("status");
  return exit_usage_error;
}
