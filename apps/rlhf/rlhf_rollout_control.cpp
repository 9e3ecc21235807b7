#include "apps/rlhf/rlhf_controller_state.hpp"

// The rollout workers of the RLHF controller: generations spread over them and collected, the
// weight sync rounds, and what a lost or joined worker changes (docs/rlhf.md).

#include "absl/strings/str_cat.h"
#include "runtime/actor/role_context.hpp"
#include "runtime/actor/status_bridge.hpp"
#include "runtime/base/steady_clock_domain.hpp"

namespace troupe::apps::rlhf::control {

static void poll(self_ptr self, const std::string& w);
static void send_requests(self_ptr self, const std::string& w,
                          std::vector<actor::generation_request> requests);
static void settle_sync(self_ptr self);

// `who` is gone, or its worker is: a rollout worker leaves the pool, its unfinished requests
// regenerated on the others with the same seeds (their partial outputs dropped); a training
// role ends the run, saying how to resume it.
void on_lost(self_ptr self, const std::string& who, const std::string& why) {
  auto& st = self->state;
  if (!st.running) return;
  st.suspects.erase(who);
  const std::string role(actor::parse_actor_name(who).role);
  if ((role == "policy" || role == "critic") && st.logic->elastic(role == "critic")) {
    if (st.sync.active && who == st.sync.sender) {
      st.sync.active = false;  // its round is void; the regrouped policy's rank 0 sends again
      ++st.sync.id;
    }
    return execute(self, st.logic->on_lost(who, why));
  }
  if (role != "rollout") {
    const std::string resume =
        st.last_checkpoint >= 0
            ? absl::StrCat("troupe launch CONFIG --resume ",
                           st.last_checkpoint_run.empty() ? "RUN_DIR" : st.last_checkpoint_run,
                           " continues from checkpoint ", st.last_checkpoint)
            : std::string("no checkpoint was committed yet (rlhf.trainer.save_freq), so relaunch");
    return complete(
        self,
        actor::job_result{
            false,
            {},
            absl::StrCat(who, " was lost (", why, "); app: rlhf does not survive a lost ", role,
                         role == "policy" || role == "critic"
                             ? absl::StrCat(" of a fixed group (roles.", role,
                                            ".elastic regroups without it)")
                             : std::string(" (rollout workers and elastic policy and critic "
                                           "ranks come and go)"),
                         ": ", resume)});
  }
  bool known = false;
  const auto moved = st.pool->remove(who, &known);
  if (!known) return;
  size_t regenerated = 0;
  for (const auto& r : moved)
    regenerated += r.ids.size();
  st.events->emit(
      run::severity::warning, "rollout_lost",
      absl::StrCat(who, " lost (", why, "); ", st.pool->members().size(), " rollout worker",
                   st.pool->members().size() == 1 ? "" : "s", " left",
                   regenerated > 0
                       ? absl::StrCat(", ", regenerated, " sequences regenerated on them")
                       : std::string()),
      {{"name", who}, {"why", why}, {"regenerated", regenerated}});
  if (st.pool->members().empty()) {
    return execute(self, st.logic->on_error(absl::UnavailableError(absl::StrCat(
                             "every rollout worker is lost (the last: ", who, ", ", why,
                             "); start one with `troupe worker --join HEAD`, or relaunch with "
                             "--resume RUN_DIR"))));
  }
  for (const auto& r : moved) {
    std::vector<actor::generation_request> again;
    for (uint64_t id : r.ids) {
      actor::generation_event& out = st.gen.outputs[st.gen.index.at(id)];
      out.tokens.clear();
      out.logprobs.clear();
      again.push_back(st.gen.requests.at(id));
    }
    send_requests(self, r.to, std::move(again));
  }
  settle_sync(self);  // a sync waiting on the lost worker is asked again without it
}

// An error from rollout worker `w`: its loss when its actor is gone; otherwise the run's
// failure, once no loss explains it within loss_wait (a killed worker's socket errors come
// before the heartbeats declare it dead).
static void on_rollout_error(self_ptr self, const std::string& w, const caf::error& e) {
  auto& st = self->state;
  if (!st.running || !st.pool->is_member(w)) return;
  if (e == caf::sec::request_receiver_down) return on_lost(self, w, "its actor is gone");
  st.suspects.emplace(w, std::pair{absl::Status(actor::to_status(e)), clock::now()});
  self->delayed_send(self, st.loss_wait, actor::wake_atom_v);
}

// The timer: a suspect's error no loss explained fails the run; a failed sync settles.
void on_wake(self_ptr self) {
  auto& st = self->state;
  if (!st.running) return;
  for (const auto& [w, failure] : st.suspects) {
    if (st.pool->is_member(w) && clock::now() - failure.second >= st.loss_wait) {
      const absl::Status s = failure.first;
      return execute(
          self, st.logic->on_error(absl::Status(s.code(), absl::StrCat(w, ": ", s.message()))));
    }
  }
  settle_sync(self);
}

// The longest a sync member's answer may take: the group's timeout bounds each of its waits (for
// the others' addresses, for their connections, for a bucket).
static std::chrono::milliseconds sync_limit(const controller_state& st) {
  return std::chrono::milliseconds(3 * st.options.sync.timeout_ms + 5000);
}

// Rollout worker `w`'s requests `requests` join its engine (those for a newer policy version,
// sent during the step before or with the sync, once it has swapped that version in).
static void send_requests(self_ptr self, const std::string& w,
                          std::vector<actor::generation_request> requests) {
  auto& st = self->state;
  // Requests for a newer version are answered at that version's swap, after this step's updates
  // and the next sync: the sync's own limit bounds the wait once it starts, and the worker's
  // loss is its monitor's to see.
  const bool wait_for_sync = !requests.empty() && requests.front().min_weights_version > 0;
  const caf::duration limit =
      wait_for_sync ? caf::duration{caf::infinite} : caf::duration{std::chrono::seconds(60)};
  self->request(st.rollouts.at(w), limit, actor::generate_atom_v, std::move(requests))
      .then([](caf::ok_atom) {}, [self, w](caf::error& e) { on_rollout_error(self, w, e); });
  if (!st.gen.polling.contains(w)) poll(self, w);
}

// `more` after `to`: moved when `to` is empty (a whole response comes in one event).
template <class T>
static void append(std::vector<T>& to, std::vector<T> more) {
  if (to.empty()) {
    to = std::move(more);
  } else {
    to.insert(to.end(), more.begin(), more.end());
  }
}

// Polls rollout worker `w` until its requests of the generation in flight have ended.
static void poll(self_ptr self, const std::string& w) {
  auto& st = self->state;
  st.gen.polling.insert(w);
  // Answered once the worker runs none of its requests any more (or after its poll wait).
  self->request(st.rollouts.at(w), std::chrono::seconds(120), actor::poll_atom_v, true)
      .then(
          [self, w](actor::worker_report& report) {
            auto& st = self->state;
            st.gen.polling.erase(w);
            if (!st.pool->is_member(w)) return;  // lost meanwhile: its requests went elsewhere
            for (auto& e : report.events) {
              auto it = st.gen.index.find(e.id);
              if (it == st.gen.index.end() || !st.pool->holds(w, e.id)) continue;
              actor::generation_event& out = st.gen.outputs[it->second];
              append(out.tokens, std::move(e.tokens));
              append(out.logprobs, std::move(e.logprobs));
              out.weights_version = e.weights_version;
              if (!e.finished) continue;
              out.finished = true;
              out.reason = e.reason;
              st.gen.index.erase(it);
              st.pool->finish(w, e.id);
              if (st.gen.index.empty()) {
                execute(self, st.logic->on_generated(std::move(st.gen.outputs)));
                return;
              }
            }
            if (st.pool->unfinished(w) > 0) poll(self, w);
          },
          [self, w](caf::error& e) {
            self->state.gen.polling.erase(w);
            on_rollout_error(self, w, e);
          });
}

void generate(self_ptr self, std::vector<actor::generation_request> requests) {
  auto& st = self->state;
  st.gen = generation{};
  st.gen.outputs.resize(requests.size());
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < requests.size(); ++i) {
    st.gen.index[requests[i].id] = i;
    st.gen.outputs[i].id = requests[i].id;
    ids.push_back(requests[i].id);
    st.gen.requests.emplace(requests[i].id, std::move(requests[i]));
  }
  // Request i goes to worker i % workers, each worker's in one message: they join the same
  // engine iteration, so the batches (and their float rounding) do not depend on timing.
  const auto assigned = st.pool->assign(ids);
  nlohmann::json shares = nlohmann::json::object();
  for (const auto& [w, mine] : assigned)
    shares[w] = mine.size();
  st.events->emit(run::severity::debug, "generating",
                  absl::StrCat(ids.size(), " sequences on ", assigned.size(), " rollout worker",
                               assigned.size() == 1 ? "" : "s"),
                  {{"workers", shares}});
  for (auto& [w, mine] : assigned) {
    std::vector<actor::generation_request> share;
    for (uint64_t id : mine)
      share.push_back(st.gen.requests.at(id));
    send_requests(self, w, std::move(share));
  }
}

