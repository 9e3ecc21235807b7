#pragma once

#include "runtime/actor/role_registry.hpp"

namespace troupe::apps {

/// The factory of `app: pretrain`: a driver that trains the `model:` GPT from scratch on the
/// `trainer` role's data-parallel ranks, evaluates, checkpoints asynchronously, resumes, and
/// writes metrics.jsonl and loss.svg into the run directory (docs/pretrain.md). With
/// `reward_model`, `app: reward_model`: the same driver and trainers, the section's data
/// preference pairs, the model a GPT trunk with a scalar head trained on the Bradley-Terry loss
/// (docs/alignment.md).
[[nodiscard]] actor::role_factory pretrain_app_factory(bool reward_model = false);

/// The factory of role kind `trainer`, impl `gpt`: one data-parallel rank of `app: pretrain`,
/// configured by the app's `pretrain:` (or `reward_model:`) section (it has no options of its
/// own).
[[nodiscard]] actor::role_factory gpt_trainer_factory();

}  // namespace troupe::apps
