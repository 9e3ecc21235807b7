#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/actor/interfaces.hpp"
#include "runtime/metrics/registry.hpp"

namespace troupe::actors {

/// A rule reward: the score of `response` to `prompt`; `ended` says whether the response ended
/// with the end string rather than at the length limit.
using reward_rule =
    std::function<double(std::string_view prompt, std::string_view response, bool ended)>;

/// The scores of a request by `rule`; INVALID_ARGUMENT when its lists differ in length.
[[nodiscard]] absl::StatusOr<std::vector<double>> score_all(const reward_rule& rule,
                                                            const actor::reward_request& request);

/// Spawns the RL reward role scoring with `rule`.
[[nodiscard]] actor::reward_actor spawn_rule_reward(caf::actor_system& system,
                                                    metrics::registry& metrics,
                                                    const std::string& name, reward_rule rule);

}  // namespace troupe::actors
