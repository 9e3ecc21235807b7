#include "actors/role_host_actor.hpp"

#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "runtime/actor/role_context.hpp"
#include "runtime/actor/status_bridge.hpp"
#include "runtime/comm/rendezvous_store.hpp"

namespace troupe::actors {
namespace {

struct role_host_state {
  std::shared_ptr<const role_host_deps> deps;
  // Shared with the exit hook that stops the hosted actors when the host terminates.
  std::shared_ptr<std::map<caf::actor_addr, std::string>> hosted =
      std::make_shared<std::map<caf::actor_addr, std::string>>();
};

using host_self = actor::role_pointer<role_host_actor, role_host_state>;

absl::Status spawn_role(host_self self, const std::string& role, int32_t index) {
  auto& st = self->state;
  const auto* resolved = st.deps->plan.find_role(role);
  if (resolved == nullptr) {
    return absl::NotFoundError(absl::StrCat("this worker's app has no role '", role, "'"));
  }
  const auto& node = st.deps->node.options();
  actor::role_context ctx{.system = self->system(),
                          .metrics = st.deps->metrics,
                          .events = st.deps->events,
                          .plan = st.deps->plan,
                          .role = role,
                          .index = index,
                          .cores = static_cast<int>(node.res.cores),
                          .rendezvous = comm::head_store_opener(node.head, node.credentials),
                          .host = node.bind_host};
  const std::string name = ctx.actor_name();
  auto handle = resolved->entry->factory.spawn(ctx, resolved->options.get());
  if (!handle.ok()) {
    return absl::Status(handle.status().code(),
                        absl::StrCat("cannot start ", name, ": ", handle.status().message()));
  }
  self->monitor(*handle);
  (*st.hosted)[handle->address()] = name;
  st.deps->node.publish(name, *handle);
  self->send(st.deps->health, actor::track_atom_v, name, *handle);
  return absl::OkStatus();
}

}  // namespace

std::string role_host_name(absl::string_view node) {
  return absl::StrCat("host/", node);
}

role_host_actor spawn_role_host(caf::actor_system& system, role_host_deps deps) {
  using role = actor::role_actor<role_host_actor, role_host_state>;
  auto stats = deps.metrics.actor(role_host_name(deps.node.id()));
  auto shared = std::make_shared<const role_host_deps>(std::move(deps));
  return system.spawn<role>(
      std::move(stats), [shared](host_self self) -> role_host_actor::behavior_type {
        self->state.deps = shared;
        self->set_down_handler([self](caf::down_msg& down) {
          auto& st = self->state;
          auto it = st.hosted->find(down.source);
          if (it == st.hosted->end()) return;
          const std::string name = it->second;
          st.hosted->erase(it);
          st.deps->node.unpublish(name);
          const absl::Status reason = actor::to_status(down.reason);
          caf::anon_send(st.deps->node.remote(std::string(supervisor_name), "head"),
                         actor::actor_down{name, static_cast<int32_t>(reason.code()),
                                           std::string(reason.message())});
        });
        // Whatever this host started stops with it.
        self->attach_functor([hosted = self->state.hosted](const caf::error&) {
          for (const auto& [addr, name] : *hosted) {
            if (auto h = caf::actor_cast<caf::actor>(addr)) {
              caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
            }
          }
        });
        return {
            [self](actor::spawn_atom, const std::string& role,
                   int32_t index) -> caf::result<caf::ok_atom> {
              if (auto s = spawn_role(self, role, index); !s.ok()) return actor::to_error(s);
              return caf::ok_atom::value;
            },
        };
      });
}

}  // namespace troupe::actors
