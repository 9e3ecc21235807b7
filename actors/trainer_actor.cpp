#include "actors/trainer_actor.hpp"

#include <atomic>
#include <chrono>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "actors/checkpoint_writer_actor.hpp"
#include "actors/job_thread.hpp"
#include "models/decoder/decoder_source.hpp"
#include "runtime/actor/status_bridge.hpp"
#include "runtime/base/seconds.hpp"
#include "runtime/comm/counted_communicator.hpp"
#include "runtime/comm/gloo_communicator.hpp"

namespace troupe::actors {
namespace {

using clock = std::chrono::steady_clock;

struct trainer_state {
  trainer_actor_spec spec;
  std::string name;                      // the actor's, e.g. "trainer/1"
  metrics::registry* metrics = nullptr;  // its process's
  std::unique_ptr<models::decoder_layout> layout;
  std::mutex group_mutex;  // group: replaced on the job thread, aborted from the actor's
  std::unique_ptr<comm::communicator> group;
  std::unique_ptr<comm::communicator> pipe;    // a pipeline stage's, formed at the start
  std::unique_ptr<comm::communicator> tensor;  // a tensor-parallel rank's, formed at the start
  std::atomic<uint64_t> given_up{0};           // groups of older generations are moot (abort)
  std::unique_ptr<trainer> logic;
  // Elastic: the generation `logic` was formed in, and, until the first step on it, the trainer
  // of the last generation every member formed (`kept`), which a regroup cut short by another
  // loss starts again from.
  uint64_t logic_generation = 0;
  std::unique_ptr<trainer> kept;
  uint64_t kept_generation = 0;
  actor::data_loader_actor loader;
  std::shared_ptr<comm::rendezvous_store> store;
  std::vector<token_batch> validation;
  int64_t cursor = 0;  // the global sample index the next step's batch starts at
  actor::checkpoint_writer_actor writer;
  std::unique_ptr<comm::communicator> sync_group;  // formed at the first (sync)
  // Steps, evaluations and regroups run on `jobs`; what each does next runs on the actor's
  // thread, found here by the id its (done) prompt carries.
  uint64_t next_job = 0;
  std::map<uint64_t, std::function<void()>> finishing;
  std::unique_ptr<job_thread> jobs = std::make_unique<job_thread>();

