#include "models/decoder/quantized_weights.hpp"

#include <numeric>

#include <sys/mman.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace troupe::models {
namespace {

using linear_weight = quantized_weights::linear_weight;

int group_size_for(weight_quantization q, int inputs) {
  if (q.group_size > 0) return q.group_size;
  return q.bits == 8 ? inputs : std::gcd(128, inputs);
}

}  // namespace

std::vector<quantized_weights::linear_weight> quantized_weights::block_weights(
    const decoder_layout& layout, int l) {
  const decoder_config& c = layout.config();
  const auto& o = layout.block(l);
  const int C = c.dim;
  if (c.family == decoder_family::gpt2) {
    return {{"attn.c_attn", o.attn_w, 3 * C, C, true},
            {"attn.c_proj", o.proj_w, C, C, true},
            {"mlp.c_fc", o.fc_w, 4 * C, C, true},
            {"mlp.c_proj", o.fc2_w, C, 4 * C, true}};
  }
  const int Q = c.q_width(), KV = c.kv_width(), F = c.ffn_width();
  return {{"self_attn.q_proj", o.q_w, Q, C, false},  {"self_attn.k_proj", o.k_w, KV, C, false},
          {"self_attn.v_proj", o.v_w, KV, C, false}, {"self_attn.o_proj", o.o_w, C, Q, false},
          {"mlp.gate_proj", o.gate_w, F, C, false},  {"mlp.up_proj", o.up_w, F, C, false},
          {"mlp.down_proj", o.down_w, C, F, false}};
}

std::string weight_quantization::describe() const {
  if (!enabled()) return "f32";
  const std::string blocks =
      group_size > 0 ? absl::StrCat("int", bits, " in groups of ", group_size, " inputs")
      : bits == 8    ? "int8 per output channel"
                     : "int4 in groups of up to 128 inputs";
  return head ? absl::StrCat(blocks, ", the output head int8 per output channel") : blocks;
}

absl::StatusOr<std::unique_ptr<quantized_weights>> quantized_weights::quantize(
    const decoder_layout& layout, const float* params, weight_quantization q) {
  auto out = std::make_unique<quantized_weights>();
  const layer_range range = layout.range();
  for (int l = range.first; l < range.last; ++l) {
    for (const linear_weight& w : block_weights(layout, l)) {
      const int group = group_size_for(q, w.inputs);
      if (absl::Status ok = kernels::cpu::check_quantizable(q.bits, w.outputs, w.inputs, group);
          !ok.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer ", l, " ", w.name, ": ", ok.message()));
      }
      matrix s;
      s.view = {q.bits, w.outputs, w.inputs, group};
      s.q.resize(w.outputs * s.view.row_bytes());
      s.scales.resize(int64_t{w.outputs} * s.view.groups());
      const int64_t row_stride = w.stored_transposed ? 1 : w.inputs;
      const int64_t col_stride = w.stored_transposed ? w.outputs : 1;
      kernels::cpu::quantize_symmetric(params + w.offset, row_stride, col_stride, q.bits, w.outputs,
                                       w.inputs, group, s.q.data(), s.scales.data());
      s.view.q = s.q.data();
      s.view.scales = s.scales.data();
      s.stored_transposed = w.stored_transposed;
      out->add(w.offset, std::move(s));
    }
  }
  const decoder_config& c = layout.config();
  if (q.head && range.has_head(c)) {
    if (absl::Status ok = kernels::cpu::check_quantizable(8, c.vocab, c.dim, c.dim); !ok.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("the output head: ", ok.message()));
    }
    matrix s;
    s.view = {8, c.vocab, c.dim, c.dim};
    s.q.resize(int64_t{c.vocab} * c.dim);
    s.scales.resize(c.vocab);
    kernels::cpu::quantize_symmetric(params + layout.head_weight(), c.dim, 1, 8, c.vocab, c.dim,
                                     c.dim, s.q.data(), s.scales.data());
    out->add(layout.head_weight(), std::move(s));
  }
  return out;
}

void quantized_weights::add(int64_t offset, matrix m) {
  bytes_ += static_cast<int64_t>(m.q.size() + (m.scales.size() + m.zeros.size()) * sizeof(float));
  matrix& stored = matrices_[offset] = std::move(m);
  stored.view.q = stored.q.data();
  stored.view.scales = stored.scales.data();
  stored.view.zeros = stored.zeros.empty() ? nullptr : stored.zeros.data();
}

void quantized_weights::dequantize_into(float* params) const {
  std::vector<float> dense;
  for (const auto& [offset, s] : matrices_) {
    const kernels::quantized_matrix& w = s.view;
    dense.resize(int64_t{w.rows} * w.cols);
    kernels::cpu::dequantize(w, dense.data());
    float* out = params + offset;
    for (int r = 0; r < w.rows; ++r) {
      for (int k = 0; k < w.cols; ++k) {
        out[s.stored_transposed ? int64_t{k} * w.rows + r : int64_t{r} * w.cols + k] =
            dense[int64_t{r} * w.cols + k];
      }
    }
  }
}

int64_t quantized_weights::release_f32(float* params) const {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  int64_t released = 0;
  for (const auto& [offset, m] : matrices_) {
    const auto begin = reinterpret_cast<uintptr_t>(params + offset);
    const auto end = begin + static_cast<uintptr_t>(m.view.rows) * m.view.cols * sizeof(float);
    const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
    if (last > first && madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) == 0)
      released += static_cast<int64_t>(last - first);
  }
  return released;
}

const kernels::quantized_matrix* quantized_weights::find(int64_t offset) const {
  const auto it = matrices_.find(offset);
  return it == matrices_.end() ? nullptr : &it->second.view;
}

}  // namespace troupe::models
