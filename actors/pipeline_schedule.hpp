#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace troupe::actors {

/// A pipeline stage's unit of work on one micro-batch: its forward pass, its whole backward pass
/// (1F1B, GPipe), or the backward split as zero-bubble schedules split it: the input gradient
/// (what the stage before waits for) and the weight gradient (what nobody waits for).
struct pipeline_action {
  enum class kind { forward, backward, backward_input, backward_weight };
  kind op = kind::forward;
  int micro_batch = 0;
  bool operator==(const pipeline_action&) const = default;
};

/// The schedules of `pretrain.parallel.schedule`.
enum class pipeline_schedule_kind {
  gpipe,        ///< every forward, then every backward (Huang et al., 2019)
  one_f_one_b,  ///< PipeDream-Flush / Megatron: p - s - 1 forwards, then one forward and one
                ///< backward in turn, then the backwards left; at most p - s micro-batches stashed
  zb1,  ///< ZB-H1 (Qi et al., 2023): 1F1B's order with each backward split, stage s deferring
        ///< its weight gradients by s micro-batches so that every stage holds at most p
        ///< micro-batches (1F1B's peak) and the deferred ones fill the pipeline's tail
};

/// "gpipe", "1f1b" or "zb1".
[[nodiscard]] absl::StatusOr<pipeline_schedule_kind> parse_pipeline_schedule(const std::string& s);
[[nodiscard]] const char* to_string(pipeline_schedule_kind k);

/// What stage `stage` of `stages` does, in order, over `micro_batches` micro-batches.
[[nodiscard]] std::vector<pipeline_action> stage_schedule(pipeline_schedule_kind kind, int stages,
                                                          int stage, int micro_batches);

/// The timeline of a schedule run with fixed costs per unit (and no communication time): when
/// each stage is busy, and the bubble, the share of stages x makespan they are idle.
struct pipeline_timeline {
  double makespan = 0;
  std::vector<double> busy;  ///< per stage
  double bubble = 0;         ///< 1 - sum(busy) / (stages x makespan)
  /// Per stage, the most micro-batches whose activations it holds at once (forward done,
  /// weight gradient not yet).
  std::vector<int> peak_in_flight;
};

/// Runs every stage's schedule with each unit taking its cost (forward `f`, a whole backward
/// `b`, its input and weight halves `b_input` and `b_weight`), a unit starting once its stage is
/// free and its inputs exist: a forward after the stage before forwarded that micro-batch, a
/// backward (or input gradient) after the stage after produced that micro-batch's input
/// gradient (the last stage: after its own forward), a weight gradient after the stage's input
/// gradient. INTERNAL when the schedules deadlock.
struct pipeline_costs {
  double forward = 1, backward = 2, backward_input = 1, backward_weight = 1;
};
[[nodiscard]] absl::StatusOr<pipeline_timeline> simulate_pipeline(pipeline_schedule_kind kind,
                                                                  int stages, int micro_batches,
                                                                  const pipeline_costs& costs);

/// 1F1B's and GPipe's bubble when every stage's forward and backward cost the same as every
/// other's: (p - 1) / (m + p - 1).
[[nodiscard]] inline double theoretical_bubble(int stages, int micro_batches) {
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

/// A schedule's bubble when a forward costs 1 and a backward 2 (1 + 1 in halves) on every
/// stage, communication free: theoretical_bubble() for gpipe and 1f1b, less for zb1. What the
/// steps' measured bubble is reported against.
[[nodiscard]] double ideal_bubble(pipeline_schedule_kind kind, int stages, int micro_batches);

}  // namespace troupe::actors
