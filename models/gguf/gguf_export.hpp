#pragma once

// A model of troupe's decoder family as llama.cpp reads it from GGUF: the architecture it names
// (llama for Llama and Mistral, qwen2, qwen3, gpt2), its hyperparameters under that name, its
// tensors under llama.cpp's names (blk.N.attn_q.weight, ...) in the precision asked for, and its
// vocabulary. What convert_hf_to_gguf.py does for the same checkpoint, so that llama.cpp's
// forward equals the Hugging Face one: the llama architecture's query and key rows are
// reordered from HF's rotate-half RoPE pairs (i, i + d/2) to llama.cpp's adjacent pairs
// (2i, 2i + 1); Llama 3.1's RoPE scaling becomes a rope_freqs tensor; GPT-2's Conv1D weights
// are transposed.

#include <string>

#include "absl/status/statusor.h"
#include "models/gguf/gguf_vocab.hpp"
#include "models/hf/hf_config.hpp"
#include "runtime/tensor/safetensors.hpp"

namespace troupe::models::gguf {

/// The precision of the weight matrices (norms, biases and vectors stay F32, as in llama.cpp's
/// converter): convert_hf_to_gguf.py's --outtype values.
enum class outtype { f32, f16, bf16, q8_0 };

/// "f32", "f16", "bf16" or "q8_0"; INVALID_ARGUMENT naming the accepted ones.
[[nodiscard]] absl::StatusOr<outtype> parse_outtype(const std::string& name);

/// llama.cpp's architecture for a model: llama, qwen2, qwen3 or gpt2.
[[nodiscard]] std::string gguf_architecture(const decoder_config& config);

/// Writes `weights` (f32, under Hugging Face's names and shapes: hf_tensor_specs of
/// `hf.model`) with `vocab` to the GGUF file `path`, named `name` (general.name). A matrix
/// whose rows do not fill Q8_0 blocks stays F16 under q8_0, as llama.cpp's converter keeps it.
/// Errors name what llama.cpp could not run (a RoPE scaling its architecture lacks) or the file.
[[nodiscard]] absl::Status write_gguf_model(const std::string& path, const hf_model_config& hf,
                                            const tensor::named_tensors& weights,
                                            const gguf_vocab& vocab, outtype type,
                                            const std::string& name);

}  // namespace troupe::models::gguf
