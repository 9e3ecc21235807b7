#include "apps/pretrain/pretrain_driver_actor.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "actors/pipeline_schedule.hpp"
#include "actors/trainer_actor.hpp"
#include "apps/pretrain/pretrain_driver.hpp"
#include "models/decoder/decoder_source.hpp"
#include "runtime/actor/interfaces.hpp"
#include "runtime/actor/status_bridge.hpp"
#include "runtime/app/app_plan.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"
#include "runtime/cluster/head_logic.hpp"
#include "runtime/cluster/job_publisher.hpp"
#include "runtime/metrics/row_gauges.hpp"
#include "runtime/run/line_chart.hpp"
#include "runtime/run/row_alerts.hpp"

namespace troupe::apps {
namespace {

namespace fs = std::filesystem;
using clock = std::chrono::steady_clock;
using command = pretrain_driver::command;

// The app driver's interface, its own prompt to ask again for a step a test holds, and its
// timer (elastic waits).
using driver_actor =
    actor::app_actor::extend<caf::reacts_to<actor::tick_atom>, caf::reacts_to<actor::wake_atom>>;

struct driver_state {
  std::string app;  // pretrain, reward_model or dpo
  pretrain_options options;
  run::work_pacer pacer;
  models::decoder_config model;
  std::string model_dir;  // model.path: a Hugging Face model's directory, or empty
  run::event_log* events = nullptr;
  metrics::registry* registry = nullptr;  // the process's: each metrics row's figures as gauges
  run::row_alerts alerts;                 // warnings about the rows: NaN loss, throughput drop
  std::string run_dir;
  std::string checkpoint_root;
  std::optional<elastic_world> elastic;  // roles.trainer.elastic
  std::string resumed_dir;               // elastic: the checkpoint the first generation restores
  std::map<std::string, actor::trainer_actor> trainers;  // by actor name
  std::map<caf::actor_addr, std::string> names;          // monitored trainers
  cluster::job_publisher status;                         // what troupe status shows of the job
  actors::recovery_metrics recovery;
  std::unique_ptr<pretrain_driver> logic;
  caf::typed_response_promise<actor::job_result> done;
  bool running = false;
  std::ofstream metrics;
  run::chart_series train{"train", {}}, val{"held-out", {}};
  // A reward model's held-out pairs: the share ranked right and the mean reward gap.
  run::chart_series accuracy{"held-out accuracy", {}}, reward_gap{"held-out reward gap", {}};
  clock::time_point last_progress{};
};

using pretrain_self = actor::role_pointer<driver_actor, driver_state>;

void execute(pretrain_self self, std::vector<command> commands);

void complete(pretrain_self self, actor::job_result result) {
  auto& st = self->state;
  if (!st.running) return;
  st.running = false;
  st.done.deliver(std::move(result));
  self->quit();
}

void fail(pretrain_self self, const absl::Status& why) {
  complete(self, actor::job_result{false, {}, std::string(why.message())});
}

// A run that fails after a checkpoint was committed says how to continue from it.
absl::Status with_resume_hint(const driver_state& st, const absl::Status& why) {
  if (!st.logic || st.logic->committed() < 0) return why;
  return absl::Status(
      why.code(),
      absl::StrCat(why.message(), "; checkpoint ", st.logic->committed(),
                   " is committed: troupe launch CONFIG --resume ",
                   st.run_dir.empty() ? "RUN_DIR" : st.run_dir,
                   " continues from it, at this layout or another (pretrain.parallel)"));
}

void report_progress(pretrain_self self, const nlohmann::json& row) {
  auto& st = self->state;
  const auto now = clock::now();
  const int64_t step = row["step"];
  if (step < st.logic->schedule().end() &&
      now - st.last_progress < std::chrono::milliseconds(200)) {
    return;
  }
  st.last_progress = now;
  const double loss = row["loss"];
  const double tokens_per_s = row["tokens_per_s"];
  st.events->emit(
      run::severity::debug, "progress",
      absl::StrFormat("step %d/%d loss %.3f", step, st.options.train.steps, loss),
      {{"done", step},
       {"total", st.logic->schedule().end()},
       {"unit", "steps"},
       {"detail",
        absl::StrFormat(
            "loss %.3f  %.0f tok/s%s", loss, tokens_per_s,
            st.elastic ? absl::StrFormat("  %d ranks", row.value("world_size", 0)) : "")}});
}

void record(pretrain_self self, const nlohmann::json& row) {
  auto& st = self->state;
  if (st.metrics.is_open()) st.metrics << row.dump() << '\n' << std::flush;
  metrics::set_row_gauges(*st.registry, "troupe_train_", row);
  st.alerts.report(row, *st.events);
  const double step = row["step"].get<double>();
  if (row.contains("loss")) {
    st.train.points.emplace_back(step, row["loss"].get<double>());
    report_progress(self, row);
  }
  if (row.contains("val_loss")) {
    const double v = row["val_loss"];
    st.val.points.emplace_back(step, v);
    st.events->emit(run::severity::info, "eval",
                    absl::StrFormat("step %d: held-out loss %.4f", row["step"].get<int64_t>(), v),
                    {{"step", row["step"]}, {"val_loss", v}});
  }
  // A reward model's held-out pairs, or DPO's (TRL's names).
  for (const auto& [accuracy, gap] : {std::pair{"val_accuracy", "val_reward_gap"},
                                      {"val_rewards/accuracies", "val_rewards/margins"}}) {
    if (!row.contains(accuracy)) continue;
    st.accuracy.points.emplace_back(step, row[accuracy].get<double>());
    st.reward_gap.points.emplace_back(step, row[gap].get<double>());
  }
}

absl::Status commit(pretrain_self self, const pretrain_driver::commit& c) {
  auto& st = self->state;
  nlohmann::json meta = {
      {"app", st.app},
      {"model", models::decoder_config_json(st.model)},
      // The layout it was saved at (a resume may take another).
      {"dp", st.logic->members().size() / (st.options.parallel.pp * st.options.parallel.tp)},
      {"pp", st.options.parallel.pp},
      {"tp", st.options.parallel.tp},
      {"zero", st.options.parallel.zero},
      {"batch", st.options.train.batch},
      {"seed", st.options.train.seed},
      {"cursor", c.cursor}};
  if (const std::string& dir = st.model_dir.empty() ? st.options.data.tokenizer : st.model_dir;
      !dir.empty()) {
    // Whose ids the model reads: `troupe export` ships it (and its chat template) with the
    // weights.
    meta["tokenizer"] = std::filesystem::absolute(dir).string();
  }
  checkpoint::checkpoint_store store(st.checkpoint_root);
  TROUPE_RETURN_IF_ERROR(store.commit(c.step, c.files, meta, st.options.checkpoint.keep));
  st.events->emit(run::severity::debug, "checkpoint_committed",
                  absl::StrCat("checkpoint ", store.step_dir(c.step), " committed"),
                  {{"step", c.step}, {"dir", store.step_dir(c.step)}});
  return absl::OkStatus();
}

void finish(pretrain_self self, nlohmann::json summary) {
  auto& st = self->state;
  if (!st.run_dir.empty()) {
    const std::string title = absl::StrCat(st.app, ": ", st.model.layers, " layers, dim ",
                                           st.model.dim, ", dp ", st.logic->members().size());
    std::vector<run::line_chart> charts;
    if (st.accuracy.points.empty()) {
      charts.push_back({title, "loss (nats per token)", {st.train, st.val}});
    } else {  // a reward model's: its pairs' loss, and how well it ranks the held-out ones
      charts.push_back({title, "Bradley-Terry loss (nats per pair)", {st.train, st.val}});
      charts.push_back({"held-out pairs ranked right", "accuracy", {st.accuracy}});
      charts.push_back({"held-out reward gap", "r_chosen - r_rejected", {st.reward_gap}});
    }
    if (auto svg = run::line_charts_svg(charts); svg.ok()) {
      std::ofstream(fs::path(st.run_dir) / "loss.svg") << *svg;
      summary["loss_plot"] = (fs::path(st.run_dir) / "loss.svg").string();
    }
  }
  if (!st.checkpoint_root.empty() && summary.contains("checkpoint_step")) {
    summary["checkpoint"] =
        checkpoint::checkpoint_store(st.checkpoint_root).step_dir(summary["checkpoint_step"]);
  }
  if (st.logic->stopped()) {
    // Interrupted, but resumable exactly from the checkpoint it just wrote.
    const int64_t committed = st.logic->committed();
    return complete(
        self,
        actor::job_result{
            false, summary.dump(),
            committed < 0
                ? absl::StrCat("interrupted after step ", st.logic->step(),
                               " (no checkpoint: pretrain.checkpoint.every_steps is 0)")
                : absl::StrCat("interrupted after step ", st.logic->step(), "; checkpoint ",
                               committed, " is committed: troupe launch CONFIG --resume ",
                               st.run_dir.empty() ? "RUN_DIR" : st.run_dir, " continues exactly")});
  }
  complete(self, actor::job_result{true, summary.dump(), {}});
}

// Asks each of `members` (rank r is its index) `message`, and carries out what the driver
// returns for its answer (`on_answer`) or its error (`on_failure`).
template <class Answer, class... Ts>
void ask_each(pretrain_self self, const std::vector<std::string>& members,
              std::function<std::vector<command>(int, Answer&)> on_answer,
              std::function<std::vector<command>(int, const absl::Status&)> on_failure,
              Ts... message) {
  for (size_t rank = 0; rank < members.size(); ++rank) {
    const int r = static_cast<int>(rank);
    self->request(self->state.trainers.at(members[rank]), caf::infinite, message...)
        .then([self, r, on_answer](Answer& a) { execute(self, on_answer(r, a)); },
              [self, r, on_failure](caf::error& e) {
                execute(self, on_failure(r, actor::to_status(e)));
              });
  }
}

// Asks every member of the driver's current generation `message`: its answer goes to
// `on_answer`, its error to the driver's on_error.
template <class Answer, class... Ts>
void ask_all(pretrain_self self,
             std::function<std::vector<command>(int, Answer&, uint64_t)> on_answer, Ts... message) {
  const uint64_t generation = self->state.logic->generation();
  ask_each<Answer>(
      self, self->state.logic->members(),
      [on_answer, generation](int r, Answer& a) { return on_answer(r, a, generation); },
      [self, generation](int r, const absl::Status& s) {
        return self->state.logic->on_error(r, s, generation);
      },
      message...);
}

void step_all(pretrain_self self) {
  if (!self->state.pacer.may_start()) {  // held by a test: ask again shortly
    self->delayed_send(self, run::work_pacer::recheck, actor::tick_atom_v);
    return;
  }
  ask_all<actor::step_report>(
      self,
      [self](int r, actor::step_report& x, uint64_t g) {
        return self->state.logic->on_step(r, x, g);
      },
      actor::step_atom_v);
}

// Elastic: the group as `troupe status` shows it, in the head's store (when there is a head).
void publish_group(pretrain_self self) {
  auto& st = self->state;
  st.status.publish("trainer_group", {{"generation", st.logic->generation()},
                                      {"world_size", st.logic->members().size()},
                                      {"members", st.logic->members()}});
}

// Elastic: every member forms the new generation of the group, as rank r of the members.
void regroup_all(pretrain_self self, const pretrain_driver::regroup_all& g) {
  auto& st = self->state;
  const std::vector<std::string>& members = st.logic->members();
  const int ranks = static_cast<int>(members.size());
  std::string dir;
  if (g.from == actor::group_change::source::checkpoint) {
    dir = g.steps == st.logic->schedule().first_step && !st.resumed_dir.empty()
              ? st.resumed_dir
              : checkpoint::checkpoint_store(st.checkpoint_root).step_dir(g.steps);
  }
  for (int r = 0; r < ranks; ++r) {
    const actor::group_change change{g.generation, r,       ranks,    g.from,
                                     g.basis,      g.steps, g.cursor, dir};
    self->request(st.trainers.at(members[r]), caf::infinite, actor::regroup_atom_v, change)
        .then(
            [self, r, g](int64_t steps) {
              execute(self, self->state.logic->on_regrouped(r, steps, g.generation));
            },
            [self, r, g](caf::error& e) {
              execute(self, self->state.logic->on_regrouped(r, actor::to_status(e), g.generation));
            });
  }
}

void execute_one(pretrain_self self, command& cmd) {
  auto& st = self->state;
  if (std::holds_alternative<pretrain_driver::step_all>(cmd)) {
    step_all(self);
  } else if (std::holds_alternative<pretrain_driver::eval_all>(cmd)) {
    ask_all<actor::eval_report>(
        self,
        [self](int r, actor::eval_report& report, uint64_t g) {
          return self->state.logic->on_eval(r, report, g);
        },
        actor::eval_atom_v);
  } else if (auto* c = std::get_if<pretrain_driver::checkpoint_all>(&cmd)) {
    ask_each<actor::checkpoint_shard>(
        self, c->members,
        [self](int, actor::checkpoint_shard& x) { return self->state.logic->on_saved(x); },
        [self, step = c->step](int r, const absl::Status& s) {
          return self->state.logic->on_save_failed(step, r, s);
        },
        actor::checkpoint_atom_v, c->step, st.checkpoint_root);
  } else if (auto* m = std::get_if<pretrain_driver::metrics_row>(&cmd)) {
    record(self, m->row);
  } else if (auto* c = std::get_if<pretrain_driver::commit>(&cmd)) {
    if (absl::Status s = commit(self, *c); !s.ok()) fail(self, s);
  } else if (auto* f = std::get_if<pretrain_driver::finish>(&cmd)) {
    finish(self, std::move(f->summary));
  } else if (auto* f = std::get_if<pretrain_driver::fail>(&cmd)) {
    fail(self, with_resume_hint(st, f->why));
  } else if (auto* g = std::get_if<pretrain_driver::regroup_all>(&cmd)) {
    regroup_all(self, *g);
  } else if (auto* a = std::get_if<pretrain_driver::abort_all>(&cmd)) {
    for (const auto& name : st.logic->members())
      self->send(st.trainers.at(name), actor::abort_atom_v, a->generation);
  } else if (auto* n = std::get_if<pretrain_driver::note>(&cmd)) {
    st.events->emit(n->level, n->kind, n->message, n->fields);
  } else if (auto* w = std::get_if<pretrain_driver::wake_after>(&cmd)) {
    self->delayed_send(self, w->after, actor::wake_atom_v);
  } else if (auto* r = std::get_if<pretrain_driver::recovered>(&cmd)) {
    st.recovery.record(r->seconds);
  } else if (std::holds_alternative<pretrain_driver::group_whole>(cmd)) {
    publish_group(self);
  }
}

void execute(pretrain_self self, std::vector<command> commands) {
  for (auto& cmd : commands) {
    if (!self->state.running) return;
    execute_one(self, cmd);
  }
}

void start_training(pretrain_self self, int64_t first_step) {
  auto& st = self->state;
  const auto& o = st.options;
  pretrain_schedule schedule{
      .steps = o.train.steps,
      .ranks = o.parallel.dp * o.parallel.pp * o.parallel.tp,
      .batch = o.train.batch,
      .elastic = st.elastic,
      .eval_every = o.data.eval_every,
      .checkpoint_every = o.checkpoint.every_steps,
      .tokens_per_step = static_cast<int64_t>(o.train.batch) * st.model.ctx,
      .first_step = first_step,
      .stop_after = o.train.stop_after,
      .stages = o.parallel.pp,
      .tensor = o.parallel.tp,
      .ideal_bubble = actors::ideal_bubble(*actors::parse_pipeline_schedule(o.parallel.schedule),
                                           o.parallel.pp, o.parallel.micro_batches),
      .dpo = st.app == "dpo"};
  if (first_step >= schedule.end()) {
    return fail(self,
                absl::FailedPreconditionError(absl::StrCat("the checkpoint is at step ", first_step,
                                                           ", so nothing is left to train; "
                                                           "raise pretrain.train.steps (now ",
                                                           o.train.steps, ")")));
  }
  std::vector<std::string> members;  // in rank order: the trainers' role indices
  for (const auto& [name, handle] : st.trainers)
    members.push_back(name);
  std::sort(members.begin(), members.end(), [](const std::string& a, const std::string& b) {
    return actor::parse_actor_name(a).index < actor::parse_actor_name(b).index;
  });
  const size_t world = members.size();
  st.logic = std::make_unique<pretrain_driver>(
      schedule, [] { return clock::now(); }, std::move(members));
  st.events->emit(
      run::severity::info, "training",
      absl::StrCat(
          first_step > 0 ? absl::StrCat("continuing at step ", first_step + 1) : "training",
          " for ", schedule.end() - first_step, " steps on ", world, " trainer",
          world != 1 ? "s" : "",
          st.elastic ? absl::StrCat(" (elastic, ", st.elastic->min, " to ", st.elastic->max, ")")
          : o.parallel.pp > 1 || o.parallel.tp > 1
              ? absl::StrCat(" (", describe_grid(o.parallel.dp, o.parallel.pp, o.parallel.tp), ", ",
                             o.parallel.micro_batches, " micro-batches",
                             o.parallel.pp > 1 ? absl::StrCat(", ", o.parallel.schedule) : "",
                             ", zero ", o.parallel.zero, ")")
              : absl::StrCat(" (zero ", o.parallel.zero, ")")),
      {{"first_step", first_step}, {"steps", o.train.steps}, {"world_size", world}});
  execute(self, st.logic->start());
}

// FAILED_PRECONDITION unless `saved` holds this run's model.
absl::Status check_model(const driver_state& st, const checkpoint::checkpoint& saved) {
  const nlohmann::json held = saved.meta.value("model", nlohmann::json());
  if (held == models::decoder_config_json(st.model)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(saved.dir, " holds model ", held.dump(),
                                                    " but this config's model is ",
                                                    models::decoder_config_json(st.model).dump()));
}

// Finds the newest good checkpoint, checks it fits this run, and restores every rank from it.
void resume(pretrain_self self) {
  auto& st = self->state;
  std::vector<std::string> warnings;
  const checkpoint::checkpoint_store store(checkpoint::checkpoint_root_of(st.options.resume));
  absl::StatusOr<checkpoint::checkpoint> saved = store.read_latest(&warnings);
  for (const auto& w : warnings) {
    st.events->emit(run::severity::warning, "checkpoint_skipped", w, {{"warning", w}});
  }
  if (!saved.ok()) {
    return fail(
        self, absl::Status(saved.status().code(), absl::StrCat("--resume ", st.options.resume, ": ",
                                                               saved.status().message())));
  }
  if (absl::Status s = check_model(st, *saved); !s.ok()) return fail(self, s);
  const int saved_dp = saved->meta.value("dp", 0), saved_pp = saved->meta.value("pp", 1),
            saved_tp = saved->meta.value("tp", 1);
  const int pp = st.options.parallel.pp, tp = st.options.parallel.tp;
  const int dp = static_cast<int>(st.trainers.size()) / (pp * tp);
  const std::string was = describe_grid(saved_dp, saved_pp, saved_tp),
                    now = describe_grid(dp, pp, tp);
  st.events->emit(run::severity::info, "resume",
                  absl::StrCat("resuming from ", saved->dir,
                               was != now ? absl::StrCat(" (saved at ", was,
                                                         ", parameters and optimizer state "
                                                         "resharded to ",
                                                         now, ")")
                                          : std::string()),
                  {{"dir", saved->dir}, {"step", saved->step}});
  const int64_t step = saved->step;
  if (st.elastic) {  // the first generation of the group restores it as it forms
    st.resumed_dir = saved->dir;
    return start_training(self, step);
  }
  auto restored = std::make_shared<size_t>(0);
  for (const auto& [name, trainer] : st.trainers) {
    self->request(trainer, caf::infinite, actor::restore_atom_v, saved->dir)
        .then(
            [self, restored, step](int64_t) {
              if (++*restored == self->state.trainers.size()) start_training(self, step);
            },
            [self, name](caf::error& e) {
              const absl::Status s = actor::to_status(e);
              fail(self,
                   absl::Status(s.code(), absl::StrCat(name, " cannot resume: ", s.message())));
            });
  }
}

// init_from (or model.path): every rank takes the weights of the named run's latest checkpoint
// (a reward model a language model's trunk) or of a Hugging Face model, then the run starts at
// step 0. An elastic group's ranks hold them as their initial state already (each generation
// formed from the initial state takes them).
void init_from(pretrain_self self) {
  auto& st = self->state;
  const std::string& path = st.options.initial_weights(st.model_dir);
  absl::StatusOr<models::weights_source> source = models::find_weights(
      path, st.model, st.options.init_from.empty() ? "model.path" : "init_from");
  if (!source.ok()) return fail(self, source.status());
  st.events->emit(run::severity::info, "init_from",
                  absl::StrCat("starting from the weights of ", source->dir),
                  {{"dir", source->dir}, {"step", source->step}});
  if (st.elastic) return start_training(self, 0);
  auto loaded = std::make_shared<size_t>(0);
  for (const auto& [name, trainer] : st.trainers) {
    self->request(trainer, caf::infinite, actor::load_atom_v, source->dir)
        .then(
            [self, loaded](int64_t) {
              if (++*loaded == self->state.trainers.size()) start_training(self, 0);
            },
            [self, name, dir = source->dir](caf::error& e) {
              const absl::Status s = actor::to_status(e);
              fail(self, absl::Status(s.code(), absl::StrCat(name, " cannot start from ", dir, ": ",
                                                             s.message())));
            });
  }
}

void on_update(pretrain_self self, const actor::actor_update& update) {
  auto& st = self->state;
  const auto [role, index] = actor::parse_actor_name(update.name);
  if (role != "trainer" || index < 0) return;
  auto handle = caf::actor_cast<actor::trainer_actor>(update.handle);
  if (!st.elastic) {
    if (index >= st.options.parallel.dp * st.options.parallel.pp * st.options.parallel.tp) return;
    if (st.running && st.trainers.contains(update.name)) {
      // Trainers are not restarted (their state is the run's); a replacement cannot join.
      return fail(self, absl::AbortedError(absl::StrCat(update.name, " was replaced mid-run")));
    }
    st.trainers[update.name] = handle;
    st.names[handle.address()] = update.name;
    self->monitor(handle);  // a fixed grid cannot go on without any of its ranks
    return;
  }
  // Elastic: a trainer on a worker that joined; the group admits it at a step boundary.
  if (st.trainers.contains(update.name)) return;
  st.trainers[update.name] = handle;
  st.names[handle.address()] = update.name;
  self->monitor(handle);
  if (st.logic) execute(self, st.logic->on_joined(update.name));
}

// A trainer is gone (its worker died, or was declared dead and fenced): an elastic group goes on
// without it; a fixed grid's run fails, saying which rank it lost.
void on_down(pretrain_self self, const caf::down_msg& down) {
  auto& st = self->state;
  auto it = st.names.find(down.source);
  if (it == st.names.end()) return;
  const std::string name = it->second;
  st.names.erase(it);
  if (st.logic) {
    // The trainer's handle stays until no command of an older generation can name it.
    execute(self, st.logic->on_lost(name, std::string(actor::to_status(down.reason).message())));
  } else {
    st.trainers.erase(name);  // before the run: it is simply not a member
  }
}

absl::Status prepare_outputs(driver_state& st) {
  if (st.run_dir.empty()) return absl::OkStatus();
  st.metrics.open(fs::path(st.run_dir) / "metrics.jsonl", std::ios::app);
  if (!st.metrics) {
    return absl::UnavailableError(
        absl::StrCat("cannot write ", (fs::path(st.run_dir) / "metrics.jsonl").string()));
  }
  return absl::OkStatus();
}

// Ctrl-C: the step in flight is the last one; the event says which.
void stop(pretrain_self self) {
  auto& st = self->state;
  if (!st.logic) {  // still restoring: nothing to finish
    return complete(self, actor::job_result{false, {}, "interrupted"});
  }
  std::vector<command> commands = st.logic->stop();
  if (st.logic->stopped()) {
    const int64_t last = st.logic->schedule().end();
    st.events->emit(run::severity::info, "training_stopping",
                    absl::StrCat("stopping after step ", last,
                                 st.options.checkpoint.every_steps > 0
                                     ? ", which is checkpointed so that --resume continues exactly"
                                     : ""),
                    {{"step", last}});
  }
  execute(self, std::move(commands));
}

}  // namespace

absl::StatusOr<caf::actor> spawn_pretrain_driver(actor::role_context& ctx,
                                                 const pretrain_options& options,
                                                 run::work_pacer pacer) {
  auto state = std::make_shared<driver_state>();
  state->app = ctx.plan.spec.app;
  state->options = options;
  state->pacer = pacer;
  TROUPE_ASSIGN_OR_RETURN(state->model, models::decoder_config_of(ctx.plan.spec.model));
  state->model_dir = models::hf_model_dir(ctx.plan.spec.model);
  state->events = &ctx.events;
  state->registry = &ctx.metrics;
  state->run_dir = ctx.run_dir;
  state->status = cluster::job_publisher(ctx.rendezvous);
  state->recovery = actors::recovery_metrics_of(ctx.metrics);
  if (const auto* role = ctx.plan.find_role("trainer"); role != nullptr && role->spec.elastic) {
    const auto& c = ctx.plan.spec.cluster;
    const auto heartbeat_timeout =
        std::chrono::milliseconds(c.heartbeat_interval_ms) * c.heartbeat_misses;
    state->elastic = elastic_world{
        role->spec.elastic->min,
        role->spec.elastic->max,
        std::chrono::seconds(c.worker_wait_s),
        std::max<std::chrono::milliseconds>(3 * heartbeat_timeout, std::chrono::seconds(2)),
        options.parallel.zero > 0,
        options.parallel.shard_replicas > 0};
  }
  if (!options.checkpoint.dir.empty()) {
    state->checkpoint_root = fs::absolute(options.checkpoint.dir).string();
  } else if (!ctx.run_dir.empty()) {
    state->checkpoint_root = fs::absolute(fs::path(ctx.run_dir) / "checkpoints").string();
  } else if (options.checkpoint.every_steps > 0) {
    return absl::InvalidArgumentError(
        "pretrain.checkpoint.every_steps is set, but there is no run directory: set "
        "pretrain.checkpoint.dir");
  }
  auto handle = ctx.spawn<driver_actor, driver_state>(
      [state](pretrain_self self) -> driver_actor::behavior_type {
        auto& st = self->state;
        st.app = state->app;
        st.options = state->options;
        st.pacer = state->pacer;
        st.model = state->model;
        st.model_dir = state->model_dir;
        st.events = state->events;
        st.registry = state->registry;
        st.run_dir = state->run_dir;
        st.checkpoint_root = state->checkpoint_root;
        st.elastic = state->elastic;
        st.recovery = state->recovery;
        st.status = state->status;
        self->set_down_handler([self](caf::down_msg& down) { on_down(self, down); });
        return {
            [self](const actor::actor_update& update) { on_update(self, update); },
            [self](actor::run_atom) {
              auto& st = self->state;
              st.done = self->make_response_promise<actor::job_result>();
              st.running = true;
              if (absl::Status s = prepare_outputs(st); !s.ok()) {
                fail(self, s);
              } else if (!st.options.resume.empty()) {
                resume(self);
              } else if (!st.options.initial_weights(st.model_dir).empty()) {
                init_from(self);
              } else {
                start_training(self, 0);
              }
              return st.done;
            },
            [self](actor::stop_atom) { stop(self); },
            [self](actor::tick_atom) {
              if (self->state.running) step_all(self);
            },
            [self](actor::wake_atom) {
              if (self->state.running) execute(self, self->state.logic->on_timer());
            },
        };
      });
  return caf::actor_cast<caf::actor>(handle);
}

}  // namespace troupe::apps
