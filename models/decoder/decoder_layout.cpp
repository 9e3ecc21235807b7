#include "models/decoder/decoder_layout.hpp"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/sampling.hpp"
#include "runtime/base/status.hpp"

namespace troupe::models {

namespace {

// A block's tensors in the whole model's order (what seeds each one's initialisation): GPT-2's
// twelve; the Llama family's fifteen, counting its optional biases and q/k norms whether the
// config has them or not.
constexpr int64_t gpt2_tensors_per_block = 12;
constexpr int64_t llama_tensors_per_block = 15;

}  // namespace

tensor_split tensor_split_of(const std::string& name) {
  // GPT-2 (Conv1D weights [in, out]).
  if (name.ends_with("attn.c_attn.weight") || name.ends_with("attn.c_attn.bias")) return {1, 3};
  if (name.ends_with("mlp.c_fc.weight") || name.ends_with("mlp.c_fc.bias")) return {1, 1};
  if (name.ends_with("attn.c_proj.weight") || name.ends_with("mlp.c_proj.weight")) return {0, 1};
  if (name == "wte.weight") return {0, 1};  // vocab-parallel: a block of the vocabulary's rows
  // The Llama family (nn.Linear weights [out, in]): a rank's heads' rows of q, k and v, its
  // share of the MLP's hidden units, the matching columns of the output projections.
  for (const char* rows :
       {"q_proj.weight", "k_proj.weight", "v_proj.weight", "gate_proj.weight", "up_proj.weight"}) {
    if (name.ends_with(rows)) return {0, 1};
  }
  for (const char* bias : {"q_proj.bias", "k_proj.bias", "v_proj.bias"}) {
    if (name.ends_with(bias)) return {1, 1};  // a 1-D tensor: a block of its elements
  }
  if (name.ends_with("o_proj.weight") || name.ends_with("down_proj.weight")) return {1, 1};
  if (name == "model.embed_tokens.weight" || name == "lm_head.weight") return {0, 1};
  return {};
}

void for_each_shard_run(const tensor::shape_t& whole, tensor_split split, tensor_parallel tp,
                        const std::function<void(int64_t, int64_t, int64_t)>& run) {
  const int64_t numel = tensor::shape_numel(whole);
  if (split.dim < 0 || tp.size == 1) return run(0, 0, numel);
  const int64_t width = whole.back(), rows = numel / width;
  if (split.dim == 0) {  // a block of rows
    const int64_t mine = rows / tp.size * width;
    return run(0, tp.rank * mine, mine);
  }
  // Each row's `groups` groups of columns, a rank's share of each.
  const int64_t part = width / (split.groups * tp.size), local_width = width / tp.size;
  for (int64_t r = 0; r < rows; ++r) {
    for (int g = 0; g < split.groups; ++g) {
      run(r * local_width + g * part, r * width + (g * tp.size + tp.rank) * part, part);
    }
  }
}

decoder_layout::decoder_layout(const decoder_config& config, layer_range range, decoder_head head,
                               tensor_parallel tp)
    : config_(config), range_(range), head_(head), tp_(tp) {
  TROUPE_CHECK(tp.size >= 1 && tp.rank >= 0 && tp.rank < tp.size && config.heads % tp.size == 0 &&
               config.kv_head_count() % tp.size == 0 && config.vocab % tp.size == 0 &&
               config.ffn_width() % tp.size == 0);
  const int64_t C = config.dim;
  const bool lm_head = range.has_head(config) && head == decoder_head::lm;
  const bool gpt2 = config.family == decoder_family::gpt2;
  // The whole model's order: the embeddings, each block's tensors, the final norm, the head.
  const int64_t per_block = gpt2 ? gpt2_tensors_per_block : llama_tensors_per_block;
  const int64_t head_index = 2 + per_block * int64_t{config.layers};
  const bool embedding_here = range.has_embedding() || (lm_head && config.tied_embeddings);
  if (embedding_here) {
    wte_ = add(gpt2 ? "wte.weight" : "model.embed_tokens.weight", {config.vocab, C}, true, 0);
  }
  if (gpt2 && range.has_embedding()) wpe_ = add("wpe.weight", {config.ctx, C}, true, 1);
  for (int l = range.first; l < range.last; ++l) {
    if (gpt2) {
      add_gpt2_block(l);
    } else {
      add_llama_block(l);
    }
  }
  if (range.has_head(config)) {
    lnf_w_ = add(gpt2 ? "ln_f.weight" : "model.norm.weight", {C}, false, head_index);
    if (gpt2) lnf_b_ = add("ln_f.bias", {C}, false, head_index + 1);
    if (lm_head && !config.tied_embeddings) {
      lm_head_ = add("lm_head.weight", {config.vocab, C}, true, head_index + 1);
    }
    if (head == decoder_head::value) {
      value_w_ = add("classifier.weight", {1, C}, true, head_index + 2);
      value_b_ = add("classifier.bias", {1}, false, head_index + 3);
    }
  }
}

void decoder_layout::add_gpt2_block(int l) {
  const int64_t C = config_.dim;
  const std::string p = absl::StrCat("h.", l, ".");
  int64_t index = 2 + gpt2_tensors_per_block * int64_t{l};
  block_offsets b;
  b.ln1_w = add(p + "ln_1.weight", {C}, false, index++);
  b.ln1_b = add(p + "ln_1.bias", {C}, false, index++);
  b.attn_w = add(p + "attn.c_attn.weight", {C, 3 * C}, true, index++);
  b.attn_b = add(p + "attn.c_attn.bias", {3 * C}, false, index++);
  b.proj_w = add(p + "attn.c_proj.weight", {C, C}, true, index++);
  b.proj_b = add(p + "attn.c_proj.bias", {C}, false, index++);
  b.ln2_w = add(p + "ln_2.weight", {C}, false, index++);
  b.ln2_b = add(p + "ln_2.bias", {C}, false, index++);
  b.fc_w = add(p + "mlp.c_fc.weight", {C, 4 * C}, true, index++);
  b.fc_b = add(p + "mlp.c_fc.bias", {4 * C}, false, index++);
  b.fc2_w = add(p + "mlp.c_proj.weight", {4 * C, C}, true, index++);
  b.fc2_b = add(p + "mlp.c_proj.bias", {C}, false, index++);
  blocks_.push_back(b);
}

void decoder_layout::add_llama_block(int l) {
  const decoder_config& c = config_;
  const int64_t C = c.dim, Q = c.q_width(), KV = c.kv_width(), F = c.ffn_width();
  const std::string p = absl::StrCat("model.layers.", l, ".");
  // Hugging Face's tensors, input_layernorm first (where backward_buckets starts a block). The
  // q, k and v weights lie back to back, one [q + 2 kv, dim] matrix (one GEMM), as do their
  // biases, and the gate and up weights, one [2 ffn, dim]: a rank's parts alike.
  int64_t index = 2 + llama_tensors_per_block * int64_t{l};
  block_offsets b;
  b.ln1_w = add(p + "input_layernorm.weight", {C}, false, index++);
  b.q_w = add(p + "self_attn.q_proj.weight", {Q, C}, true, index, true);
  b.k_w = add(p + "self_attn.k_proj.weight", {KV, C}, true, index + 2, true);
  b.v_w = add(p + "self_attn.v_proj.weight", {KV, C}, true, index + 4);
  if (c.qkv_bias) {
    b.q_b = add(p + "self_attn.q_proj.bias", {Q}, false, index + 1, true);
    b.k_b = add(p + "self_attn.k_proj.bias", {KV}, false, index + 3, true);
    b.v_b = add(p + "self_attn.v_proj.bias", {KV}, false, index + 5);
  }
  index += 6;
  b.o_w = add(p + "self_attn.o_proj.weight", {C, Q}, true, index++);
  if (c.o_bias) b.o_b = add(p + "self_attn.o_proj.bias", {C}, false, index);
  ++index;
  if (c.qk_norm) {
    b.q_norm = add(p + "self_attn.q_norm.weight", {c.head_size()}, false, index);
    b.k_norm = add(p + "self_attn.k_norm.weight", {c.head_size()}, false, index + 1);
  }
  index += 2;
  b.ln2_w = add(p + "post_attention_layernorm.weight", {C}, false, index++);
  b.gate_w = add(p + "mlp.gate_proj.weight", {F, C}, true, index++, true);
  b.up_w = add(p + "mlp.up_proj.weight", {F, C}, true, index++);
  b.down_w = add(p + "mlp.down_proj.weight", {C, F}, true, index++);
  blocks_.push_back(b);
}

int64_t decoder_layout::add(const std::string& name, tensor::shape_t whole, bool decay,
                            int64_t index, bool packed_with_next) {
  const tensor_split split = tp_.size > 1 ? tensor_split_of(name) : tensor_split{};
  tensor::shape_t shape = whole;
  if (split.dim == 0) shape.front() /= tp_.size;
  if (split.dim == 1) shape.back() /= tp_.size;
  parameter_slot s{name, shape, whole, split, total_, tensor::shape_numel(shape), decay, index};
  // 64-byte aligned starts for vector loads, unless the next tensor continues this one.
  total_ += packed_with_next ? s.numel : (s.numel + 15) / 16 * 16;
  slots_.push_back(std::move(s));
  return slots_.back().offset;
}

std::vector<param_range> decoder_layout::backward_buckets() const {
  if (blocks_.empty()) return {{0, total_}};
  std::vector<param_range> out;
  int64_t end = total_;
  for (auto b = blocks_.rbegin(); b != blocks_.rend(); ++b) {
    out.push_back({b->ln1_w, end});
    end = b->ln1_w;
  }
  if (end > 0) out.push_back({0, end});
  return out;
}

absl::StatusOr<const parameter_slot*> decoder_layout::find(const std::string& name) const {
  for (const auto& s : slots_) {
    if (s.name == name) return &s;
  }
  return absl::NotFoundError(absl::StrCat("parameter '", name, "' is not in layers [", range_.first,
                                          ", ", range_.last, ")"));
}

void decoder_layout::initialize(float* params, uint64_t seed) const {
  std::memset(params, 0, total_ * sizeof(float));
  const float residual_std = 0.02f / std::sqrt(2.0f * config_.layers);
  for (const auto& s : slots_) {
    float* p = params + s.offset;
    const uint64_t stream = static_cast<uint64_t>(s.index) + 1;
    if (s.shape.size() == 1) {  // norms start at 1, biases at 0
      if (s.name.ends_with("ln_1.weight") || s.name.ends_with("ln_2.weight") ||
          s.name == "ln_f.weight" || s.name.ends_with("norm.weight")) {
        for (int64_t i = 0; i < s.numel; ++i)
          p[i] = 1.0f;
      }
      continue;
    }
    // GPT-2 scales its residual projections down; HF's Llama initializes every matrix alike.
    const float std = s.name.ends_with("c_proj.weight") ? residual_std : 0.02f;
    const uint64_t tensor_seed = seed * 0x100000001b3ull + stream;
    // Box-Muller on counter-based uniforms of the whole tensor's element index: a tensor-
    // parallel rank's part is the whole tensor's.
    for_each_shard_run(s.whole_shape, s.split, tp_, [&](int64_t local, int64_t whole, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const float u1 = 1.0f - kernels::seeded_uniform(tensor_seed, 2 * (whole + i));
        const float u2 = kernels::seeded_uniform(tensor_seed, 2 * (whole + i) + 1);
        p[local + i] = std * std::sqrt(-2.0f * std::log(u1)) * std::cos(6.28318530718f * u2);
      }
    });
  }
}

