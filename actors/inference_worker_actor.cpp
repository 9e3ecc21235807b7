#include "actors/inference_worker_actor.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "runtime/actor/role_actor.hpp"
#include "runtime/actor/status_bridge.hpp"
#include "runtime/base/steady_clock_domain.hpp"
#include "runtime/comm/gloo_communicator.hpp"

namespace troupe::actors {
namespace {

// Generations that arrived while a weight swap waits for the engine to empty, or before the
// weights they wait for.
struct held_request {
  std::vector<actor::generation_request> requests;
  uint64_t weights_version = 0;  // the newest min_weights_version among them
  caf::typed_response_promise<caf::ok_atom> promise;
};

// Weights received, waiting for the engine to empty to be swapped in.
struct pending_swap {
  int buffer = 0;
  actor::weights_ack ack;
  caf::typed_response_promise<actor::weights_ack> promise;
  // The sync's sending where this process reads the sender's clock, else its arrival.
  std::chrono::steady_clock::time_point sent;
};

struct worker_state {
  std::shared_ptr<const served_model> model;
  std::shared_ptr<inference_engine> engine;
  actor::worker_report report;  // events and batch sizes not yet polled
  // Requests with stream false that run (the engine hands out each one's output once, at its
  // end).
  absl::flat_hash_set<uint64_t> quiet;
  caf::typed_response_promise<actor::worker_report> poll;
  bool polling = false;      // a poll waits for events
  uint64_t poll_serial = 0;  // the latest poll's: its wait timer answers it, no older one
  bool until_quiet = false;  // ... until no quiet request runs any more
  bool stepping = false;     // a (step) is on its way
  std::chrono::milliseconds poll_wait{500};
  run::work_pacer pacer;
  std::optional<actors::rollout_sync> sync;
  std::unique_ptr<comm::communicator> sync_group;  // formed at the first (sync)
  std::array<tensor::tensor, 2> weights;           // this worker's own, once synced
  int live = -1;  // the one of `weights` the engine runs on; -1: the model it was spawned with
  // The scheduler's prefix-cache counters at the last report (a report carries the change).
  uint64_t prefix_queries_reported = 0, prefix_hits_reported = 0;
  inference_engine::speculation_counts speculation_reported;
  std::optional<pending_swap> swap;
  std::deque<held_request> held;
};

using worker_self = actor::role_pointer<actor::inference_worker_actor, worker_state>;

// Batch sizes a report keeps (the latest), however long since the last poll.
constexpr size_t max_batch_sizes = 256;

// Delivers the report to the poll that waits, if one does.
void answer_poll(worker_self self) {
  auto& st = self->state;
  if (!st.polling) return;
  st.polling = false;
  const kv_block_pool& blocks = st.engine->blocks();
  st.report.kv_blocks_used = blocks.used_blocks();
  st.report.kv_blocks_total = blocks.total();
  const batch_scheduler& scheduler = st.engine->scheduler();
  st.report.waiting = static_cast<int32_t>(scheduler.waiting());
  st.report.running = static_cast<int32_t>(scheduler.running());
  st.report.prefix_cache_queries = static_cast<int32_t>(
      scheduler.prefix_cache_queries() -
      std::exchange(st.prefix_queries_reported, scheduler.prefix_cache_queries()));
  st.report.prefix_cache_hits =
      static_cast<int32_t>(scheduler.prefix_cache_hits() -
                           std::exchange(st.prefix_hits_reported, scheduler.prefix_cache_hits()));
  const inference_engine::speculation_counts& spec = st.engine->speculation();
  inference_engine::speculation_counts& reported = st.speculation_reported;
  st.report.spec_decode_drafts =
      static_cast<int32_t>(spec.drafts - std::exchange(reported.drafts, spec.drafts));
  st.report.spec_decode_draft_tokens = static_cast<int32_t>(
      spec.draft_tokens - std::exchange(reported.draft_tokens, spec.draft_tokens));
  st.report.spec_decode_accepted_tokens = static_cast<int32_t>(
      spec.accepted_tokens - std::exchange(reported.accepted_tokens, spec.accepted_tokens));
  st.poll.deliver(std::exchange(st.report, {}));
}

// Whether the poll that waits has what it waits for.
bool poll_ready(const worker_state& st) {
  return !st.report.events.empty() && (!st.until_quiet || st.quiet.empty());
}

// A poll: answered once it is ready, or after poll_wait (by its own timer: an older poll's, still
// on its way, would cut a newer poll's wait short).
caf::typed_response_promise<actor::worker_report> start_poll(worker_self self, bool until_quiet) {
  auto& st = self->state;
  if (st.polling) answer_poll(self);  // a newer poll replaces an older one
  st.poll = self->make_response_promise<actor::worker_report>();
  st.polling = true;
  ++st.poll_serial;
  st.until_quiet = until_quiet;
  if (poll_ready(st)) {
    answer_poll(self);
  } else {
    self->delayed_send(self, st.poll_wait, actor::tick_atom_v, st.poll_serial);
  }
  return st.poll;
}

void keep_stepping(worker_self self) {
  auto& st = self->state;
  if (st.stepping || st.engine->idle()) return;
  st.stepping = true;
  self->send(self, actor::step_atom_v);  // behind the messages already queued: they join first
}

// Every event is wanted by a poll: a streamed request's as they come, a quiet one's (stream
// false: its whole output) at its end.
void add_events(worker_self self, std::vector<actor::generation_event> events) {
  auto& st = self->state;
  for (auto& e : events) {
    if (e.finished) st.quiet.erase(e.id);
    st.report.events.push_back(std::move(e));
  }
  if (poll_ready(st)) answer_poll(self);
}

// Adds every request or none: the first refused one takes back those added before it. All join
// the engine before its next iteration, so the batches they run in do not depend on timing.
absl::Status add_requests(worker_self self, std::vector<actor::generation_request> requests) {
  auto& st = self->state;
  auto& engine = *st.engine;
  for (size_t i = 0; i < requests.size(); ++i) {
    const uint64_t id = requests[i].id;  // (a request moved into the engine keeps its id here)
    const bool quiet = !requests[i].stream;
    if (absl::Status s = engine.add(std::move(requests[i])); !s.ok()) {
      for (size_t k = 0; k < i; ++k) {
        engine.cancel(requests[k].id);
        st.quiet.erase(requests[k].id);
      }
      return absl::Status(s.code(), absl::StrCat("request ", id, ": ", s.message()));
    }
    if (quiet) st.quiet.insert(id);
  }
  keep_stepping(self);
  return absl::OkStatus();
}

caf::result<caf::ok_atom> generate(worker_self self,
                                   std::vector<actor::generation_request> requests) {
  auto& st = self->state;
  uint64_t wanted = 0;
  for (const auto& r : requests)
    wanted = std::max(wanted, r.min_weights_version);
  if (wanted > st.engine->weights_version() && !st.sync) {
    return actor::to_error(absl::FailedPreconditionError(absl::StrCat(
        "request ", requests.front().id, " waits for weights version ", wanted,
        ", but this inference worker receives no weights (it is not an RL rollout worker): send "
        "min_weights_version 0")));
  }
  if (st.swap || wanted > st.engine->weights_version()) {  // after the swap that brings them
    st.held.push_back({std::move(requests), wanted, self->make_response_promise<caf::ok_atom>()});
    return st.held.back().promise;
  }
  if (absl::Status s = add_requests(self, std::move(requests)); !s.ok()) {
    return actor::to_error(s);
  }
  return caf::ok_atom_v;
}

// A pending swap, once the engine is empty: the new weights go in and the held requests follow.
void finish_swap(worker_self self) {
  auto& st = self->state;
  if (!st.swap || !st.engine->idle()) return;
  pending_swap swap = *std::move(st.swap);
  st.swap.reset();
  swap.ack.swap_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - swap.sent).count();
  if (absl::Status s =
          st.engine->swap_weights(st.weights[swap.buffer].data<float>(), swap.ack.version);
      !s.ok()) {
    swap.promise.deliver(actor::to_error(s));
  } else {
    st.live = swap.buffer;
    swap.promise.deliver(swap.ack);
  }
  // In arrival order, all before the next iteration; those for a newer version wait on.
  std::deque<held_request> waiting;
  for (held_request& h : st.held) {
    if (h.weights_version > st.engine->weights_version()) {
      waiting.push_back(std::move(h));
    } else if (absl::Status s = add_requests(self, std::move(h.requests)); !s.ok()) {
      h.promise.deliver(actor::to_error(s));
    } else {
      h.promise.deliver(caf::ok_atom_v);
    }
  }
  st.held = std::move(waiting);
  keep_stepping(self);
}

// Receives weights version `version` into the buffer the engine does not run on, then swaps
// them in at once when the engine is empty, else after its last running request.
caf::result<actor::weights_ack> receive_weights(worker_self self,
                                                const actor::weight_sync_round& round) {
  const uint64_t version = round.version;
  const auto arrived = std::chrono::steady_clock::now();
  const auto sent =
      std::min(arrived, steady_time_from(round.clock_domain, round.sent_at_ns, arrived));
  auto& st = self->state;
  if (!st.sync) {
    return actor::to_error(absl::FailedPreconditionError(
        "(sync) asked of an inference worker that is not an RL rollout worker (it has no "
        "weight-sync group)"));
  }
  if (st.swap) {
    return actor::to_error(absl::FailedPreconditionError(
        absl::StrCat("(sync) to version ", version, " while version ", st.swap->ack.version,
                     " still waits to be swapped in")));
  }
  if (st.sync_group == nullptr || st.sync_group->epoch() != round.epoch) {
    st.sync_group.reset();
    auto group = comm::make_gloo_communicator(*st.sync->store,
                                              sync_group_options(st.sync->spec.group, round));
    if (!group.ok()) return actor::to_error(group.status());
    st.sync_group = *std::move(group);
  }
  // The transfer is a paced unit: a test holds it here, with the group formed, so that it can
  // take a member away in the middle of a sync. (The worker's thread would block in the
  // broadcast anyway.)
  while (!st.pacer.may_start())
    std::this_thread::sleep_for(run::work_pacer::recheck);
  const int buffer = st.live == 0 ? 1 : 0;
  if (!st.weights[buffer].defined()) {
    absl::StatusOr<tensor::tensor> fresh =
        tensor::tensor::zeros({st.model->layout->total()}, tensor::dtype::f32);
    if (!fresh.ok()) return actor::to_error(fresh.status());
    st.weights[buffer] = *std::move(fresh);
  }
  absl::StatusOr<std::string> checksum = actors::broadcast_weights(
      *st.sync_group, st.weights[buffer], st.sync->spec.bucket_bytes, /*root=*/0);
  if (!checksum.ok()) {
    st.sync_group.reset();  // a failed group refuses further work; the next sync forms anew
    return actor::to_error(checksum.status());
  }
  st.swap.emplace();
  st.swap->buffer = buffer;
  st.swap->ack.version = version;
  st.swap->ack.checksum = *std::move(checksum);
  st.swap->promise = self->make_response_promise<actor::weights_ack>();
  st.swap->sent = sent;
  auto promise = st.swap->promise;
  finish_swap(self);
  return promise;
}

}  // namespace

