// A stage that misbehaves on purpose, for supervision tests: the first `fail_first` items a
// role sees (counted across restarts, since the plugin outlives its actors) throw, return an
// error, sleep, are held or hang; later items pass through unchanged.
// - hold: the items wait, in order, while the test hold is on (TROUPE_TEST_HOLD, docs/testing.md)
//   and the actor stays responsive: a job in flight by construction, however fast the machine.
// - hang: the handler blocks its thread while the test hold is on: a hung actor, for as long as
//   the test needs one.

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "runtime/actor/interfaces.hpp"
#include "runtime/actor/role_context.hpp"
#include "runtime/base/status.hpp"
#include "runtime/config/environment.hpp"
#include "runtime/plugin/plugin_api.hpp"
#include "runtime/run/work_pacer.hpp"

namespace {

using troupe::actor::work_item;
using troupe::run::work_pacer;

struct faulty_options {
  int fail_first = 1;
  std::string mode = "throw";  // throw | error | sleep | hold | hang
  int sleep_ms = 0;
};

// The stage, and its own prompt to look at the hold again.
using faulty_actor = troupe::actor::stage_actor::extend<caf::reacts_to<troupe::actor::tick_atom>>;

struct faulty_state {
  work_pacer pacer;
  std::deque<std::pair<caf::typed_response_promise<work_item>, work_item>> held;
};

using self_ptr = troupe::actor::role_pointer<faulty_actor, faulty_state>;

// Items seen per role, shared by all of the role's actors and their restarts.
std::atomic<int>& seen_by(const std::string& role) {
  static std::mutex mu;
  static std::map<std::string, std::atomic<int>> counts;
  std::lock_guard<std::mutex> lock(mu);
  return counts[role];
}

// Answers the held items, oldest first, as far as the hold allows; looks again later if some
// are left.
void release_held(self_ptr self) {
  auto& st = self->state;
  while (!st.held.empty() && st.pacer.may_start()) {
    st.held.front().first.deliver(std::move(st.held.front().second));
    st.held.pop_front();
  }
  if (!st.held.empty()) self->delayed_send(self, work_pacer::recheck, troupe::actor::tick_atom_v);
}

caf::result<work_item> hold(self_ptr self, work_item& item) {
  auto& st = self->state;
  if (st.held.empty() && st.pacer.may_start()) return std::move(item);
  st.held.emplace_back(self->make_response_promise<work_item>(), std::move(item));
  if (st.held.size() == 1) {
    self->delayed_send(self, work_pacer::recheck, troupe::actor::tick_atom_v);
  }
  return st.held.back().first;
}

troupe::actor::role_factory faulty_factory() {
  using namespace troupe;
  config::object_schema<faulty_options> schema;
  schema.add("fail_first", &faulty_options::fail_first).range(0, 1 << 20);
  schema.add("mode", &faulty_options::mode).one_of({"throw", "error", "sleep", "hold", "hang"});
  schema.add("sleep_ms", &faulty_options::sleep_ms).range(0, 600000);
  return actor::make_role_factory<faulty_options>(
      "fails on purpose (tests)", std::move(schema),
      [](actor::role_context& ctx, const faulty_options& options) -> absl::StatusOr<caf::actor> {
        TROUPE_ASSIGN_OR_RETURN(config::test_hooks hooks, config::test_hooks_from_environment());
        std::atomic<int>* seen = &seen_by(ctx.role);
        auto handle = ctx.spawn<faulty_actor, faulty_state>(
            [options, seen, hooks](self_ptr self) -> faulty_actor::behavior_type {
              self->state.pacer = work_pacer(hooks);
              return {
                  [self, options, seen](actor::process_atom,
                                        work_item& item) -> caf::result<work_item> {
                    if (seen->fetch_add(1) >= options.fail_first) return std::move(item);
                    const std::string what = "injected failure on item " + std::to_string(item.seq);
                    if (options.mode == "throw") throw std::runtime_error(what);
                    if (options.mode == "error") {
                      return actor::to_result(self,
                                              absl::StatusOr<work_item>(absl::InternalError(what)));
                    }
                    if (options.mode == "hold") return hold(self, item);
                    if (options.mode == "hang") {
                      while (!self->state.pacer.may_start())
                        std::this_thread::sleep_for(work_pacer::recheck);
                    }
                    std::this_thread::sleep_for(std::chrono::milliseconds(options.sleep_ms));
                    return std::move(item);
                  },
                  [self](actor::tick_atom) { release_held(self); },
              };
            });
        return caf::actor_cast<caf::actor>(handle);
      });
}

void register_roles(troupe::plugin::registrar& r) {
  r.add_role("stage", "faulty", faulty_factory());
}

}  // namespace

TROUPE_PLUGIN("faulty", "stages that fail on purpose, for tests", register_roles)
