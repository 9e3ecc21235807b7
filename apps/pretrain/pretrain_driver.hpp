#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/actor/message_types.hpp"
#include "runtime/run/driver_commands.hpp"

namespace troupe::apps {

/// The range of an elastic trainer role's world, and how long the driver waits on it.
struct elastic_world {
  int min = 1;
  int max = 1;
  /// Below `min`, how long to wait for a replacement before the job fails.
  std::chrono::milliseconds worker_wait{30000};
  /// After a step failed on a rank, how long to wait for the membership to name a lost rank
  /// before the failure is the job's (a step fails before the heartbeats declare its peer dead).
  std::chrono::milliseconds loss_wait{10000};
  /// ZeRO-1/2: each rank holds only its shard of the optimizer state, so a lost rank's comes
  /// back from its replica (`replicas`: parallel.shard_replicas) or, without one, the group
  /// rolls back to the last checkpoint in place.
  bool sharded = false;
  bool replicas = false;
};

/// A trainer's place in a dp x pp x tp grid: rank r is replica r / (pp tp)'s stage r / tp % pp's
/// tensor-parallel rank r % tp (Megatron's order: a stage's tensor-parallel ranks side by side).
struct grid_place {
  int replica = 0, stage = 0, tp_rank = 0;
};
[[nodiscard]] inline grid_place grid_place_of(int rank, int pp, int tp) {
  return {rank / (pp * tp), rank / tp % pp, rank % tp};
}
/// " (replica d, stage s, tp rank t)", the parts a grid has; nothing for plain data parallelism.
[[nodiscard]] std::string describe_place(int rank, int pp, int tp);
/// "dp 2 x pp 2 x tp 2", the dimensions beyond one dropped (but dp's).
[[nodiscard]] std::string describe_grid(int dp, int pp, int tp);

/// The shape of a pretraining run, as the driver needs it.
struct pretrain_schedule {
  int steps = 1;
  int ranks = 1;      ///< a fixed group's size; an elastic one's is its members'
  int64_t batch = 0;  ///< sequences per step (the global batch): a step's samples
  std::optional<elastic_world> elastic;
  int eval_every = 0;        ///< 0: evaluate only at the end
  int checkpoint_every = 0;  ///< 0: no periodic checkpoints
  int64_t tokens_per_step = 0;
  int64_t first_step = 0;  ///< steps already done (a resume)
  int64_t stop_after = 0;  ///< end this launch after this step (0: after `steps`)
  /// A pipeline's stages and tensor-parallel ranks per replica (ranks 0 .. stages x tensor - 1
  /// are replica 0's; grid_place_of), and its schedule's bubble with ideal costs
  /// (actors::ideal_bubble), what the measured one is reported against.
  int stages = 1;
  int tensor = 1;
  double ideal_bubble = 0;
  /// app: dpo: the steps' and evaluations' pair figures go by TRL's DPO names (rewards/chosen,
  /// ...; val_rewards/chosen, ... held out) rather than a reward model's (val_accuracy,
  /// val_reward_gap).
  bool dpo = false;

  /// The step this launch ends after.
  [[nodiscard]] int64_t end() const {
    return stop_after > 0 && stop_after < steps ? stop_after : steps;
  }
};

/// The pretraining app's control loop, without CAF. Every rank runs the same step in lockstep
/// (their collectives pair up), so the driver asks all ranks, waits for all answers, then decides:
///
///   start -> step all -> (all answered) -> metrics row
///         -> [eval due] eval all -> (all answered) -> val loss
///         -> [checkpoint due] checkpoint all (answers come later) -> next step, or finish
///   every rank's part of checkpoint N saved -> commit N
///   finish waits until every checkpoint asked for is committed
///
/// Checkpoints are asynchronous: a rank snapshots its state and goes on with the next step
/// while its writer persists the snapshot; it answers (on_saved) once its files are durable.
/// In a fixed group any rank's error, or a lost rank (on_lost), fails the job with that error. Each
/// event returns the commands the actor carries out, in order.
///
/// Elastic (schedule.elastic): the ranks are the members, in rank order, of a generation of the
/// group, bumped on every change. The first generation is formed at start (regroup_all), and
/// answers carry the generation they were asked in, so a stale one is ignored.
///   - A lost member (on_lost) leaves at once: the survivors still in a step or evaluation are
///     told to abort it (abort_all), and once each has answered the group is regrouped without
///     it. A step is transactional. With ZeRO 0 it is committed when it completed on some
///     survivor (their ring allreduce held every rank's gradients), and the others take that
///     state; with ZeRO-1/2 only when it completed on every survivor (the lost rank's new shard
///     is then in its replica). Otherwise the new generation redoes it from the committed state
///     (a survivor that applied it rolls it back), with the same samples (the cursor is the
///     step's). A failed evaluation is redone.
///   - The state comes from the last generation every member formed. With ZeRO-1/2, a lost
///     rank's shard comes from its replica; when no replica survives, every member restores the
///     last checkpoint in place (or the seed's initial state before one), and the steps since
///     are redone (rolled_back).
///   - A failed step without a lost member waits elastic.loss_wait for one (heartbeats declare a
///     death after the socket errors), then fails the job.
///   - Below elastic.min the driver waits elastic.worker_wait for joiners, then fails.
///   - A joiner (on_joined) is admitted at the next step boundary, up to elastic.max: the group
///     is regrouped with it, and it pulls its state from the other members.
/// Events worth a line (rank_lost, group_rebuilt, rank_joined, step_redone) come as notes.
class pretrain_driver {
 public:
  using clock = std::chrono::steady_clock;

