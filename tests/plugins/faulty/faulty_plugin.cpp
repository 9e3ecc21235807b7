// A stage that misbehaves on purpose, for supervision tests: the first `fail_first` items a
// role sees (counted across restarts, since the plugin outlives its actors) throw, return an
// error, or sleep; later items pass through unchanged.

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "runtime/actor/interfaces.hpp"
#include "runtime/actor/role_context.hpp"
#include "runtime/plugin/plugin_api.hpp"

namespace {

struct faulty_options {
  int fail_first = 1;
  std::string mode = "throw";  // throw | error | sleep
  int sleep_ms = 0;
};

// Items seen per role, shared by all of the role's actors and their restarts.
std::atomic<int>& seen_by(const std::string& role) {
  static std::mutex mu;
  static std::map<std::string, std::atomic<int>> counts;
  std::lock_guard<std::mutex> lock(mu);
  return counts[role];
}

troupe::actor::role_factory faulty_factory() {
  using namespace troupe;
  config::object_schema<faulty_options> schema;
  schema.add("fail_first", &faulty_options::fail_first).range(0, 1 << 20);
  schema.add("mode", &faulty_options::mode).one_of({"throw", "error", "sleep"});
  schema.add("sleep_ms", &faulty_options::sleep_ms).range(0, 600000);
  return actor::make_role_factory<faulty_options>(
      "fails on purpose (tests)", std::move(schema),
      [](actor::role_context& ctx, const faulty_options& options) -> absl::StatusOr<caf::actor> {
        std::atomic<int>* seen = &seen_by(ctx.role);
        auto handle = ctx.spawn<actor::stage_actor>(
            [options, seen](
                actor::role_pointer<actor::stage_actor> self) -> actor::stage_actor::behavior_type {
              return {[self, options, seen](
                          actor::process_atom,
                          actor::work_item& item) -> caf::result<actor::work_item> {
                if (seen->fetch_add(1) < options.fail_first) {
                  const std::string what = "injected failure on item " + std::to_string(item.seq);
                  if (options.mode == "throw") throw std::runtime_error(what);
                  if (options.mode == "error") {
                    return actor::to_result(
                        self, absl::StatusOr<actor::work_item>(absl::InternalError(what)));
                  }
                  std::this_thread::sleep_for(std::chrono::milliseconds(options.sleep_ms));
                }
                return std::move(item);
              }};
            });
        return caf::actor_cast<caf::actor>(handle);
      });
}

void register_roles(troupe::plugin::registrar& r) {
  r.add_role("stage", "faulty", faulty_factory());
}

}  // namespace

TROUPE_PLUGIN("faulty", "stages that fail on purpose, for tests", register_roles)
