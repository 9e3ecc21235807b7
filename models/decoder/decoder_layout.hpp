#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/decoder/decoder_config.hpp"
#include "runtime/tensor/safetensors.hpp"
#include "runtime/tensor/tensor.hpp"

namespace troupe::models {

/// A tensor-parallel rank's place in its group of `size` ranks.
struct tensor_parallel {
  int rank = 0;
  int size = 1;
};

/// How a tensor-parallel rank's part of a parameter is cut from the whole tensor (Megatron):
/// `dim` -1 replicated (every rank holds all of it), 0 its rows, 1 its last dimension, in
/// `groups` equal groups each split over the ranks (QKV's three, so that a rank's columns are
/// its heads' queries, keys and values).
struct tensor_split {
  int dim = -1;
  int groups = 1;
};

/// Megatron's split of the parameter called `name`: GPT-2's attention QKV and MLP first layer
/// (weights and biases) by columns, its output projections' weights and the token embedding
/// (vocab-parallel) by rows; the Llama family's [out, in] q/k/v, gate and up projections and
/// lm_head by rows (their biases by elements), o_proj and down_proj by columns; the rest
/// replicated.
[[nodiscard]] tensor_split tensor_split_of(const std::string& name);

/// A rank's part of a tensor of `whole` shape as runs of contiguous elements: `run(local
/// offset, whole offset, length)`, in local order.
void for_each_shard_run(const tensor::shape_t& whole, tensor_split split, tensor_parallel tp,
                        const std::function<void(int64_t, int64_t, int64_t)>& run);

/// One named parameter inside the flat parameter buffer.
struct parameter_slot {
  std::string name;             ///< GPT-2's Hugging Face name, e.g. "h.0.attn.c_attn.weight"
  tensor::shape_t shape;        ///< what this rank holds
  tensor::shape_t whole_shape;  ///< the whole model's tensor (shape, without tensor parallelism)
  tensor_split split;
  int64_t offset = 0;  ///< in floats from the buffer start
  int64_t numel = 0;
  bool decay = false;  ///< weight decay applies (matrices and embeddings, not biases or norms)
  /// Its place among the whole model's parameters (wte, wpe, each block's twelve, ln_f, the
  /// value head): what seeds its initialisation, so that a stage starts as the whole model.
  int64_t index = 0;
};

/// A range [begin, end) of the flat parameter buffer, in floats.
struct param_range {
  int64_t begin = 0;
  int64_t end = 0;
};

/// What the last stage ends in.
enum class decoder_head {
  lm,     ///< the tied output embedding: logits over the vocabulary (GPT2LMHeadModel)
  value,  ///< a scalar per position, "classifier" [1, dim] + bias (GPT2ForTokenClassification
          ///< with one label): the RL critic
};

/// Where every parameter of a stage lives in one flat f32 buffer, under Hugging Face's names
/// and shapes: GPT-2's linear weights [in, out] as its Conv1D, the Llama family's [out, in] as
/// nn.Linear, so that exported weights load in other tools unchanged.
///
/// With tensor parallelism (`tp`, size > 1) a rank holds its part of each block: its heads'
/// columns of QKV, its share of the MLP's hidden units, and the matching rows of the two output
/// projections (tensor_split_of), and its block of the token embedding's rows (the vocabulary);
/// norms, the output projections' biases and the position embedding are replicated.
class decoder_layout {
 public:
  decoder_layout(const decoder_config& config, layer_range range,
                 decoder_head head = decoder_head::lm, tensor_parallel tp = {});

  [[nodiscard]] const decoder_config& config() const { return config_; }
  [[nodiscard]] layer_range range() const { return range_; }
  [[nodiscard]] decoder_head head() const { return head_; }
  [[nodiscard]] tensor_parallel tp() const { return tp_; }
  /// This rank's attention width (its heads' dims) and heads: dim / tp and heads / tp.
  [[nodiscard]] int local_dim() const { return config_.dim / tp_.size; }
  [[nodiscard]] int local_heads() const { return config_.heads / tp_.size; }
  /// This rank's widths of a token's queries, keys (or values) and MLP hidden units, and its
  /// key/value heads (the Llama family's; GPT-2's are dim / tp, dim / tp and 4 dim / tp).
  [[nodiscard]] int local_q_width() const { return config_.q_width() / tp_.size; }
  [[nodiscard]] int local_kv_width() const { return config_.kv_width() / tp_.size; }
  [[nodiscard]] int local_ffn() const { return config_.ffn_width() / tp_.size; }
  [[nodiscard]] int local_kv_heads() const { return config_.kv_head_count() / tp_.size; }
  /// This rank's rows of the token embedding (the vocabulary's [vocab_first(), + local_vocab()),
  /// whose logits it computes): vocab / tp from vocab / tp * rank.
  [[nodiscard]] int local_vocab() const { return config_.vocab / tp_.size; }
  [[nodiscard]] int vocab_first() const { return local_vocab() * tp_.rank; }
  /// Whether this stage ends in the value head (the last stage of a critic).
  [[nodiscard]] bool has_value_head() const {
    return head_ == decoder_head::value && range_.has_head(config_);
  }
  [[nodiscard]] const std::vector<parameter_slot>& slots() const { return slots_; }
  [[nodiscard]] int64_t total() const { return total_; }
  /// The slot called `name`; NotFound names it and this stage's layer range.
  [[nodiscard]] absl::StatusOr<const parameter_slot*> find(const std::string& name) const;

