#include "actors/health_monitor.hpp"

namespace troupe::actors {

const char* to_string(liveness l) {
  switch (l) {
    case liveness::alive:
      return "alive";
    case liveness::unresponsive:
      return "unresponsive";
    case liveness::dead:
      return "dead";
  }
  return "dead";
}

void health_monitor::set(const std::string& actor, entry& e, liveness to) {
  if (e.state != to) {
    const auto stats = metrics_.actor(actor);
    changes_.push_back({actor, e.state, to, e.missed_in_a_row, stats->mailbox_depth(),
                        stats->handler_age_seconds()});
  }
  e.state = to;
  metrics_.get_gauge("troupe_actor_up", "1 if the actor answers pings, else 0", {{"actor", actor}})
      .set(to == liveness::alive ? 1 : 0);
}

void health_monitor::track(const std::string& actor) {
  entry& e = actors_[actor];  // a new entry starts alive, so only a comeback is a change
  e.missed_in_a_row = 0;
  set(actor, e, liveness::alive);
}

void health_monitor::pong(const std::string& actor, std::chrono::nanoseconds rtt) {
  auto it = actors_.find(actor);
  if (it == actors_.end() || it->second.state == liveness::dead) return;
  it->second.missed_in_a_row = 0;
  metrics_
      .get_gauge("troupe_actor_ping_seconds", "Round trip of the last liveness ping",
                 {{"actor", actor}})
      .set(std::chrono::duration<double>(rtt).count());
  set(actor, it->second, liveness::alive);
}

void health_monitor::missed(const std::string& actor) {
  auto it = actors_.find(actor);
  if (it == actors_.end() || it->second.state == liveness::dead) return;
  metrics_
      .get_counter("troupe_actor_missed_pings_total", "Liveness pings not answered in time",
                   {{"actor", actor}})
      .inc();
  if (++it->second.missed_in_a_row >= spec_.unresponsive_after) {
    set(actor, it->second, liveness::unresponsive);
  }
}

void health_monitor::down(const std::string& actor) {
  auto it = actors_.find(actor);
  if (it == actors_.end()) return;
  set(actor, it->second, liveness::dead);
}

std::vector<std::string> health_monitor::pingable() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : actors_) {
    if (e.state != liveness::dead) out.push_back(name);
  }
  return out;
}

liveness health_monitor::status(const std::string& actor) const {
  auto it = actors_.find(actor);
  return it == actors_.end() ? liveness::dead : it->second.state;
}

std::vector<health_monitor::change> health_monitor::take_changes() {
  return std::exchange(changes_, {});
}

}  // namespace troupe::actors
