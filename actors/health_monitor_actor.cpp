#include "actors/health_monitor_actor.hpp"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/actor/status_bridge.hpp"

namespace troupe::actors {
namespace {

struct health_state {
  config::health_spec spec;
  std::unique_ptr<health_monitor> logic;
  run::event_log* events = nullptr;
  std::map<std::string, caf::actor> actors;
  std::map<caf::actor_addr, std::string> names;
  std::set<std::string> outstanding;  // one ping per actor at a time
};

using health_self = actor::role_pointer<health_actor, health_state>;

void report_changes(health_state& st) {
  for (const auto& c : st.logic->take_changes()) {
    if (c.to == liveness::unresponsive) {
      st.events->emit(
          run::severity::warning, "actor_unresponsive",
          absl::StrFormat("%s missed %d liveness pings in a row (%s, %d messages waiting)", c.actor,
                          c.missed_in_a_row,
                          c.in_handler_seconds > 0
                              ? absl::StrFormat("in one handler for %.2f s", c.in_handler_seconds)
                              : std::string("idle"),
                          c.mailbox_depth),
          {{"actor", c.actor},
           {"missed", c.missed_in_a_row},
           {"mailbox_depth", c.mailbox_depth},
           {"in_handler_seconds", c.in_handler_seconds}});
    } else if (c.to == liveness::alive && c.from == liveness::unresponsive) {
      st.events->emit(run::severity::info, "actor_responsive",
                      absl::StrCat(c.actor, " answers again"), {{"actor", c.actor}});
    }
  }
}

void ping_all(health_self self) {
  auto& st = self->state;
  for (const auto& name : st.logic->pingable()) {
    if (st.outstanding.count(name) || !st.actors.count(name)) continue;
    st.outstanding.insert(name);
    const auto start = std::chrono::steady_clock::now();
    const caf::actor target = st.actors[name];
    self->request(target, std::chrono::milliseconds(st.spec.ping_timeout_ms), caf::sys_atom::value,
                  caf::get_atom::value, std::string("info"))
        .then(
            [self, name, start, target](caf::ok_atom, std::string&, caf::strong_actor_ptr&,
                                        std::string&) {
              self->state.outstanding.erase(name);
              if (self->state.actors[name] != target) return;  // answered by an old incarnation
              self->state.logic->pong(name, std::chrono::steady_clock::now() - start);
              report_changes(self->state);
            },
            [self, name, target](caf::error& e) {
              self->state.outstanding.erase(name);
              if (self->state.actors[name] != target) return;
              if (e == caf::sec::request_timeout) self->state.logic->missed(name);
              report_changes(self->state);
            });
  }
}

}  // namespace

health_actor spawn_health_monitor(caf::actor_system& system, const config::health_spec& spec,
                                  metrics::registry& metrics, run::event_log& events) {
  using role = actor::role_actor<health_actor, health_state>;
  return system.spawn<role>(
      metrics.actor("health_monitor"), [spec, &metrics, &events](health_self self) {
        self->state.spec = spec;
        self->state.logic = std::make_unique<health_monitor>(spec, metrics);
        self->state.events = &events;
        self->set_down_handler([self](caf::down_msg& msg) {
          auto& st = self->state;
          auto it = st.names.find(msg.source);
          if (it == st.names.end()) return;
          const std::string name = it->second;
          st.names.erase(it);
          if (st.actors[name].address() != msg.source) return;  // an old incarnation
          st.logic->down(name);
          report_changes(st);
        });
        self->send(self, actor::tick_atom_v);
        return health_actor::behavior_type{
            [self](actor::track_atom, const std::string& name, const caf::actor& handle) {
              auto& st = self->state;
              st.actors[name] = handle;
              st.names[handle.address()] = name;
              self->monitor(handle);
              st.logic->track(name);
              report_changes(st);
            },
            [self](actor::tick_atom) {
              ping_all(self);
              self->delayed_send(self, std::chrono::milliseconds(self->state.spec.interval_ms),
                                 actor::tick_atom_v);
            },
        };
      });
}

}  // namespace troupe::actors
