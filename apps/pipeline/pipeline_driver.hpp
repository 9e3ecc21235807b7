#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "runtime/actor/message_types.hpp"

namespace troupe::apps {

/// The `pipeline:` section of `app: pipeline`.
struct pipeline_options {
  /// Role names from source to sink: a `source`, any number of `stage`s, a `sink`.
  std::vector<std::string> flow;
  /// Items pulled from the source and not yet delivered to the sink, at most.
  int max_in_flight = 256;
  /// Items asked of the source at once.
  int batch = 64;
  /// How long one stage actor may take for one item before the attempt counts as failed.
  int item_timeout_ms = 10000;
  /// Failed attempts of one item at one stage before the job fails.
  int max_attempts = 3;
};

/// The pipeline app's scheduling, without CAF: pulls items from the source by position, sends
/// each through the stages (one item at a time per stage actor, to the least busy available
/// one), retries failed attempts, and delivers results to the sink in sequence order. It
/// answers every event with the commands its actor must carry out.
///
/// One item per stage actor at a time means a failure is always charged to the item that
/// caused it, never to items queued behind it; parallelism comes from the stage's `count`.
///
///   pulling --source empty, nothing in flight--> finishing --report--> done
///   any --an item fails max_attempts times, or the source or sink fails--> failed
class pipeline_driver {
 public:
  /// A stage between source and sink: its role. Its actors are added with `on_stage_actor`.
  struct stage {
    std::string role;
  };

  /// Ask the source for items [first, first + max).
  struct pull {
    uint64_t first;
    uint32_t max;
  };
  /// Send `item` to actor `instance` of stage `stage`; the answer must quote `generation`.
  struct dispatch {
    size_t stage;
    int instance;
    uint64_t generation;
    actor::work_item item;
  };
  /// Hand `item` to the sink (always in sequence order).
  struct deliver {
    actor::work_item item;
  };
  /// Everything is delivered: ask the sink for its report.
  struct finish {};
  using command = std::variant<pull, dispatch, deliver, finish>;

  pipeline_driver(const pipeline_options& options, std::vector<stage> stages);

  [[nodiscard]] std::vector<command> start();
  [[nodiscard]] std::vector<command> on_batch(actor::source_batch batch);
  [[nodiscard]] std::vector<command> on_pull_error(const absl::Status& error);
  /// Actor `instance` of `stage` answered a `dispatch` of `generation`.
  [[nodiscard]] std::vector<command> on_processed(size_t stage, int instance, uint64_t generation,
                                                  actor::work_item item);
  [[nodiscard]] std::vector<command> on_process_error(size_t stage, int instance,
                                                      uint64_t generation, uint64_t seq,
                                                      const absl::Status& error);
  [[nodiscard]] std::vector<command> on_delivered();
  [[nodiscard]] std::vector<command> on_delivery_error(const absl::Status& error);
  /// The source actor was restarted.
  [[nodiscard]] std::vector<command> on_source_replaced();
  /// Actor `instance` of `stage` started, anew or after a restart (elastic stages gain actors).
  [[nodiscard]] std::vector<command> on_stage_actor(size_t stage, int instance);

  /// OK while the pipeline can still finish; the cause once it cannot.
  [[nodiscard]] const absl::Status& failure() const { return failure_; }
  /// Items the sink accepted.
  [[nodiscard]] uint64_t delivered() const { return delivered_; }
  /// Items in the source, or -1 while unknown.
  [[nodiscard]] int64_t total() const { return total_; }
  /// Failed attempts that were retried.
  [[nodiscard]] uint64_t retries() const { return retries_; }
  /// Items each stage actor ("role/index") processed.
  [[nodiscard]] std::map<std::string, uint64_t> processed_by() const;

 private:
  // One stage actor. `generation` grows with every restart, so that an answer from an actor's
  // previous life cannot free its successor. A slot is unavailable until its actor started.
  struct actor_slot {
    uint64_t generation = 0;
    bool available = false;
    bool busy = false;
    uint64_t processed = 0;
  };
  struct item_state {
    actor::work_item item;
    size_t stage = 0;
    int attempts = 0;
    int last_instance = -1;
    std::string last_error;
  };

  std::vector<command> schedule();
  void fail(absl::Status cause);
  int pick_instance(size_t stage, int avoid) const;
  // Frees the slot if `generation` is its current one; false for an answer from a past life.
  bool release(size_t stage, int instance, uint64_t generation);

  pipeline_options options_;
  std::vector<stage> stages_;
  std::vector<std::vector<actor_slot>> slots_;
  std::vector<std::deque<uint64_t>> waiting_;   // per stage, items ready for it
  std::map<uint64_t, item_state> items_;        // items inside the stages
  std::map<uint64_t, actor::work_item> ready_;  // finished all stages, not yet delivered
  uint64_t next_pull_ = 0;
  uint64_t next_deliver_ = 0;
  uint64_t delivered_ = 0;
  uint64_t retries_ = 0;
  int64_t total_ = -1;
  int in_flight_ = 0;  // pulled, not yet accepted by the sink
  int pull_attempts_ = 0;
  bool pull_outstanding_ = false;
  bool source_available_ = true;
  bool source_done_ = false;
  bool finish_sent_ = false;
  bool started_ = false;  // no commands before start(), however many actors are announced
  absl::Status failure_;
};

}  // namespace troupe::apps
