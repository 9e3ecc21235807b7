#include "actors/digest_sink_actor.hpp"

#include "runtime/actor/interfaces.hpp"
#include "runtime/actor/role_context.hpp"

namespace troupe::actors {
namespace {

struct digest_sink_state {
  digest_sink sink;
};

using sink_self = actor::role_pointer<actor::sink_actor, digest_sink_state>;

}  // namespace

actor::role_factory digest_sink_factory() {
  auto factory = actor::make_role_factory<digest_sink_options>(
      "counts and an order-sensitive digest of the stream", {},
      [](actor::role_context& ctx, const digest_sink_options&) -> absl::StatusOr<caf::actor> {
        auto handle = ctx.spawn<actor::sink_actor, digest_sink_state>(
            [](sink_self self) -> actor::sink_actor::behavior_type {
              return {
                  [self](actor::consume_atom, const actor::work_item& item) {
                    return actor::to_result(self, self->state.sink.consume(item.seq, item.payload));
                  },
                  [self](actor::finish_atom) { return self->state.sink.report(); },
              };
            });
        return caf::actor_cast<caf::actor>(handle);
      });
  factory.restartable = false;
  return factory;
}

}  // namespace troupe::actors