  struct step_all {};
  struct eval_all {};
  /// The ranks that took step `step` save it: `members`, the group's then (a joiner admitted
  /// at the same step boundary has none of its state yet).
  struct checkpoint_all {
    int64_t step;
    std::vector<std::string> members;
  };
  struct metrics_row {
    nlohmann::json row;  ///< one line of metrics.jsonl
  };
  /// Every rank's files of checkpoint `step` are durable: write its manifest and make it visible.
  struct commit {
    int64_t step;
    std::vector<checkpoint::file_record> files;
    int64_t cursor;  ///< the data cursor to resume from
  };
  struct finish {
    nlohmann::json summary;
  };
  struct fail {
    absl::Status why;
  };
  /// Form generation `generation` of the group: members()[r] becomes rank r, continuing from
  /// step `steps` at sample `cursor`, with the state of `from`: the members' trainers of
  /// generation `basis`, the checkpoint of step `steps`, or the seed's.
  struct regroup_all {
    uint64_t generation;
    actor::group_change::source from;
    uint64_t basis;
    int64_t steps;
    int64_t cursor;
  };
  /// Tell every member to give up groups older than `generation`.
  struct abort_all {
    uint64_t generation;
  };
  /// An event for the job's log, and a call of on_timer() after a while.
  using note = run::note;
  using wake_after = run::wake_after;
  /// The group is whole again after a lost member, `seconds` after the loss was known.
  struct recovered {
    double seconds;
  };
  /// Every member has formed generation() of the group: show it (troupe status).
  struct group_whole {};
  using command =
      std::variant<step_all, eval_all, checkpoint_all, metrics_row, commit, finish, fail,
                   regroup_all, abort_all, note, wake_after, recovered, group_whole>;

  /// `members`: the trainers' names in rank order (a fixed group's ranks, or an elastic job's
  /// first members).
  pretrain_driver(pretrain_schedule schedule, std::function<clock::time_point()> now,
                  std::vector<std::string> members = {});

  std::vector<command> start();
  /// Answers of the members asked in `generation` (a fixed group's is 0).
  std::vector<command> on_step(int rank, const actor::step_report& report, uint64_t generation = 0);
  /// (Every rank's evaluation is the group's sum: the same figures.)
  std::vector<command> on_eval(int rank, const actor::eval_report& report, uint64_t generation = 0);
  std::vector<command> on_saved(const actor::checkpoint_shard& shard);
  /// Rank `rank` of checkpoint_all's members could not save its part of checkpoint `step`: the
  /// job fails, unless the rank's process is gone (UNAVAILABLE) in an elastic group, where
  /// on_lost abandons the checkpoint.
  std::vector<command> on_save_failed(int64_t step, int rank, const absl::Status& error);
  std::vector<command> on_error(int rank, const absl::Status& error, uint64_t generation = 0);
  /// Elastic: a member answered its regroup with the step count it continues from.
  std::vector<command> on_regrouped(int rank, const absl::StatusOr<int64_t>& steps,
                                    uint64_t generation);
  /// Elastic: a trainer appeared (a worker joined) or is gone (its worker died or was fenced).
  std::vector<command> on_joined(const std::string& name);
  std::vector<command> on_lost(const std::string& name, const std::string& why);
  std::vector<command> on_timer();
  /// Ctrl-C: end after the step in flight, as if it were the last one (its evaluation, its
  /// checkpoint when checkpoints are on, every checkpoint committed before finish).
  std::vector<command> stop();

