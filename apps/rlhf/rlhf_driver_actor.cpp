#include "apps/rlhf/rlhf_driver_actor.hpp"

// The RLHF controller: the roles, the run's outputs and resume. The rollout workers and the
// weight sync are in rlhf_rollout_control.cpp.

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "apps/rlhf/rlhf_controller_state.hpp"
#include "models/decoder/decoder_checkpoint.hpp"
#include "models/decoder/decoder_source.hpp"
#include "runtime/actor/interfaces.hpp"
#include "runtime/actor/job_end_flush.hpp"
#include "runtime/actor/status_bridge.hpp"
#include "runtime/app/app_plan.hpp"
#include "runtime/base/status.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"
#include "runtime/cluster/job_publisher.hpp"
#include "runtime/metrics/row_gauges.hpp"
#include "runtime/run/line_chart.hpp"
#include "runtime/run/row_alerts.hpp"

namespace troupe::apps::rlhf {
namespace control {

namespace fs = std::filesystem;

void complete(self_ptr self, actor::job_result result) {
  auto& st = self->state;
  if (!st.running) return;
  st.running = false;
  st.done.deliver(std::move(result));
  self->quit();
}

// An error from role `who` fails the run, naming it.
void on_error(self_ptr self, const std::string& who, const caf::error& e) {
  const absl::Status s = actor::to_status(e);
  execute(self, self->state.logic->on_error(
                    absl::Status(s.code(), absl::StrCat(who, ": ", s.message()))));
}

std::string name_of(const char* role, size_t index) {
  return absl::StrCat(role, "/", index);
}

std::vector<std::pair<std::string, actor::trainer_actor>> ranks_of(self_ptr self, bool critic) {
  auto& st = self->state;
  std::vector<std::pair<std::string, actor::trainer_actor>> out;
  for (const auto& name : st.logic->members(critic)) {
    auto it = st.trainers.find(name);
    out.emplace_back(name, it == st.trainers.end() ? actor::trainer_actor{} : it->second);
  }
  return out;
}

// An error from rank `rank` of the policy's (the critic's) group asked in `generation`: an
// elastic group's waits for the loss that explains it (a rank whose actor is gone is one: its
// down message follows); a fixed group's fails the run, naming the rank.
void on_rank_error(self_ptr self, bool critic, int rank, uint64_t generation,
                   const std::string& who, const caf::error& e) {
  auto& st = self->state;
  if (!st.logic->elastic(critic)) return on_error(self, who, e);
  if (e == caf::sec::request_receiver_down) return;
  const absl::Status s = actor::to_status(e);
  execute(self, st.logic->on_rank_error(
                    critic, rank, absl::Status(s.code(), absl::StrCat(who, ": ", s.message())),
                    generation));
}

void record(self_ptr self, const nlohmann::json& row) {
  auto& st = self->state;
  if (st.metrics.is_open()) st.metrics << row.dump() << '\n' << std::flush;
  metrics::set_row_gauges(*st.registry, "troupe_rl_", row);
  st.alerts.report(row, *st.events);
  if (!row.contains("step")) {
    if (row.contains("warmup_step")) {
      st.events->emit(run::severity::debug, "progress",
                      absl::StrFormat("warm-up step %d loss %.3f",
                                      row["warmup_step"].get<int64_t>(), row["loss"].get<double>()),
                      {{"done", row["warmup_step"]},
                       {"total", st.options.warmup.steps},
                       {"unit", "warm-up steps"},
                       {"detail", absl::StrFormat("loss %.3f", row["loss"].get<double>())}});
    }
    return;
  }
  const double step = row["step"].get<double>();
  if (const std::string val = st.logic->schedule().val_metric(); row.contains(val)) {
    const double v = row[val];
    st.val.points.emplace_back(step, v);
    st.events->emit(
        run::severity::info, "validation",
        absl::StrFormat("step %d: greedy validation score %.3f", row["step"].get<int64_t>(), v),
        {{"step", row["step"]}, {"score", v}});
  }
  if (!row.contains("critic/score/mean")) return;
  const double score = row["critic/score/mean"], kl = row["actor/reward_kl_penalty"];
  st.score.points.emplace_back(step, score);
  if (row.contains("critic/true_score/mean")) {
    st.true_score.points.emplace_back(step, row["critic/true_score/mean"].get<double>());
  }
  st.kl.points.emplace_back(step, kl);
  st.length.points.emplace_back(step, row["response_length/mean"].get<double>());
  const auto now = clock::now();
  const int64_t done = row["step"];
  if (done < st.options.trainer.total_training_steps &&
      now - st.last_progress < std::chrono::milliseconds(200)) {
    return;
  }
  st.last_progress = now;
  st.events->emit(run::severity::debug, "progress",
                  absl::StrFormat("step %d/%d score %.3f kl %.4f", done,
                                  st.options.trainer.total_training_steps, score, kl),
                  {{"done", done},
                   {"total", st.options.trainer.total_training_steps},
                   {"unit", "steps"},
                   {"detail", absl::StrFormat("score %.3f  kl %.4f", score, kl)}});
}

void finish(self_ptr self, nlohmann::json summary) {
  auto& st = self->state;
  if (!st.run_dir.empty() && !st.score.points.empty()) {
    std::vector<run::line_chart> charts = {{"rlhf: score per step", "score", {st.score}},
                                           {"KL to the reference", "nats per token", {st.kl}},
                                           {"response length", "tokens", {st.length}}};
    if (!st.val.points.empty()) charts[0].series.push_back(st.val);
    // A learned reward's proxy score against the rule's: where they part, the policy is
    // over-optimising the reward model (Gao et al., 2022).
    // (and on a chart of its own, at its own scale).
    if (!st.true_score.points.empty()) {
      charts[0].series.push_back(st.true_score);
      charts.push_back({"the task's rule on the same responses", "true score", {st.true_score}});
    }
    if (auto svg = run::line_charts_svg(charts); svg.ok()) {
      std::ofstream(fs::path(st.run_dir) / "reward.svg") << *svg;
      summary["reward_plot"] = (fs::path(st.run_dir) / "reward.svg").string();
    }
    summary["samples"] = (fs::path(st.run_dir) / "samples.jsonl").string();
  }
  complete(self, actor::job_result{true, summary.dump(), {}});
}

// Checkpoints every policy rank (and, with `critic`, every critic rank) as step `step` into
// `root` and commits it with `meta` (plus the model, dp, the trainers' data cursor and the
// model directory whose tokenizer it reads); `committed(dir)` continues. A newer save drops the
// answers of this one (a rank lost: the regrouped ranks save again).
void checkpoint_trainers(self_ptr self, int64_t step, const std::string& root, nlohmann::json meta,
                         int keep, bool critic, std::function<void(const std::string&)> committed) {
  auto& st = self->state;
  st.shards.clear();
  const uint64_t round = ++st.save_round;
  std::vector<std::pair<std::string, actor::trainer_actor>> ranks = ranks_of(self, false);
  const size_t policy_ranks = ranks.size();
  if (critic) {
    for (auto& r : ranks_of(self, true))
      ranks.push_back(std::move(r));
  }
  const size_t expected = ranks.size();
  for (size_t i = 0; i < ranks.size(); ++i) {
    const auto& [who, rank] = ranks[i];
    const bool of_critic = i >= policy_ranks;
    const int r = static_cast<int>(of_critic ? i - policy_ranks : i);
    const uint64_t generation = st.logic->generation(of_critic);
    self->request(rank, caf::infinite, actor::checkpoint_atom_v, step, root)
        .then(
            [self, step, root, meta, keep, committed, expected, round, policy_ranks,
             critic](actor::checkpoint_shard& shard) mutable {
              auto& st = self->state;
              if (round != st.save_round) return;
              st.shards.push_back(std::move(shard));
              if (st.shards.size() < expected) return;
              std::vector<checkpoint::file_record> files;
              for (const auto& s : st.shards)
                files.insert(files.end(), s.files.begin(), s.files.end());
              meta["app"] = "rlhf";
              meta["model"] = models::decoder_config_json(st.model);
              meta["dp"] = policy_ranks;
              meta["critic_dp"] = critic ? expected - policy_ranks : 0;
              meta["cursor"] = st.shards.front().cursor;
              // Whose ids the policy reads: `troupe export` ships it with the weights.
              if (!st.model_dir.empty()) meta["tokenizer"] = fs::absolute(st.model_dir).string();
              checkpoint::checkpoint_store store(root);
              if (absl::Status s = store.commit(step, files, meta, keep); !s.ok()) {
                execute(self, st.logic->on_error(s));
                return;
              }
              committed(store.step_dir(step));
            },
            [self, who, of_critic, r, generation, round](caf::error& e) {
              if (round == self->state.save_round) {
                on_rank_error(self, of_critic, r, generation, who, e);
              }
            });
  }
}

void save_initial(self_ptr self, int64_t step) {
  auto& st = self->state;
  checkpoint_trainers(self, step, (fs::path(st.run_dir) / "init").string(),
                      {{"what", "the initial policy, after the warm-up: the reference"}}, 1, false,
                      [self](const std::string& dir) {
                        self->state.init_dir = fs::absolute(dir).string();
                        execute(self, self->state.logic->on_initial_saved(dir));
                      });
}

void save_checkpoint(self_ptr self, int64_t step, nlohmann::json meta, uint64_t round) {
  auto& st = self->state;
  meta["init"] = st.init_dir;  // the reference stays pinned to it
  checkpoint_trainers(
      self, step, (fs::path(st.run_dir) / "checkpoints").string(), std::move(meta),
      st.options.trainer.max_actor_ckpt_to_keep, true, [self, round](const std::string& dir) {
        self->state.events->emit(run::severity::debug, "checkpoint_committed",
                                 absl::StrCat("checkpoint ", dir, " committed"), {{"dir", dir}});
        self->state.last_checkpoint = self->state.logic->step();
        self->state.last_checkpoint_run = self->state.run_dir;
        execute(self, self->state.logic->on_checkpoint_saved(round));
      });
}

// An elastic group's generation, world size and members, for troupe status ("job
// policy_group: ..."), as the pretraining app publishes its trainer group.
void publish_group(self_ptr self, const nlohmann::json& formed) {
  self->state.status.publish(absl::StrCat(formed["role"].get<std::string>(), "_group"),
                             {{"generation", formed["generation"]},
                              {"world_size", formed["world_size"]},
                              {"members", formed["members"]}});
}

// Every member of an elastic group forms generation `c.generation`, as its rank in the logic's
// members.
void regroup(self_ptr self, const rlhf_driver::regroup_all& c) {
  const auto ranks = ranks_of(self, c.critic);
  for (size_t r = 0; r < ranks.size(); ++r) {
    const actor::group_change change{c.generation,
                                     static_cast<int32_t>(r),
                                     static_cast<int32_t>(ranks.size()),
                                     c.from,
                                     c.basis,
                                     c.steps,
                                     0,
                                     c.checkpoint};
    const int rank = static_cast<int>(r);
    self->request(ranks[r].second, caf::infinite, actor::regroup_atom_v, change)
        .then(
            [self, c, rank](int64_t steps) {
              execute(self, self->state.logic->on_regrouped(c.critic, rank, steps, c.generation));
            },
            [self, c, rank](caf::error& e) {
              execute(self, self->state.logic->on_regrouped(c.critic, rank, actor::to_status(e),
                                                            c.generation));
            });
  }
}

// Asks every rank of the policy's (the critic's) group `message(rank)` (a tuple);
// `answer(rank, reply, generation)` gives the logic's commands.
template <class Answer, class Answered, class Message>
void ask_ranks(self_ptr self, bool critic, Answered answer, Message message) {
  auto& st = self->state;
  const uint64_t generation = st.logic->generation(critic);
  const auto ranks = ranks_of(self, critic);
  for (size_t r = 0; r < ranks.size(); ++r) {
    const int rank = static_cast<int>(r);
    std::apply(
        [&](auto&&... args) {
          self->request(ranks[r].second, caf::infinite, args...)
              .then([self, rank, answer,
                     generation](Answer& a) { execute(self, answer(rank, a, generation)); },
                    [self, critic, rank, generation, who = ranks[r].first](caf::error& e) {
                      on_rank_error(self, critic, rank, generation, who, e);
                    });
        },
        message(rank));
  }
}

void execute_one(self_ptr self, command& cmd) {
  auto& st = self->state;
  if (auto* c = std::get_if<rlhf_driver::load_policy>(&cmd)) {
    ask_ranks<int64_t>(
        self, false,
        [self](int, int64_t, uint64_t) { return self->state.logic->on_policy_loaded(); },
        [dir = c->dir](int) {
          return std::tuple{actor::load_atom_v, dir};
        });
  } else if (std::holds_alternative<rlhf_driver::warmup_step_all>(cmd)) {
    ask_ranks<actor::step_report>(
        self, false,
        [self](int r, actor::step_report& x, uint64_t) {
          return self->state.logic->on_warmup_step(r, x);
        },
        [](int) { return std::tuple{actor::step_atom_v}; });
  } else if (auto* c = std::get_if<rlhf_driver::save_initial>(&cmd)) {
    save_initial(self, c->step);
  } else if (auto* c = std::get_if<rlhf_driver::load_initial>(&cmd)) {
    const auto loaded = [self](int64_t) { execute(self, self->state.logic->on_initial_loaded()); };
    self->request(st.reference, caf::infinite, actor::load_atom_v, c->dir)
        .then(loaded, [self](caf::error& e) { on_error(self, "reference/0", e); });
    ask_ranks<int64_t>(
        self, true,
        [self](int, int64_t, uint64_t) { return self->state.logic->on_initial_loaded(); },
        [dir = c->dir](int) {
          return std::tuple{actor::load_atom_v, dir};
        });
  } else if (auto* c = std::get_if<rlhf_driver::sync_all>(&cmd)) {
    sync(self, c->version, c->sent);
    if (c->requests_follow) {
      actor::flush_job_output();  // the sync starts while the requests are made and sent
      execute(self, st.logic->requests_ahead());
    }
  } else if (auto* c = std::get_if<rlhf_driver::generate_all>(&cmd)) {
    generate(self, std::move(c->requests));
  } else if (auto* c = std::get_if<rlhf_driver::score_all>(&cmd)) {
    actor::reward_request request{std::move(c->prompts), std::move(c->responses), {}};
    for (bool e : c->ended)
      request.ended.push_back(e ? 1 : 0);
    self->request(st.reward, caf::infinite, actor::score_atom_v, std::move(request))
        .then(
            [self](std::vector<double>& scores) {
              execute(self, self->state.logic->on_scored(std::move(scores)));
            },
            [self](caf::error& e) { on_error(self, "reward/0", e); });
  } else if (auto* c = std::get_if<rlhf_driver::log_probs_all>(&cmd)) {
    auto parts = std::make_shared<std::vector<actor::rl_batch>>(std::move(c->policy));
    if (!parts->empty()) {
      ask_ranks<std::vector<float>>(
          self, false,
          [self](int r, std::vector<float>& v, uint64_t generation) {
            return self->state.logic->on_log_probs(false, r, v, generation);
          },
          [parts](int r) {
            return std::tuple{actor::log_probs_atom_v, (*parts)[r]};
          });
    }
    auto critic = std::make_shared<std::vector<actor::rl_batch>>(std::move(c->critic));
    if (!critic->empty()) {
      ask_ranks<std::vector<float>>(
          self, true,
          [self](int r, std::vector<float>& v, uint64_t generation) {
            return self->state.logic->on_values(r, v, generation);
          },
          [critic](int r) {
            return std::tuple{actor::values_atom_v, (*critic)[r]};
          });
    }
    if (c->reference.batch > 0) {
      self->request(st.reference, caf::infinite, actor::log_probs_atom_v, std::move(c->reference))
          .then(
              [self](std::vector<float>& v) {
                execute(self, self->state.logic->on_log_probs(true, 0, v));
              },
              [self](caf::error& e) { on_error(self, "reference/0", e); });
    }
  } else if (auto* c = std::get_if<rlhf_driver::update_all>(&cmd)) {
    auto parts = std::make_shared<std::vector<actor::rl_batch>>(std::move(c->parts));
    const bool critic = c->critic;
    ask_ranks<actor::rl_step_report>(
        self, critic,
        [self, critic](int r, actor::rl_step_report& x, uint64_t generation) {
          return self->state.logic->on_updated(r, x, critic, generation);
        },
        [parts](int r) {
          return std::tuple{actor::rl_step_atom_v, (*parts)[r]};
        });
  } else if (auto* c = std::get_if<rlhf_driver::save_checkpoint>(&cmd)) {
    save_checkpoint(self, c->step, std::move(c->meta), c->round);
  } else if (auto* c = std::get_if<rlhf_driver::regroup_all>(&cmd)) {
    regroup(self, *c);
  } else if (auto* c = std::get_if<rlhf_driver::abort_all>(&cmd)) {
    for (const auto& [who, rank] : ranks_of(self, c->critic)) {
      if (rank) self->send(rank, actor::abort_atom_v, c->generation);
    }
  } else if (auto* n = std::get_if<rlhf_driver::note>(&cmd)) {
    st.events->emit(n->level, n->kind, n->message, n->fields);
    if (n->kind == "group_rebuilt" && n->fields.value("recovered", false)) {
      st.recovery[n->fields["role"] == "critic"].record(n->fields["seconds"].get<double>());
    }
    if (n->kind == "group_formed" || n->kind == "group_rebuilt") publish_group(self, n->fields);
  } else if (auto* w = std::get_if<rlhf_driver::wake_after>(&cmd)) {
    self->delayed_send(self, w->after, actor::wake_atom_v);
  } else if (auto* m = std::get_if<rlhf_driver::metrics_row>(&cmd)) {
    record(self, m->row);
  } else if (auto* s = std::get_if<rlhf_driver::sample_rows>(&cmd)) {
    if (st.samples.is_open()) {
      // Responses are bytes: what is not UTF-8 shows as U+FFFD.
      for (const auto& row : s->rows)
        st.samples << row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
      st.samples << std::flush;
    }
  } else if (auto* f = std::get_if<rlhf_driver::finish>(&cmd)) {
    finish(self, std::move(f->summary));
  } else if (auto* f = std::get_if<rlhf_driver::fail>(&cmd)) {
    complete(self, actor::job_result{false, {}, std::string(f->why.message())});
  }
}

void execute(self_ptr self, std::vector<command> commands) {
  for (auto& cmd : commands) {
    if (!self->state.running) return;
    execute_one(self, cmd);
  }
}

void on_update(self_ptr self, const actor::actor_update& update) {
  auto& st = self->state;
  const auto [role, index] = actor::parse_actor_name(update.name);
  if (role == "rollout") {
    // Placed at the start, or mid-run (a worker joined, or a lost one was restarted): a
    // mid-run one joins the weight-sync group at the next step's sync.
    auto handle = caf::actor_cast<actor::inference_worker_actor>(update.handle);
    if (st.rollouts.contains(update.name) && st.rollouts.at(update.name) == handle) return;
    st.rollouts[update.name] = handle;
    if (!st.running) return;
    st.pool->remove(update.name);  // a replacement under the same name
    st.pool->add(update.name);
    st.watched[handle.address()] = update.name;
    self->monitor(handle);
    if (st.logic) st.logic->on_rollout_joining();
    st.events->emit(run::severity::info, "rollout_joining",
                    absl::StrCat(update.name, " joins the rollout at the next weight sync"),
                    {{"name", update.name}});
    return;
  }
  const bool trainer = role == "policy" || role == "critic";
  if (st.running && trainer && st.logic && st.logic->elastic(role == "critic")) {
    // A rank on a worker that joined: its group admits it at the next RL step.
    if (st.trainers.contains(update.name)) return;
    auto handle = caf::actor_cast<actor::trainer_actor>(update.handle);
    st.trainers[update.name] = handle;
    st.watched[handle.address()] = update.name;
    self->monitor(handle);
    return execute(self, st.logic->on_joined(update.name));
  }
  if (st.running) return on_lost(self, update.name, "it was replaced mid-run");
  if (trainer && index >= 0) {
    st.trainers[update.name] = caf::actor_cast<actor::trainer_actor>(update.handle);
  } else if (role == "reference") {
    st.reference = caf::actor_cast<actor::trainer_actor>(update.handle);
  } else if (role == "reward") {
    st.reward = caf::actor_cast<actor::reward_actor>(update.handle);
  }
}

absl::Status prepare_outputs(controller_state& st) {
  if (st.run_dir.empty()) {
    if (st.options.warmup.steps > 0 || st.options.trainer.save_freq > 0) {
      return absl::FailedPreconditionError(
          "rlhf.warmup.steps or rlhf.trainer.save_freq is set, but there is no run directory to "
          "keep checkpoints in");
    }
    return absl::OkStatus();
  }
  for (auto [file, name] :
       {std::pair{&st.metrics, "metrics.jsonl"}, {&st.samples, "samples.jsonl"}}) {
    file->open(fs::path(st.run_dir) / name, std::ios::app);
    if (!*file) {
      return absl::UnavailableError(
          absl::StrCat("cannot write ", (fs::path(st.run_dir) / name).string()));
    }
  }
  return absl::OkStatus();
}

// Restores every policy and critic rank from the newest good checkpoint, the reference from the
// initial policy it names, and continues the controller where it stopped.
void resume(self_ptr self) {
  auto& st = self->state;
  std::vector<std::string> warnings;
  const checkpoint::checkpoint_store store(checkpoint::checkpoint_root_of(st.options.resume));
  absl::StatusOr<checkpoint::checkpoint> saved = store.read_latest(&warnings);
  for (const auto& w : warnings)
    st.events->emit(run::severity::warning, "checkpoint_skipped", w, {{"warning", w}});
  const auto refuse = [&](const absl::Status& s) {
    complete(self, actor::job_result{
                       false, {}, absl::StrCat("--resume ", st.options.resume, ": ", s.message())});
  };
  if (!saved.ok()) return refuse(saved.status());
  if (saved->meta.value("app", "") != "rlhf" ||
      saved->meta.value("model", nlohmann::json()) != models::decoder_config_json(st.model)) {
    return refuse(absl::FailedPreconditionError(absl::StrCat(
        saved->dir, " holds app ", saved->meta.value("app", nlohmann::json()).dump(), " model ",
        saved->meta.value("model", nlohmann::json()).dump(), ", not this config's app rlhf model ",
        models::decoder_config_json(st.model).dump())));
  }
  absl::StatusOr<rlhf_driver::resume_point> at = rlhf_driver::resume_point_of(saved->meta);
  if (!at.ok())
    return refuse(absl::Status(
        at.status().code(), absl::StrCat(saved->dir, "/manifest.json: ", at.status().message())));
  st.init_dir = saved->meta.value("init", "");
  st.last_checkpoint = at->step;
  st.last_checkpoint_run = st.options.resume;
  st.events->emit(run::severity::info, "resume",
                  absl::StrCat("resuming from ", saved->dir, " after RL step ", at->step),
                  {{"dir", saved->dir}, {"step", at->step}});
  const size_t critics = ranks_of(self, true).size();
  if (!st.logic->elastic(true) && saved->meta.value("critic_dp", size_t{0}) != critics) {
    return refuse(absl::FailedPreconditionError(absl::StrCat(
        saved->dir, " holds ", saved->meta.value("critic_dp", 0), " critic ranks; this config has ",
        critics, " (roles.critic.count): resume with the same roles")));
  }
  // An elastic group's first generation restores the checkpoint as it forms; a fixed group's
  // ranks restore it here. Then the reference loads the initial policy, and the run goes on.
  const bool any_elastic = st.logic->elastic(false) || st.logic->elastic(true);
  const auto continue_run = [self, point = *at, dir = any_elastic ? saved->dir : ""] {
    auto& st = self->state;
    const auto go_on = [self, point, dir] { execute(self, self->state.logic->resume(point, dir)); };
    if (st.init_dir.empty()) return go_on();  // the reference: the initial weights
    self->request(st.reference, caf::infinite, actor::load_atom_v, st.init_dir)
        .then([go_on](int64_t) { go_on(); },
              [self](caf::error& e) { on_error(self, "reference/0", e); });
  };
  std::vector<std::pair<std::string, actor::trainer_actor>> ranks;
  for (bool critic : {false, true}) {
    if (st.logic->elastic(critic)) continue;
    for (auto& r : ranks_of(self, critic))
      ranks.push_back(std::move(r));
  }
  if (ranks.empty()) return continue_run();
  auto restored = std::make_shared<size_t>(0);
  for (auto& [who, rank] : ranks) {
    self->request(rank, caf::infinite, actor::restore_atom_v, saved->dir)
        .then(
            [restored, continue_run, expected = ranks.size()](int64_t) {
              if (++*restored == expected) continue_run();
            },
            [self, who](caf::error& e) { on_error(self, who, e); });
  }
}

void start(self_ptr self) {
  auto& st = self->state;
  const rlhf_options& o = st.options;
  const auto refuse = [self](const absl::Status& why) {
    complete(self, actor::job_result{false, {}, std::string(why.message())});
  };
  absl::StatusOr<std::shared_ptr<const text_task>> task = make_task(o.task);
  if (!task.ok()) {
    return refuse(absl::InvalidArgumentError(absl::StrCat("rlhf.task: ", task.status().message())));
  }
  rlhf_schedule schedule = schedule_of(o, st.model.ctx, st.codec);
  schedule.policy_elastic = st.policy_elastic;
  schedule.critic_elastic = st.critic_elastic;
  schedule.worker_wait = st.worker_wait;
  schedule.loss_wait = st.loss_wait;
  const std::string& initial = o.init_from.empty() ? st.model_dir : o.init_from;
  if (!initial.empty() && o.resume.empty()) {  // a resumed run's reference is pinned already
    absl::StatusOr<models::weights_source> source = models::find_weights(
        initial, st.model, o.init_from.empty() ? "model.path" : "rlhf.init_from");
    if (!source.ok()) return refuse(source.status());
    schedule.init_from = st.init_dir = fs::absolute(source->dir).string();
    st.events->emit(
        run::severity::info, "init_from",
        absl::StrCat("the policy, the reference and the critic start from ", st.init_dir),
        {{"dir", st.init_dir}, {"step", source->step}});
  }
  rl_task rl{[task = *task](uint64_t seed, int64_t index) { return task->prompt(seed, index); }};
  // The requests render each prompt alike; one that the chat template refuses stops the run here.
  if (auto p = st.codec.prompt_tokens((*task)->prompt(schedule.seed, 0)); !p.ok()) {
    return refuse(absl::InvalidArgumentError(absl::StrCat(
        "model.path: the chat template cannot render the task's prompts: ", p.status().message())));
  }
  rl.codec = st.codec;
  if (st.learned_reward) {
    rl.true_score = [task = *task](std::string_view prompt, std::string_view response, bool ended) {
      return task->reward(prompt, response, ended);
    };
  }
  st.logic =
      std::make_unique<rlhf_driver>(std::move(schedule), algorithm_of(o), kl_controller_of(o),
                                    std::move(rl), [] { return clock::now(); });
  // The rollout workers in index order (the sync group's ranks 1..); every role watched.
  std::vector<std::string> rollouts;
  for (const auto& [name, handle] : st.rollouts)
    rollouts.push_back(name);
  std::sort(rollouts.begin(), rollouts.end(), [](const std::string& a, const std::string& b) {
    return actor::parse_actor_name(a).index < actor::parse_actor_name(b).index;
  });
  st.pool = std::make_unique<rollout_pool>(rollouts);
  // An elastic group's first members: its actors placed at the start, in index order.
  for (bool critic : {false, true}) {
    if (!st.logic->elastic(critic)) continue;
    std::vector<std::string> names;
    for (const auto& [name, handle] : st.trainers) {
      if (actor::parse_actor_name(name).role == (critic ? "critic" : "policy")) {
        names.push_back(name);
      }
    }
    std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
      return actor::parse_actor_name(a).index < actor::parse_actor_name(b).index;
    });
    st.logic->set_members(critic, std::move(names));
  }
  const size_t policy_ranks = st.logic->members(false).size();
  const auto watch = [&](const caf::actor_addr& a, std::string name) {
    st.watched[a] = std::move(name);
    self->monitor(caf::actor_cast<caf::actor>(a));
  };
  for (const auto& [name, handle] : st.trainers)
    watch(handle.address(), name);
  watch(st.reference.address(), "reference/0");
  watch(st.reward.address(), "reward/0");
  for (const auto& [name, handle] : st.rollouts)
    watch(handle.address(), name);
  const rlhf_schedule& s = st.logic->schedule();
  st.events->emit(
      run::severity::info, "training",
      absl::StrCat(
          "rlhf (", o.algorithm.adv_estimator, ") for ", s.steps, " steps: ", s.prompts,
          " prompts x ", s.n, " responses per step, ", s.updates_per_step(),
          " policy updates per step on ", policy_ranks, " policy rank", policy_ranks > 1 ? "s" : "",
          st.logic->elastic(false) ? absl::StrCat(" (elastic, ", st.policy_elastic->min, " to ",
                                                  st.policy_elastic->max, ")")
                                   : "",
          ", ", st.rollouts.size(), " rollout worker", st.rollouts.size() > 1 ? "s" : "",
          st.init_dir.empty() ? "" : absl::StrCat(", from ", st.init_dir),
          o.warmup.steps > 0 ? absl::StrCat(", after a ", o.warmup.steps, "-step warm-up on ",
                                            warmup_description(o.task, o.warmup.text == "answers"))
                             : ""),
      {{"steps", s.steps}, {"updates_per_step", s.updates_per_step()}});
  if (o.resume.empty()) {
    execute(self, st.logic->start());
  } else {
    resume(self);
  }
}

}  // namespace control

