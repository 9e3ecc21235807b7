#pragma once

#include <string>

#include "absl/status/status.h"

namespace troupe::models {

/// The block a decoder is built of.
enum class decoder_family {
  gpt2,   ///< learned positions, LayerNorm with biases, GELU (tanh) MLP, fused biased QKV
  llama,  ///< RoPE, RMSNorm, SwiGLU MLP, grouped-query attention (Llama, Mistral, Qwen 2/3)
};

/// RoPE's frequency scaling (Hugging Face's rope_scaling).
struct rope_scaling {
  enum class kind { none, linear, llama3 } type = kind::none;
  double factor = 1.0;
  double low_freq_factor = 1.0;                 ///< llama3
  double high_freq_factor = 4.0;                ///< llama3
  int original_max_position_embeddings = 8192;  ///< llama3
};

/// A decoder of the family troupe runs, named after its first member: by default GPT-2
/// (learned positions, pre-norm blocks, tanh GELU, tied embeddings), and with `family = llama`
/// the Llama family (Llama, Mistral, Qwen 2, Qwen 3: RoPE, RMSNorm, SwiGLU, grouped-query
/// attention, optional q/k/v biases and per-head q/k norms). The fields after `heads` default
/// to GPT-2's values.
struct decoder_config {
  int vocab = 256;
  int ctx = 128;
  int layers = 4;
  int dim = 128;
  int heads = 4;

  decoder_family family = decoder_family::gpt2;
  int kv_heads = 0;  ///< key/value heads (grouped-query attention); 0: as many as heads
  int head_dim = 0;  ///< 0: dim / heads (Qwen 3 gives its own)
  int ffn = 0;       ///< the MLP's hidden width; 0: 4 dim
  float norm_eps = 1e-5f;
  double rope_theta = 10000.0;
  rope_scaling rope;
  bool qkv_bias = false;        ///< llama: the q, k and v projections have biases (Qwen 2)
  bool o_bias = false;          ///< llama: the output projection has one
  bool qk_norm = false;         ///< llama: per-head RMSNorm of queries and keys (Qwen 3)
  bool tied_embeddings = true;  ///< the output head is the token embedding

  [[nodiscard]] int kv_head_count() const { return kv_heads > 0 ? kv_heads : heads; }
  [[nodiscard]] int head_size() const { return head_dim > 0 ? head_dim : dim / heads; }
  [[nodiscard]] int ffn_width() const { return ffn > 0 ? ffn : 4 * dim; }
  /// The widths of a token's queries, and of its keys (or values).
  [[nodiscard]] int q_width() const { return heads * head_size(); }
  [[nodiscard]] int kv_width() const { return kv_head_count() * head_size(); }

  /// Sizes must be positive and heads must divide dim (or head_dim be given), kv heads divide
  /// heads, and a Llama head have an even size (RoPE rotates pairs).
  [[nodiscard]] absl::Status validate() const;
};

/// The blocks [first, last) a pipeline stage holds. The first stage also holds the embeddings,
/// the last one the final layer norm and the (tied) output head.
struct layer_range {
  int first = 0;
  int last = 0;

  [[nodiscard]] static layer_range all(const decoder_config& c) { return {0, c.layers}; }
  [[nodiscard]] bool has_embedding() const { return first == 0; }
  [[nodiscard]] bool has_head(const decoder_config& c) const { return last == c.layers; }
};

}  // namespace troupe::models
