#pragma once

#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "actors/batch_scheduler.hpp"
#include "actors/draft_model_proposer.hpp"
#include "actors/guided_decoding.hpp"
#include "actors/speculative_decoding.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "models/decoder/paged_decoder.hpp"

namespace troupe::actors {

/// An inference worker's engine, without CAF: the GPT decoder (CPU or CUDA) over a paged KV
/// cache, driven by the continuous-batching scheduler. Each step() runs one iteration (prefill
/// chunks and decode steps in one batch through the model), samples each finished chunk's next
/// token with its request's parameters and seed, and returns the stream events. With speculative
/// decoding, each decoding sequence's next tokens are guessed after its step (by prompt lookup,
/// or by a draft model) and checked in its next step (speculative_decoding.hpp): it may then
/// gain several tokens. A pooling request (an embedding; the CPU decoder) runs its prompt and
/// ends there, its final event carrying the final norm's hidden state at its last token or
/// averaged over its tokens.
class inference_engine {
 public:
  struct options {
    scheduler_options scheduler;
    int kv_blocks = 256;
    int block_size = 16;
    int device = -1;  ///< the CUDA device the model runs on; -1: the CPU
    /// CPU threads an iteration's batch (its requests' forward passes and draws) is split over.
    int threads = 1;
    /// Weight-only quantization of the blocks' linear layers (the CPU decoder's).
    models::weight_quantization quantization;
    /// Or block weights already quantized (a GPTQ checkpoint's, or quantized when the model was
    /// loaded); then weight swaps are refused.
    std::shared_ptr<const models::quantized_weights> prequantized;
    /// The KV cache's values: f32, or int8 with a scale per position and key/value head.
    models::kv_cache_dtype kv_cache_dtype = models::kv_cache_dtype::f32;
    /// Speculative decoding (continuous batching; not for guided requests): by prompt lookup,
    /// or by the draft model below.
    speculative_options speculative;
    /// Speculative decoding's draft model (vLLM's draft_model method), on the same device: its
    /// layout and weights, which must outlive the engine; null: prompt lookup.
    const models::decoder_layout* draft_layout = nullptr;
    const float* draft_params = nullptr;
  };

  /// `params` is the whole model's flat buffer, laid out by `layout`; both must outlive this.
  /// UNAVAILABLE when `o.device` cannot be used.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<inference_engine>> create(
      const models::decoder_layout& layout, const float* params, options o);

  /// Queues a request (see batch_scheduler::add); token ids must be below the vocabulary.
  [[nodiscard]] absl::Status add(generation_request request);
  std::vector<generation_event> cancel(uint64_t id);

  /// One iteration; empty when nothing is waiting or running.
  [[nodiscard]] absl::StatusOr<std::vector<generation_event>> step();

  /// Generates with `params` (laid out like the old weights; they must outlive the engine or the
  /// next swap) from the next iteration on, as weights version `version`, which every event then
  /// carries. Only between generations: FAILED_PRECONDITION while a request runs or waits, so
  /// that each output comes from one version.
  [[nodiscard]] absl::Status swap_weights(const float* params, uint64_t version);
  [[nodiscard]] uint64_t weights_version() const { return weights_version_; }

  [[nodiscard]] bool idle() const { return scheduler_.waiting() == 0 && scheduler_.running() == 0; }
  [[nodiscard]] const kv_block_pool& blocks() const { return blocks_; }
  [[nodiscard]] const batch_scheduler& scheduler() const { return scheduler_; }
  /// Tokens and sequences the last step ran through the model.
  [[nodiscard]] int last_batch_tokens() const { return last_batch_tokens_; }
  [[nodiscard]] int last_batch_sequences() const { return last_batch_sequences_; }
  /// Speculative decoding's counters (vLLM's spec_decode_num_drafts, _num_draft_tokens and
  /// _num_accepted_tokens): decode steps that checked drafts, the draft tokens checked, and
  /// those accepted.
  struct speculation_counts {
    uint64_t drafts = 0, draft_tokens = 0, accepted_tokens = 0;
  };
  [[nodiscard]] const speculation_counts& speculation() const { return speculation_; }

 private:
  inference_engine(const models::decoder_layout& layout,
                   std::unique_ptr<kernels::cpu::thread_pool> pool,
                   std::unique_ptr<models::paged_decoder> decoder,
                   std::unique_ptr<draft_model_proposer> drafter, options o);

  // The draws after one sampling chunk: the tokens it gives (its accepted drafts, then one drawn
  // token), their log-probs and top alternatives.
  struct draw {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    std::vector<int32_t> top_tokens;
    std::vector<float> top_values;
    int accepted = 0;       // drafts among the tokens
    bool dead_end = false;  // a guided request that no token can continue
  };

  // A pooling request's chunk, its hidden-state `rows`: summed for a mean; at its prompt's end,
  // the request ends with its embedding.
  void pool_chunk(const batch_chunk& c, const float* rows, std::vector<generation_event>& events);
  // The tokens chunk `c` gives, from its logit rows `logits` [1 + c.drafts, vocab].
  void draw_tokens(const batch_chunk& c, float* logits, draw& d);
  // Guesses the next tokens of the sequences of `batch` that go on decoding.
  [[nodiscard]] absl::Status propose_drafts(const std::vector<batch_chunk>& batch);
  // Forgets what is kept for sequences that ended in `events`.
  void forget_ended(const std::vector<generation_event>& events);

  // Moves a guided request past its drawn token; ends its output when the value is whole.
  void guide(uint64_t id, int32_t token, std::vector<generation_event>& events);

  const models::decoder_layout& layout_;
  speculative_options speculative_;
  std::unique_ptr<kernels::cpu::thread_pool> pool_;  // null with one thread; before the decoder
  std::unique_ptr<models::paged_decoder> decoder_;
  std::unique_ptr<draft_model_proposer> drafter_;  // null: prompt lookup
  // The draft model's distributions of each sequence's drafts ([drafts, vocab]; empty: greedy).
  absl::flat_hash_map<uint64_t, std::vector<float>> draft_probs_;
  kv_block_pool blocks_;
  batch_scheduler scheduler_;
  guided_decoding guided_;  // structured output
  std::vector<float> logits_;
  std::vector<float> hidden_;                                  // pooling requests' rows
  absl::flat_hash_map<uint64_t, std::vector<double>> pooled_;  // mean pooling's running sums
  std::vector<draw> draws_;                                    // one per chunk of the iteration
  uint64_t weights_version_ = 0;
  int last_batch_tokens_ = 0;
  int last_batch_sequences_ = 0;
  speculation_counts speculation_;
};

}  // namespace troupe::actors
