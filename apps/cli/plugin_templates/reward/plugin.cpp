// The {{name}} plugin: the role reward/{{name}}, a rule reward for RLHF.

#include "{{name}}.hpp"
#include "runtime/plugin/plugin_api.hpp"

namespace {

void register_roles(troupe::plugin::registrar& r) {
  r.add_reward_rule("{{name}}", "the share of a response's bytes that are letters",
                    &{{name}}_plugin::score);
}

}  // namespace

TROUPE_PLUGIN("{{name}}", "reward/{{name}}: scores responses by their share of letters",
              register_roles)