absl::StatusOr<actor::inference_worker_actor> spawn_inference_worker(
    caf::actor_system& system, metrics::registry& metrics, const std::string& name,
    std::shared_ptr<const served_model> model, inference_engine::options options,
    run::work_pacer pacer, std::chrono::milliseconds poll_wait, std::optional<rollout_sync> sync) {
  TROUPE_ASSIGN_OR_RETURN(std::shared_ptr<inference_engine> engine,
                          inference_engine::create(*model->layout, model->params.data(), options));
  return system
      .spawn<actor::role_actor<actor::inference_worker_actor, worker_state>, caf::detached>(
          metrics.actor(name),
          [model, engine, poll_wait, pacer,
           sync](worker_self self) -> actor::inference_worker_actor::behavior_type {
            auto& st = self->state;
            st.model = model;
            st.engine = engine;
            st.poll_wait = poll_wait;
            st.pacer = pacer;
            st.sync = sync;
            return {
                [self](actor::generate_atom, actor::generation_request& request) {
                  std::vector<actor::generation_request> one;
                  one.push_back(std::move(request));
                  return generate(self, std::move(one));
                },
                [self](actor::generate_atom, std::vector<actor::generation_request>& requests) {
                  return generate(self, std::move(requests));
                },
                [self](actor::cancel_atom, uint64_t id) {
                  add_events(self, self->state.engine->cancel(id));
                },
                [self](actor::poll_atom) { return start_poll(self, false); },
                [self](actor::poll_atom, bool until_quiet) {
                  return start_poll(self, until_quiet);
                },
                [self](actor::tick_atom, uint64_t serial) {
                  if (serial == self->state.poll_serial) answer_poll(self);
                },
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
                  finish_swap(self);
                },
                [self](actor::sync_atom, const actor::weight_sync_round& round) {
                  return receive_weights(self, round);
                },
            };
          });
}

}  // namespace troupe::actors
