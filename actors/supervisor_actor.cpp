#include "actors/supervisor_actor.hpp"

#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "actors/placement.hpp"
#include "actors/role_host_actor.hpp"
#include "actors/supervisor.hpp"
#include "runtime/actor/role_context.hpp"
#include "runtime/actor/status_bridge.hpp"

namespace troupe::actors {
namespace {

constexpr absl::string_view driver_name = "app/0";  // role "app", index 0

struct supervisor_state {
  std::shared_ptr<const supervisor_deps> deps;
  supervision policy;
  placement nodes;
  // Each supervised actor's role, by actor name.
  std::map<std::string, const app::resolved_role*> role_of;
  // Actors of each role that run or are being started (elastic roles grow and shrink).
  std::map<std::string, int> live;
  // The next index of each elastic role.
  std::map<std::string, int> next_index;
  std::map<caf::actor_addr, std::string> names;
  // The app's colocation: each colocated role's group, and where each group's actors of one
  // index run (a worker node; empty: this process).
  std::map<std::string, int> group_of;
  std::map<std::pair<int, int>, std::string> slot_node;
  // Shared with the exit hook that stops every child when the supervisor terminates.
  std::shared_ptr<std::map<std::string, caf::actor>> children =
      std::make_shared<std::map<std::string, caf::actor>>();
  actor::app_actor driver;
  // Spawns still under way before the driver may start.
  int starting = 0;
  bool running = false;
  bool finished = false;
  bool stopping = false;  // (stop) asked: the driver winds down
};

using supervisor_self = actor::role_pointer<supervisor_actor, supervisor_state>;

void spawn_instance(supervisor_self self, const app::resolved_role& role, int index, bool initial);
void apply_policy(supervisor_self self, const std::string& name, const absl::Status& status);

void finish(supervisor_self self, actor::job_result result) {
  auto& st = self->state;
  if (st.finished) return;
  st.finished = true;
  if (result.ok) {
    st.deps->events.emit(run::severity::info, "job_succeeded", "the app finished");
  } else if (st.stopping) {
    st.deps->events.emit(run::severity::warning, "job_interrupted", "stopped on request");
  } else {
    st.deps->events.emit(run::severity::error, "job_failed", result.error,
                         {{"error", result.error}});
  }
  caf::anon_send(st.deps->owner, std::move(result));
  self->quit();
}

void fail(supervisor_self self, std::string cause) {
  finish(self, actor::job_result{false, {}, std::move(cause)});
}

// Starts watching `handle` as `name`: monitored, stopped with the supervisor.
void watch(supervisor_self self, const std::string& name, const caf::actor& handle) {
  auto& st = self->state;
  self->monitor(handle);
  st.names[handle.address()] = name;
  (*st.children)[name] = handle;
}

// What the driver is told of actor `name`: its handle and its node.
actor::actor_update update_of(supervisor_self self, const std::string& name) {
  auto& st = self->state;
  return {name, st.children->at(name), st.nodes.node_of(name).value_or("")};
}

// The driver learns of a new or replaced actor.
void announce(supervisor_self self, const std::string& name) {
  auto& st = self->state;
  if (st.running) self->send(st.driver, update_of(self, name));
}

void grow(supervisor_self self);

// After the initial spawns: hand the driver every actor, then run it.
void maybe_run(supervisor_self self) {
  auto& st = self->state;
  if (st.running || st.finished || st.starting > 0 || !st.driver) return;
  st.running = true;
  for (const auto& [name, unused] : *st.children) {
    if (name != driver_name) self->send(st.driver, update_of(self, name));
  }
  const auto& plan = st.deps->plan;
  st.deps->events.emit(
      run::severity::info, "job_started",
      absl::StrCat("started ", st.children->size() - 1, " actors for app ", plan.spec.app,
                   st.deps->node ? absl::StrCat(" on ", st.nodes.worker_count(), " workers") : ""),
      {{"actors", st.children->size() - 1}});
  self->request(st.driver, caf::infinite, actor::run_atom_v)
      .then([self](actor::job_result& result) { finish(self, std::move(result)); },
            [self](caf::error& e) {
              fail(self, absl::StrCat("the app driver failed: ", actor::to_status(e).message()));
            });
  grow(self);  // workers that joined while the job started get their elastic actors now
}

// Spawns actor `index` of `role` in this process.
absl::StatusOr<caf::actor> spawn_here(supervisor_self self, const actor::role_factory& factory,
                                      const void* options, const std::string& role, int index) {
  auto& st = self->state;
  actor::role_context ctx{.system = self->system(),
                          .metrics = st.deps->metrics,
                          .events = st.deps->events,
                          .plan = st.deps->plan,
                          .role = role,
                          .index = index,
                          .run_dir = st.deps->run_dir,
                          .rendezvous = st.deps->rendezvous,
                          .scaler = st.deps->scaler};
  if (st.deps->node != nullptr) ctx.host = st.deps->node->options().bind_host;
  auto handle = factory.spawn(ctx, options);
  if (!handle.ok()) {
    return absl::Status(handle.status().code(), absl::StrCat("cannot start ", ctx.actor_name(),
                                                             ": ", handle.status().message()));
  }
  self->send(st.deps->health, actor::track_atom_v, ctx.actor_name(), *handle);
  return handle;
}

// A spawn that did not happen: for the first start the job cannot run; a failed restart counts
// as one more failure of the actor.
void spawn_failed(supervisor_self self, const std::string& name, bool initial,
                  const absl::Status& why) {
  auto& st = self->state;
  --st.live[st.role_of.at(name)->spec.name];
  if (initial) return fail(self, std::string(why.message()));
  apply_policy(self, name, why);
}

void spawn_instance(supervisor_self self, const app::resolved_role& role, int index, bool initial) {
  auto& st = self->state;
  const std::string name = absl::StrCat(role.spec.name, "/", index);
  st.role_of[name] = &role;
  ++st.live[role.spec.name];
  // A colocated actor goes where its group's actor of the same index went (unless that worker
  // is gone); the first of them is placed by the role's own placement.
  std::optional<std::pair<int, int>> slot;
  std::optional<std::string> with;
  if (auto g = st.group_of.find(role.spec.name); g != st.group_of.end()) {
    slot = std::pair{g->second, index};
    if (auto s = st.slot_node.find(*slot);
        s != st.slot_node.end() && (s->second.empty() || st.nodes.has_worker(s->second))) {
      with = s->second;
    }
  }
  const bool here =
      st.deps->node == nullptr || (with ? with->empty() : role.spec.placement == "head");
  if (here) {
    if (slot) st.slot_node[*slot] = "";
    auto handle = spawn_here(self, role.entry->factory, role.options.get(), role.spec.name, index);
    if (!handle.ok()) return spawn_failed(self, name, initial, handle.status());
    if (st.deps->node != nullptr) st.deps->node->publish(name, *handle);
    watch(self, name, *handle);
    return announce(self, name);
  }
  const auto node = with ? with : st.nodes.choose();
  if (!node) {
    return spawn_failed(
        self, name, initial,
        absl::UnavailableError(absl::StrCat("no live worker to run ", name, " on")));
  }
  st.nodes.assign(name, *node);
  if (slot) st.slot_node[*slot] = *node;
  if (initial) ++st.starting;
  auto host = caf::actor_cast<role_host_actor>(st.deps->node->remote(role_host_name(*node), *node));
  const auto timeout = std::chrono::milliseconds(st.deps->plan.spec.cluster.request_timeout_ms);
  self->request(host, timeout, actor::spawn_atom_v, role.spec.name, int32_t{index})
      .then(
          [self, name, node = *node, initial](caf::ok_atom) {
            auto& st = self->state;
            if (initial) --st.starting;
            watch(self, name, st.deps->node->remote(name, node));
            announce(self, name);
            maybe_run(self);
          },
          [self, name, node = *node, initial](caf::error& e) {
            auto& st = self->state;
            if (initial) --st.starting;
            st.nodes.release(name);
            spawn_failed(self, name, initial,
                         absl::UnavailableError(absl::StrCat("cannot start ", name, " on ", node,
                                                             ": ", actor::to_status(e).message())));
          });
}

void apply_policy(supervisor_self self, const std::string& name, const absl::Status& status) {
  auto& st = self->state;
  const app::resolved_role& role = *st.role_of.at(name);
  // An elastic role shrinks with its workers, down to its min. One that cannot be restarted
  // shrinks below min too: a fresh actor would not have its state, so its app decides (an
  // elastic pretraining job waits for a worker to join). So does an autoscaled one: the job
  // starts a worker in place of the lost one (actor::worker_scaler::replace), where it grows.
  const auto elastic = role.spec.elastic_bounds();
  if (elastic && (st.live[role.spec.name] >= elastic->min || !role.entry->factory.restartable ||
                  role.spec.autoscale)) {
    // An autoscaled role shrinks by design (a drained worker retires); its app reports a loss.
    st.deps->events.emit(role.spec.autoscale ? run::severity::info : run::severity::warning,
                         "role_shrunk",
                         absl::StrCat(name, " stopped (", status.message(), "); ", role.spec.name,
                                      " continues with ", st.live[role.spec.name], " actors"),
                         {{"actor", name}, {"error", std::string(status.message())}});
    return;
  }
  if (role.entry->factory.app_decides_loss && st.running) {
    st.deps->events.emit(run::severity::warning, "actor_lost",
                         absl::StrCat(name, " stopped (", status.message(), "); its app decides"),
                         {{"actor", name}, {"error", std::string(status.message())}});
    return;
  }
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

void on_child_down(supervisor_self self, const std::string& name, const caf::error& reason) {
  auto& st = self->state;
  if (name == driver_name) {
    if (reason) {
      fail(self, absl::StrCat("the app driver failed: ", actor::to_status(reason).message()));
    }
    return;
  }
  st.nodes.release(name);
  st.children->erase(name);
  --st.live[st.role_of.at(name)->spec.name];
  apply_policy(self, name, actor::to_status(reason));
}

// Elastic roles get an actor on each worker that joined, up to their max.
void grow(supervisor_self self) {
  auto& st = self->state;
  for (const auto& role : st.deps->plan.roles) {
    const auto elastic = role.spec.elastic_bounds();
    if (!elastic || role.embedded) continue;
    while (st.live[role.spec.name] < st.nodes.elastic_target(*elastic)) {
      const int index = st.next_index[role.spec.name]++;
      st.policy.add(absl::StrCat(role.spec.name, "/", index), role.on_failure);
      st.deps->events.emit(
          run::severity::info, "role_grown",
          absl::StrCat(role.spec.name, " grows to ", st.live[role.spec.name] + 1, " actors"),
          {{"role", role.spec.name}, {"actor", absl::StrCat(role.spec.name, "/", index)}});
      spawn_instance(self, role, index, false);
    }
  }
}

void start(supervisor_self self) {
  auto& st = self->state;
  const auto& plan = st.deps->plan;
  if (const auto& colocation = plan.app_entry->factory.colocation) {
    const auto groups = colocation(plan.app_options.get());
    for (size_t g = 0; g < groups.size(); ++g) {
      for (const auto& role : groups[g])
        st.group_of[role] = static_cast<int>(g);
    }
  }
  if (st.deps->node != nullptr) {
    for (const auto& p : st.deps->node->peers()) {
      if (!p.head && p.state == cluster::member_state::alive) st.nodes.add_worker(p.node);
    }
  }
  for (const auto& role : plan.roles) {
    if (role.embedded) continue;
    const auto elastic = role.spec.elastic_bounds();
    const int count = elastic ? st.nodes.elastic_target(*elastic) : role.spec.count;
    for (int i = 0; i < count; ++i) {
      st.policy.add(absl::StrCat(role.spec.name, "/", i), role.on_failure);
      spawn_instance(self, role, i, true);
      if (st.finished) return;
    }
    st.next_index[role.spec.name] = count;
  }
  auto driver = spawn_here(self, plan.app_entry->factory, plan.app_options.get(), "app", 0);
  if (!driver.ok()) return fail(self, std::string(driver.status().message()));
  st.driver = caf::actor_cast<actor::app_actor>(*driver);
  watch(self, std::string(driver_name), *driver);
  maybe_run(self);
}

}  // namespace

supervisor_actor spawn_supervisor(caf::actor_system& system, supervisor_deps deps) {
  using role = actor::role_actor<supervisor_actor, supervisor_state>;
  auto stats = deps.metrics.actor(std::string(supervisor_name));
  auto shared_deps = std::make_shared<supervisor_deps>(std::move(deps));
  auto handle = system.spawn<role>(std::move(stats), [shared_deps](supervisor_self self) {
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
      // A restarted actor's predecessor may report late; only the current one counts.
      if (auto c = s.children->find(name);
          c != s.children->end() && c->second.address() != msg.source) {
        return;
      }
      on_child_down(self, name, msg.reason);
    });
    start(self);
    return supervisor_actor::behavior_type{
        [self](actor::restart_atom, const std::string& name) {
          auto& s = self->state;
          if (s.finished) return;
          const app::resolved_role& role = *s.role_of.at(name);
          spawn_instance(self, role, actor::parse_actor_name(name).index, false);
          s.deps->events.emit(run::severity::info, "actor_restarted",
                              absl::StrCat(name, " restarted (", s.policy.restarts(name), " of ",
                                           role.on_failure.restart.max, ")"),
                              {{"actor", name}, {"restarts", s.policy.restarts(name)}});
        },
        [self](const actor::actor_down& down) {
          // A worker's role host reports an actor it hosted: end its stand-in, whose monitor
          // then reports the failure here like a local actor's.
          auto& s = self->state;
          if (s.finished || s.deps->node == nullptr) return;
          s.deps->node->forget(
              down.name, absl::Status(static_cast<absl::StatusCode>(down.code),
                                      down.message.empty() ? "stopped on its own" : down.message));
        },
        [self](actor::stop_atom) {
          auto& s = self->state;
          if (s.finished || s.stopping) return;
          s.stopping = true;
          if (s.running) {
            self->send(s.driver, actor::stop_atom_v);  // it answers `run` when it has stopped
          } else {
            finish(self, actor::job_result{false, {}, "interrupted"});
          }
        },
        [self](const actor::member_event& event) {
          auto& s = self->state;
          if (s.finished) return;
          if (event.kind == "joined") {
            s.nodes.add_worker(event.node);
            if (s.running) grow(self);
          } else {
            s.nodes.remove_worker(event.node);
          }
        },
    };
  });
  return handle;
}

}  // namespace troupe::actors
