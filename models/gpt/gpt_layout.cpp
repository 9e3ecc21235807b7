#include "models/gpt/gpt_layout.hpp"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/sampling.hpp"

namespace troupe::models {

gpt_layout::gpt_layout(const gpt_config& config, layer_range range, gpt_head head)
    : config_(config), range_(range), head_(head) {
  const int64_t C = config.dim;
  const bool lm_head = range.has_head(config) && head == gpt_head::lm;
  // The whole model's order: wte, wpe, twelve per block, ln_f, the value head.
  const int64_t head_index = 2 + 12 * int64_t{config.layers};
  if (range.has_embedding() || lm_head) wte_ = add("wte.weight", {config.vocab, C}, true, 0);
  if (range.has_embedding()) wpe_ = add("wpe.weight", {config.ctx, C}, true, 1);
  for (int l = range.first; l < range.last; ++l) {
    const std::string p = absl::StrCat("h.", l, ".");
    int64_t index = 2 + 12 * int64_t{l};
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
  if (range.has_head(config)) {
    lnf_w_ = add("ln_f.weight", {C}, false, head_index);
    lnf_b_ = add("ln_f.bias", {C}, false, head_index + 1);
    if (head == gpt_head::value) {
      value_w_ = add("classifier.weight", {1, C}, true, head_index + 2);
      value_b_ = add("classifier.bias", {1}, false, head_index + 3);
    }
  }
}

int64_t gpt_layout::add(const std::string& name, tensor::shape_t shape, bool decay, int64_t index) {
  parameter_slot s{name, shape, total_, tensor::shape_numel(shape), decay, index};
  total_ += (s.numel + 15) / 16 * 16;  // 64-byte aligned starts for vector loads
  slots_.push_back(std::move(s));
  return slots_.back().offset;
}

std::vector<param_range> gpt_layout::backward_buckets() const {
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

absl::StatusOr<const parameter_slot*> gpt_layout::find(const std::string& name) const {
  for (const auto& s : slots_) {
    if (s.name == name) return &s;
  }
  return absl::NotFoundError(absl::StrCat("parameter '", name, "' is not in layers [", range_.first,
                                          ", ", range_.last, ")"));
}

void gpt_layout::initialize(float* params, uint64_t seed) const {
  std::memset(params, 0, total_ * sizeof(float));
  const float residual_std = 0.02f / std::sqrt(2.0f * config_.layers);
  for (const auto& s : slots_) {
    float* p = params + s.offset;
    const uint64_t stream = static_cast<uint64_t>(s.index) + 1;
    if (s.shape.size() == 1) {  // norms start at 1, biases at 0
      if (s.name.ends_with("ln_1.weight") || s.name.ends_with("ln_2.weight") ||
          s.name == "ln_f.weight") {
        for (int64_t i = 0; i < s.numel; ++i)
          p[i] = 1.0f;
      }
      continue;
    }
    const float std = s.name.ends_with("c_proj.weight") ? residual_std : 0.02f;
    const uint64_t tensor_seed = seed * 0x100000001b3ull + stream;
    for (int64_t i = 0; i < s.numel; ++i) {  // Box-Muller on counter-based uniforms
      const float u1 = 1.0f - kernels::seeded_uniform(tensor_seed, 2 * i);
      const float u2 = kernels::seeded_uniform(tensor_seed, 2 * i + 1);
      p[i] = std * std::sqrt(-2.0f * std::log(u1)) * std::cos(6.28318530718f * u2);
    }
  }
}

tensor::named_tensors gpt_layout::to_named(const float* params) const {
  tensor::named_tensors out;
  for (const auto& s : slots_) {
    tensor::tensor t = tensor::tensor::host(s.shape);
    std::memcpy(t.data<float>(), params + s.offset, s.numel * sizeof(float));
    out.tensors.emplace_back(s.name, std::move(t));
  }
  return out;
}

absl::Status gpt_layout::from_named(const tensor::named_tensors& in, float* params) const {
  return load(in, params, false);
}

absl::Status gpt_layout::trunk_from_named(const tensor::named_tensors& in, float* params) const {
  return load(in, params, true);
}

absl::Status gpt_layout::load(const tensor::named_tensors& in, float* params,
                              bool skip_value_head) const {
  for (const auto& s : slots_) {
    if (skip_value_head && (s.offset == value_w_ || s.offset == value_b_)) continue;
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor t, in.get(s.name));
    if (t.shape() != s.shape || t.type() != tensor::dtype::f32) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", s.name, "' is ",
                                                     t.description(), " but the model needs f32",
                                                     tensor::shape_string(s.shape)));
    }
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor host, t.to(tensor::device::cpu()));
    std::memcpy(params + s.offset, host.data<float>(), s.numel * sizeof(float));
  }
  return absl::OkStatus();
}

}  // namespace troupe::models