  void abort_group(const std::string& reason) {
    std::lock_guard lock(group_mutex);
    if (group) group->abort(reason);
    if (pipe) pipe->abort(reason);
    if (tensor) tensor->abort(reason);
  }
  ~trainer_state() {
    // A job waiting in a collective, or for a group to form, ends now.
    given_up = std::numeric_limits<uint64_t>::max();
    abort_group("the trainer stopped");
    jobs.reset();
  }
};

using trainer_self = actor::role_pointer<actor::trainer_actor, trainer_state>;

// Runs `work` on the job thread; `then` gets its result on the actor's thread.
template <class T>
void off_thread(trainer_self self, std::function<T()> work, std::function<void(T)> then) {
  auto& st = self->state;
  const uint64_t id = ++st.next_job;
  auto result = std::make_shared<std::optional<T>>();
  st.finishing.emplace(id, [result, then = std::move(then)] { then(std::move(**result)); });
  st.jobs->post([result, work = std::move(work), id, me = self->address()] {
    *result = work();
    if (auto h = caf::actor_cast<actor::trainer_actor>(me)) {
      caf::anon_send(h, actor::done_atom_v, id);
    }
  });
}

void on_done(trainer_self self, uint64_t id) {
  auto& st = self->state;
  auto it = st.finishing.find(id);
  if (it == st.finishing.end()) return;
  std::function<void()> then = std::move(it->second);
  st.finishing.erase(it);
  then();
}

// One of the trainer's groups (kind: dp, pipe, tensor or sync), its progress in the process's
// metrics as if it were an actor named e.g. "trainer/1/dp_group" (comm::counted).
absl::StatusOr<std::unique_ptr<comm::communicator>> form_group(trainer_state& st,
                                                               const comm::group_options& g,
                                                               const char* kind) {
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<comm::communicator> group,
                          comm::make_gloo_communicator(*st.store, g));
  return comm::counted(std::move(group), *st.metrics, absl::StrCat(st.name, "/", kind, "_group"));
}

absl::Status build(trainer_self self, metrics::registry& metrics, const std::string& name) {
  auto& st = self->state;
  if (st.spec.objective && st.spec.critic) {
    return absl::InvalidArgumentError("a trainer is the RL policy or the critic, not both");
  }
  const pipeline_options& pipeline = st.spec.options.pipeline;
  const int per_stage = st.spec.model.layers / std::max(1, pipeline.stages);
  const models::layer_range range =
      pipeline.stages > 1
          ? models::layer_range{pipeline.stage * per_stage, (pipeline.stage + 1) * per_stage}
          : models::layer_range::all(st.spec.model);
  st.layout = std::make_unique<models::decoder_layout>(st.spec.model, range,
                                                       st.spec.critic || st.spec.reward_model()
                                                           ? models::decoder_head::value
                                                           : models::decoder_head::lm,
                                                       st.spec.tp);
  if (st.spec.ranks > 1 && !st.spec.elastic) {  // an elastic rank's group comes with (regroup)
    comm::group_options g = st.spec.group;
    g.rank = st.spec.rank;
    g.size = st.spec.ranks;
    TROUPE_ASSIGN_OR_RETURN(st.group, form_group(st, g, "dp"));
  }
  if (pipeline.stages > 1) {
    comm::group_options g = st.spec.pipe;
    g.rank = pipeline.stage;
    g.size = pipeline.stages;
    TROUPE_ASSIGN_OR_RETURN(st.pipe, form_group(st, g, "pipe"));
  }
  if (st.spec.tp.size > 1) {
    comm::group_options g = st.spec.tensor;
    g.rank = st.spec.tp.rank;
    g.size = st.spec.tp.size;
    TROUPE_ASSIGN_OR_RETURN(st.tensor, form_group(st, g, "tensor"));
  }
  TROUPE_ASSIGN_OR_RETURN(st.logic, trainer::create(*st.layout, st.spec.options, st.group.get(),
                                                    st.pipe.get(), st.tensor.get()));
  st.writer = spawn_checkpoint_writer(self->system(), metrics, absl::StrCat(name, "/writer"));
  self->link_to(st.writer);  // the loader and the writer live and die with their trainer
  if (st.spec.corpus == nullptr) return absl::OkStatus();  // RL steps and log-probs only
  const int rows = st.spec.rows_per_sample();
  TROUPE_ASSIGN_OR_RETURN(
      data_loader loader,
      data_loader::create(*st.spec.corpus, st.spec.model.ctx, st.spec.options.global_batch / rows,
                          st.spec.rank, st.spec.ranks, st.spec.data_seed));
  const int micro = st.spec.options.micro_batch / rows;
  const int eval_batch = micro > 0 ? std::min(micro, loader.local_batch()) : loader.local_batch();
  st.validation = loader.validation(eval_batch, st.spec.eval_windows);
  st.loader = spawn_data_loader(self->system(), metrics, absl::StrCat(name, "/data"),
                                st.spec.corpus, prefetch_queue(std::move(loader)));
  self->link_to(st.loader);
  self->send(st.loader, actor::credit_atom_v, static_cast<int32_t>(st.spec.prefetch));
  return absl::OkStatus();
}

caf::result<actor::step_report> step(trainer_self self) {
  if (!self->state.loader) {
    return actor::to_error(absl::FailedPreconditionError(
        "(step) asked of a trainer without training text; it takes RL steps only"));
  }
  auto promise = self->make_response_promise<actor::step_report>();
  const auto asked = clock::now();
  self->request(self->state.loader, caf::infinite, actor::next_atom_v)
      .then(
          [self, promise, asked](actor::token_batch& batch) mutable {
            auto& st = self->state;
            const double data_s = seconds_since(asked);
            const int64_t next_cursor =
                batch.cursor + st.spec.options.global_batch / st.spec.rows_per_sample();
            self->send(st.loader, actor::credit_atom_v, int32_t{1});
            off_thread<absl::StatusOr<actor::step_report>>(
                self,
                [self, batch = std::move(batch)] {
                  auto& st = self->state;
                  st.kept.reset();  // a step: every member formed this trainer's generation
                  const auto started = clock::now();
                  absl::StatusOr<actor::step_report> report = st.logic->step(batch);
                  std::this_thread::sleep_for(st.spec.pacer.pause_after(clock::now() - started));
                  if (report.ok()) {
                    // A replica's samples, said once: by its first stage's first
                    // tensor-parallel rank.
                    const bool says = st.spec.options.pipeline.stage == 0 && st.spec.tp.rank == 0;
                    report->first_sample = batch.first_sample;
                    report->samples = says ? batch.batch / st.spec.rows_per_sample() : 0;
                    report->stage_busy_s = st.logic->last_pipeline_times().busy_s;
                    report->stage_idle_s = st.logic->last_pipeline_times().idle_s;
                  }
                  return report;
                },
                [self, promise, data_s,
                 next_cursor](absl::StatusOr<actor::step_report> report) mutable {
                  auto& st = self->state;
                  if (!report.ok()) {
                    promise.deliver(actor::to_error(report.status()));
                    // An elastic rank stays for the driver to regroup; a fixed one is done.
                    if (!st.spec.elastic) self->quit(actor::to_error(report.status()));
                    return;
                  }
                  st.cursor = next_cursor;
                  report->data_s = data_s;
                  promise.deliver(*report);
                });
          },
          [self, promise](caf::error& e) mutable {
            promise.deliver(e);
            self->quit(e);
          });
  return promise;
}

caf::result<actor::eval_report> evaluate(trainer_self self) {
  auto promise = self->make_response_promise<actor::eval_report>();
  off_thread<absl::StatusOr<actor::eval_report>>(
      self,
      [self] {
        self->state.kept.reset();  // as for a step
        return self->state.logic->held_out_report(self->state.validation);
      },
      [promise](absl::StatusOr<actor::eval_report> report) mutable {
        if (report.ok()) {
          promise.deliver(*report);
        } else {
          promise.deliver(actor::to_error(report.status()));
        }
      });
  return promise;
}

// The files of `saved` whose names start with `prefix`, under their names without it.
checkpoint::checkpoint files_named(checkpoint::checkpoint saved, const std::string& prefix) {
  std::map<std::string, tensor::named_tensors> mine;
  for (auto& [name, contents] : saved.files) {
    if (name.starts_with(prefix)) mine.emplace(name.substr(prefix.size()), std::move(contents));
  }
  saved.files = std::move(mine);
  return saved;
}

// The trainer of generation `generation`, when this rank has it.
trainer* trainer_of(trainer_state& st, uint64_t generation) {
  if (st.logic && st.logic_generation == generation) return st.logic.get();
  if (st.kept && st.kept_generation == generation) return st.kept.get();
  return nullptr;
}

// On the job thread: forms generation `c.generation` of the group and builds its trainer from
// where the state comes from.
absl::Status form_group(trainer_self self, const actor::group_change& c) {
  auto& st = self->state;
  std::unique_ptr<comm::communicator> group;
  if (c.ranks > 1) {
    comm::group_options g = st.spec.group;
    g.rank = c.rank;
    g.size = c.ranks;
    g.epoch = c.generation;
    // A newer generation's abort ends a rendezvous that waits for a rank lost meanwhile.
    g.cancelled = [&st, generation = c.generation] { return st.given_up.load() > generation; };
    TROUPE_ASSIGN_OR_RETURN(group, form_group(st, g, "dp"));
  }
  std::unique_ptr<trainer> next;
  using source = actor::group_change::source;
  if (c.from == source::members) {
    TROUPE_ASSIGN_OR_RETURN(next, trainer::regroup(trainer_of(st, c.basis), *st.layout,
                                                   st.spec.options, group.get(), c.steps));
  } else {
    TROUPE_ASSIGN_OR_RETURN(next, trainer::create(*st.layout, st.spec.options, group.get()));
    if (c.from == source::checkpoint) {
      TROUPE_ASSIGN_OR_RETURN(checkpoint::checkpoint saved,
                              checkpoint::checkpoint_store::read(c.checkpoint));
      if (!st.spec.file_prefix.empty()) saved = files_named(std::move(saved), st.spec.file_prefix);
      TROUPE_RETURN_IF_ERROR(next->restore(saved));
    } else if (!st.spec.initial_weights.empty()) {
      TROUPE_ASSIGN_OR_RETURN(const tensor::named_tensors weights,
                              models::read_model_tensors(st.spec.initial_weights));
      TROUPE_RETURN_IF_ERROR(next->load_weights(weights, st.spec.initial_weights));
    }
    if (next->steps() != c.steps) {
      return absl::FailedPreconditionError(absl::StrCat(
          "regroup: the state from ",
          c.from == source::checkpoint ? c.checkpoint : "the initial weights", " is at step ",
          next->steps(), ", but the group continues from step ", c.steps));
    }
  }
  std::lock_guard lock(st.group_mutex);
  // The basis stays until a step runs on the new trainer; anything else is superseded.
  if (st.logic_generation == c.basis) {
    st.kept = std::move(st.logic);
    st.kept_generation = c.basis;
  } else if (st.kept_generation != c.basis) {
    st.kept.reset();
  }
  st.logic = std::move(next);  // before the group: the old trainer uses the old group
  st.logic_generation = c.generation;
  st.group = std::move(group);
  return absl::OkStatus();
}

caf::result<int64_t> regroup(trainer_self self, const actor::group_change& c) {
  if (!self->state.spec.elastic) {
    return actor::to_error(absl::FailedPreconditionError(
        "(regroup) asked of a trainer of a fixed group; an elastic job sets "
        "roles.trainer.elastic"));
  }
  auto promise = self->make_response_promise<int64_t>();
  off_thread<absl::Status>(
      self, [self, c] { return form_group(self, c); },
      [self, promise, c](absl::Status formed) mutable {
        auto& st = self->state;
        if (!formed.ok()) {
          promise.deliver(actor::to_error(formed));
          return;
        }
        st.cursor = c.cursor;
        if (!st.loader) {
          promise.deliver(st.logic->steps());
          return;
        }
        self->request(st.loader, caf::infinite, actor::seek_atom_v, c.cursor, c.rank, c.ranks)
            .then([self,
                   promise](caf::ok_atom) mutable { promise.deliver(self->state.logic->steps()); },
                  [promise](caf::error& e) mutable { promise.deliver(e); });
      });
  return promise;
}

// Snapshots this rank's state and hands it to the writer; the answer waits for the writer.
caf::result<actor::checkpoint_shard> start_checkpoint(trainer_self self, int64_t step,
                                                      const std::string& root) {
  auto& st = self->state;
  // A pretraining checkpoint is named by the optimizer step; an RL one by the RL step (the
  // policy's and the critic's optimizer steps differ, and their optimizer states record them).
  const bool rl = st.spec.objective || st.spec.critic;
  if (!rl && step != st.logic->steps()) {
    return actor::to_error(absl::FailedPreconditionError(absl::StrCat(
        "checkpoint of step ", step, " asked, but this rank is at step ", st.logic->steps())));
  }
  const auto started = clock::now();
  absl::StatusOr<std::vector<std::pair<std::string, tensor::named_tensors>>> made =
      st.logic->checkpoint_files();
  if (!made.ok()) return actor::to_error(made.status());
  auto files = *std::move(made);
  for (auto& [file, contents] : files)
    file = st.spec.file_prefix + file;
  actor::checkpoint_snapshot snapshot{
      {step, st.logic->rank(), st.cursor, {}, 0, 0},
      root,
      std::make_shared<const std::vector<std::pair<std::string, tensor::named_tensors>>>(
          std::move(files))};
  snapshot.shard.stall_s = seconds_since(started);
  auto promise = self->make_response_promise<actor::checkpoint_shard>();
  self->request(st.writer, caf::infinite, std::move(snapshot))
      .then([promise](actor::checkpoint_shard& shard) mutable { promise.deliver(shard); },
            [promise](caf::error& e) mutable { promise.deliver(e); });
  return promise;
}

// On the job thread, as a step: the gradient sum blocks in a collective, which an (abort) of an
// elastic group's driver must reach.
caf::result<actor::rl_step_report> rl_step(trainer_self self, actor::rl_batch batch) {
  auto& st = self->state;
  if (!st.spec.objective && !st.spec.critic) {
    return actor::to_error(absl::FailedPreconditionError(
        "(rl_step) asked of a trainer without an RL objective (a pretraining rank)"));
  }
  auto promise = self->make_response_promise<actor::rl_step_report>();
  off_thread<absl::StatusOr<actor::rl_step_report>>(
      self,
      [self, batch = std::move(batch)] {
        auto& st = self->state;
        st.kept.reset();  // a step: every member formed this trainer's generation
        const auto started = clock::now();
        absl::StatusOr<actor::rl_step_report> report =
            st.spec.critic ? st.logic->step(batch, *st.spec.critic)
                           : st.logic->step(batch, *st.spec.objective);
        std::this_thread::sleep_for(st.spec.pacer.pause_after(clock::now() - started));
        return report;
      },
      [promise](absl::StatusOr<actor::rl_step_report> report) mutable {
        if (report.ok()) {
          promise.deliver(*report);
        } else {
          promise.deliver(actor::to_error(report.status()));
        }
      });
  return promise;
}

caf::result<std::vector<float>> log_probs(trainer_self self, const actor::rl_batch& batch) {
  auto& st = self->state;
  const float temperature = st.spec.objective ? st.spec.objective->temperature : 1.0f;
  absl::StatusOr<std::vector<float>> out = st.logic->log_probs(batch, temperature);
  if (!out.ok()) return actor::to_error(out.status());
  return *std::move(out);
}

caf::result<int64_t> load_weights(trainer_self self, const std::string& dir) {
  absl::StatusOr<tensor::named_tensors> weights = models::read_model_tensors(dir);
  if (!weights.ok()) return actor::to_error(weights.status());
  if (absl::Status s = self->state.logic->load_weights(*weights, dir); !s.ok()) {
    return actor::to_error(s);
  }
  return int64_t{0};
}

// Rank 0 of the policy sends its weights to the rollout (the group's other members), in the
// round's group (formed anew at each new epoch: a rollout worker lost or joined).
caf::result<actor::weights_ack> sync_weights(trainer_self self,
                                             const actor::weight_sync_round& round) {
  auto& st = self->state;
  if (!st.spec.sync || st.logic->rank() != 0) {
    return actor::to_error(absl::FailedPreconditionError(
        absl::StrCat("(sync) asked of trainer rank ", st.logic->rank(),
                     ", which is not the sender of a weight-sync group (rank 0 of the policy)")));
  }
  if (round.rank != 0) {
    return actor::to_error(absl::InvalidArgumentError(
        absl::StrCat("(sync) makes policy rank 0 rank ", round.rank,
                     " of the weight-sync group, but the sender is always rank 0")));
  }
  if (st.sync_group == nullptr || st.sync_group->epoch() != round.epoch) {
    st.sync_group.reset();
    absl::StatusOr<std::unique_ptr<comm::communicator>> group =
        form_group(st, sync_group_options(st.spec.sync->group, round), "sync");
    if (!group.ok()) return actor::to_error(group.status());
    st.sync_group = *std::move(group);
  }
  absl::StatusOr<std::string> checksum = broadcast_weights(*st.sync_group, st.logic->weights(),
                                                           st.spec.sync->bucket_bytes, /*root=*/0);
  if (!checksum.ok()) {
    st.sync_group.reset();  // a failed group refuses further work; the next sync forms anew
    return actor::to_error(checksum.status());
  }
  return actor::weights_ack{round.version, *std::move(checksum)};
}

caf::result<int64_t> restore(trainer_self self, const std::string& dir) {
  auto& st = self->state;
  if (st.logic->steps() != 0) {
    return actor::to_error(absl::FailedPreconditionError(
        absl::StrCat("restore asked after ", st.logic->steps(), " steps; it must come first")));
  }
  absl::StatusOr<checkpoint::checkpoint> saved = checkpoint::checkpoint_store::read(dir);
  if (!saved.ok()) return actor::to_error(saved.status());
  if (!st.spec.file_prefix.empty()) *saved = files_named(*std::move(saved), st.spec.file_prefix);
  const nlohmann::json& cursor = saved->meta["cursor"];
  if (!cursor.is_number_integer() || cursor.get<int64_t>() < 0) {
    return actor::to_error(absl::DataLossError(
        absl::StrCat(dir, "/manifest.json: meta.cursor is missing or not a sample index")));
  }
  if (absl::Status s = st.logic->restore(*saved); !s.ok()) return actor::to_error(s);
  st.cursor = cursor.get<int64_t>();
  if (!st.loader) return st.logic->steps();
  auto promise = self->make_response_promise<int64_t>();
  self->request(st.loader, caf::infinite, actor::seek_atom_v, st.cursor)
      .then([self, promise](caf::ok_atom) mutable { promise.deliver(self->state.logic->steps()); },
            [promise](caf::error& e) mutable { promise.deliver(e); });
  return promise;
}

}  // namespace

