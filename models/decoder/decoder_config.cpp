#include "models/decoder/decoder_config.hpp"

#include "absl/strings/str_cat.h"

namespace troupe::models {

absl::Status decoder_config::validate() const {
  if (vocab < 2 || ctx < 1 || layers < 1 || dim < 1 || heads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: vocab (", vocab, "), ctx (", ctx, "), layers (", layers, "), dim (",
                     dim, ") and heads (", heads, ") must be positive and vocab at least 2"));
  }
  if (head_dim <= 0 && dim % heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: heads (", heads, ") must divide dim (", dim, ")"));
  }
  if (kv_heads < 0 || head_dim < 0 || ffn < 0 || heads % kv_head_count() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: kv_heads (", kv_heads, ") must divide heads (", heads,
                     "), and kv_heads, head_dim and ffn be positive (or 0 for the default)"));
  }
  if (family == decoder_family::gpt2 &&
      (kv_head_count() != heads || head_size() * heads != dim || ffn_width() != 4 * dim ||
       !tied_embeddings || qkv_bias || o_bias || qk_norm)) {
    return absl::InvalidArgumentError(
        "model: a GPT-2 has as many key/value heads as heads, heads of dim / heads, an MLP of "
        "4 dim, a tied output head and none of the Llama family's options");
  }
  if (family == decoder_family::llama && head_size() % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: head size ", head_size(), " is odd; RoPE rotates pairs"));
  }
  return absl::OkStatus();
}

}  // namespace troupe::models
