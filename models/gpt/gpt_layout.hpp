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
};

/// A range [begin, end) of the flat parameter buffer, in floats.
struct param_range {
  int64_t begin = 0;
  int64_t end = 0;
};

/// Where every parameter of a stage lives in one flat f32 buffer. Linear weights are stored
/// [in, out] as in GPT-2's Conv1D, so exported weights load in other tools unchanged.
class gpt_layout {
 public:
  gpt_layout(const gpt_config& config, layer_range range);

  [[nodiscard]] const gpt_config& config() const { return config_; }
  [[nodiscard]] layer_range range() const { return range_; }
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

  /// GPT-2 initialisation (normal 0.02; residual projections 0.02 / sqrt(2 layers); norms 1,
  /// biases 0), the same for a given seed wherever it runs.
  void initialize(float* params, uint64_t seed) const;

  /// The parameters as named tensors (copies), for safetensors.
  [[nodiscard]] tensor::named_tensors to_named(const float* params) const;
  /// Loads every parameter of this stage from named tensors; a missing name or a shape that
  /// differs is an error naming it.
  [[nodiscard]] absl::Status from_named(const tensor::named_tensors& in, float* params) const;

 private:
  int64_t add(const std::string& name, tensor::shape_t shape, bool decay);

  gpt_config config_;
  layer_range range_;
  std::vector<parameter_slot> slots_;
  std::vector<block_offsets> blocks_;
  int64_t total_ = 0;
  int64_t wte_ = -1, wpe_ = -1, lnf_w_ = -1, lnf_b_ = -1;
};

}  // namespace troupe::models
