#pragma once

#include <string>

#include "absl/status/status.h"

namespace troupe::models {

/// A GPT-2-style decoder: learned positions, pre-norm blocks, tanh GELU, tied embeddings.
struct gpt_config {
  int vocab = 256;
  int ctx = 128;
  int layers = 4;
  int dim = 128;
  int heads = 4;

  /// Sizes must be positive and heads must divide dim.
  [[nodiscard]] absl::Status validate() const;
};

/// The blocks [first, last) a pipeline stage holds. The first stage also holds the embeddings,
/// the last one the final layer norm and the (tied) output head.
struct layer_range {
  int first = 0;
  int last = 0;

  [[nodiscard]] static layer_range all(const gpt_config& c) { return {0, c.layers}; }
  [[nodiscard]] bool has_embedding() const { return first == 0; }
  [[nodiscard]] bool has_head(const gpt_config& c) const { return last == c.layers; }
};

}  // namespace troupe::models
