#pragma once

#include "absl/strings/string_view.h"
#include "runtime/actor/role_registry.hpp"

namespace troupe::apps {

/// The factory of `app: pretrain`: a driver that trains the `model:` GPT from scratch on the
/// `trainer` role's data-parallel ranks, evaluates, checkpoints asynchronously, resumes, and
/// writes metrics.jsonl and loss.svg into the run directory (docs/pretrain.md). With
/// `app` "reward_model", `app: reward_model`: the same driver and trainers, the section's data
/// preference pairs, the model a GPT trunk with a scalar head trained on the Bradley-Terry loss;
/// "dpo", `app: dpo`: the same on preference pairs, a language model from init_from trained on
/// TRL's DPO loss against a frozen reference (docs/alignment.md).
[[nodiscard]] actor::role_factory pretrain_app_factory(absl::string_view app = "pretrain");

/// The factory of role kind `trainer`, impl `gpt`: one data-parallel rank of `app: pretrain`,
/// configured by the app's `pretrain:` (or `reward_model:`, `dpo:`) section (it has no options of
/// its own).
[[nodiscard]] actor::role_factory gpt_trainer_factory();

}  // namespace troupe::apps
