#include "actors/supervisor_actor.hpp"

#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "actors/supervisor.hpp"
#include "runtime/actor/role_context.hpp"
#include "runtime/actor/status_bridge.hpp"

namespace troupe::actors {
namespace {

// Where a supervised actor comes from, to spawn it again.
constexpr absl::string_view driver_name = "app/0";  // role "app", index 0

struct child_origin {
  const app::resolved_role* role;
  int index;
};

struct supervisor_state {
  std::shared_ptr<const supervisor_deps> deps;
  supervision policy;
  std::map<std::string, child_origin> origins;
  std::map<caf::actor_addr, std::string> names;
  // Shared with the exit hook that stops every child when the supervisor terminates.
  std::shared_ptr<std::map<std::string, caf::actor>> children =
      std::make_shared<std::map<std::string, caf::actor>>();
  actor::app_actor driver;
  bool finished = false;
};

using self_ptr = actor::role_pointer<supervisor_actor, supervisor_state>;

void finish(self_ptr self, actor::job_result result) {
  auto& st = self->state;
  if (st.finished) return;
  st.finished = true;
  if (result.ok) {
    st.deps->events.emit(run::severity::info, "job_succeeded", "the app finished");
  } else {
    st.deps->events.emit(run::severity::error, "job_failed", result.error,
                         {{"error", result.error}});
  }
  caf::anon_send(st.deps->owner, std::move(result));
  self->quit();
}

void fail(self_ptr self, std::string cause) {
  finish(self, actor::job_result{false, {}, std::move(cause)});
}

// Spawns actor `index` of `role` with `factory` and starts watching it: monitored by the
// supervisor, tracked by the health monitor, stopped with the supervisor.
absl::StatusOr<caf::actor> spawn_watched(self_ptr self, const actor::role_factory& factory,
                                         const void* options, const std::string& role, int index) {
  auto& st = self->state;
  actor::role_context ctx{self->system(), st.deps->metrics, st.deps->events, st.deps->plan, role,
                          index};
  const std::string name = ctx.actor_name();
  auto handle = factory.spawn(ctx, options);
  if (!handle.ok()) {
    return absl::Status(handle.status().code(),
                        absl::StrCat("cannot start ", name, ": ", handle.status().message()));
  }
  self->monitor(*handle);
  st.names[handle->address()] = name;
  (*st.children)[name] = *handle;
  self->send(st.deps->health, actor::track_atom_v, name, *handle);
  return *handle;
}

// Spawns (or respawns) actor `index` of `role`.
absl::Status spawn_child(self_ptr self, const app::resolved_role& role, int index) {
  auto handle = spawn_watched(self, role.entry->factory, role.options.get(), role.spec.name, index);
  if (!handle.ok()) return handle.status();
  self->state.origins[absl::StrCat(role.spec.name, "/", index)] = {&role, index};
  return absl::OkStatus();
}

void on_child_down(self_ptr self, const std::string& name, const caf::error& reason) {
  auto& st = self->state;
  if (name == driver_name) {
    if (reason)
      fail(self, absl::StrCat("the app driver failed: ", actor::to_status(reason).message()));
    return;
  }
  const absl::Status status = actor::to_status(reason);
  const auto d = st.policy.on_exit(name, status);
  switch (d.what) {
    case supervision::decision::action::ignore:
      return;
    case supervision::decision::action::fail_job:
      fail(self, d.cause);
      return;
    case supervision::decision::action::restart:
      st.deps->events.emit(run::severity::warning, "actor_failed",
                           absl::StrCat(name, " failed: ", status.message(), "; restart ",
                                        d.attempt, " in ", d.delay.count(), " ms"),
                           {{"actor", name},
                            {"error", std::string(status.message())},
                            {"attempt", d.attempt},
                            {"delay_ms", d.delay.count()}});
      self->delayed_send(self, d.delay, actor::restart_atom_v, name);
      return;
  }
}

void start(self_ptr self) {
  auto& st = self->state;
  const auto& plan = st.deps->plan;
  for (const auto& role : plan.roles) {
    for (int i = 0; i < role.spec.count; ++i) {
      st.policy.add(absl::StrCat(role.spec.name, "/", i), role.on_failure);
      if (auto s = spawn_child(self, role, i); !s.ok()) {
        return fail(self, std::string(s.message()));
      }
    }
  }
  auto driver = spawn_watched(self, plan.app_entry->factory, plan.app_options.get(), "app", 0);
  if (!driver.ok()) return fail(self, std::string(driver.status().message()));
  st.driver = caf::actor_cast<actor::app_actor>(*driver);
  for (const auto& [name, handle] : *st.children) {
    if (name != driver_name) self->send(st.driver, actor::actor_update{name, handle});
  }
  st.deps->events.emit(
      run::severity::info, "job_started",
      absl::StrCat("started ", plan.actor_count(), " actors for app ", plan.spec.app),
      {{"actors", plan.actor_count()}});
  self->request(st.driver, caf::infinite, actor::run_atom_v)
      .then([self](actor::job_result& result) { finish(self, std::move(result)); },
            [self](caf::error& e) {
              fail(self, absl::StrCat("the app driver failed: ", actor::to_status(e).message()));
            });
}

}  // namespace

supervisor_actor spawn_supervisor(caf::actor_system& system, supervisor_deps deps) {
  using role = actor::role_actor<supervisor_actor, supervisor_state>;
  auto stats = deps.metrics.actor("supervisor");
  auto shared_deps = std::make_shared<supervisor_deps>(std::move(deps));
  return system.spawn<role>(std::move(stats), [shared_deps](self_ptr self) {
    auto& st = self->state;
    st.deps = shared_deps;
    self->attach_functor([children = st.children](const caf::error&) {
      for (const auto& [name, handle] : *children) {
        caf::anon_send_exit(handle, caf::exit_reason::user_shutdown);
      }
    });
    self->set_down_handler([self](caf::down_msg& msg) {
      auto& s = self->state;
      auto it = s.names.find(msg.source);
      if (it == s.names.end() || s.finished) return;
      const std::string name = it->second;
      s.names.erase(it);
      on_child_down(self, name, msg.reason);
    });
    start(self);
    return supervisor_actor::behavior_type{
        [self](actor::restart_atom, const std::string& name) {
          auto& s = self->state;
          if (s.finished) return;
          const child_origin origin = s.origins.at(name);
          if (auto status = spawn_child(self, *origin.role, origin.index); !status.ok()) {
            return fail(self, std::string(status.message()));
          }
          const caf::actor& handle = s.children->at(name);
          self->send(s.driver, actor::actor_update{name, handle});
          s.deps->events.emit(run::severity::info, "actor_restarted",
                              absl::StrCat(name, " restarted (", s.policy.restarts(name), " of ",
                                           origin.role->on_failure.restart.max, ")"),
                              {{"actor", name}, {"restarts", s.policy.restarts(name)}});
        },
    };
  });
}

}  // namespace troupe::actors
