#include "models/gguf/gguf_export.hpp"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "models/decoder/rope_frequencies.hpp"
#include "runtime/base/status.hpp"

namespace troupe::models::gguf {
namespace {

// llama.cpp's name for a tensor of Hugging Face's naming (`layer` its block, or -1), and whether
// its [in, out] Conv1D weight must be transposed (GPT-2). Empty for a name with no counterpart.
struct gguf_name {
  std::string name;
  bool transpose = false;
};

gguf_name gguf_name_of(const std::string& hf) {
  static const std::pair<const char*, const char*> whole[] = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"},
      {"wte.weight", "token_embd.weight"},
      {"wpe.weight", "position_embd.weight"},
      {"ln_f.weight", "output_norm.weight"},
      {"ln_f.bias", "output_norm.bias"},
  };
  for (const auto& [from, to] : whole) {
    if (hf == from) return {to};
  }
  static const std::pair<const char*, const char*> block[] = {
      {"input_layernorm", "attn_norm"},
      {"self_attn.q_proj", "attn_q"},
      {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"},
      {"self_attn.o_proj", "attn_output"},
      {"self_attn.q_norm", "attn_q_norm"},
      {"self_attn.k_norm", "attn_k_norm"},
      {"post_attention_layernorm", "ffn_norm"},
      {"mlp.gate_proj", "ffn_gate"},
      {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"},
      {"ln_1", "attn_norm"},
      {"attn.c_attn", "attn_qkv"},
      {"attn.c_proj", "attn_output"},
      {"ln_2", "ffn_norm"},
      {"mlp.c_fc", "ffn_up"},
      {"mlp.c_proj", "ffn_down"},
  };
  // model.layers.N.<part>.<weight|bias> or h.N.<part>.<weight|bias>
  absl::string_view rest = hf;
  if (absl::ConsumePrefix(&rest, "model.layers.") || absl::ConsumePrefix(&rest, "h.")) {
    const size_t dot = rest.find('.');
    int layer = 0;
    if (dot == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, dot), &layer)) return {};
    rest.remove_prefix(dot + 1);
    const size_t last = rest.rfind('.');
    if (last == absl::string_view::npos) return {};
    const absl::string_view part = rest.substr(0, last), kind = rest.substr(last + 1);
    for (const auto& [from, to] : block) {
      if (part == from) {
        const bool conv1d =
            absl::StartsWith(hf, "h.") && kind == "weight" && !absl::StartsWith(part, "ln_");
        return {absl::StrCat("blk.", layer, ".", to, ".", kind), conv1d};
      }
    }
  }
  return {};
}

// HF's rotate-half RoPE pairs dimension i of a head with i + d/2; llama.cpp's llama pairs 2i
// with 2i + 1. Row (h, half * d/2 + i) of a q or k projection (or bias) becomes row
// (h, 2i + half), as convert_hf_to_gguf.py's permute does.
std::vector<float> interleave_rope_rows(const float* w, int64_t heads, int64_t head_size,
                                        int64_t row_width) {
  std::vector<float> out(static_cast<size_t>(heads * head_size * row_width));
  const int64_t half = head_size / 2;
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < half; ++i) {
      for (int64_t s = 0; s < 2; ++s) {
        const float* from = w + (h * head_size + s * half + i) * row_width;
        std::copy(from, from + row_width, out.data() + (h * head_size + 2 * i + s) * row_width);
      }
    }
  }
  return out;
}

std::vector<float> transposed(const float* w, int64_t rows, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c)
      out[c * rows + r] = w[r * cols + c];
  }
  return out;
}

uint32_t file_type_of(outtype type) {
  switch (type) {  // llama.h's llama_ftype
    case outtype::f32:
      return 0;
    case outtype::f16:
      return 1;
    case outtype::q8_0:
      return 7;
    case outtype::bf16:
      return 32;
  }
  return 0;
}

tensor_type matrix_type(outtype type, int64_t row) {
  switch (type) {
    case outtype::f32:
      return tensor_type::f32;
    case outtype::f16:
      return tensor_type::f16;
    case outtype::bf16:
      return tensor_type::bf16;
    case outtype::q8_0:
      return row % q8_0_block == 0 ? tensor_type::q8_0 : tensor_type::f16;
  }
  return tensor_type::f32;
}

