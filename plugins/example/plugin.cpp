// The example plugin: the smallest complete plugin, adding one role, `stage/caesar`.

#include "caesar_actor.hpp"
#include "runtime/plugin/plugin_api.hpp"

namespace {

void register_roles(troupe::plugin::registrar& r) {
  r.add_role("stage", "caesar", troupe::example::caesar_factory());
}

}  // namespace

TROUPE_PLUGIN("example", "Caesar cipher stage: the minimal troupe plugin", register_roles)
