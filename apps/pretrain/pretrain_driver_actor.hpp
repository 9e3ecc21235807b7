#pragma once

#include "absl/status/statusor.h"
#include "apps/pretrain/pretrain_options.hpp"
#include "caf/all.hpp"
#include "runtime/actor/role_context.hpp"
#include "runtime/run/work_pacer.hpp"

namespace troupe::apps {

/// Spawns the pretraining app driver: it carries out what pretrain_driver decides. It restores
/// every rank from the checkpoint to resume from (`options.resume`), asks the trainers for
/// steps, evaluations and checkpoints, commits checkpoints once every rank's files are durable,
/// appends metrics.jsonl, reports progress, and at the end writes loss.svg and answers `run` with
/// the summary (steps, train_loss, val_loss, tokens_per_s, ...). `pacer` may hold a step for a
/// test (it is asked again shortly).
[[nodiscard]] absl::StatusOr<caf::actor> spawn_pretrain_driver(actor::role_context& ctx,
                                                               const pretrain_options& options,
                                                               run::work_pacer pacer = {});

}  // namespace troupe::apps
