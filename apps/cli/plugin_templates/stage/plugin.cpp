// The {{name}} plugin: the role stage/{{name}}, a pipeline stage that transforms each item.

#include "{{name}}.hpp"
#include "runtime/actor/interfaces.hpp"
#include "runtime/actor/role_context.hpp"
#include "runtime/plugin/plugin_api.hpp"

namespace {

using namespace troupe;

actor::role_factory stage_factory() {
  config::object_schema<{{name}}_plugin::options> schema;
  schema.add("times", &{{name}}_plugin::options::times)
      .range(1, 100)
      .help("how many times each item's text is repeated");
  return actor::make_role_factory<{{name}}_plugin::options>(
      "repeats each item's text", std::move(schema),
      [](actor::role_context& ctx,
         const {{name}}_plugin::options& options) -> absl::StatusOr<caf::actor> {
        const int times = options.times;
        auto handle = ctx.spawn<actor::stage_actor>(
            [times](actor::role_pointer<actor::stage_actor>) -> actor::stage_actor::behavior_type {
              return {[times](actor::process_atom, actor::work_item& item) {
                item.payload = {{name}}_plugin::transform(item.payload, times);
                return std::move(item);
              }};
            });
        return caf::actor_cast<caf::actor>(handle);
      });
}

void register_roles(plugin::registrar& r) { r.add_role("stage", "{{name}}", stage_factory()); }

}  // namespace

TROUPE_PLUGIN("{{name}}", "stage/{{name}}: repeats each item's text", register_roles)