tensor::named_tensors decoder_layout::to_named(const float* params) const {
  tensor::named_tensors out;
  for (const auto& s : slots_) {
    tensor::tensor t = tensor::tensor::host(s.shape);
    std::memcpy(t.data<float>(), params + s.offset, s.numel * sizeof(float));
    out.tensors.emplace_back(s.name, std::move(t));
  }
  if (tp_.size > 1) {
    out.metadata = {{"tp_rank", std::to_string(tp_.rank)}, {"tp_size", std::to_string(tp_.size)}};
  }
  return out;
}

absl::Status decoder_layout::from_named(const tensor::named_tensors& in, float* params) const {
  return load(in, params, false);
}

absl::Status decoder_layout::trunk_from_named(const tensor::named_tensors& in,
                                              float* params) const {
  return load(in, params, true);
}

absl::Status decoder_layout::load(const tensor::named_tensors& in, float* params,
                                  bool skip_value_head) const {
  for (const auto& s : slots_) {
    if (skip_value_head && (s.offset == value_w_ || s.offset == value_b_)) continue;
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor t, in.get(s.name));
    if (t.shape() != s.whole_shape || t.type() != tensor::dtype::f32) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", s.name, "' is ",
                                                     t.description(), " but the model needs f32",
                                                     tensor::shape_string(s.whole_shape)));
    }
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor host, t.to(tensor::device::cpu()));
    const float* whole = host.data<float>();
    for_each_shard_run(s.whole_shape, s.split, tp_, [&](int64_t local, int64_t at, int64_t n) {
      std::memcpy(params + s.offset + local, whole + at, n * sizeof(float));
    });
  }
  return absl::OkStatus();
}

}  // namespace troupe::models
