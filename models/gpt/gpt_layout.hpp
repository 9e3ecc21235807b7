#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/gpt/gpt_config.hpp"
#include "runtime/tensor/safetensors.hpp"
#include "runtime/tensor/tensor.hpp"

namespace troupe::models {

/// One named parameter inside the flat parameter buffer.
struct parameter_slot {
  std::string name;  ///< GPT-2's Hugging Face name, e.g. "h.0.attn.c_attn.weight"
  tensor::shape_t shape;
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
enum class gpt_head {
  lm,     ///< the tied output embedding: logits over the vocabulary (GPT2LMHeadModel)
  value,  ///< a scalar per position, "classifier" [1, dim] + bias (GPT2ForTokenClassification
          ///< with one label): the RL critic
};

/// Where every parameter of a stage lives in one flat f32 buffer. Linear weights are stored
/// [in, out] as in GPT-2's Conv1D, so exported weights load in other tools unchanged.
class gpt_layout {
 public:
  gpt_layout(const gpt_config& config, layer_range range, gpt_head head = gpt_head::lm);

  [[nodiscard]] const gpt_config& config() const { return config_; }
  [[nodiscard]] layer_range range() const { return range_; }
  [[nodiscard]] gpt_head head() const { return head_; }
  /// Whether this stage ends in the value head (the last stage of a critic).
  [[nodiscard]] bool has_value_head() const {
    return head_ == gpt_head::value && range_.has_head(config_);
  }
  [[nodiscard]] const std::vector<parameter_slot>& slots() const { return slots_; }
  [[nodiscard]] int64_t total() const { return total_; }
  /// The slot called `name`; NotFound names it and this stage's layer range.
  [[nodiscard]] absl::StatusOr<const parameter_slot*> find(const std::string& name) const;

  /// Offsets of the tensors the kernels address directly.
  struct block_offsets {
    int64_t ln1_w, ln1_b, attn_w, attn_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fc2_w, fc2_b;
  };
  [[nodiscard]] const block_offsets& block(int layer) const {
    return blocks_[layer - range_.first];
  }
  /// The ranges whose gradients a backward pass finishes, in the order it finishes them: the
  /// last block (with the final norm), each block down to the first, then the embeddings (the
  /// tied token embedding gets its last contribution there). Together they cover the buffer.
  [[nodiscard]] std::vector<param_range> backward_buckets() const;

  [[nodiscard]] int64_t wte() const { return wte_; }
  [[nodiscard]] int64_t wpe() const { return wpe_; }
  [[nodiscard]] int64_t lnf_w() const { return lnf_w_; }
  [[nodiscard]] int64_t lnf_b() const { return lnf_b_; }
  [[nodiscard]] int64_t value_w() const { return value_w_; }
  [[nodiscard]] int64_t value_b() const { return value_b_; }

  /// GPT-2 initialisation (normal 0.02; residual projections 0.02 / sqrt(2 layers); norms 1,
  /// biases 0), the same for a given seed wherever it runs, and for a stage the same as the
  /// whole model's parameters of the same names (the tied wte of a last stage included).
  void initialize(float* params, uint64_t seed) const;

  /// The parameters as named tensors (copies), for safetensors.
  [[nodiscard]] tensor::named_tensors to_named(const float* params) const;
  /// Loads every parameter of this stage from named tensors; a missing name or a shape that
  /// differs is an error naming it.
  [[nodiscard]] absl::Status from_named(const tensor::named_tensors& in, float* params) const;
  /// from_named() of a language model's tensors into a value-head layout: every parameter but
  /// the value head, which keeps what `params` holds (a critic starts from the policy's trunk).
  [[nodiscard]] absl::Status trunk_from_named(const tensor::named_tensors& in, float* params) const;

 private:
  int64_t add(const std::string& name, tensor::shape_t shape, bool decay, int64_t index);
  [[nodiscard]] absl::Status load(const tensor::named_tensors& in, float* params,
                                  bool skip_value_head) const;

  gpt_config config_;
  layer_range range_;
  gpt_head head_;
  std::vector<parameter_slot> slots_;
  std::vector<block_offsets> blocks_;
  int64_t total_ = 0;
  int64_t wte_ = -1, wpe_ = -1, lnf_w_ = -1, lnf_b_ = -1, value_w_ = -1, value_b_ = -1;
};

}  // namespace troupe::models
