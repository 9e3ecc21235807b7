#include "caesar_actor.hpp"

#include "runtime/actor/interfaces.hpp"
#include "runtime/actor/role_context.hpp"

namespace troupe::example {

actor::role_factory caesar_factory() {
  config::object_schema<caesar_options> schema;
  schema.add("shift", &caesar_options::shift).range(1, 25).help("places to rotate letters by");
  return actor::make_role_factory<caesar_options>(
      "rotates letters (Caesar cipher)", std::move(schema),
      [](actor::role_context& ctx, const caesar_options& options) -> absl::StatusOr<caf::actor> {
        const int shift = options.shift;
        auto handle = ctx.spawn<actor::stage_actor>(
            [shift](actor::role_pointer<actor::stage_actor>) -> actor::stage_actor::behavior_type {
              return {[shift](actor::process_atom, actor::work_item& item) {
                item.payload = caesar_shift(item.payload, shift);
                return std::move(item);
              }};
            });
        return caf::actor_cast<caf::actor>(handle);
      });
}

}  // namespace troupe::example