// The hyperparameters under the architecture's name, and Llama 3.1's rope_freqs.
absl::Status set_hyperparameters(gguf_writer& w, const std::string& arch,
                                 const hf_model_config& hf) {
  const decoder_config& c = hf.model;
  const std::string p = arch + ".";
  w.set_u32(p + "vocab_size", c.vocab);
  w.set_u32(p + "context_length", c.ctx);
  w.set_u32(p + "embedding_length", c.dim);
  w.set_u32(p + "block_count", c.layers);
  w.set_u32(p + "feed_forward_length", c.ffn_width());
  w.set_u32(p + "attention.head_count", c.heads);
  if (c.family == decoder_family::gpt2) {
    w.set_f32(p + "attention.layer_norm_epsilon", c.norm_eps);
    return absl::OkStatus();
  }
  w.set_u32(p + "attention.head_count_kv", c.kv_head_count());
  w.set_u32(p + "attention.key_length", c.head_size());
  w.set_u32(p + "attention.value_length", c.head_size());
  w.set_u32(p + "rope.dimension_count", c.head_size());
  w.set_f32(p + "rope.freq_base", static_cast<float>(c.rope_theta));
  w.set_f32(p + "attention.layer_norm_rms_epsilon", c.norm_eps);
  if (c.rope.type == rope_scaling::kind::linear) {
    w.set_string(p + "rope.scaling.type", "linear");
    w.set_f32(p + "rope.scaling.factor", static_cast<float>(c.rope.factor));
  } else if (c.rope.type == rope_scaling::kind::llama3) {
    if (arch != "llama") {
      return absl::InvalidArgumentError(
          absl::StrCat("rope_scaling 'llama3' on a ", hf.architecture,
                       " has no GGUF form: llama.cpp applies it through rope_freqs on its llama "
                       "architecture only"));
    }
    decoder_config unscaled = c;
    unscaled.rope = {};
    const std::vector<float> base = rope_inverse_frequencies(unscaled),
                             scaled = rope_inverse_frequencies(c);
    std::vector<float> factors(base.size());
    for (size_t i = 0; i < base.size(); ++i)
      factors[i] = base[i] / scaled[i];  // llama.cpp divides each frequency by its factor
    const auto n = static_cast<int64_t>(factors.size());
    TROUPE_RETURN_IF_ERROR(
        w.add_tensor("rope_freqs.weight", {n}, tensor_type::f32, std::move(factors)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<outtype> parse_outtype(const std::string& name) {
  if (name == "f32") return outtype::f32;
  if (name == "f16") return outtype::f16;
  if (name == "bf16") return outtype::bf16;
  if (name == "q8_0") return outtype::q8_0;
  return absl::InvalidArgumentError(
      absl::StrCat("'", name, "' is not a GGUF output type; use f32, f16, bf16 or q8_0"));
}

std::string gguf_architecture(const decoder_config& c) {
  if (c.family == decoder_family::gpt2) return "gpt2";
  if (c.qk_norm) return "qwen3";
  if (c.qkv_bias && !c.o_bias) return "qwen2";
  return "llama";
}

absl::Status write_gguf_model(const std::string& path, const hf_model_config& hf,
                              const tensor::named_tensors& weights, const gguf_vocab& vocab,
                              outtype type, const std::string& name) {
  const decoder_config& c = hf.model;
  const std::string arch = gguf_architecture(c);
  if (c.qk_norm && c.o_bias) {
    return absl::InvalidArgumentError(
        "a model with per-head q/k norms and an output-projection bias has no llama.cpp "
        "architecture (qwen3 has no o_proj bias)");
  }
  if (static_cast<int>(vocab.tokens.size()) != c.vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("the vocabulary has ", vocab.tokens.size(), " tokens, the model ", c.vocab));
  }
  gguf_writer w;
  w.set_string("general.architecture", arch);
  w.set_string("general.name", name);
  w.set_u32("general.file_type", file_type_of(type));
  w.set_u32("general.quantization_version", 2);
  TROUPE_RETURN_IF_ERROR(set_hyperparameters(w, arch, hf));
  set_vocab(w, vocab);

  for (const auto& [hf_name, t] : weights.tensors) {
    const gguf_name target = gguf_name_of(hf_name);
    if (target.name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", hf_name, "' has no GGUF name in the ", arch, " architecture"));
    }
    const tensor::shape_t& shape = t.shape();
    const float* data = t.data<float>();
    const int64_t numel = tensor::shape_numel(shape);
    if (shape.size() == 1) {
      std::vector<float> values(data, data + numel);
      if (arch == "llama" &&
          (absl::EndsWith(hf_name, "q_proj.bias") || absl::EndsWith(hf_name, "k_proj.bias"))) {
        const int64_t heads = absl::EndsWith(hf_name, "q_proj.bias") ? c.heads : c.kv_head_count();
        values = interleave_rope_rows(data, heads, c.head_size(), 1);
      }
      TROUPE_RETURN_IF_ERROR(
          w.add_tensor(target.name, {shape[0]}, tensor_type::f32, std::move(values)));
      continue;
    }
    // [out, in] as HF writes nn.Linear (GPT-2's Conv1D [in, out], transposed here) is ggml's
    // ne = {in, out}.
    int64_t out = shape[0], in = shape[1];
    if (target.transpose) {
      std::swap(out, in);
      TROUPE_RETURN_IF_ERROR(w.add_tensor(target.name, {in, out}, matrix_type(type, in),
                                          transposed(data, shape[0], shape[1])));
    } else if (arch == "llama" && (absl::EndsWith(hf_name, "q_proj.weight") ||
                                   absl::EndsWith(hf_name, "k_proj.weight"))) {
      const int64_t heads = absl::EndsWith(hf_name, "q_proj.weight") ? c.heads : c.kv_head_count();
      TROUPE_RETURN_IF_ERROR(w.add_tensor(target.name, {in, out}, matrix_type(type, in),
                                          interleave_rope_rows(data, heads, c.head_size(), in)));
    } else {
      TROUPE_RETURN_IF_ERROR(w.add_tensor(target.name, {in, out}, matrix_type(type, in),
                                          std::span<const float>(data, numel)));
    }
  }
  return w.write(path);
}

}  // namespace troupe::models::gguf