absl::StatusOr<caf::actor> spawn_rlhf_driver(actor::role_context& ctx,
                                             const rlhf_options& options) {
  using namespace control;
  auto state = std::make_shared<controller_state>();
  state->options = options;
  TROUPE_ASSIGN_OR_RETURN(state->model, models::decoder_config_of(ctx.plan.spec.model));
  state->model_dir = models::hf_model_dir(ctx.plan.spec.model);
  TROUPE_ASSIGN_OR_RETURN(
      state->codec,
      tasks::task_codec_of(ctx.plan.spec.model, schedule_of(options, state->model.ctx).end_string));
  state->events = &ctx.events;
  state->registry = &ctx.metrics;
  state->run_dir = ctx.run_dir;
  const auto& c = ctx.plan.spec.cluster;
  state->loss_wait = std::max<std::chrono::milliseconds>(
      3 * std::chrono::milliseconds(c.heartbeat_interval_ms) * c.heartbeat_misses,
      std::chrono::seconds(2));
  state->worker_wait = std::chrono::seconds(c.worker_wait_s);
  const auto elastic_of = [&](const char* role) -> std::optional<rl_elastic> {
    const auto* r = ctx.plan.find_role(role);
    if (r == nullptr || !r->spec.elastic) return std::nullopt;
    return rl_elastic{r->spec.elastic->min, r->spec.elastic->max};
  };
  state->policy_elastic = elastic_of("policy");
  const auto* reward = ctx.plan.find_role("reward");
  state->learned_reward = reward != nullptr && reward->spec.impl == "reward_model";
  state->status = cluster::job_publisher(ctx.rendezvous);
  for (bool critic : {false, true})
    state->recovery[critic] =
        actors::recovery_metrics_of(ctx.metrics, {{"role", critic ? "critic" : "policy"}});
  state->critic_elastic = uses_critic(options) ? elastic_of("critic") : std::nullopt;
  auto handle = ctx.spawn<driver_actor, controller_state>(
      [state](self_ptr self) -> driver_actor::behavior_type {
        auto& st = self->state;
        st.options = state->options;
        st.model = state->model;
        st.model_dir = state->model_dir;
        st.codec = state->codec;
        st.events = state->events;
        st.registry = state->registry;
        st.run_dir = state->run_dir;
        st.loss_wait = state->loss_wait;
        st.worker_wait = state->worker_wait;
        st.policy_elastic = state->policy_elastic;
        st.critic_elastic = state->critic_elastic;
        st.learned_reward = state->learned_reward;
        st.status = state->status;
        st.recovery[0] = state->recovery[0];
        st.recovery[1] = state->recovery[1];
        self->set_down_handler([self](caf::down_msg& down) {
          auto& st = self->state;
          auto it = st.watched.find(down.source);
          if (it == st.watched.end()) return;
          const std::string who = it->second;
          st.watched.erase(it);
          on_lost(self, who, std::string(actor::to_status(down.reason).message()));
        });
        return {
            [self](const actor::actor_update& update) { on_update(self, update); },
            [self](actor::run_atom) {
              auto& st = self->state;
              st.done = self->make_response_promise<actor::job_result>();
              st.running = true;
              if (absl::Status s = prepare_outputs(st); !s.ok()) {
                complete(self, actor::job_result{false, {}, std::string(s.message())});
              } else {
                start(self);
              }
              return st.done;
            },
            [self](actor::stop_atom) {
              complete(self, actor::job_result{false, {}, "interrupted"});
            },
            [self](actor::wake_atom) {
              on_wake(self);
              if (self->state.running) execute(self, self->state.logic->on_timer());
            },
        };
      });
  return caf::actor_cast<caf::actor>(handle);
}

}  // namespace troupe::apps::rlhf
