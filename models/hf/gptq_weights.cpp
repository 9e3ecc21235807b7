#include "models/hf/gptq_weights.hpp"

#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "kernels/quantized_matmul.hpp"
#include "models/hf/hf_weights.hpp"
#include "runtime/base/status.hpp"
#include "runtime/tensor/safetensors.hpp"

namespace troupe::models {
namespace {

using linear_weight = quantized_weights::linear_weight;

// The four tensors of a quantized linear layer, in this order.
enum part { qweight, qzeros, scales, g_idx };

// A quantized linear layer of the checkpoint.
struct gptq_linear {
  std::string prefix;  // model.layers.L.self_attn.q_proj
  linear_weight weight;
  int group = 0;  // inputs per group
};

// The checkpoint's tensors: the unquantized ones (at their offset in the layout's buffer) and
// each linear layer's four (`first`: the index of its qweight in `specs`).
struct gptq_specs {
  std::vector<hf_tensor_spec> specs;
  std::vector<int64_t> offset;  // per spec: where an unquantized one goes; -1 for the parts
  std::vector<gptq_linear> linears;
  std::vector<size_t> first;
};

absl::StatusOr<gptq_specs> specs_of(const decoder_layout& layout, const hf_model_config& hf) {
  const gptq_quantization& q = *hf.quantization;
  const int per_word = 32 / q.bits;
  // Every linear weight's name, so that its ".weight" spec is replaced by the four parts.
  std::vector<std::pair<std::string, gptq_linear>> linears;
  for (int l = 0; l < hf.model.layers; ++l) {
    for (const linear_weight& w : quantized_weights::block_weights(layout, l)) {
      gptq_linear g{absl::StrCat("model.layers.", l, ".", w.name), w,
                    q.group_size > 0 ? q.group_size : w.inputs};
      if (absl::Status ok = kernels::cpu::check_quantizable(q.bits, w.outputs, w.inputs, g.group);
          !ok.ok() || w.outputs % per_word != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            g.prefix, ": a GPTQ weight of ", w.outputs, " outputs and ", w.inputs, " inputs in ",
            q.bits, "-bit groups of ", g.group, " is not one troupe's kernel takes: ",
            ok.ok() ? absl::StrCat("outputs must be a multiple of ", per_word) : ok.message()));
      }
      linears.emplace_back(g.prefix + ".weight", std::move(g));
    }
  }
  gptq_specs out;
  size_t next = 0;
  for (const hf_tensor_spec& spec : hf_tensor_specs(hf.model)) {
    if (next < linears.size() && spec.name == linears[next].first) {
      const gptq_linear& g = linears[next++].second;
      const int64_t in = g.weight.inputs, outs = g.weight.outputs, groups = in / g.group;
      out.first.push_back(out.specs.size());
      out.linears.push_back(g);
      out.specs.push_back({g.prefix + ".qweight", {in / per_word, outs}});
      out.specs.push_back({g.prefix + ".qzeros", {groups, outs / per_word}});
      out.specs.push_back({g.prefix + ".scales", {groups, outs}});
      out.specs.push_back({g.prefix + ".g_idx", {in}});
      out.offset.insert(out.offset.end(), 4, -1);
      continue;
    }
    TROUPE_ASSIGN_OR_RETURN(const parameter_slot* slot, layout.find(spec.name));
    out.specs.push_back(spec);
    out.offset.push_back(slot->offset);
  }
  return out;
}

// Checks a part's dtype: the integers I32, the scales a float type.
absl::Status check_part(const tensor::mapped_safetensors::entry& e, bool is_scales) {
  const bool ok =
      is_scales ? (e.dtype == "F16" || e.dtype == "BF16" || e.dtype == "F32") : e.dtype == "I32";
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("tensor '", e.name, "' is ", e.dtype, "; GPTQ's ",
                   is_scales ? "scales are a float type" : "integers are I32"));
}

// The integer at `index` of a row of words, `bits` wide, packed from the low bits up.
uint32_t unpack(const int32_t* words, int64_t index, int bits) {
  const int per_word = 32 / bits;
  const uint32_t word = static_cast<uint32_t>(words[index / per_word]);
  return (word >> ((index % per_word) * bits)) & ((1u << bits) - 1);
}

