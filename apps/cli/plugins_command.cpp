#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "apps/cli/commands.hpp"
#include "nlohmann/json.hpp"

namespace troupe::cli {

int plugins_list_command(const std::vector<std::string>& plugin_dirs, bool json) {
  roles_and_plugins env(plugin_dirs);
  // Load everything found, so that the listing shows every role one could name.
  std::vector<std::string> failures;
  for (const auto& name : env.plugins.available()) {
    if (auto p = env.plugins.load(name, env.registry); !p.ok()) {
      failures.push_back(std::string(p.status().message()));
    }
  }

  nlohmann::json out = {{"search_dirs", env.plugins.search_dirs()},
                        {"plugins", nlohmann::json::array()},
                        {"roles", nlohmann::json::array()},
                        {"errors", failures}};
  for (const auto& p : env.plugins.loaded()) {
    out["plugins"].push_back({{"name", p.name},
                              {"description", p.description},
                              {"path", p.path},
                              {"abi_version", p.abi_version},
                              {"roles", p.roles}});
  }
  for (const auto* e : env.registry.entries()) {
    nlohmann::json options = nlohmann::json::array();
    for (const auto& f : e->factory.options->describe()) {
      options.push_back({{"key", f.key},
                         {"type", f.type},
                         {"required", f.required},
                         {"default", f.default_value},
                         {"help", f.help}});
    }
    out["roles"].push_back({{"kind", e->kind},
                            {"name", e->name},
                            {"origin", e->origin.to_string()},
                            {"description", e->factory.description},
                            {"options", options}});
  }
  if (json) {
    std::printf("%s\n", out.dump(2).c_str());
    return failures.empty() ? exit_ok : exit_runtime_failure;
  }

  std::printf("plugin directories: %s\n\n", absl::StrJoin(env.plugins.search_dirs(), ", ").c_str());
  std::printf("plugins:\n");
  if (env.plugins.loaded().empty()) std::printf("  (none found)\n");
  for (const auto& p : env.plugins.loaded()) {
    std::printf("  %-12s %s\n  %-12s %s (ABI %u)\n", p.name.c_str(), p.description.c_str(), "",
                p.path.c_str(), p.abi_version);
  }
  std::printf("\nroles (kind/name, origin):\n");
  for (const auto* e : env.registry.entries()) {
    std::printf("  %-22s %-10s %s\n", absl::StrCat(e->kind, "/", e->name).c_str(),
                e->origin.built_in() ? "built-in" : ("plugin:" + e->origin.plugin).c_str(),
                e->factory.description.c_str());
    for (const auto& f : e->factory.options->describe()) {
      std::printf("      %-18s %s%s  %s\n", f.key.c_str(), f.type.c_str(),
                  f.required ? " (required)" : absl::StrCat(" = ", f.default_value).c_str(),
                  f.help.c_str());
    }
  }
  for (const auto& f : failures)
    std::fprintf(stderr, "error: %s\n", f.c_str());
  return failures.empty() ? exit_ok : exit_runtime_failure;
}

}  // namespace troupe::cli
