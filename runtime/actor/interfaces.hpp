#pragma once

// Typed actor interfaces, declared once and shared by built-in and plugin roles.

#include "runtime/actor/messages.hpp"

namespace troupe::actor {

/// Produces work. `(next, first, max)` returns up to `max` items starting at sequence number
/// `first`; an empty batch means the source is exhausted. Asking by position (not "give me
/// more") lets a restarted source continue exactly where the stream was.
using source_actor =
    caf::typed_actor<caf::replies_to<next_atom, uint64_t, uint32_t>::with<source_batch>>;

/// Transforms one item into one item.
using stage_actor = caf::typed_actor<caf::replies_to<process_atom, work_item>::with<work_item>>;

/// Receives items in sequence order; `finish` returns what it saw.
using sink_actor = caf::typed_actor<caf::replies_to<consume_atom, work_item>::with<caf::ok_atom>,
                                    caf::replies_to<finish_atom>::with<sink_report>>;

/// One data-parallel rank's training batches, prepared ahead under credit-based back-pressure:
/// `(credit, n)` allows n more batches ahead, `(next)` hands one over, `(cursor)` says where the
/// next batch not yet handed over starts (what a checkpoint saves), `(seek, cursor)` continues
/// from there, `(seek, cursor, rank, ranks)` too, as rank `rank` of `ranks` (the group changed).
/// `(produce)` is the loader's own prompt to prepare one batch.
using data_loader_actor =
    caf::typed_actor<caf::reacts_to<credit_atom, int32_t>,
                     caf::replies_to<next_atom>::with<token_batch>,
                     caf::replies_to<cursor_atom>::with<int64_t>,
                     caf::replies_to<seek_atom, int64_t>::with<caf::ok_atom>,
                     caf::replies_to<seek_atom, int64_t, int32_t, int32_t>::with<caf::ok_atom>,
                     caf::reacts_to<produce_atom>>;

/// One data-parallel rank of a pretraining job: `(step)` runs one optimizer step on the rank's
/// next batch and reports it; `(eval)` returns the held-out loss, summed over the group.
/// `(checkpoint, step, root)` snapshots the rank's state to host memory and hands it to the
/// rank's checkpoint writer; the answer comes once the files are durable, and steps asked
/// meanwhile run at once. `(restore, dir)` loads a committed checkpoint (before the first step)
/// and answers its step.
///
/// Elastic: `(regroup, change)` forms the data-parallel group anew as `change` says (a rank lost
/// or joined), takes the state of its source rank and continues from sample `change.cursor`,
/// answering the step count it continues from; `(abort, generation)` gives up a group older
/// than `generation`, releasing a step blocked on a lost peer (steps, evaluations and regroups
/// run off the actor's thread, so this arrives while they wait); `(done, id)` is the actor's own
/// prompt that such a job finished.
///
/// As the RL policy (or the reference), with the objective it was spawned with: `(rl_step,
/// batch)` runs one optimizer step on the rank's share of a mini-batch; `(log_probs, batch)`
/// returns each position's log-prob, forward only; `(load, dir)` takes the weights (not the
/// optimizer) of a committed checkpoint and answers its step; `(sync, version)` sends the
/// weights to the rollout over the weight-sync group (rank 0 of the policy only) and answers with
/// their checksum. As the RL critic (a value head on the GPT trunk), `(rl_step, batch)` runs one
/// optimizer step of the clipped value loss and `(values, batch)` returns each position's value.
using trainer_actor =
    caf::typed_actor<caf::replies_to<step_atom>::with<step_report>,
                     caf::replies_to<eval_atom>::with<eval_report>,
                     caf::replies_to<checkpoint_atom, int64_t, std::string>::with<checkpoint_shard>,
                     caf::replies_to<restore_atom, std::string>::with<int64_t>,
                     caf::replies_to<rl_step_atom, rl_batch>::with<rl_step_report>,
                     caf::replies_to<log_probs_atom, rl_batch>::with<std::vector<float>>,
                     caf::replies_to<values_atom, rl_batch>::with<std::vector<float>>,
                     caf::replies_to<load_atom, std::string>::with<int64_t>,
                     caf::replies_to<sync_atom, weight_sync_round>::with<weights_ack>,
                     caf::replies_to<regroup_atom, group_change>::with<int64_t>,
                     caf::reacts_to<abort_atom, uint64_t>, caf::reacts_to<done_atom, uint64_t>>;

/// Persists a trainer's checkpoint snapshots, one at a time in arrival order, on its own thread:
/// each file staged into ROOT/.step-N.partial/ (written, synced, hashed), then the shard answered
/// with the files' records and the write time.
using checkpoint_writer_actor =
    caf::typed_actor<caf::replies_to<checkpoint_snapshot>::with<checkpoint_shard>>;

/// An inference worker (the serving app's engine): `(generate, request)` queues a generation and
/// answers at once (or with the error for a request it refuses); `(generate, requests)` queues
/// several to join the same iteration, all or none; `(cancel, id)` ends one;
/// `(poll)` answers with the stream events produced since the last poll and the engine's state
/// (a worker_report), held until there is an event or a short wait passes, so that a router
/// long-polls each worker; `(poll, true)` holds it until no request that does not stream is
/// running any more (or the wait passes): the RL controller, which wants whole responses, takes
/// a generation's outputs in one answer. `(step)` and `(tick, poll)` are its
/// own prompts: run one batching iteration, end the wait of poll number `poll`. As the RL rollout,
/// `(sync, version)` receives new weights over the weight-sync group and swaps them in once no
/// request runs (requests that arrive meanwhile wait), answering with the version and checksum it
/// holds.
using inference_worker_actor = caf::typed_actor<
    caf::replies_to<generate_atom, generation_request>::with<caf::ok_atom>,
    caf::replies_to<generate_atom, std::vector<generation_request>>::with<caf::ok_atom>,
    caf::reacts_to<cancel_atom, uint64_t>, caf::replies_to<poll_atom>::with<worker_report>,
    caf::replies_to<poll_atom, bool>::with<worker_report>, caf::reacts_to<step_atom>,
    caf::reacts_to<tick_atom, uint64_t>,
    caf::replies_to<sync_atom, weight_sync_round>::with<weights_ack>>;

/// The RL reward role: `(score, request)` returns one score per response, in order.
using reward_actor =
    caf::typed_actor<caf::replies_to<score_atom, reward_request>::with<std::vector<double>>>;

/// An app driver. The supervisor hands it the role actors (`actor_update`) and then `run`; the
/// driver answers `run` with the job's result when the app is done. `(stop)` asks it to end
/// early and gracefully (Ctrl-C): a server finishes the requests it has and succeeds, a job
/// with a goal winds down (pretraining checkpoints the step in flight) and ends as failed,
/// saying why.
using app_actor =
    caf::typed_actor<caf::reacts_to<actor_update>, caf::replies_to<run_atom>::with<job_result>,
                     caf::reacts_to<stop_atom>>;

}  // namespace troupe::actor
