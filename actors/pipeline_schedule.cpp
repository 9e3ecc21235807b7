#include "actors/pipeline_schedule.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace troupe::actors {

using kind = pipeline_action::kind;

absl::StatusOr<pipeline_schedule_kind> parse_pipeline_schedule(const std::string& s) {
  if (s == "gpipe") return pipeline_schedule_kind::gpipe;
  if (s == "1f1b") return pipeline_schedule_kind::one_f_one_b;
  if (s == "zb1") return pipeline_schedule_kind::zb1;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown pipeline schedule '", s, "'; use gpipe, 1f1b or zb1"));
}

const char* to_string(pipeline_schedule_kind k) {
  switch (k) {
    case pipeline_schedule_kind::gpipe:
      return "gpipe";
    case pipeline_schedule_kind::one_f_one_b:
      return "1f1b";
    case pipeline_schedule_kind::zb1:
      return "zb1";
  }
  return "?";
}

std::vector<pipeline_action> stage_schedule(pipeline_schedule_kind schedule, int stages, int stage,
                                            int micro_batches) {
  const int m = micro_batches;
  std::vector<pipeline_action> out;
  if (schedule == pipeline_schedule_kind::gpipe) {
    for (int mb = 0; mb < m; ++mb)
      out.push_back({kind::forward, mb});
    for (int mb = 0; mb < m; ++mb)
      out.push_back({kind::backward, mb});
    return out;
  }
  // 1F1B's order of forwards and backwards: a warm-up of the forwards the stages after this one
  // need to start, then one forward and one backward in turn, then the backwards left.
  const int warmup = std::min(stages - stage - 1, m);
  std::vector<pipeline_action> order;
  for (int mb = 0; mb < warmup; ++mb)
    order.push_back({kind::forward, mb});
  for (int k = 0; k < m - warmup; ++k) {
    order.push_back({kind::forward, warmup + k});
    order.push_back({kind::backward, k});
  }
  for (int mb = m - warmup; mb < m; ++mb)
    order.push_back({kind::backward, mb});
  if (schedule == pipeline_schedule_kind::one_f_one_b) return order;
  // ZB-H1: each backward becomes its input gradient, and its weight gradient follows `stage`
  // backwards later (stage 0, which stashes the most, at once; the last stage p - 1 later), so
  // every stage holds p micro-batches at most. The deferred ones end the schedule.
  const int delay = stage;
  int weights = 0, inputs = 0;
  for (const pipeline_action& a : order) {
    if (a.op == kind::forward) {
      out.push_back(a);
      continue;
    }
    out.push_back({kind::backward_input, a.micro_batch});
    ++inputs;
    if (inputs - weights > delay) out.push_back({kind::backward_weight, weights++});
  }
  while (weights < m)
    out.push_back({kind::backward_weight, weights++});
  return out;
}

absl::StatusOr<pipeline_timeline> simulate_pipeline(pipeline_schedule_kind schedule, int stages,
                                                    int micro_batches,
                                                    const pipeline_costs& costs) {
  std::vector<std::vector<pipeline_action>> plans;
  for (int s = 0; s < stages; ++s)
    plans.push_back(stage_schedule(schedule, stages, s, micro_batches));
  // When each unit ended: (stage, op, micro-batch) -> time.
  std::map<std::tuple<int, kind, int>, double> done;
  const auto ended = [&](int stage, kind op, int mb) -> const double* {
    auto it = done.find({stage, op, mb});
    return it == done.end() ? nullptr : &it->second;
  };
  // When `a` on `stage` may start, or nullptr while an input is missing.
  const auto ready_at = [&](int stage, const pipeline_action& a) -> std::optional<double> {
    switch (a.op) {
      case kind::forward: {
        if (stage == 0) return 0.0;
        const double* t = ended(stage - 1, kind::forward, a.micro_batch);
        return t ? std::optional<double>(*t) : std::nullopt;
      }
      case kind::backward:
      case kind::backward_input: {
        const double* t = stage == stages - 1
                              ? ended(stage, kind::forward, a.micro_batch)
                              : (ended(stage + 1, kind::backward, a.micro_batch)
                                     ? ended(stage + 1, kind::backward, a.micro_batch)
                                     : ended(stage + 1, kind::backward_input, a.micro_batch));
        return t ? std::optional<double>(*t) : std::nullopt;
      }
      case kind::backward_weight: {
        const double* t = ended(stage, kind::backward_input, a.micro_batch);
        return t ? std::optional<double>(*t) : std::nullopt;
      }
    }
    return std::nullopt;
  };
  const auto cost = [&](kind op) {
    switch (op) {
      case kind::forward:
        return costs.forward;
      case kind::backward:
        return costs.backward;
      case kind::backward_input:
        return costs.backward_input;
      case kind::backward_weight:
        return costs.backward_weight;
    }
    return 0.0;
  };
  pipeline_timeline t;
  t.busy.assign(stages, 0.0);
  t.peak_in_flight.assign(stages, 0);
  std::vector<size_t> next(stages, 0);
  std::vector<double> free_at(stages, 0.0);
  std::vector<int> in_flight(stages, 0);
  size_t left = 0;
  for (const auto& p : plans)
    left += p.size();
  while (left > 0) {
    // The startable unit that can start earliest, the lowest stage on a tie.
    int best = -1;
    double best_start = std::numeric_limits<double>::infinity();
    for (int s = 0; s < stages; ++s) {
      if (next[s] == plans[s].size()) continue;
      const std::optional<double> ready = ready_at(s, plans[s][next[s]]);
      if (!ready) continue;
      const double start = std::max(*ready, free_at[s]);
      if (start < best_start) best = s, best_start = start;
    }
    if (best < 0) {
      return absl::InternalError(absl::StrCat("the ", to_string(schedule), " schedule of ", stages,
                                              " stages and ", micro_batches,
                                              " micro-batches deadlocks"));
    }
    const pipeline_action& a = plans[best][next[best]++];
    const double end = best_start + cost(a.op);
    done[{best, a.op, a.micro_batch}] = end;
    free_at[best] = end;
    t.busy[best] += cost(a.op);
    t.makespan = std::max(t.makespan, end);
    if (a.op == kind::forward) {
      t.peak_in_flight[best] = std::max(t.peak_in_flight[best], ++in_flight[best]);
    } else if (a.op != kind::backward_input) {
      --in_flight[best];  // a whole backward or a weight gradient frees the micro-batch
    }
    --left;
  }
  double busy = 0;
  for (double b : t.busy)
    busy += b;
  t.bubble = 1.0 - busy / (stages * t.makespan);
  return t;
}

double ideal_bubble(pipeline_schedule_kind kind, int stages, int micro_batches) {
  const absl::StatusOr<pipeline_timeline> t =
      simulate_pipeline(kind, stages, micro_batches, pipeline_costs{});
  return t.ok() ? t->bubble : 1.0;  // the schedules here never deadlock (tests)
}

}  // namespace troupe::actors
