#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "actors/kv_block_pool.hpp"
#include "runtime/actor/message_types.hpp"

namespace troupe::actors {

using actor::finish_reason;
using actor::generation_event;
using actor::generation_request;

struct scheduler_options {
  int ctx = 128;               ///< the model's context: prompt + output fit in it
  int max_batch_tokens = 256;  ///< new tokens per iteration, prefill and decode together
  int max_sequences = 32;      ///< sequences running at once
  /// true: continuous batching (requests join at the next iteration). false: static batching,
  /// the baseline (request-level scheduling as in FasterTransformer or HF generate): a batch is
  /// formed when none runs and runs as one dense batch until its longest sequence ends; a
  /// sequence that ended keeps its row, computed on padding with the output discarded, and its
  /// KV blocks until then.
  bool continuous = true;
  /// The bytes each token stands for, which stop strings are matched on; null: troupe's byte
  /// vocabulary, where token t is the byte t.
  std::shared_ptr<const std::vector<std::string>> token_text;
  /// Automatic prefix caching (vLLM's `enable_prefix_caching`): a sequence starts from the
  /// cached full blocks of its longest cached prefix (kv_block_pool), short of its last token,
  /// whose logits it needs.
  bool prefix_caching = true;
};

/// Part of one iteration's batch: positions [first_position, first_position + count) of a
/// sequence. When `samples`, the chunk ends at the sequence's last token, and the logits after
/// it give its next token; the last `drafts` of its positions are then draft tokens past the
/// last token (speculative decoding), each with logits of its own to check it by.
struct batch_chunk {
  uint64_t id = 0;
  int first_position = 0;
  int count = 0;
  bool samples = false;
  int drafts = 0;
};

/// The continuous-batching scheduler of an inference worker, without CAF or a model (vLLM's
/// scheduler): it decides each iteration's batch under a token budget, owns the sequences'
/// KV blocks, and turns sampled tokens into stream events.
///
/// An iteration: every running sequence gets its next chunk, oldest first, decode steps (one
/// token) and prefill chunks alike, as far as `max_batch_tokens` goes; then waiting requests join
/// in arrival order while budget, sequences and blocks last. A running sequence that needs a
/// block when none is free preempts the newest running sequence (possibly itself): its blocks are
/// freed and it waits at the front, to be recomputed from its tokens when it is readmitted.
/// Sampling is seeded by (seed, output index), so a recomputed sequence continues exactly as it
/// would have. With prefix caching, every full block a sequence computes is cached under its
/// hash chain (salted with the weights version) and a sequence admitted (or readmitted) skips
/// the positions its cached prefix holds; a waiting sequence whose prefix another sequence is
/// computing in this iteration is admitted at the next, when it can share it.
///
/// Speculative decoding: draft tokens given to a decoding sequence (set_drafts) ride along with
/// its next decode step, as far as the budget, the context, max_tokens and the free blocks let
/// them; the engine keeps those the model confirms (on_token, then computed_draft for each).
class batch_scheduler {
 public:
  batch_scheduler(scheduler_options options, kv_block_pool& blocks);

  /// Queues a request. INVALID_ARGUMENT for an empty prompt, max_tokens < 1, a token outside
  /// [0, vocab) is the caller's to check; OUT_OF_RANGE when the prompt does not leave room for
  /// one token in the context; ALREADY_EXISTS for a duplicate id.
  [[nodiscard]] absl::Status add(generation_request request);
  /// Ends a request wherever it is; its blocks are freed. Returns its final event (nothing when
  /// the id is unknown).
  std::vector<generation_event> cancel(uint64_t id);
  /// Ends a running sequence whose output is whole (a structured output's value): "stop", every
  /// token kept. Nothing for a sequence that has ended.
  std::vector<generation_event> end(uint64_t id);

  /// The next iteration's batch (empty when nothing can run). A chunk that does not sample is
  /// prefill, or (static batching) the padding row of a sequence that ended.
  [[nodiscard]] std::vector<batch_chunk> schedule();
  /// The batch ran: its chunks' positions are in the cache (a chunk's draft positions are not,
  /// until computed_draft confirms them).
  void computed(const std::vector<batch_chunk>& batch);
  /// Draft tokens for the next decode step of running sequence `id` (speculative decoding;
  /// dropped if its next chunk is not a decode step). Continuous batching only.
  void set_drafts(uint64_t id, std::vector<int32_t> drafts);
  /// The tokens of `chunk` (of this iteration's batch), its drafts included.
  [[nodiscard]] const int32_t* chunk_tokens(const batch_chunk& chunk) const;
  /// The last output token of `id` was a draft token that the model confirmed: its position,
  /// computed with the batch, now holds its key and value.
  void computed_draft(uint64_t id);
  /// The token sampled after a `samples` chunk of sequence `id`, its log-prob, and the request's
  /// top_logprobs most likely tokens with theirs (empty when it asks for none). The events it
  /// returns: the tokens that can be released, and the end. A request with stream false gets
  /// one event, its whole output, when it ends.
  std::vector<generation_event> on_token(uint64_t id, int32_t token, float logprob = 0.0f,
                                         std::span<const int32_t> top_tokens = {},
                                         std::span<const float> top_values = {});

