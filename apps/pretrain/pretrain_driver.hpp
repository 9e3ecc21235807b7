#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "runtime/actor/message_types.hpp"

namespace troupe::apps {

/// The shape of a pretraining run, as the driver needs it.
struct pretrain_schedule {
  int steps = 1;
  int ranks = 1;
  int eval_every = 0;        ///< 0: evaluate only at the end
  int checkpoint_every = 0;  ///< 0: no periodic checkpoints
  int64_t tokens_per_step = 0;
  int64_t first_step = 0;  ///< steps already done (a resume)
  int64_t stop_after = 0;  ///< end this launch after this step (0: after `steps`)

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
/// Any rank's error fails the job with that error. Each event returns the commands the actor
/// carries out, in order.
class pretrain_driver {
 public:
  using clock = std::chrono::steady_clock;

  struct step_all {};
  struct eval_all {};
  struct checkpoint_all {
    int64_t step;
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
  using command =
      std::variant<step_all, eval_all, checkpoint_all, metrics_row, commit, finish, fail>;

  pretrain_driver(pretrain_schedule schedule, std::function<clock::time_point()> now);

  std::vector<command> start();
  std::vector<command> on_step(int rank, const actor::step_report& report);
  std::vector<command> on_eval(int rank, double loss);
  std::vector<command> on_saved(const actor::checkpoint_shard& shard);
  std::vector<command> on_error(int rank, const absl::Status& error);
  /// Ctrl-C: end after the step in flight, as if it were the last one (its evaluation, its
  /// checkpoint when checkpoints are on, every checkpoint committed before finish).
  std::vector<command> stop();

  [[nodiscard]] int64_t step() const { return step_; }
  [[nodiscard]] const pretrain_schedule& schedule() const { return schedule_; }
  [[nodiscard]] bool done() const { return done_; }
  /// Whether stop() cut the run short.
  [[nodiscard]] bool stopped() const { return stopped_; }
  /// The newest committed checkpoint's step; -1 when none.
  [[nodiscard]] int64_t committed() const { return committed_; }

 private:
  enum class phase { idle, stepping, evaluating, draining, finished };
  // A checkpoint being written: the ranks' shards received so far.
  struct saving {
    std::vector<actor::checkpoint_shard> shards;
  };
  std::vector<command> after_step();
  std::vector<command> after_eval();
  std::vector<command> next_or_finish();
  bool all_answered();

  pretrain_schedule schedule_;
  std::function<clock::time_point()> now_;
  phase phase_ = phase::idle;
  int answers_ = 0;
  int64_t step_ = 0;
  actor::step_report last_;  // rank 0's report of the current step
  double step_data_s_ = 0, step_compute_s_ = 0, step_comm_s_ = 0;
  double val_loss_ = -1;
  std::map<int64_t, saving> saving_;  // by step
  int64_t committed_ = -1;            // the newest committed step
  double stall_s_ = 0;                // the longest any rank was blocked by a checkpoint
  clock::time_point started_{}, step_started_{};
  bool done_ = false;
  bool stopped_ = false;
};

}  // namespace troupe::apps
