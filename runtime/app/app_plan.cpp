#include "runtime/app/app_plan.hpp"

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/status.hpp"
#include "runtime/config/document.hpp"

namespace troupe::app {
namespace {

using config::parse_context;

const YAML::Node key_or(const YAML::Node& map, const std::string& key) {
  const YAML::Node& m = map;
  return m[key].IsDefined() ? m[key] : map;
}

// Loads the plugins the config names, reporting failures at the key that named them.
void load_plugins(const config::app_spec& spec, const YAML::Node& root, const parse_context& ctx,
                  actor::role_registry& registry, plugin::plugin_loader& plugins) {
  const parse_context plugins_ctx = ctx.child("plugins");
  for (size_t i = 0; i < spec.plugins.load.size(); ++i) {
    if (auto p = plugins.load(spec.plugins.load[i], registry); !p.ok()) {
      plugins_ctx.child("load").element(i).error(root["plugins"]["load"][i], p.status().message());
    }
  }
  const parse_context roles_ctx = ctx.child("roles");
  for (const auto& role : spec.roles) {
    if (role.plugin.empty()) continue;
    if (auto p = plugins.load(role.plugin, registry); !p.ok()) {
      roles_ctx.child(role.name).child("plugin").error(root["roles"][role.name]["plugin"],
                                                       p.status().message());
    }
  }
}

// Finds the role's implementation and validates its options.
bool resolve_role(const config::role_spec& role, const YAML::Node& node, const parse_context& ctx,
                  const actor::role_registry& registry, resolved_role& out) {
  if (auto problem = config::check_identifier(role.name)) {
    ctx.error(node, absl::StrCat("role name: ", *problem));
    return false;
  }
  if (role.name == "app") {
    ctx.error(node, "the role name 'app' is reserved for the app driver; pick another name");
    return false;
  }
  if (role.elastic && role.count != 1) {
    ctx.child("elastic").error(key_or(node, "elastic"),
                               "set either count or elastic, not both: an elastic role has one "
                               "actor per worker");
    return false;
  }
  if (role.autoscale && (role.elastic || role.count != 1)) {
    ctx.child("autoscale")
        .error(key_or(node, "autoscale"),
               absl::StrCat("set autoscale alone, without ", role.elastic ? "elastic" : "count",
                            ": autoscale's min and max bound the role, one actor per worker"));
    return false;
  }
  out.spec = role;
  if (out.spec.kind.empty()) out.spec.kind = role.name;
  auto entry = registry.find(out.spec.kind, role.impl);
  if (!entry.ok()) {
    ctx.child("impl").error(key_or(node, "impl"), entry.status().message());
    return false;
  }
  out.entry = *entry;
  if (!role.plugin.empty() && out.entry->origin.plugin != role.plugin) {
    ctx.child("plugin").error(
        key_or(node, "plugin"),
        absl::StrCat(out.spec.kind, "/", role.impl, " comes from ", out.entry->origin.to_string(),
                     ", not from plugin '", role.plugin, "'"));
    return false;
  }
  const auto& factory = out.entry->factory;
  if (role.on_failure) {
    out.on_failure = *role.on_failure;
    if (!factory.restartable &&
        out.on_failure.on_failure == config::failure_policy::action::restart) {
      ctx.child("on_failure")
          .error(
              key_or(node, "on_failure"),
              absl::StrCat(out.spec.kind, "/", role.impl,
                           " keeps state that a restart would lose, so it cannot be restarted; use "
                           "on_failure: fail_job"));
      return false;
    }
  } else if (!factory.restartable) {
    out.on_failure.on_failure = config::failure_policy::action::fail_job;
  }
  out.options = factory.options->parse(role.options.node, ctx.child("options"));
  if (out.options == nullptr) return false;
  out.spec.on_failure = out.on_failure;
  out.spec.options.node = factory.options->to_node(out.options.get());
  return true;
}

// An autoscaled role needs an app that scales by load and a way to start workers; a scale
// command needs an autoscaled role.
void check_autoscaling(const app_plan& plan, const YAML::Node& root, const parse_context& ctx) {
  if (!plan.spec.cluster.scale_command.empty() &&
      absl::c_none_of(plan.roles, [](const resolved_role& r) { return r.spec.autoscale; })) {
    ctx.child("cluster")
        .child("scale_command")
        .error(key_or(root["cluster"], "scale_command"),
               "a scale command is for a role with autoscale (app: serve's roles.worker."
               "autoscale); remove it, or add autoscale");
  }
  for (const auto& role : plan.roles) {
    if (!role.spec.autoscale) continue;
    const YAML::Node node = root["roles"][role.spec.name];
    const parse_context at = ctx.child("roles").child(role.spec.name).child("autoscale");
    if (!plan.app_entry->factory.autoscales) {
      at.error(key_or(node, "autoscale"),
               absl::StrCat("app: ", plan.spec.app,
                            " does not scale its workers by load (app: serve does); use elastic: "
                            "{min, max} for a role that grows as workers join"));
    } else if (role.spec.placement == "head") {
      at.error(key_or(node, "autoscale"),
               "an autoscaled role runs one actor per worker; remove placement: head");
    } else if (plan.spec.cluster.local_workers == 0 && plan.spec.cluster.scale_command.empty()) {
      at.error(key_or(node, "autoscale"),
               "autoscaling starts and stops worker processes: set cluster.local_workers (workers "
               "on this machine) or cluster.scale_command (e.g. an sbatch or a kubectl scale)");
    }
  }
}

}  // namespace

const resolved_role* app_plan::find_role(absl::string_view name) const {
  for (const auto& r : roles) {
    if (r.spec.name == name) return &r;
  }
  return nullptr;
}

int app_plan::actor_count() const {
  int n = 0;
  for (const auto& r : roles) {
    if (r.embedded) continue;
    const auto elastic = r.spec.elastic_bounds();
    n += elastic ? elastic->min : r.spec.count;  // elastic: grown as workers join
  }
  return n;
}

std::string app_plan::resolved_yaml() const {
  YAML::Emitter out;
  out << config::app_spec_schema().to_node(spec);
  return std::string(out.c_str()) + "\n";
}

absl::StatusOr<app_plan> load_app_plan(const load_request& request, actor::role_registry& registry,
                                       plugin::plugin_loader& plugins) {
  TROUPE_ASSIGN_OR_RETURN(
      config::document doc,
      request.config_text.empty()
          ? config::document::load_file(request.config_path)
          : config::document::load_string(request.config_text, request.config_path));
  for (const auto& assignment : request.overrides) {
    TROUPE_RETURN_IF_ERROR(doc.apply_override(assignment));
  }

  config::diagnostics diag;
  const parse_context ctx(doc, diag);
  const YAML::Node& root = doc.root();
  app_plan plan;
  if (!config::app_spec_schema().parse(root, ctx, plan.spec)) return diag.status();

  for (const auto& dir : plan.spec.plugins.dirs)
    plugins.add_search_dir(dir);
  load_plugins(plan.spec, root, ctx, registry, plugins);
  if (!diag.empty()) return diag.status();

  const parse_context roles_ctx = ctx.child("roles");
  for (const auto& role : plan.spec.roles) {
    resolved_role resolved;
    if (resolve_role(role, root["roles"][role.name], roles_ctx.child(role.name), registry,
                     resolved)) {
      plan.roles.push_back(std::move(resolved));
    }
  }

  const std::string& app = plan.spec.app;
  if (auto entry = registry.find("app", app); !entry.ok()) {
    ctx.child("app").error(root["app"], absl::StrCat("unknown app. ", entry.status().message()));
  } else if (diag.empty()) {
    plan.app_entry = *entry;
    const auto& factory = plan.app_entry->factory;
    const YAML::Node section = root[app];
    plan.app_options = factory.options->parse(section, ctx.child(app));
    if (plan.app_options != nullptr && factory.check_plan) {
      factory.check_plan(plan, plan.app_options.get(), ctx.child(app),
                         section.IsDefined() ? section : root);
    }
    if (plan.app_options != nullptr) {
      plan.spec.app_section.node = factory.options->to_node(plan.app_options.get());
      const std::vector<std::string> embedded = factory.embedded_roles
                                                    ? factory.embedded_roles(plan.app_options.get())
                                                    : std::vector<std::string>{};
      for (auto& r : plan.roles)
        r.embedded = absl::c_linear_search(embedded, r.spec.name);
    }
    check_autoscaling(plan, root, ctx);
  }
  TROUPE_RETURN_IF_ERROR(diag.status());

  for (size_t i = 0; i < plan.roles.size(); ++i)
    plan.spec.roles[i] = plan.roles[i].spec;
  return plan;
}

}  // namespace troupe::app
