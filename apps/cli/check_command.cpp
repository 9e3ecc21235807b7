#include <cstdio>

#include "apps/cli/commands.hpp"

namespace troupe::cli {

int check_command(const config_args& args) {
  roles_and_plugins env(args.plugin_dirs);
  auto plan = env.load(args);
  if (!plan.ok()) {
    std::fprintf(stderr, "%s\n", std::string(plan.status().message()).c_str());
    std::fprintf(stderr, "troupe check: %s is not valid\n", args.config.c_str());
    return exit_usage_error;
  }
  std::printf("%s: ok (app %s, %zu roles, %d actors)\n", args.config.c_str(),
              plan->spec.app.c_str(), plan->roles.size(), plan->actor_count());
  auto app = env.registry.find("app", plan->spec.app);
  if (app.ok() && (*app)->factory.describe_plan) {
    for (const std::string& line : (*app)->factory.describe_plan(*plan, plan->app_options.get()))
      std::printf("  %s\n", line.c_str());
  }
  return exit_ok;
}

}  // namespace troupe::cli