// The sync in flight has every answer: done, asked again without a lost worker, or failed
// (once no loss explains the failure within loss_wait).
static void settle_sync(self_ptr self) {
  auto& st = self->state;
  if (!st.sync.active || st.sync.answers < st.sync.expected) return;
  if (st.pool->changed_since_sync()) {
    st.sync.active = false;
    st.events->emit(run::severity::warning, "sync_redone",
                    absl::StrCat("the weight sync to version ", st.sync.version,
                                 " lost a rollout worker; it is redone with ",
                                 st.pool->members().size(), " (epoch ", st.pool->epoch() + 1, ")"),
                    {{"version", st.sync.version}});
    execute(self, st.logic->resync());
    return;
  }
  if (st.sync.failure.ok()) {
    st.sync.active = false;  // the logic went on at the last acknowledgement
    const size_t workers = st.sync.expected - 1;
    st.events->emit(run::severity::debug, "weights_synced",
                    absl::StrCat("weights version ", st.sync.version, " on ", workers,
                                 " rollout worker", workers == 1 ? "" : "s"),
                    {{"version", st.sync.version}, {"workers", workers}});
    return;
  }
  if (clock::now() - st.sync.failed_at >= st.loss_wait) {
    st.sync.active = false;
    execute(self, st.logic->on_error(st.sync.failure));
    return;
  }
  self->delayed_send(self, st.loss_wait, actor::wake_atom_v);
}

