#include "actors/health_monitor_actor.hpp"

#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/actor/system_config.hpp"
#include "tests/support/wait.hpp"

namespace troupe::actors {
namespace {

// A real actor system: a busy actor misses pings and is reported; once free it answers again;
// a killed actor is reported dead.
TEST(HealthMonitorActor, DetectsABlockedActorAndItsRecovery) {
  auto cfg = actor::make_system_config({.scheduler_threads = 4});
  caf::actor_system system{*cfg};
  metrics::registry metrics;
  run::event_log events;
  std::mutex mu;
  std::vector<std::string> seen;
  events.add_listener([&](const nlohmann::json& e) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(e["event"].get<std::string>() + " " + e.value("actor", std::string()));
  });
  auto has = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    return std::find(seen.begin(), seen.end(), what) != seen.end();
  };

  // Its handler blocks until the test lets it go: it hangs for as long as the test needs.
  std::promise<void> let_go;
  std::shared_future<void> released = let_go.get_future().share();
  auto sleeper = system.spawn([released](caf::event_based_actor*) -> caf::behavior {
    return {[released](int) { released.wait_for(std::chrono::seconds(30)); }};
  });
  auto monitor = spawn_health_monitor(
      system, {.interval_ms = 20, .ping_timeout_ms = 30, .unresponsive_after = 2}, metrics, events);
  caf::anon_send(monitor, actor::track_atom_v, std::string("sleeper/0"), sleeper);

  auto up = [&] {
    return metrics.get_gauge("troupe_actor_up", "", {{"actor", "sleeper/0"}}).value();
  };
  EXPECT_TRUE(testing::wait_until([&] { return up() == 1; }));
  caf::anon_send(sleeper, 0);  // hangs its handler
  EXPECT_TRUE(testing::wait_until([&] { return has("actor_unresponsive sleeper/0"); }));
  EXPECT_EQ(up(), 0);
  let_go.set_value();
  EXPECT_TRUE(testing::wait_until([&] { return has("actor_responsive sleeper/0"); }));
  EXPECT_EQ(up(), 1);

  caf::anon_send_exit(sleeper, caf::exit_reason::kill);
  EXPECT_TRUE(testing::wait_until([&] { return up() == 0; }));
  caf::anon_send_exit(monitor, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace troupe::actors