  /// A sequence's tokens (prompt then output) and block table, for building the batch.
  [[nodiscard]] const std::vector<int32_t>& tokens(uint64_t id) const;
  [[nodiscard]] const std::vector<int32_t>& block_table(uint64_t id) const;
  [[nodiscard]] const generation_request& request(uint64_t id) const;
  /// Whether `id` is a sequence still generating.
  [[nodiscard]] bool generating(uint64_t id) const;
  /// How many tokens sequence `id` has produced.
  [[nodiscard]] int output_size(uint64_t id) const;

  [[nodiscard]] size_t waiting() const { return waiting_.size(); }
  /// Sequences in the batch (with static batching, the ended ones that still hold their rows).
  [[nodiscard]] size_t running() const { return running_.size(); }
  [[nodiscard]] uint64_t preemptions() const { return preemptions_; }
  /// Prefix caching's counters (vLLM's): prompt tokens looked up at admission, and those found
  /// cached.
  [[nodiscard]] uint64_t prefix_cache_queries() const { return prefix_cache_queries_; }
  [[nodiscard]] uint64_t prefix_cache_hits() const { return prefix_cache_hits_; }
  /// New weights (version `version`): the cached blocks are forgotten and new ones are salted
  /// with the version. Only between generations (the engine swaps when idle).
  void new_weights(uint64_t version);

 private:
  struct sequence {
    generation_request request;
    std::vector<int32_t> tokens;      // prompt, then output
    std::vector<float> logprobs;      // of each output token
    std::vector<int32_t> top_tokens;  // top_logprobs per output token
    std::vector<float> top_values;
    int computed = 0;  // positions whose keys and values are in the cache
    std::vector<int32_t> blocks;
    std::string text;               // the output's bytes (options.token_text), for stop strings
    std::vector<size_t> text_ends;  // where each output token's bytes end in `text`
    int released = 0;               // output tokens already handed out
    bool ended = false;             // static batching: its row runs on padding until the batch ends
    std::vector<uint64_t> chain;    // prefix caching: the salt, then its full blocks' hashes
    int cached = 0;                 // its blocks registered in the prefix cache
    std::vector<int32_t> drafts;    // speculative decoding: for its next decode step
    std::vector<int32_t> checked;   // the batch's chunk: its last token, then the drafts in it
  };

  // Adds the next chunk of `id` to `batch` within `budget`; false when it could not get blocks.
  bool plan_chunk(uint64_t id, int& budget, std::vector<batch_chunk>& batch);
  // How many of the drafts of a sequence whose decode step is planned ride along with it, their
  // blocks reserved; s.checked holds the chunk's tokens then.
  int plan_drafts(sequence& s, int budget);
  // s.chain over its full blocks, rehashed when the weights changed since it was hashed.
  const std::vector<uint64_t>& hash_blocks(sequence& s);
  // A sequence with no blocks takes its cached prefix's; returns how many positions it holds.
  int take_cached_prefix(sequence& s);
  // Whether a block of s's prompt is being computed by a chunk of this iteration's batch: it is
  // admitted at the next one, to share it (GRPO's samples of one prompt, a shared system
  // prompt arriving in a burst), rather than compute it again.
  bool prefix_in_flight(sequence& s);
  // Notes the full blocks `chunk` completes as in flight.
  void note_in_flight(sequence& s, const batch_chunk& chunk);
  // Registers the full blocks of `s` computed since the last call.
  void cache_computed(sequence& s);
  // Frees the blocks of the newest running sequence and puts it back in front of the queue;
  // drops its chunk from `batch`. Returns its id.
  uint64_t preempt_newest(std::vector<batch_chunk>& batch);
  std::vector<generation_event> finish(uint64_t id, finish_reason reason, int keep);
  // The bytes token `token` stands for (options.token_text).
  [[nodiscard]] std::string_view token_text(int32_t token) const;
  // How many output tokens stay when a stop string starts at byte `at` of the output's text.
  [[nodiscard]] static int kept_before_stop(const sequence& s, size_t at);
  // Output tokens [from, to)'s top log-probs into `e`.
  static void attach_top(const sequence& s, int from, int to, generation_event& e);
  // Static batching: once every sequence of the running batch has ended, frees them all.
  void end_static_batch();

  scheduler_options options_;
  kv_block_pool& blocks_;
  // By id; a node map, so that a sequence stays where it is while others come and go (the batch
  // points into its tokens and blocks). Looked up several times per sequence per iteration.
  absl::node_hash_map<uint64_t, sequence> sequences_;
  std::deque<uint64_t> waiting_;
  std::vector<uint64_t> running_;  // oldest first
  uint64_t preemptions_ = 0;
  uint64_t prefix_cache_queries_ = 0, prefix_cache_hits_ = 0;
  uint64_t salt_ = 0;                        // the weights version
  absl::flat_hash_set<uint64_t> in_flight_;  // hashes of blocks this iteration's batch completes
};

}  // namespace troupe::actors