void sync(self_ptr self, uint64_t version, clock::time_point sent) {
  auto& st = self->state;
  // The policy's rank 0 sends; joiners come in now, and the group is formed anew when the
  // workers or the sender changed.
  const std::string sender = st.logic->members(false).front();
  st.pool->set_sender(sender);
  const uint64_t previous = st.pool->epoch();
  const uint64_t epoch = st.pool->begin_sync();
  const std::vector<std::string>& members = st.pool->members();
  const int ranks = 1 + static_cast<int>(members.size());
  if (epoch != previous) {
    st.events->emit(run::severity::info, "rollout_group",
                    absl::StrCat("weight-sync group epoch ", epoch, ": ", sender, " and ",
                                 members.size(), " rollout worker", members.size() == 1 ? "" : "s"),
                    {{"epoch", epoch}, {"sender", sender}, {"workers", members}});
  }
  st.logic->set_sync_participants(ranks);
  st.sync = {st.sync.id + 1, version, 0, static_cast<size_t>(ranks), true, {}, {}, sender};
  const auto limit = sync_limit(st);  // bounds an actor that never answers
  // A rollout worker on this host times its swap from the sending, on this clock; one elsewhere
  // from the round's arrival.
  const int64_t sent_at = steady_ns(sent);
  const auto ask = [&](auto& handle, std::string who, int rank) {
    const actor::weight_sync_round round{version, epoch,   rank,
                                         ranks,   sent_at, steady_clock_domain()};
    self->request(handle, limit, actor::sync_atom_v, round)
        .then(
            [self, who, rank, id = st.sync.id](actor::weights_ack& ack) {
              auto& st = self->state;
              if (id != st.sync.id) return;
              ++st.sync.answers;
              execute(self, st.logic->on_synced(who, ack, rank == 0));
              settle_sync(self);
            },
            [self, who, version, id = st.sync.id](caf::error& e) {
              auto& st = self->state;
              if (id != st.sync.id) return;
              ++st.sync.answers;
              if (st.sync.failure.ok()) {
                const absl::Status s = actor::to_status(e);
                st.sync.failure = absl::Status(
                    s.code(),
                    absl::StrCat("weight sync to version ", version, ": ", who, ": ", s.message()));
                st.sync.failed_at = clock::now();
              }
              settle_sync(self);
            });
  };
  // The rollout workers first: their generation's time runs from the sync's sending.
  for (size_t i = 0; i < members.size(); ++i)
    ask(st.rollouts.at(members[i]), members[i], 1 + static_cast<int>(i));
  ask(st.trainers.at(sender), sender, 0);
}

}  // namespace troupe::apps::rlhf::control
