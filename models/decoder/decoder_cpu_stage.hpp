#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "kernels/attention.hpp"
#include "models/decoder/decoder_layout.hpp"

namespace troupe::kernels::cpu {
class thread_pool;
}

namespace troupe::models {

/// Sum and count of the token losses of one forward pass.
struct loss_sum {
  double sum = 0.0;
  int64_t tokens = 0;
};

/// What a last stage's backward seeds instead of a mean loss: the gradient of an objective of
/// each token's loss (-log p of its target) and entropy, as the RL policy loss is.
struct token_objective_grad {
  const float* dloss = nullptr;      ///< d objective / d token_losses()[i], per token
  const float* entropies = nullptr;  ///< from entropies(); null when there is no entropy term
  const float* dentropy = nullptr;   ///< d objective / d entropy, per token
};

/// What a value-head stage's backward seeds: d objective / d value at each position.
struct value_objective_grad {
  const float* dvalues = nullptr;
};

/// Forward and backward of a GPT stage (blocks [first, last)) on the CPU, for one batch of
/// sequences at a time: either family of decoder_config, GPT-2's blocks (decoder_cpu_stage.cpp) or
/// the Llama family's (decoder_cpu_stage_llama.cpp), around the same residual stream, head, loss,
/// checkpointing, tensor parallelism and ZeRO-3 hooks. It owns the activations the backward pass
/// needs; parameters and gradients are flat buffers laid out by decoder_layout, owned by the
/// caller.
///
/// The first stage reads token ids, a middle stage reads the hidden state of the stage before;
/// the last stage ends in the loss (or, with the value head, in a value per position), a middle
/// one hands its hidden state on.
class decoder_cpu_stage {
 public:
  /// Room for batches of up to `max_batch` sequences of up to ctx tokens. `pool` runs attention
  /// heads in parallel; nullptr runs everything on the calling thread.
  ///
  /// Activation checkpointing with `checkpoint_segment` k > 0: the blocks form segments of k,
  /// and only the input of every block is kept through the forward pass; the activations of one
  /// segment at a time are held, and backward recomputes a segment's forward (the same
  /// arithmetic, so the same bits) before it goes through it. 0 keeps every block's.
  ///
  /// With `defer_weight_gradients` the backward pass may also run in the two halves a zero-bubble
  /// pipeline schedules apart (backward_input, then backward_weights): each block keeps the
  /// gradients of its linear maps' outputs in between. It excludes checkpointing (the weight
  /// half needs every block's activations).
  decoder_cpu_stage(const decoder_layout& layout, int max_batch, kernels::cpu::thread_pool* pool,
                    int checkpoint_segment = 0, bool defer_weight_gradients = false);

  /// Runs the stage on [batch, seq] inputs: `tokens` on the first stage, `hidden` [batch * seq,
  /// dim] otherwise. The last stage takes `targets` (-1 ignores a position) and returns the loss
  /// of softmax(logits / temperature) (the RL objectives train on the sampling distribution).
  loss_sum forward(const float* params, int batch, int seq, const int32_t* tokens,
                   const float* hidden, const int32_t* targets, float temperature = 1.0f);
  /// softmax(logits / temperature) [batch * seq, vocab] of the last forward, until backward
  /// reuses the memory (last stage only).
  [[nodiscard]] const float* probabilities() const { return probs_.data(); }
  /// Each position's loss -log p(target) of the last forward (0 where ignored; last stage).
  [[nodiscard]] const float* token_losses() const { return losses_.data(); }
  /// Each position's value of the last forward (a value-head last stage; no targets, no loss).
  [[nodiscard]] const float* values() const { return values_.data(); }
  /// Each position's entropy of the last forward's distribution into `h` (before backward).
  void entropies(float* h) const;
  /// The hidden state the last forward produced (not on the last stage).
  [[nodiscard]] const float* hidden_out() const { return x_.back().data(); }

