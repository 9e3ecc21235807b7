#pragma once

// The reward role around a rule: a function that scores (prompt, response) bytes. The built-in
// tasks' rewards and the rules plugins add through the C ABI (troupe_plugin_add_reward_rule in
// runtime/plugin/plugin_abi.h) are all this role, so it lives in the core beside the registry.

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/actor/interfaces.hpp"
#include "runtime/actor/role_registry.hpp"
#include "runtime/metrics/registry.hpp"

namespace troupe::actor {

/// A rule reward: the score of `response` to `prompt`; `ended` says whether the response ended
/// with the task's end string rather than at the length limit.
using reward_rule =
    std::function<double(std::string_view prompt, std::string_view response, bool ended)>;

/// The scores of a request by the rule `name`. INVALID_ARGUMENT when the request's lists differ
/// in length, or when the rule gives a score that is not finite (naming the rule and the
/// response).
[[nodiscard]] absl::StatusOr<std::vector<double>> score_all(const std::string& name,
                                                            const reward_rule& rule,
                                                            const reward_request& request);

/// A reward that scores a whole request at once (a learned reward model's batches).
using reward_scorer = std::function<absl::StatusOr<std::vector<double>>(const reward_request&)>;

/// Spawns a reward role scoring each request with `scorer`; its errors fail the request.
[[nodiscard]] reward_actor spawn_reward(caf::actor_system& system, metrics::registry& metrics,
                                        const std::string& actor_name, reward_scorer scorer);

/// Spawns a reward role scoring with `rule` (`name` names it in errors).
[[nodiscard]] reward_actor spawn_rule_reward(caf::actor_system& system, metrics::registry& metrics,
                                             const std::string& actor_name, std::string name,
                                             reward_rule rule);

/// The factory of the reward role `name` scoring with `rule`; it takes no options.
[[nodiscard]] role_factory rule_reward_factory(std::string name, std::string description,
                                               reward_rule rule);

}  // namespace troupe::actor
