#pragma once

// The plain data that troupe actors exchange. No CAF here, so actor logic can use these types
// and stay testable without an actor system; messages.hpp registers them with CAF.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/checkpoint/checkpoint_store.hpp"
#include "runtime/tensor/safetensors.hpp"

namespace troupe::actor {

/// One unit of work flowing through a pipeline: its position in the stream and its bytes.
struct work_item {
  uint64_t seq = 0;
  std::string payload;
};

/// A source's answer: the items asked for (none once exhausted) and, when known, how many items
/// the source holds in total (-1 when unknown), for progress display.
struct source_batch {
  std::vector<work_item> items;
  int64_t total = -1;
};

/// What a pipeline sink saw: item and byte counts and a digest of the ordered payloads.
struct sink_report {
  uint64_t items = 0;
  uint64_t bytes = 0;
  std::string digest;
};

/// A plugin's own message: a type name and msgpack-encoded bytes.
struct custom_message {
  std::string type;
  std::vector<uint8_t> bytes;
};

/// Tells the job's supervisor that actor `name`, hosted on another node, stopped: `code` and
/// `message` are its exit reason as an absl::Status (code 0: it stopped without an error).
struct actor_down {
  std::string name;
  int32_t code = 0;
  std::string message;
};

/// A change of cluster membership, sent to subscribers of a node agent: `kind` is "joined",
/// "left" or "dead"; `epoch` the membership epoch after the change.
struct member_event {
  std::string kind;
  std::string node;
  uint64_t epoch = 0;
};

/// One data-parallel rank's training batch: token ids and next-token targets, [batch, ctx] each,
/// row-major, and where in the sample stream it comes from.
struct token_batch {
  int32_t batch = 0;
  int32_t ctx = 0;
  std::vector<int32_t> tokens;
  std::vector<int32_t> targets;
  int64_t first_sample = 0;  ///< the global stream index of the batch's first sample
  int64_t cursor = 0;        ///< the global stream index where its global batch starts
  /// The targets (>= 0) of its whole global batch, over every rank: the token mean's
  /// denominator. 0: every position of the global batch (text windows).
  int64_t global_targets = 0;
  /// A reward model's batch of preference pairs: each pair's margin (the Bradley-Terry loss is
  /// -log sigmoid(r_chosen - r_rejected - margin), TRL's RewardTrainer's); empty: all 0.
  std::vector<float> margins;
  /// A DPO batch of preference pairs: each row's response log-probability under the reference
  /// (the sum over its targets >= 0); empty otherwise.
  std::vector<float> reference_logps;
};

/// Means over a batch's preference pairs, TRL's figures: the pairs ranked right
/// (rewards/accuracies), the reward gap chosen - rejected (rewards/margins), each side's reward
/// (rewards/chosen, rewards/rejected: a reward model's scalar, DPO's implicit
/// beta (log pi - log ref)) and, for DPO, each side's summed log-probability (logps/chosen,
/// logps/rejected).
struct pair_metrics {
  int64_t count = 0;  ///< the pairs; 0: not a preference objective
  double accuracy = 0;
  double margin = 0;
  double reward_chosen = 0, reward_rejected = 0;
  double logp_chosen = 0, logp_rejected = 0;
};

/// What one optimizer step of a data-parallel rank did.
struct step_report {
  int64_t step = 0;  ///< 1-based: the number of steps done
  double loss = 0;   ///< mean token loss over the global batch
  double grad_norm = 0;
  double lr = 0;
  double data_s = 0;     ///< waiting for the batch
  double compute_s = 0;  ///< forward, backward and optimizer on this rank
  double comm_s = 0;     ///< waiting for collectives (what compute did not hide)
  double replica_s = 0;  ///< of comm_s: refreshing the shard replica (shard_replicas)
  /// A pipeline stage's schedule: computing, and waiting for its neighbours (0 without stages).
  double stage_busy_s = 0;
  double stage_idle_s = 0;
  int64_t first_sample = 0;  ///< the global stream index of this rank's first sample
  int64_t samples = 0;       ///< how many samples this rank trained on (0: it does not say)
  pair_metrics pairs;        ///< a DPO step's, over the global batch
};

/// A held-out evaluation, summed over the data-parallel group: the mean loss (a language model's
/// token loss; a reward model's Bradley-Terry loss; DPO's loss), and the pairs' figures (a reward
/// model's or DPO's).
struct eval_report {
  double loss = 0;
  pair_metrics pairs;
};

/// A data-parallel group formed anew after its membership changed: the receiving rank's place
/// in generation `generation` of the group, where every rank's state comes from, the optimizer
/// step it is at, and the global sample index the next step's batch starts at.
struct group_change {
  /// Where the new group's state comes from.
  enum class source : int32_t {
    members = 0,     ///< the members' trainers of generation `basis` (the last one formed)
    checkpoint = 1,  ///< the checkpoint in `checkpoint` (a shard was lost; or a resume)
    initial = 2,     ///< the seed's initial state (a fresh run; or a loss before a checkpoint)
  };
  uint64_t generation = 0;
  int32_t rank = 0;
  int32_t ranks = 1;
  source from = source::initial;
  uint64_t basis = 0;
  int64_t steps = 0;
  int64_t cursor = 0;
  std::string checkpoint;
};

/// One data-parallel rank's share of an RL mini-batch (the policy's or the critic's update),
/// [batch, ctx] each, row-major and indexed like `targets`: the sequences (prompt, then response,
/// right-padded), the next token on each response position (-1 elsewhere: prompt and padding are
/// not trained on), and per response token its log-prob when it was sampled (old), the
/// reference's, its advantage, the critic's value before the update and the return it is trained
/// towards, and its weight in the loss aggregation over the whole mini-batch, every rank's rows
/// together (kernels::cpu::loss_agg_weights), so that the ranks' summed gradients are the
/// mini-batch's. A field its reader does not use may be empty.
struct rl_batch {
  int32_t batch = 0;
  int32_t ctx = 0;
  std::vector<int32_t> tokens;
  std::vector<int32_t> targets;
  std::vector<float> old_log_probs;
  std::vector<float> ref_log_probs;  ///< read only with the KL loss; may then be empty
  std::vector<float> advantages;
  std::vector<float> values;   ///< the critic's (GAE only)
  std::vector<float> returns;  ///< the critic's targets (GAE only)
  std::vector<float> weights;
};

/// What one policy (or critic) optimizer step did over its whole mini-batch, with veRL's actor
/// metrics: pg_loss, entropy and kl_loss aggregated with the batch's weights; pg_clipfrac,
/// pg_clipfrac_lower and ppo_kl as means over the response tokens; or its critic metrics:
/// vf_loss aggregated, vf_clipfrac and vpred_mean as means over the response tokens.
struct rl_step_report {
  int64_t step = 0;  ///< 1-based: the number of optimizer steps done
  double pg_loss = 0;
  double pg_clipfrac = 0;
  double pg_clipfrac_lower = 0;
  double ppo_kl = 0;
  double entropy = 0;
  double kl_loss = 0;  ///< 0 without the KL loss
  double vf_loss = 0;
  double vf_clipfrac = 0;
  double vpred_mean = 0;
  double grad_norm = 0;
  double lr = 0;
  double compute_s = 0;
  double comm_s = 0;
};

/// Responses for the RL reward role to score: prompt i, response i (as text, without the end
/// string) and whether it ended (1) or ran out of tokens (0).
struct reward_request {
  std::vector<std::string> prompts;
  std::vector<std::string> responses;
  std::vector<uint8_t> ended;
};

/// One weight sync of the RL policy to its rollout workers: the version it carries and the
/// group it travels in, formed anew at each new `epoch` (a rollout worker lost or joined):
/// `rank` of `ranks` (the sender, policy rank 0, is rank 0). It says when it was sent, on the
/// sender's steady clock (`sent_at_ns`, troupe::steady_ns) and which clock that is
/// (`clock_domain`, troupe::steady_clock_domain; empty: not told).
struct weight_sync_round {
  uint64_t version = 0;
  uint64_t epoch = 0;
  int32_t rank = 0;
  int32_t ranks = 1;
  int64_t sent_at_ns = 0;
  std::string clock_domain;
};

/// A weight-sync participant's acknowledgement: the version it now holds and the checksum of its
/// weights (actors::weights_checksum), which the sender compares with its own.
struct weights_ack {
  uint64_t version = 0;
  std::string checksum;
  /// A rollout worker's seconds from the sync's sending to the new weights' swap into its engine
  /// where it reads the sender's clock (the same host), else from the sync's arrival (0 from the
  /// sender): an RL step's generation, sent ahead of the sync, starts then.
  double swap_s = 0;
};

/// One data-parallel rank's part of checkpoint `step`, written and synced: its files, the data
/// cursor to resume from, and what it cost the rank.
struct checkpoint_shard {
  int64_t step = 0;
  int32_t rank = 0;
  int64_t cursor = 0;                          ///< the global sample index the next step starts at
  std::vector<checkpoint::file_record> files;  ///< written, synced and hashed
  double stall_s = 0;  ///< the rank was blocked this long (the snapshot to host memory)
  double write_s = 0;  ///< the writer took this long, in the background
};

/// A trainer's state copied to host memory for a checkpoint, handed to the checkpoint writer in
/// its own process: the shard to report (step, rank, cursor, stall filled in), the checkpoint
/// root, and the files to write. Local only: the files do not serialize, and no wire codec
/// carries this message.
struct checkpoint_snapshot {
  checkpoint_shard shard;
  std::string root;
  std::shared_ptr<const std::vector<std::pair<std::string, tensor::named_tensors>>> files;
};

/// OpenAI's logit_bias entry: `bias` added to token `token`'s logit before sampling.
struct token_bias {
  int32_t token = 0;
  float bias = 0.0f;
  friend bool operator==(const token_bias&, const token_bias&) = default;
};

/// How a pooling request makes its embedding from the final norm's hidden states (vLLM's
/// pooling_type): none (a generation), the prompt's last token's, or their mean over its tokens.
enum class pooling_type : int32_t { none = 0, last = 1, mean = 2 };

/// One generation as an inference worker receives it: a prompt of token ids and how to
/// continue it (temperature 0 is greedy; top_k 0 and top_p 1 cut nothing).
struct generation_request {
  uint64_t id = 0;
  std::vector<int32_t> prompt;
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
  int32_t max_tokens = 16;
  /// Generation ends when the output's text comes to hold one of these; it is not part of the
  /// output unless include_stop_str_in_output.
  std::vector<std::string> stop;
  /// vLLM's stop_token_ids: generation ends at one of these tokens (the model's end-of-turn and
  /// end-of-sequence tokens, added by the API); it is not part of the output unless
  /// include_stop_str_in_output.
  std::vector<int32_t> stop_token_ids;
  /// vLLM's sampling parameter: keep the stop string or token that ended the output in it, with
  /// its log-probs (an RL response is trained on its end).
  bool include_stop_str_in_output = false;
  /// false: the requester wants the output only when it ends (OpenAI's stream: false). The
  /// engine then hands out its whole output in one event when it ends, and a worker answers a
  /// poll for it only then, so a batch of such requests costs a few polls instead of one per
  /// iteration.
  bool stream = true;
  /// The most likely tokens to report with each output token, with their log-probs (OpenAI's
  /// top logprobs); 0: none.
  int32_t top_logprobs = 0;
  /// The request waits in the worker until its weights are at least this version (an RL step's
  /// requests go out with that step's weight sync); 0: any weights.
  uint64_t min_weights_version = 0;
  /// OpenAI's penalties of the tokens already in the output: each logit less frequency_penalty
  /// times the token's count, and presence_penalty if it occurs at all; 0: none.
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  /// vLLM's (HF's) repetition_penalty of the tokens in the prompt or the output: a positive
  /// logit divided by it, a negative one multiplied; 1: none.
  float repetition_penalty = 1.0f;
  /// OpenAI's logit_bias, added to the logits before the penalties.
  std::vector<token_bias> logit_bias;
  /// vLLM's min_tokens: before this many output tokens, stop_token_ids cannot be drawn and stop
  /// strings do not end the output.
  int32_t min_tokens = 0;
  /// Structured output (OpenAI's response_format): the text of a JSON schema that the output is
  /// a value of (actors/json_grammar); empty: free text.
  std::string json_schema;
  /// An embedding instead of an output (OpenAI's /v1/embeddings): the request ends at its prompt,
  /// its final event carrying the pooled hidden state (unnormalized).
  pooling_type pooling = pooling_type::none;
};

/// Why a generation ended (OpenAI's finish_reason): "length" (max_tokens or the context),
/// "stop" (a stop string), or "cancelled".
enum class finish_reason : int32_t { length = 0, stop = 1, cancelled = 2 };
[[nodiscard]] inline const char* to_string(finish_reason r) {
  return r == finish_reason::stop ? "stop" : r == finish_reason::cancelled ? "cancelled" : "length";
}

/// Output of one generation for its requester: tokens that can be streamed (output indices
/// first_index, first_index + 1, ...), and whether (and why) it ended.
struct generation_event {
  uint64_t id = 0;
  std::vector<int32_t> tokens;
  int32_t first_index = 0;
  bool finished = false;
  finish_reason reason = finish_reason::length;
  /// Each token's log-prob when it was sampled, log softmax(logits / temperature)[token] over the
  /// whole vocabulary (temperature 1 for a greedy request), the logits adjusted as the request
  /// asks (logit_bias, penalties) as the draw saw them: what the RL policy trains on.
  std::vector<float> logprobs;
  /// The version of the weights that generated it (the RL policy_version; 0 before any swap).
  uint64_t weights_version = 0;
  /// With the request's top_logprobs k: for each token, the k most likely tokens and their
  /// log-probs (the same distribution as logprobs), most likely first: [tokens.size() * k] each.
  std::vector<int32_t> top_tokens;
  std::vector<float> top_values;
  /// A pooling request's embedding, in its final event ([the model's width]; else empty).
  std::vector<float> embedding;
};

/// An inference worker's answer to a poll: the stream events produced since the last poll, and
/// the state of its engine (for the router's metrics).
struct worker_report {
  std::vector<generation_event> events;
  int32_t kv_blocks_used = 0;
  int32_t kv_blocks_total = 0;
  int32_t waiting = 0;  ///< requests not yet admitted (or preempted)
  int32_t running = 0;  ///< sequences in the batch
  /// Prompt tokens looked up in the prefix cache since the last poll, and those found there.
  int32_t prefix_cache_queries = 0;
  int32_t prefix_cache_hits = 0;
  /// Speculative decoding since the last poll (vLLM's spec_decode counters): decode steps that
  /// checked draft tokens, the draft tokens checked, and those accepted.
  int32_t spec_decode_drafts = 0;
  int32_t spec_decode_draft_tokens = 0;
  int32_t spec_decode_accepted_tokens = 0;
  /// Sequences in each iteration since the last poll, oldest first (the latest 256 at most).
  std::vector<int32_t> batch_sizes;
};

/// How a job ended: the app's JSON summary on success, the cause on failure.
struct job_result {
  bool ok = false;
  std::string summary_json;
  std::string error;
};

}  // namespace troupe::actor
