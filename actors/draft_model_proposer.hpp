#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "actors/kv_block_pool.hpp"
#include "models/decoder/paged_decoder.hpp"
#include "runtime/actor/message_types.hpp"

namespace troupe::actors {

/// Speculative decoding's draft model (vLLM's `draft_model` method), without CAF: a small model
/// of the target's vocabulary guesses each sequence's next tokens by decoding them itself, over
/// a KV cache of its own. It remembers which tokens it holds keys and values for, per sequence,
/// so that each call only runs what changed: the tokens the target kept since (its accepted
/// drafts are already there), then its guesses one position at a time, all sequences in one
/// batch per position.
class draft_model_proposer {
 public:
  /// The draft model `layout` with weights `params` (both must outlive it) on `device` (-1: the
  /// CPU, over `pool`), running at most `max_tokens` tokens per forward pass over a cache of
  /// `kv_blocks` blocks of `block_size`. INVALID_ARGUMENT when its vocabulary is not
  /// `target_vocab`.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<draft_model_proposer>> create(
      const models::decoder_layout& layout, const float* params, int target_vocab, int max_tokens,
      int kv_blocks, int block_size, int device, kernels::cpu::thread_pool* pool);

  /// A sequence to guess for: its tokens (prompt and output) and its request.
  struct sequence {
    uint64_t id = 0;
    std::span<const int32_t> tokens;
    const actor::generation_request* request = nullptr;
  };
  /// Up to `k` draft tokens for one sequence, and the draft's distribution each was drawn from
  /// ([tokens, vocab]; empty for a greedy request).
  struct proposal {
    std::vector<int32_t> tokens;
    std::vector<float> probs;
  };

  /// Guesses up to `k` tokens for each of `sequences` (one proposal each, in their order). A
  /// sequence gets none when its tokens to catch up on do not fit this call's `max_tokens` (it
  /// catches up over the next calls) or the cache has no room for it.
  [[nodiscard]] absl::StatusOr<std::vector<proposal>> propose(std::span<const sequence> sequences,
                                                              int k);
  /// Frees the cache of a sequence that ended.
  void forget(uint64_t id);

 private:
  struct held {
    std::vector<int32_t> blocks;
    std::vector<int32_t> tokens;  // by position, those whose keys and values the cache holds
  };

  draft_model_proposer(std::unique_ptr<models::paged_decoder> decoder, int vocab, int ctx,
                       int max_tokens, int kv_blocks, int block_size);

  std::unique_ptr<models::paged_decoder> decoder_;
  int vocab_, ctx_, max_tokens_;
  kv_block_pool blocks_;
  absl::flat_hash_map<uint64_t, held> held_;
  std::vector<float> logits_;
};

}  // namespace troupe::actors