recovery_metrics recovery_metrics_of(metrics::registry& registry, const metrics::labels& l) {
  return {&registry.get_counter(
              "troupe_train_recoveries_total",
              "times an elastic trainer group was whole again after losing a rank", l),
          &registry.get_histogram("troupe_train_recovery_seconds",
                                  "from a lost trainer rank known to its elastic group whole again",
                                  {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}, l)};
}

actor::trainer_actor spawn_trainer(caf::actor_system& system, metrics::registry& metrics,
                                   const std::string& name,
                                   std::shared_ptr<comm::rendezvous_store> store,
                                   trainer_actor_spec spec) {
  auto shared_spec = std::make_shared<trainer_actor_spec>(std::move(spec));
  return system.spawn<actor::role_actor<actor::trainer_actor, trainer_state>, caf::detached>(
      metrics.actor(name),
      [&metrics, name, store,
       shared_spec](trainer_self self) -> actor::trainer_actor::behavior_type {
        self->state.spec = *shared_spec;
        self->state.name = name;
        self->state.metrics = &metrics;
        self->state.store = store;
        // A failed build stops the actor; its handlers never run then.
        if (absl::Status s = build(self, metrics, name); !s.ok()) self->quit(actor::to_error(s));
        return {
            [self](actor::step_atom) { return step(self); },
            [self](actor::eval_atom) { return evaluate(self); },
            [self](actor::checkpoint_atom, int64_t step, const std::string& root) {
              return start_checkpoint(self, step, root);
            },
            [self](actor::restore_atom, const std::string& dir) { return restore(self, dir); },
            [self](actor::rl_step_atom, actor::rl_batch& batch) {
              return rl_step(self, std::move(batch));
            },
            [self](actor::log_probs_atom, const actor::rl_batch& batch) {
              return log_probs(self, batch);
            },
            [self](actor::values_atom,
                   const actor::rl_batch& batch) -> caf::result<std::vector<float>> {
              absl::StatusOr<std::vector<float>> out = self->state.logic->values(batch);
              if (!out.ok()) return actor::to_error(out.status());
              return *std::move(out);
            },
            [self](actor::load_atom, const std::string& dir) { return load_weights(self, dir); },
            [self](actor::sync_atom, const actor::weight_sync_round& round) {
              return sync_weights(self, round);
            },
            [self](actor::regroup_atom, const actor::group_change& c) { return regroup(self, c); },
            [self](actor::abort_atom, uint64_t generation) {
              auto& st = self->state;
              uint64_t seen = st.given_up.load();
              while (seen < generation && !st.given_up.compare_exchange_weak(seen, generation)) {
              }
              std::lock_guard lock(st.group_mutex);
              if (st.group && st.group->epoch() < generation) {
                st.group->abort(
                    absl::StrCat("generation ", generation, " of the group replaces it"));
              }
            },
            [self](actor::done_atom, uint64_t id) { on_done(self, id); },
        };
      });
}

}  // namespace troupe::actors