  [[nodiscard]] int64_t step() const { return step_; }
  /// The trainers commands go to, in rank order, and the generation they form.
  [[nodiscard]] const std::vector<std::string>& members() const { return members_; }
  [[nodiscard]] uint64_t generation() const { return generation_; }
  [[nodiscard]] const pretrain_schedule& schedule() const { return schedule_; }
  [[nodiscard]] bool done() const { return done_; }
  /// Whether stop() cut the run short.
  [[nodiscard]] bool stopped() const { return stopped_; }
  /// The newest committed checkpoint's step; -1 when none.
  [[nodiscard]] int64_t committed() const { return committed_; }

 private:
  enum class phase { idle, regrouping, waiting, stepping, evaluating, draining, finished };
  // A checkpoint being written: the ranks' shards received so far, of how many.
  struct saving {
    std::vector<actor::checkpoint_shard> shards;
    size_t expected = 0;
  };
  // The members' answers to the request in flight (a step, an evaluation, a regroup).
  struct asking {
    uint64_t generation = 0;
    std::vector<std::string> members;
    std::vector<bool> answered, ok;
    std::vector<actor::step_report> reports;
    absl::Status failure;  // the first error
    [[nodiscard]] bool all_answered() const;
  };
  std::vector<command> ask(phase p);
  std::vector<command> after_step();
  // A report's pair figures into `row`, each name after `prefix` (none without pairs).
  void add_pair_metrics(nlohmann::json& row, const std::string& prefix,
                        const actor::pair_metrics& m) const;
  std::vector<command> after_eval();
  std::vector<command> next_or_finish();
  // " (replica d, stage s)" of a pipeline grid's rank; nothing without stages.
  [[nodiscard]] std::string place_of(int rank) const;
  std::vector<command> fail_with(absl::Status why);
  // A fixed group's answered request, or an elastic one's: on to the next phase, or recover.
  std::vector<command> after_answers();
  std::vector<command> recover();
  std::vector<command> regroup_or_wait();
  // Where the next generation's state comes from; a checkpoint or the seed's when a ZeRO shard
  // was lost with no replica.
  actor::group_change::source state_source() const;
  // The step a rollback goes back to: the newest committed checkpoint, the one this launch
  // resumed from, or 0.
  [[nodiscard]] int64_t restart_step() const {
    return committed_ >= 0 ? committed_ : schedule_.first_step;
  }
  std::vector<command> after_regroup();
  std::vector<command> admit_joiners();
  // Whether the answers of `generation` are the request's in flight in phase `p`.
  bool current(phase p, uint64_t generation) const;
  absl::Status check_samples() const;

  pretrain_schedule schedule_;
  std::function<clock::time_point()> now_;
  phase phase_ = phase::idle;
  asking asking_;
  int64_t step_ = 0;
  actor::step_report last_;  // a rank's report of the current step
  double step_data_s_ = 0, step_compute_s_ = 0, step_comm_s_ = 0, step_replica_s_ = 0;
  double val_loss_ = -1;
  actor::eval_report held_out_;       // the evaluation being answered, then the last one
  std::map<int64_t, saving> saving_;  // by step
  int64_t committed_ = -1;            // the newest committed step
  double stages_busy_s_ = 0, stages_idle_s_ = 0;  // replica 0's stages, summed over the steps
  double stall_s_ = 0;  // the longest any rank was blocked by a checkpoint
  clock::time_point started_{}, step_started_{};
  bool done_ = false;
  bool stopped_ = false;
  // Elastic.
  std::vector<std::string> members_;
  std::vector<std::string> joiners_;  // admitted at the next step boundary
  uint64_t generation_ = 0;
  // What follows a regroup: the next step (or the redone one), the rest of a step committed
  // on some ranks only, a redone evaluation, or the checkpoint a loss abandoned at the end.
  enum class then { next_step, after_step, redo_eval, after_eval };
  then resume_ = then::next_step;
  uint64_t formed_ = 0;  // the newest generation every member has regrouped into
  std::vector<std::string> formed_members_;  // its members, in rank order
  bool lost_during_request_ = false;
  bool recovering_ = false;  // a member was lost since the group was last whole
  clock::time_point lost_at_{}, failed_at_{}, waiting_since_{};
};

}  // namespace troupe::apps
