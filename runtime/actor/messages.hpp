#pragma once

// Every message type and atom troupe actors exchange, with the one CAF type-id block.
// Plugins use these types (or `custom_message`) and never add type ids of their own.

#include <cstdint>
#include <string>
#include <vector>

#include "caf/all.hpp"
#include "runtime/actor/message_types.hpp"

namespace troupe::checkpoint {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, file_record& x) {
  return f(caf::meta::type_name("file_record"), x.name, x.bytes, x.sha256);
}

}  // namespace troupe::checkpoint

namespace troupe::actor {

/// Tells an actor that the actor registered under `name` now has handle `handle`, sent by the
/// supervisor before the app starts and again after every restart.
struct actor_update {
  std::string name;
  caf::actor handle;
  /// The cluster node the actor runs on; empty for one in the supervisor's process.
  std::string node;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, source_batch& x) {
  return f(caf::meta::type_name("source_batch"), x.items, x.total);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, work_item& x) {
  return f(caf::meta::type_name("work_item"), x.seq, x.payload);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sink_report& x) {
  return f(caf::meta::type_name("sink_report"), x.items, x.bytes, x.digest);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, custom_message& x) {
  return f(caf::meta::type_name("custom_message"), x.type, x.bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, actor_update& x) {
  return f(caf::meta::type_name("actor_update"), x.name, x.handle, x.node);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, actor_down& x) {
  return f(caf::meta::type_name("actor_down"), x.name, x.code, x.message);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, member_event& x) {
  return f(caf::meta::type_name("member_event"), x.kind, x.node, x.epoch);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, token_batch& x) {
  return f(caf::meta::type_name("token_batch"), x.batch, x.ctx, x.tokens, x.targets, x.first_sample,
           x.cursor, x.global_targets, x.margins, x.reference_logps);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pair_metrics& x) {
  return f(caf::meta::type_name("pair_metrics"), x.count, x.accuracy, x.margin, x.reward_chosen,
           x.reward_rejected, x.logp_chosen, x.logp_rejected);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, eval_report& x) {
  return f(caf::meta::type_name("eval_report"), x.loss, x.pairs);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_report& x) {
  return f(caf::meta::type_name("step_report"), x.step, x.loss, x.grad_norm, x.lr, x.data_s,
           x.compute_s, x.comm_s, x.replica_s, x.first_sample, x.samples, x.pairs);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_change& x) {
  return f(caf::meta::type_name("group_change"), x.generation, x.rank, x.ranks, x.from, x.basis,
           x.steps, x.cursor, x.checkpoint);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, checkpoint_shard& x) {
  return f(caf::meta::type_name("checkpoint_shard"), x.step, x.rank, x.cursor, x.files, x.stall_s,
           x.write_s);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, checkpoint_snapshot& x) {
  return f(caf::meta::type_name("checkpoint_snapshot"), x.shard, x.root);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, token_bias& x) {
  return f(caf::meta::type_name("token_bias"), x.token, x.bias);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, generation_request& x) {
  return f(caf::meta::type_name("generation_request"), x.id, x.prompt, x.temperature, x.top_k,
           x.top_p, x.seed, x.max_tokens, x.stop, x.stop_token_ids, x.include_stop_str_in_output,
           x.stream, x.top_logprobs, x.min_weights_version, x.frequency_penalty, x.presence_penalty,
           x.repetition_penalty, x.logit_bias, x.min_tokens, x.json_schema, x.pooling);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, generation_event& x) {
  return f(caf::meta::type_name("generation_event"), x.id, x.tokens, x.first_index, x.finished,
           x.reason, x.logprobs, x.weights_version, x.top_tokens, x.top_values, x.embedding);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_report& x) {
  return f(caf::meta::type_name("worker_report"), x.events, x.kv_blocks_used, x.kv_blocks_total,
           x.waiting, x.running, x.prefix_cache_queries, x.prefix_cache_hits, x.spec_decode_drafts,
           x.spec_decode_draft_tokens, x.spec_decode_accepted_tokens, x.batch_sizes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rl_batch& x) {
  return f(caf::meta::type_name("rl_batch"), x.batch, x.ctx, x.tokens, x.targets, x.old_log_probs,
           x.ref_log_probs, x.advantages, x.values, x.returns, x.weights);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rl_step_report& x) {
  return f(caf::meta::type_name("rl_step_report"), x.step, x.pg_loss, x.pg_clipfrac,
           x.pg_clipfrac_lower, x.ppo_kl, x.entropy, x.kl_loss, x.vf_loss, x.vf_clipfrac,
           x.vpred_mean, x.grad_norm, x.lr, x.compute_s, x.comm_s);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, reward_request& x) {
  return f(caf::meta::type_name("reward_request"), x.prompts, x.responses, x.ended);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, weight_sync_round& x) {
  return f(caf::meta::type_name("weight_sync_round"), x.version, x.epoch, x.rank, x.ranks,
           x.sent_at_ns, x.clock_domain);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, weights_ack& x) {
  return f(caf::meta::type_name("weights_ack"), x.version, x.checksum, x.swap_s);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_result& x) {
  return f(caf::meta::type_name("job_result"), x.ok, x.summary_json, x.error);
}

}  // namespace troupe::actor

CAF_BEGIN_TYPE_ID_BLOCK(troupe, caf::first_custom_type_id)

CAF_ADD_TYPE_ID(troupe, (troupe::actor::work_item))
CAF_ADD_TYPE_ID(troupe, (std::vector<troupe::actor::work_item>))
CAF_ADD_TYPE_ID(troupe, (troupe::actor::source_batch))
CAF_ADD_TYPE_ID(troupe, (troupe::actor::sink_report))
CAF_ADD_TYPE_ID(troupe, (troupe::actor::custom_message))
CAF_ADD_TYPE_ID(troupe, (troupe::actor::actor_update))
CAF_ADD_TYPE_ID(troupe, (troupe::actor::job_result))
CAF_ADD_TYPE_ID(troupe, (troupe::actor::actor_down))
CAF_ADD_TYPE_ID(troupe, (troupe::actor::member_event))
CAF_ADD_TYPE_ID(troupe, (troupe::actor::token_batch))
CAF_ADD_TYPE_ID(troupe, (troupe::actor::step_report))
CAF_ADD_TYPE_ID(troupe, (troupe::actor::group_change))
CAF_ADD_TYPE_ID(troupe, (troupe::checkpoint::file_record))
CAF_ADD_TYPE_ID(troupe, (std::vector<troupe::checkpoint::file_record>))
CAF_ADD_TYPE_ID(troupe, (troupe::actor::checkpoint_shard))
CAF_ADD_TYPE_ID(troupe, (troupe::actor::checkpoint_snapshot))
CAF_ADD_TYPE_ID(troupe, (troupe::actor::generation_request))
CAF_ADD_TYPE_ID(troupe, (troupe::actor::generation_event))
CAF_ADD_TYPE_ID(troupe, (std::vector<troupe::actor::generation_event>))
CAF_ADD_TYPE_ID(troupe, (troupe::actor::worker_report))
CAF_ADD_TYPE_ID(troupe, (troupe::actor::eval_report))

// Pipeline roles.
CAF_ADD_ATOM(troupe, troupe::actor, next_atom, "next")
CAF_ADD_ATOM(troupe, troupe::actor, process_atom, "process")
CAF_ADD_ATOM(troupe, troupe::actor, consume_atom, "consume")
CAF_ADD_ATOM(troupe, troupe::actor, finish_atom, "finish")

// Training data.
CAF_ADD_ATOM(troupe, troupe::actor, credit_atom, "credit")
CAF_ADD_ATOM(troupe, troupe::actor, cursor_atom, "cursor")
CAF_ADD_ATOM(troupe, troupe::actor, seek_atom, "seek")
CAF_ADD_ATOM(troupe, troupe::actor, produce_atom, "produce")
CAF_ADD_ATOM(troupe, troupe::actor, step_atom, "step")
CAF_ADD_ATOM(troupe, troupe::actor, eval_atom, "eval")
CAF_ADD_ATOM(troupe, troupe::actor, checkpoint_atom, "checkpoint")
CAF_ADD_ATOM(troupe, troupe::actor, restore_atom, "restore")
// Elastic training: a group re-formed, a group given up, a rank's own job finished, a driver's
// timer.
CAF_ADD_ATOM(troupe, troupe::actor, regroup_atom, "regroup")
CAF_ADD_ATOM(troupe, troupe::actor, abort_atom, "abort")
CAF_ADD_ATOM(troupe, troupe::actor, done_atom, "done")
CAF_ADD_ATOM(troupe, troupe::actor, wake_atom, "wake")
// Serving.
CAF_ADD_ATOM(troupe, troupe::actor, generate_atom, "generate")
CAF_ADD_ATOM(troupe, troupe::actor, poll_atom, "poll")
CAF_ADD_ATOM(troupe, troupe::actor, cancel_atom, "cancel")
// Jobs and supervision.
CAF_ADD_ATOM(troupe, troupe::actor, run_atom, "run")
CAF_ADD_ATOM(troupe, troupe::actor, stop_atom, "stop")
CAF_ADD_ATOM(troupe, troupe::actor, restart_atom, "restart")
CAF_ADD_ATOM(troupe, troupe::actor, track_atom, "track")
CAF_ADD_ATOM(troupe, troupe::actor, tick_atom, "tick")
CAF_ADD_ATOM(troupe, troupe::actor, spawn_atom, "spawn")

// Benchmarks and liveness tests.
CAF_ADD_ATOM(troupe, troupe::actor, ping_atom, "ping")

// RLHF: the policy's and the critic's updates, log-probs, values, and the weight sync to the
// rollout.
CAF_ADD_TYPE_ID(troupe, (std::vector<float>))
CAF_ADD_TYPE_ID(troupe, (troupe::actor::rl_batch))
CAF_ADD_TYPE_ID(troupe, (troupe::actor::rl_step_report))
CAF_ADD_TYPE_ID(troupe, (troupe::actor::weights_ack))
CAF_ADD_TYPE_ID(troupe, (troupe::actor::weight_sync_round))
CAF_ADD_TYPE_ID(troupe, (troupe::actor::reward_request))
CAF_ADD_TYPE_ID(troupe, (std::vector<double>))
CAF_ADD_TYPE_ID(troupe, (std::vector<troupe::actor::generation_request>))
CAF_ADD_ATOM(troupe, troupe::actor, rl_step_atom, "rl_step")
CAF_ADD_ATOM(troupe, troupe::actor, log_probs_atom, "log_probs")
CAF_ADD_ATOM(troupe, troupe::actor, values_atom, "values")
CAF_ADD_ATOM(troupe, troupe::actor, sync_atom, "sync")
CAF_ADD_ATOM(troupe, troupe::actor, load_atom, "load")
CAF_ADD_ATOM(troupe, troupe::actor, score_atom, "score")

CAF_END_TYPE_ID_BLOCK(troupe)
