#include "runtime/actor/system_config.hpp"

#include <thread>

#include "runtime/actor/io_work_stealing.hpp"
#include "runtime/actor/messages.hpp"
#include "runtime/actor/status_bridge.hpp"

namespace troupe::actor {

std::unique_ptr<caf::actor_system_config> make_system_config(const config::runtime_spec& runtime) {
  auto cfg = std::make_unique<caf::actor_system_config>();
  cfg->add_message_types<caf::id_block::troupe>();
  add_troupe_error_category(*cfg);
  const size_t threads = runtime.scheduler_threads > 0
                             ? static_cast<size_t>(runtime.scheduler_threads)
                             : std::max(1u, std::thread::hardware_concurrency());
  cfg->set("scheduler.max-threads", threads);
  if (runtime.scheduler_policy == "sharing") {
    cfg->set("scheduler.policy", caf::atom("sharing"));
  } else {
    cfg->module_factories.push_back(make_io_work_stealing);
    cfg->set("work-stealing.relaxed-sleep-duration", caf::timespan{io_work_stealing::idle_recheck});
  }
  if (runtime.max_throughput > 0) {
    cfg->set("scheduler.max-throughput", static_cast<size_t>(runtime.max_throughput));
  }
  return cfg;
}

}  // namespace troupe::actor