  /// Offsets of the tensors the kernels address directly; -1 where a family has none. Both
  /// families have ln1_w and ln2_w (the Llama family's input_layernorm and
  /// post_attention_layernorm); the Llama family's weights are Hugging Face's [out, in], and
  /// q_w, k_w and v_w (q_b, k_b and v_b; gate_w and up_w) lie back to back, so that q_w (q_b,
  /// gate_w) starts the one matrix (vector) of all three (both).
  struct block_offsets {
    int64_t ln1_w = -1, ln1_b = -1, attn_w = -1, attn_b = -1, proj_w = -1, proj_b = -1, ln2_w = -1,
            ln2_b = -1, fc_w = -1, fc_b = -1, fc2_w = -1, fc2_b = -1;
    int64_t q_w = -1, q_b = -1, k_w = -1, k_b = -1, v_w = -1, v_b = -1, o_w = -1, o_b = -1,
            q_norm = -1, k_norm = -1, gate_w = -1, up_w = -1, down_w = -1;
  };
  [[nodiscard]] const block_offsets& block(int layer) const {
    return blocks_[layer - range_.first];
  }
  /// The ranges whose gradients a backward pass finishes, in the order it finishes them: the
  /// last block (with the final norm), each block down to the first, then the embeddings (the
  /// tied token embedding gets its last contribution there). Together they cover the buffer.
  [[nodiscard]] std::vector<param_range> backward_buckets() const;

  /// The token embedding (GPT-2's wte, the Llama family's model.embed_tokens).
  [[nodiscard]] int64_t wte() const { return wte_; }
  /// The output head's [vocab, dim] weight: the token embedding when tied, else lm_head.
  [[nodiscard]] int64_t head_weight() const { return lm_head_ >= 0 ? lm_head_ : wte_; }
  [[nodiscard]] int64_t wpe() const { return wpe_; }
  [[nodiscard]] int64_t lnf_w() const { return lnf_w_; }
  [[nodiscard]] int64_t lnf_b() const { return lnf_b_; }
  [[nodiscard]] int64_t value_w() const { return value_w_; }
  [[nodiscard]] int64_t value_b() const { return value_b_; }

  /// GPT-2 initialisation (normal 0.02; residual projections 0.02 / sqrt(2 layers); norms 1,
  /// biases 0), the same for a given seed wherever it runs, and for a stage the same as the
  /// whole model's parameters of the same names (the tied wte of a last stage included).
  void initialize(float* params, uint64_t seed) const;

  /// The parameters as named tensors (copies), for safetensors: with tensor parallelism this
  /// rank's parts, the metadata saying which ("tp_rank", "tp_size").
  [[nodiscard]] tensor::named_tensors to_named(const float* params) const;
  /// Loads every parameter of this stage (this rank's part of it) from the whole model's named
  /// tensors; a missing name or a shape that differs is an error naming it.
  [[nodiscard]] absl::Status from_named(const tensor::named_tensors& in, float* params) const;
  /// from_named() of a language model's tensors into a value-head layout: every parameter but
  /// the value head, which keeps what `params` holds (a critic starts from the policy's trunk).
  [[nodiscard]] absl::Status trunk_from_named(const tensor::named_tensors& in, float* params) const;

 private:
  int64_t add(const std::string& name, tensor::shape_t shape, bool decay, int64_t index,
              bool packed_with_next = false);
  [[nodiscard]] absl::Status load(const tensor::named_tensors& in, float* params,
                                  bool skip_value_head) const;

  decoder_config config_;
  layer_range range_;
  decoder_head head_;
  tensor_parallel tp_;
  std::vector<parameter_slot> slots_;
  std::vector<block_offsets> blocks_;
  int64_t total_ = 0;
  void add_gpt2_block(int layer);
  void add_llama_block(int layer);

  int64_t wte_ = -1, wpe_ = -1, lnf_w_ = -1, lnf_b_ = -1, value_w_ = -1, value_b_ = -1,
          lm_head_ = -1;
};

}  // namespace troupe::models
