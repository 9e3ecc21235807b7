#include "actors/checkpoint_writer_actor.hpp"

#include "actors/checkpoint_writer.hpp"
#include "runtime/actor/role_actor.hpp"
#include "runtime/actor/status_bridge.hpp"

namespace troupe::actors {

actor::checkpoint_writer_actor spawn_checkpoint_writer(caf::actor_system& system,
                                                       metrics::registry& metrics,
                                                       const std::string& name) {
  using self_ptr = actor::role_pointer<actor::checkpoint_writer_actor, actor::no_state>;
  return system.spawn<actor::role_actor<actor::checkpoint_writer_actor>, caf::detached>(
      metrics.actor(name), [](self_ptr) -> actor::checkpoint_writer_actor::behavior_type {
        return {
            [](const actor::checkpoint_snapshot& snapshot) -> caf::result<actor::checkpoint_shard> {
              absl::StatusOr<actor::checkpoint_shard> shard = write_snapshot(snapshot);
              if (!shard.ok()) return actor::to_error(shard.status());
              return *std::move(shard);
            },
        };
      });
}

}  // namespace troupe::actors