  /// Adds this batch's gradients to `grads`. The last stage seeds each token's loss gradient
  /// with `loss_scale` (1 / tokens for a mean); other stages take d(hidden_out) in dhidden.
  void backward(const float* params, float* grads, const float* dhidden, float loss_scale);
  /// The same for a per-token objective (last stage only).
  void backward(const float* params, float* grads, const token_objective_grad& objective);
  /// The same for an objective of the values (a value-head last stage).
  void backward(const float* params, float* grads, const value_objective_grad& objective);

  /// backward() in phases, for callers that act between them (gradient buckets): the head (or
  /// the incoming d(hidden)), then each block from the last to the first, then the embeddings.
  void backward_head(const float* params, float* grads, const float* dhidden, float loss_scale);
  void backward_head(const float* params, float* grads, const token_objective_grad& objective);
  void backward_head(const float* params, float* grads, const value_objective_grad& objective);
  void backward_block(const float* params, float* grads, int layer);
  void backward_embedding(float* grads);
  /// d(hidden input) of the last backward (not on the first stage).
  [[nodiscard]] const float* dhidden_in() const { return dx_.data(); }

  /// backward() split in two (defer_weight_gradients): the input half takes the gradient from
  /// the loss (or d(hidden_out) in dhidden) back to dhidden_in(), adding the norms'
  /// gradients; the weight half, any time before the next forward, adds the linear maps', the
  /// biases' and the embeddings'. Together they add what backward() adds, bit for bit.
  void backward_input(const float* params, float* grads, const float* dhidden, float loss_scale);
  void backward_weights(float* grads);

  /// Tensor parallelism (a layout with tp size > 1): how the stage sums its ranks' parts, in
  /// place over the tensor-parallel group, twice in each block's forward (after the row-parallel
  /// output projections) and twice in its backward (d of the norms' outputs; with Qwen 3's q/k
  /// norms a third time, their weights' gradients, each rank's heads giving a part). Every rank
  /// of the group runs the same calls in the same order.
  using tensor_allreduce = std::function<absl::Status(float* data, int64_t n)>;
  void set_tensor_allreduce(tensor_allreduce sum) { tensor_allreduce_ = std::move(sum); }
  /// The first failure of a tensor-parallel sum since the last call (what ran after it is
  /// garbage), and OK again.
  [[nodiscard]] absl::Status take_comm_status();

  /// ZeRO-3: a block's parameters are in `params` only while it runs. `acquire(layer, backward)`
  /// comes before the block's forward, or its backward (its recompute included, which needs
  /// checkpoint segments of one block), and returns once they are at their offsets;
  /// `release(layer, backward)` after, when (after a backward) its gradients of this batch are
  /// final in `grads`. Not with the backward in halves. Without hooks every parameter is there.
  struct block_hooks {
    std::function<void(int layer, bool backward)> acquire, release;
  };
  void set_block_hooks(block_hooks hooks) { hooks_ = std::move(hooks); }

  /// Bytes of the activations this stage holds for backward at its largest batch: the residual
  /// stream, the blocks' (one segment's with checkpointing) and the head's.
  [[nodiscard]] int64_t activation_bytes() const;
  /// What activation_bytes() of a stage of `layout` for `max_batch` sequences would be, without
  /// making one (troupe check's memory per rank).
  [[nodiscard]] static int64_t activation_bytes(const decoder_layout& layout, int max_batch,
                                                int checkpoint_segment,
                                                bool defer_weight_gradients = false);

 private:
  // A block's activations. GPT-2: LayerNorms' means (the Llama family has none), fused QKV,
  // fc the MLP's first GEMM, fc_gelu after GELU. The Llama family: qkv [q | k | v] after the q/k
  // norms and RoPE, qk_raw the q and k before their norms and qk_rstd the norms' statistics
  // (Qwen 3), fc [gate | up] per token, fc_gelu silu(gate) * up.
  struct block_activations {
    std::vector<float> ln1, ln1_mean, ln1_rstd, qkv, qk_raw, qk_rstd, probs, atty, mid, ln2,
        ln2_mean, ln2_rstd, fc, fc_gelu;
  };
  // The gradients of a block's linear maps' outputs, from its input half to its weight half:
  // the MLP's output and first GEMM's (after the activation), attention's output projection's
  // and QKV's.
  struct linear_output_grads {
    std::vector<float> mlp_out, fc, attn_out, qkv;
  };

