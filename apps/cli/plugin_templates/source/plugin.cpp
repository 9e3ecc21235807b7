// The {{name}} plugin: the role source/{{name}}, a pipeline source.

#include "{{name}}.hpp"
#include "runtime/actor/interfaces.hpp"
#include "runtime/actor/role_context.hpp"
#include "runtime/plugin/plugin_api.hpp"

namespace {

using namespace troupe;

actor::role_factory source_factory() {
  config::object_schema<{{name}}_plugin::options> schema;
  schema.add("count", &{{name}}_plugin::options::count)
      .range(0, int64_t{1} << 40)
      .help("how many records the source holds");
  return actor::make_role_factory<{{name}}_plugin::options>(
      "numbered records", std::move(schema),
      [](actor::role_context& ctx,
         const {{name}}_plugin::options& options) -> absl::StatusOr<caf::actor> {
        const auto count = static_cast<uint64_t>(options.count);
        auto handle = ctx.spawn<actor::source_actor>(
            [count](actor::role_pointer<actor::source_actor>)
                -> actor::source_actor::behavior_type {
              // (next, first, max): up to `max` records from `first`; none once past the end.
              return {[count](actor::next_atom, uint64_t first, uint32_t max) {
                actor::source_batch batch;
                batch.total = static_cast<int64_t>(count);
                for (uint64_t seq = first; seq < count && seq - first < max; ++seq)
                  batch.items.push_back({seq, {{name}}_plugin::record(seq)});
                return batch;
              }};
            });
        return caf::actor_cast<caf::actor>(handle);
      });
}

void register_roles(plugin::registrar& r) { r.add_role("source", "{{name}}", source_factory()); }

}  // namespace

TROUPE_PLUGIN("{{name}}", "source/{{name}}: numbered records", register_roles)