// One linear layer's four parts (raw, in the checkpoint's layout) into troupe's matrix.
absl::StatusOr<quantized_weights::matrix> convert(const gptq_linear& g, const gptq_quantization& q,
                                                  const std::vector<int32_t>& qweight,
                                                  const std::vector<int32_t>& qzeros,
                                                  const std::vector<float>& scales,
                                                  const std::vector<int32_t>& g_idx) {
  const int outs = g.weight.outputs, in = g.weight.inputs, groups = in / g.group;
  const int per_word = 32 / q.bits;
  for (int i = 0; i < in; ++i) {
    if (g_idx[i] != i / g.group) {
      return absl::InvalidArgumentError(absl::StrCat(
          g.prefix, ".g_idx[", i, "] is ", g_idx[i], ", not ", i / g.group,
          ": its groups are not in input order (act-order); troupe reads desc_act false"));
    }
  }
  quantized_weights::matrix m;
  m.view = {q.bits, outs, in, g.group};
  m.q.assign(outs * m.view.row_bytes(), 0);
  m.scales.resize(int64_t{outs} * groups);
  m.zeros.resize(int64_t{outs} * groups);
  // Stored integers are unsigned; troupe's are signed around `middle`.
  const int middle = 1 << (q.bits - 1);
  bool symmetric = true;
  for (int j = 0; j < outs; ++j) {
    for (int gi = 0; gi < groups; ++gi) {
      const int64_t at = int64_t{j} * groups + gi;
      m.scales[at] = scales[int64_t{gi} * outs + j];
      const int zero =
          static_cast<int>(unpack(qzeros.data() + int64_t{gi} * (outs / per_word), j, q.bits)) +
          (q.zeros_minus_one ? 1 : 0);
      m.zeros[at] = static_cast<float>(zero - middle);
      symmetric = symmetric && zero == middle;
    }
    uint8_t* row = m.q.data() + j * m.view.row_bytes();
    for (int i = 0; i < in; ++i) {
      // qweight is [in / per_word, outs]: input i of output j in word (i / per_word, j).
      const int64_t word = int64_t{i / per_word} * outs + j;
      const uint32_t v = (static_cast<uint32_t>(qweight[word]) >> ((i % per_word) * q.bits)) &
                         ((1u << q.bits) - 1);
      if (q.bits == 8) {
        row[i] = static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(v) - middle));
      } else {
        row[(i / 16) * 8 + i % 8] |= static_cast<uint8_t>(i % 16 < 8 ? v : v << 4);
      }
    }
  }
  if (symmetric) m.zeros.clear();
  return m;
}

}  // namespace

absl::StatusOr<quantized_hf_model> read_gptq_model(const decoder_layout& layout,
                                                   const std::string& model_dir,
                                                   const hf_model_config& hf) {
  TROUPE_ASSIGN_OR_RETURN(const gptq_specs s, specs_of(layout, hf));
  quantized_hf_model out;
  out.params.assign(layout.total(), 0.0f);
  // Each linear layer's parts, copied out of the mapped files as they are walked.
  struct raw {
    std::vector<int32_t> qweight, qzeros, g_idx;
    std::vector<float> scales;
  };
  std::vector<raw> raws(s.linears.size());
  std::vector<int> linear_of(s.specs.size(), -1);
  for (size_t k = 0; k < s.first.size(); ++k)
    for (int p = 0; p < 4; ++p)
      linear_of[s.first[k] + p] = static_cast<int>(k);
  TROUPE_RETURN_IF_ERROR(walk_hf_tensors(
      model_dir, hf, s.specs, [&](size_t i, const tensor::mapped_safetensors::entry& e) {
        if (s.offset[i] >= 0) return tensor::copy_as_f32(e, out.params.data() + s.offset[i]);
        const int k = linear_of[i];
        const auto p = static_cast<part>(i - s.first[k]);
        TROUPE_RETURN_IF_ERROR(check_part(e, p == scales));
        raw& r = raws[k];
        if (p == scales) {
          r.scales.resize(e.bytes / (e.dtype == "F32" ? 4 : 2));
          return tensor::copy_as_f32(e, r.scales.data());
        }
        std::vector<int32_t>& ints = p == qweight ? r.qweight : p == qzeros ? r.qzeros : r.g_idx;
        ints.resize(e.bytes / sizeof(int32_t));
        std::memcpy(ints.data(), e.data, e.bytes);
        return absl::OkStatus();
      }));
  auto quantized = std::make_shared<quantized_weights>();
  for (size_t k = 0; k < s.linears.size(); ++k) {
    const raw& r = raws[k];
    TROUPE_ASSIGN_OR_RETURN(
        quantized_weights::matrix m,
        convert(s.linears[k], *hf.quantization, r.qweight, r.qzeros, r.scales, r.g_idx));
    quantized->add(s.linears[k].weight.offset, std::move(m));
  }
  out.quantized = std::move(quantized);
  return out;
}

