#pragma once

#include "runtime/actor/role_registry.hpp"

namespace troupe::apps {

/// The factory of `app: pretrain`: a driver that trains the `model:` GPT from scratch on the
/// `trainer` role's data-parallel ranks, evaluates, checkpoints asynchronously, resumes, and
/// writes metrics.jsonl and loss.svg into the run directory (docs/pretrain.md).
[[nodiscard]] actor::role_factory pretrain_app_factory();

/// The factory of role kind `trainer`, impl `gpt`: one data-parallel rank of `app: pretrain`,
/// configured by the app's `pretrain:` section (it has no options of its own).
[[nodiscard]] actor::role_factory gpt_trainer_factory();

}  // namespace troupe::apps
