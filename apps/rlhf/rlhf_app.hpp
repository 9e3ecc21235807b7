#pragma once

#include "absl/status/status.h"
#include "runtime/actor/role_registry.hpp"

namespace troupe::apps::rlhf {

/// Registers `app: rlhf` and its roles (docs/rlhf.md): the single controller, and role kinds
/// trainer/gpt_policy (the policy's data-parallel ranks), trainer/gpt_reference (the frozen
/// initial policy, forward only), inference_worker/gpt_rollout (the serving engine with the
/// weight sync) and reward/digit_completion (the task's rule reward).
[[nodiscard]] absl::Status register_rlhf(actor::role_registry& registry);

}  // namespace troupe::apps::rlhf
