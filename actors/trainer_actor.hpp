#pragma once

#include <memory>
#include <optional>
#include <string>

#include "actors/data_loader_actor.hpp"
#include "actors/trainer.hpp"
#include "actors/weight_sync.hpp"
#include "runtime/comm/rendezvous_store.hpp"
#include "runtime/run/work_pacer.hpp"

namespace troupe::actors {

/// What a trainer actor is made of: the model, the training options, its place in the group and
/// the data it reads.
struct trainer_actor_spec {
  models::decoder_config model;
  trainer_options options;
  int rank = 0;               ///< in the data-parallel group (a pipeline stage's: its replica)
  int ranks = 1;              ///< of the data-parallel group
  comm::group_options group;  ///< name, epoch and timeout of the data-parallel group
  /// A pipeline stage's (options.pipeline.stages > 1) pipeline group: name and timeout; the rank
  /// is the stage. The stage holds its even share of the blocks.
  comm::group_options pipe;
  /// A tensor-parallel rank's place (tp.size > 1: it holds its part of each block) and its
  /// group's name and timeout; the rank is tp.rank.
  models::tensor_parallel tp;
  comm::group_options tensor;
  /// The text `(step)` trains on; null for a rank that only takes RL steps or gives log-probs.
  /// Preference pairs make the trainer a reward model (app: reward_model): its model ends in a
  /// value head, and options count rows (two a pair); with their reference log-probabilities
  /// (text_corpus::dpo()), a DPO policy (app: dpo; options.preference).
  std::shared_ptr<const text_corpus> corpus;
  uint64_t data_seed = 1;
  int prefetch = 2;            ///< batches the data loader may prepare ahead
  int eval_windows = 1 << 20;  ///< held-out windows per evaluation
  /// Tests' slowdown: each step keeps the rank's thread busy for longer (the driver holds steps).
  run::work_pacer pacer;
  /// The RL objective of `(rl_step)` (and the temperature of `(log_probs)`); none: pretraining.
  std::optional<policy_objective> objective;
  /// The RL critic's instead: the model ends in a value head, `(rl_step)` trains it on the
  /// clipped value loss and `(values)` gives its values.
  std::optional<value_objective> critic;
  /// What this trainer's files are called in a checkpoint it shares with another model: the
  /// critic's "critic-model.safetensors" beside the policy's "model.safetensors".
  std::string file_prefix;
  /// The weight-sync group `(sync)` sends to (rank 0 of the policy only).
  std::optional<weight_sync_spec> sync;
  /// An elastic rank: its group is formed by the driver's `(regroup)` messages instead of at
  /// the start (rank and ranks then only place its first data share), and a failed step leaves
  /// it running, for the driver to regroup.
  bool elastic = false;
  /// An elastic rank's initial state (group_change::source::initial: the first generation, or a
  /// loss before any checkpoint) takes these weights instead of the seed's: a weights_source's
  /// dir (a checkpoint, or a Hugging Face model directory), from init_from or model.path.
  std::string initial_weights;

  /// Whether the trainer is a reward model (its corpus is preference pairs).
  [[nodiscard]] bool reward_model() const {
    return corpus != nullptr && corpus->pairs() && !corpus->dpo();
  }
  /// The rows one sample of the corpus takes: options count rows, the data loader samples.
  [[nodiscard]] int rows_per_sample() const { return corpus ? corpus->rows_per_sample() : 1; }
};

/// An elastic trainer group's recoveries, as every app with one reports them:
/// troupe_train_recoveries_total and troupe_train_recovery_seconds (from a lost rank known to
/// the group whole again), labelled `l` (an RL role's group: {role}).
struct recovery_metrics {
  metrics::counter* recoveries = nullptr;
  metrics::histogram* seconds = nullptr;
  void record(double s) const {
    recoveries->inc();
    seconds->observe(s);
  }
};
[[nodiscard]] recovery_metrics recovery_metrics_of(metrics::registry& registry,
                                                   const metrics::labels& l = {});

/// Spawns a trainer on its own thread, whose steps, evaluations and regroups run on a second one
/// (collectives block; they must block neither CAF's scheduler nor the messages that abort
/// them): it forms the group through `store` (when ranks > 1 and not elastic), a pipeline
/// stage's pipeline group and a tensor-parallel rank's group, builds its trainer, and
/// spawns its data loader, to which it grants `prefetch` credits and one more per batch taken.
/// A failure to form the group or build the model stops the actor with that error.
[[nodiscard]] actor::trainer_actor spawn_trainer(caf::actor_system& system,
                                                 metrics::registry& metrics,
                                                 const std::string& name,
                                                 std::shared_ptr<comm::rendezvous_store> store,
                                                 trainer_actor_spec spec);

}  // namespace troupe::actors
