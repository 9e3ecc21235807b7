#include "apps/pipeline/pipeline_driver_actor.hpp"

#include <chrono>
#include <memory>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/actor/interfaces.hpp"
#include "runtime/actor/status_bridge.hpp"
#include "runtime/app/app_plan.hpp"

namespace troupe::apps {
namespace {

using clock = std::chrono::steady_clock;
using command = pipeline_driver::command;

struct driver_state {
  pipeline_options options;
  std::unique_ptr<pipeline_driver> logic;
  run::event_log* events = nullptr;
  std::string source_role;
  std::string sink_role;
  std::map<std::string, size_t> stage_of_role;
  actor::source_actor source;
  std::vector<std::vector<actor::stage_actor>> stages;
  actor::sink_actor sink;
  caf::typed_response_promise<actor::job_result> done;
  bool running = false;
  clock::time_point last_progress{};
};

using pipeline_self = actor::role_pointer<actor::app_actor, driver_state>;

void execute(pipeline_self self, std::vector<command> commands);

void report_progress(pipeline_self self, bool force) {
  auto& st = self->state;
  const auto now = clock::now();
  if (!force && now - st.last_progress < std::chrono::milliseconds(200)) return;
  st.last_progress = now;
  const uint64_t done = st.logic->delivered();
  const int64_t total = st.logic->total();
  st.events->emit(
      run::severity::debug, "progress",
      total >= 0 ? absl::StrCat(done, "/", total, " items") : absl::StrCat(done, " items"),
      {{"done", done}, {"total", total}, {"unit", "items"}});
}

void complete(pipeline_self self, actor::job_result result) {
  auto& st = self->state;
  if (!st.running) return;
  st.running = false;
  report_progress(self, true);
  st.done.deliver(std::move(result));
  self->quit();
}

void on_report(pipeline_self self, const actor::sink_report& report) {
  nlohmann::json summary = {{"items", report.items},
                            {"bytes", report.bytes},
                            {"digest", report.digest},
                            {"retries", self->state.logic->retries()},
                            {"processed_by", self->state.logic->processed_by()}};
  complete(self, actor::job_result{true, summary.dump(), {}});
}

void execute_one(pipeline_self self, command& cmd) {
  auto& st = self->state;
  const auto timeout = std::chrono::milliseconds(st.options.item_timeout_ms);
  if (auto* p = std::get_if<pipeline_driver::pull>(&cmd)) {
    self->request(st.source, timeout, actor::next_atom_v, p->first, p->max)
        .then(
            [self](actor::source_batch& b) {
              execute(self, self->state.logic->on_batch(std::move(b)));
            },
            [self](caf::error& e) {
              execute(self, self->state.logic->on_pull_error(actor::to_status(e)));
            });
  } else if (auto* d = std::get_if<pipeline_driver::dispatch>(&cmd)) {
    const size_t s = d->stage;
    const int i = d->instance;
    const uint64_t gen = d->generation;
    const uint64_t seq = d->item.seq;
    self->request(st.stages[s][i], timeout, actor::process_atom_v, std::move(d->item))
        .then(
            [self, s, i, gen](actor::work_item& out) {
              execute(self, self->state.logic->on_processed(s, i, gen, std::move(out)));
            },
            [self, s, i, gen, seq](caf::error& e) {
              execute(self,
                      self->state.logic->on_process_error(s, i, gen, seq, actor::to_status(e)));
            });
  } else if (auto* v = std::get_if<pipeline_driver::deliver>(&cmd)) {
    self->request(st.sink, timeout, actor::consume_atom_v, std::move(v->item))
        .then([self](caf::ok_atom) { execute(self, self->state.logic->on_delivered()); },
              [self](caf::error& e) {
                execute(self, self->state.logic->on_delivery_error(actor::to_status(e)));
              });
  } else {
    self->request(st.sink, timeout, actor::finish_atom_v)
        .then([self](actor::sink_report& r) { on_report(self, r); },
              [self](caf::error& e) {
                execute(self, self->state.logic->on_delivery_error(actor::to_status(e)));
              });
  }
}

void execute(pipeline_self self, std::vector<command> commands) {
  auto& st = self->state;
  if (!st.running) return;
  if (!st.logic->failure().ok()) {
    complete(self, actor::job_result{false, {}, std::string(st.logic->failure().message())});
    return;
  }
  for (auto& cmd : commands)
    execute_one(self, cmd);
  report_progress(self, false);
}

void on_update(pipeline_self self, const actor::actor_update& update) {
  auto& st = self->state;
  const auto [role, index] = actor::parse_actor_name(update.name);
  if (role == st.source_role) {
    st.source = caf::actor_cast<actor::source_actor>(update.handle);
    if (st.running) execute(self, st.logic->on_source_replaced());
  } else if (role == st.sink_role) {
    st.sink = caf::actor_cast<actor::sink_actor>(update.handle);
  } else if (auto it = st.stage_of_role.find(role); it != st.stage_of_role.end()) {
    auto& actors = st.stages[it->second];
    if (static_cast<size_t>(index) >= actors.size()) actors.resize(index + 1);
    actors[index] = caf::actor_cast<actor::stage_actor>(update.handle);
    auto commands = st.logic->on_stage_actor(it->second, index);
    if (st.running) execute(self, std::move(commands));
  }
}

}  // namespace

absl::StatusOr<caf::actor> spawn_pipeline_driver(actor::role_context& ctx,
                                                 const pipeline_options& options) {
  std::vector<pipeline_driver::stage> stages;
  for (size_t i = 1; i + 1 < options.flow.size(); ++i) {
    const auto* role = ctx.plan.find_role(options.flow[i]);
    stages.push_back({role->spec.name});
  }
  run::event_log* events = &ctx.events;
  auto handle = ctx.spawn<actor::app_actor, driver_state>(
      [options, stages, events](pipeline_self self) -> actor::app_actor::behavior_type {
        auto& st = self->state;
        st.options = options;
        st.logic = std::make_unique<pipeline_driver>(options, stages);
        st.events = events;
        st.source_role = options.flow.front();
        st.sink_role = options.flow.back();
        for (size_t s = 0; s < stages.size(); ++s) {
          st.stage_of_role[stages[s].role] = s;
          st.stages.emplace_back();
        }
        return {
            [self](const actor::actor_update& update) { on_update(self, update); },
            [self](actor::run_atom) {
              auto& st = self->state;
              st.done = self->make_response_promise<actor::job_result>();
              st.running = true;
              execute(self, st.logic->start());
              return st.done;
            },
            [self](actor::stop_atom) {
              complete(self, actor::job_result{false, {}, "interrupted"});
            },
        };
      });
  return caf::actor_cast<caf::actor>(handle);
}

}  // namespace troupe::apps