  void block_forward(const float* params, int layer, const float* in, float* out);
  void gpt2_block_forward(const float* params, int layer, const float* in, float* out);
  void llama_block_forward(const float* params, int layer, const float* in, float* out);
  // out [rows, dim] = in [rows, k_local] @ w + bias, w [k_local, dim] (or [dim, k_local] when
  // `w_transposed`, an nn.Linear's): with tensor parallelism each rank's part, summed over the
  // group before the bias (null: none).
  void row_parallel(float* out, const float* in, const float* w, const float* bias, int rows,
                    int k_local, bool w_transposed = false);
  void tensor_sum(float* data, int64_t n);
  // A block's backward in halves: from d(output) in dx_ to d(input) in dx_ (and the LayerNorms'
  // gradients), keeping its linear maps' output gradients in d; then their weights' and biases'.
  void block_input_grads(const float* params, float* grads, int layer, linear_output_grads& d);
  void block_weight_grads(float* grads, int layer, const linear_output_grads& d);
  void gpt2_block_input_grads(const float* params, float* grads, int layer, linear_output_grads& d);
  void gpt2_block_weight_grads(float* grads, int layer, const linear_output_grads& d);
  void llama_block_input_grads(const float* params, float* grads, int layer,
                               linear_output_grads& d);
  void llama_block_weight_grads(float* grads, int layer, const linear_output_grads& d);
  void qk_norm_backward(const float* params, float* grads, int layer, linear_output_grads& d);
  // The final norm of the residual stream into lnf_ (LayerNorm or RMSNorm by family).
  void final_norm_forward(const float* params);
  // The activations of `layer` (its slot in its segment's with checkpointing).
  block_activations& activations(int layer);
  // Recomputes the forward pass of `layer`'s segment unless its activations are held.
  void materialize(const float* params, int layer);
  // From d(logits / temperature), held in probs_, to d(final hidden state) in dx_; the head's
  // weight gradient apart (it needs only probs_ and lnf_).
  void head_backward(const float* params, float* grads);
  void head_input_grads(const float* params, float* grads);
  // d(loss) / d(logits), into probs_: the whole vocabulary's, or this rank's columns of it.
  void loss_backward(float loss_scale);
  void head_weight_grads(float* grads);
  // From d(final norm output), in dtmp_, to d(final hidden state) in dx_.
  void final_norm_backward(const float* params, float* grads);
  // Every block from the last to the first, then the embeddings.
  void backward_below_head(const float* params, float* grads);

  const decoder_layout& layout_;
  kernels::cpu::thread_pool* pool_;
  int batch_ = 0, seq_ = 0;
  float temperature_ = 1.0f;
  std::vector<std::vector<float>> x_;      // residual stream: input of each block, then the output
  std::vector<block_activations> blocks_;  // every block's, or one segment's
  int segment_ = 0;                        // blocks per checkpointed segment; 0: none
  int held_segment_ = -1;                  // the segment whose activations blocks_ holds
  std::vector<float> lnf_, lnf_mean_, lnf_rstd_, probs_, losses_, values_;
  std::vector<float> vocab_scratch_;  // a vocab-parallel loss's row maxima and sums
  std::vector<int32_t> tokens_, positions_, targets_;
  std::vector<float> inv_freq_, rope_cos_, rope_sin_;  // the Llama family's RoPE, per batch
  std::vector<float> block_scratch_;  // the Llama family's backward: d(MLP hidden) or d(attention)
  std::vector<float> qk_norm_grads_;  // a block's q/k-norm weight gradients of one batch (Qwen 3)
  std::vector<float> dx_, dtmp_;
  linear_output_grads dlinear_;                // a block's, between its halves (backward())
  std::vector<linear_output_grads> deferred_;  // every block's (defer_weight_gradients)
  tensor_allreduce tensor_allreduce_;
  absl::Status comm_status_;
  block_hooks hooks_;
};

}  // namespace troupe::models
