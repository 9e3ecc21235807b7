#pragma once

// The C++ side of the plugin ABI: what a plugin's register function uses to add roles, and the
// macro that defines its entry point.
//
//   void register_roles(troupe::plugin::registrar& r) {
//     r.add_role("stage", "caesar", troupe::actor::make_role_factory<caesar_options>(...));
//   }
//   TROUPE_PLUGIN("example", "Caesar cipher stage", register_roles)

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/actor/role_registry.hpp"
#include "runtime/actor/rule_reward.hpp"
#include "runtime/plugin/plugin_abi.h"

namespace troupe::plugin {

/// Collects a plugin's roles during `register_fn`. The loader adds them to the registry only if
/// the whole plugin registered cleanly, so a failing plugin leaves no half of itself behind.
class registrar {
 public:
  explicit registrar(std::string plugin_name) : plugin_name_(std::move(plugin_name)) {}

  /// Adds the role implementation (kind, name).
  void add_role(std::string kind, std::string name, actor::role_factory factory);

  /// Adds the reward role reward/`name` scoring with `rule` (what troupe_plugin_add_reward_rule
  /// does for a C plugin).
  void add_reward_rule(std::string name, std::string description, actor::reward_rule rule);

  /// Records a problem found while registering; the load then fails with it.
  void add_error(absl::Status status) { errors_.push_back(std::move(status)); }

  struct pending_role {
    std::string kind;
    std::string name;
    actor::role_factory factory;
  };
  [[nodiscard]] std::vector<pending_role>& roles() { return roles_; }
  [[nodiscard]] const std::vector<absl::Status>& errors() const { return errors_; }
  [[nodiscard]] const std::string& plugin_name() const { return plugin_name_; }

  /// The C handle given to `register_fn`, and back.
  [[nodiscard]] troupe_plugin_registrar* as_c() {
    return reinterpret_cast<troupe_plugin_registrar*>(this);
  }
  [[nodiscard]] static registrar& from_c(troupe_plugin_registrar* r) {
    return *reinterpret_cast<registrar*>(r);
  }

 private:
  std::string plugin_name_;
  std::vector<pending_role> roles_;
  std::vector<absl::Status> errors_;
};

}  // namespace troupe::plugin

/// Defines `troupe_plugin_entry` for a plugin named `name` whose roles `register_function`
/// (a `void(troupe::plugin::registrar&)`) adds.
#define TROUPE_PLUGIN(name, description, register_function)                                   \
  extern "C" __attribute__((visibility("default"))) const troupe_plugin* troupe_plugin_entry( \
      void) {                                                                                 \
    static const troupe_plugin plugin = {                                                     \
        TROUPE_PLUGIN_ABI_VERSION, static_cast<uint32_t>(sizeof(troupe_plugin)), name,        \
        description, [](troupe_plugin_registrar* r) {                                         \
          register_function(::troupe::plugin::registrar::from_c(r));                          \
        }};                                                                                   \
    return &plugin;                                                                           \
  }