absl::Status check_gptq_weights(const std::string& model_dir, const hf_model_config& hf) {
  const decoder_layout layout(hf.model, layer_range::all(hf.model));
  TROUPE_ASSIGN_OR_RETURN(const gptq_specs s, specs_of(layout, hf));
  return walk_hf_tensors(model_dir, hf, s.specs,
                         [&](size_t i, const tensor::mapped_safetensors::entry& e) {
                           if (s.offset[i] >= 0) {
                             return check_part(e, /*is_scales=*/true);  // a float tensor
                           }
                           return check_part(e, s.specs[i].name.ends_with(".scales"));
                         });
}

absl::Status write_gptq_model(const std::string& out_dir, const hf_model_config& config,
                              const decoder_layout& layout, const float* params,
                              const quantized_weights& quantized) {
  if (!config.quantization || config.quantization->group_size < 0) {
    return absl::InvalidArgumentError("a GPTQ checkpoint needs its quantization_config");
  }
  const gptq_quantization& q = *config.quantization;
  TROUPE_ASSIGN_OR_RETURN(const gptq_specs s, specs_of(layout, config));
  const int per_word = 32 / q.bits, middle = 1 << (q.bits - 1);
  tensor::named_tensors file;
  file.metadata = {{"format", "pt"}};
  for (size_t i = 0; i < s.specs.size(); ++i) {
    const hf_tensor_spec& spec = s.specs[i];
    if (s.offset[i] >= 0) {
      tensor::tensor t = tensor::tensor::host(spec.shape);
      std::memcpy(t.data<float>(), params + s.offset[i], t.numel() * sizeof(float));
      file.tensors.emplace_back(spec.name, std::move(t));
      continue;
    }
    if (spec.name.ends_with(".qweight")) {
      const size_t k =
          static_cast<size_t>(std::find(s.first.begin(), s.first.end(), i) - s.first.begin());
      const gptq_linear& g = s.linears[k];
      const kernels::quantized_matrix* m = quantized.find(g.weight.offset);
      if (m == nullptr || m->zeros != nullptr || m->bits != q.bits || m->group_size != g.group) {
        return absl::InvalidArgumentError(
            absl::StrCat(g.prefix, ": the quantized weights are not symmetric int", q.bits,
                         " in groups of ", g.group));
      }
      const int outs = m->rows, in = m->cols, groups = m->groups();
      tensor::tensor qw = tensor::tensor::host({in / per_word, outs}, tensor::dtype::i32);
      tensor::tensor qz = tensor::tensor::host({groups, outs / per_word}, tensor::dtype::i32);
      tensor::tensor sc = tensor::tensor::host({groups, outs});
      tensor::tensor gi = tensor::tensor::host({in}, tensor::dtype::i32);
      std::memset(qw.data<int32_t>(), 0, qw.numel() * sizeof(int32_t));
      std::memset(qz.data<int32_t>(), 0, qz.numel() * sizeof(int32_t));
      for (int j = 0; j < outs; ++j) {
        const uint8_t* row = m->q + j * m->row_bytes();
        for (int i2 = 0; i2 < in; ++i2) {
          const int v = q.bits == 8 ? static_cast<int8_t>(row[i2]) + middle
                                    : (i2 % 16 < 8 ? row[(i2 / 16) * 8 + i2 % 8] & 15
                                                   : row[(i2 / 16) * 8 + i2 % 8] >> 4);
          uint32_t& word =
              reinterpret_cast<uint32_t&>(qw.data<int32_t>()[int64_t{i2 / per_word} * outs + j]);
          word |= static_cast<uint32_t>(v) << ((i2 % per_word) * q.bits);
        }
        for (int g2 = 0; g2 < groups; ++g2) {
          sc.data<float>()[int64_t{g2} * outs + j] = m->scales[int64_t{j} * groups + g2];
          uint32_t& word = reinterpret_cast<uint32_t&>(
              qz.data<int32_t>()[int64_t{g2} * (outs / per_word) + j / per_word]);
          word |= static_cast<uint32_t>(middle - 1) << ((j % per_word) * q.bits);  // zero - 1
        }
      }
      for (int i2 = 0; i2 < in; ++i2)
        gi.data<int32_t>()[i2] = i2 / g.group;
      file.tensors.emplace_back(g.prefix + ".qweight", std::move(qw));
      file.tensors.emplace_back(g.prefix + ".qzeros", std::move(qz));
      file.tensors.emplace_back(g.prefix + ".scales", std::move(sc));
      file.tensors.emplace_back(g.prefix + ".g_idx", std::move(gi));
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat(out_dir, ": cannot create: ", ec.message()));
  TROUPE_RETURN_IF_ERROR(tensor::write_safetensors(out_dir + "/model.safetensors", file));
  hf_model_config written = config;
  written.torch_dtype = "float32";
  written.quantization->zeros_minus_one = true;
  written.quantization->symmetric = true;
  return write_hf_configs(out_dir, written);
}

}  // namespace troupe::models
