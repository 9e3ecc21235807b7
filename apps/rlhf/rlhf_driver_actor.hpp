#pragma once

#include "absl/status/statusor.h"
#include "apps/rlhf/rlhf_options.hpp"
#include "caf/all.hpp"
#include "runtime/actor/role_context.hpp"

namespace troupe::apps::rlhf {

/// Spawns the RLHF app's controller: it carries out what rlhf_driver decides, fanning each
/// command out to the roles (policy ranks, reference, rollout workers, reward) and their answers
/// back in. It writes metrics.jsonl, samples.jsonl and, at the end, reward.svg into the run
/// directory, reports progress (step, score, KL), and answers `run` with the summary.
[[nodiscard]] absl::StatusOr<caf::actor> spawn_rlhf_driver(actor::role_context& ctx,
                                                           const rlhf_options& options);

}  // namespace troupe::apps::rlhf
