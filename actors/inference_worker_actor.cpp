#include "actors/inference_worker_actor.hpp"

#include <thread>
#include <utility>

#include "runtime/actor/role_actor.hpp"
#include "runtime/actor/status_bridge.hpp"

namespace troupe::actors {
namespace {

struct worker_state {
  std::shared_ptr<const served_model> model;
  std::shared_ptr<inference_engine> engine;
  actor::worker_report report;  // events and batch sizes not yet polled
  caf::typed_response_promise<actor::worker_report> poll;
  bool polling = false;   // a poll waits for events
  bool stepping = false;  // a (step) is on its way
  std::chrono::milliseconds poll_wait{500};
  run::work_pacer pacer;
};

using self_ptr = actor::role_pointer<actor::inference_worker_actor, worker_state>;

// Batch sizes a report keeps (the latest), however long since the last poll.
constexpr size_t max_batch_sizes = 256;

void answer_poll(self_ptr self) {
  auto& st = self->state;
  if (!st.polling) return;
  st.polling = false;
  const kv_block_pool& blocks = st.engine->blocks();
  st.report.kv_blocks_used = blocks.used_blocks();
  st.report.kv_blocks_total = blocks.total();
  st.report.waiting = static_cast<int32_t>(st.engine->scheduler().waiting());
  st.report.running = static_cast<int32_t>(st.engine->scheduler().running());
  st.poll.deliver(std::exchange(st.report, {}));
}

void keep_stepping(self_ptr self) {
  auto& st = self->state;
  if (st.stepping || st.engine->idle()) return;
  st.stepping = true;
  self->send(self, actor::step_atom_v);  // behind the messages already queued: they join first
}

void add_events(self_ptr self, std::vector<actor::generation_event> events) {
  auto& st = self->state;
  for (auto& e : events)
    st.report.events.push_back(std::move(e));
  if (!st.report.events.empty()) answer_poll(self);
}

}  // namespace

absl::StatusOr<actor::inference_worker_actor> spawn_inference_worker(
    caf::actor_system& system, metrics::registry& metrics, const std::string& name,
    std::shared_ptr<const served_model> model, inference_engine::options options,
    run::work_pacer pacer, std::chrono::milliseconds poll_wait) {
  TROUPE_ASSIGN_OR_RETURN(std::shared_ptr<inference_engine> engine,
                          inference_engine::create(*model->layout, model->params.data(), options));
  return system
      .spawn<actor::role_actor<actor::inference_worker_actor, worker_state>, caf::detached>(
          metrics.actor(name),
          [model, engine, poll_wait,
           pacer](self_ptr self) -> actor::inference_worker_actor::behavior_type {
            auto& st = self->state;
            st.model = model;
            st.engine = engine;
            st.poll_wait = poll_wait;
            st.pacer = pacer;
            return {
                [self](actor::generate_atom,
                       actor::generation_request& request) -> caf::result<caf::ok_atom> {
                  if (absl::Status s = self->state.engine->add(std::move(request)); !s.ok()) {
                    return actor::to_error(s);
                  }
                  keep_stepping(self);
                  return caf::ok_atom_v;
                },
                [self](actor::cancel_atom, uint64_t id) {
                  add_events(self, self->state.engine->cancel(id));
                },
                [self](actor::poll_atom) {
                  auto& st = self->state;
                  if (st.polling) answer_poll(self);  // a newer poll replaces an older one
                  st.poll = self->make_response_promise<actor::worker_report>();
                  st.polling = true;
                  if (!st.report.events.empty()) {
                    answer_poll(self);
                  } else {
                    self->delayed_send(self, st.poll_wait, actor::tick_atom_v);
                  }
                  return st.poll;
                },
                [self](actor::tick_atom) { answer_poll(self); },
                [self](actor::step_atom) {
                  auto& st = self->state;
                  st.stepping = false;
                  if (st.engine->idle()) return;
                  if (!st.pacer.may_start()) {  // held by a test: ask again shortly
                    st.stepping = true;
                    self->delayed_send(self, run::work_pacer::recheck, actor::step_atom_v);
                    return;
                  }
                  const auto started = std::chrono::steady_clock::now();
                  absl::StatusOr<std::vector<actor::generation_event>> events = st.engine->step();
                  // A slower machine, simulated: the iteration keeps this thread for longer.
                  std::this_thread::sleep_for(
                      st.pacer.pause_after(std::chrono::steady_clock::now() - started));
                  if (!events.ok()) {
                    self->quit(actor::to_error(events.status()));
                    return;
                  }
                  auto& sizes = st.report.batch_sizes;
                  if (sizes.size() == max_batch_sizes) sizes.erase(sizes.begin());
                  sizes.push_back(st.engine->last_batch_sequences());
                  add_events(self, *std::move(events));
                  keep_stepping(self);
                },
            };
          });
}

}  // namespace troupe::actors
