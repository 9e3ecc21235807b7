#include <cstdio>

#include "apps/cli/commands.hpp"
#include "runtime/app/app_plan.hpp"

namespace troupe::cli {

int check_command(const config_args& args) {
  roles_and_plugins env;
  if (auto s = prepare(env, args.plugin_dirs); !s.ok()) {
    std::fprintf(stderr, "troupe: %s\n", std::string(s.message()).c_str());
    return exit_runtime_failure;
  }
  auto plan = app::load_app_plan({args.config, args.overrides}, env.registry, env.plugins);
  if (!plan.ok()) {
    std::fprintf(stderr, "%s\n", std::string(plan.status().message()).c_str());
    std::fprintf(stderr, "troupe check: %s is not valid\n", args.config.c_str());
    return exit_usage_error;
  }
  std::printf("%s: ok (app %s, %zu roles, %d actors)\n", args.config.c_str(),
              plan->spec.app.c_str(), plan->roles.size(), plan->actor_count());
  return exit_ok;
}

}  // namespace troupe::cli
