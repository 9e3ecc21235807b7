#include "models/decoder/decoder_checkpoint.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/base/status.hpp"

namespace troupe::models {
namespace {

// The moments of the whole model's parameters (tensor parallelism undone), gathered from the
// files, and which elements some file held.
struct whole_moments {
  explicit whole_moments(const decoder_layout& whole)
      : m(whole.total(), 0.0f), v(whole.total(), 0.0f), covered(whole.total(), 0) {}
  void put(int64_t at, const float* sm, const float* sv, int64_t n) {
    std::memcpy(m.data() + at, sm, n * sizeof(float));
    std::memcpy(v.data() + at, sv, n * sizeof(float));
    std::fill(covered.begin() + at, covered.begin() + at + n, 1);
  }
  std::vector<float> m, v;
  std::vector<char> covered;
};

absl::StatusOr<int64_t> metadata_int(const tensor::named_tensors& file, const char* key,
                                     std::optional<int64_t> otherwise = std::nullopt) {
  auto it = file.metadata.find(key);
  int64_t value = 0;
  if (it == file.metadata.end() && otherwise) return *otherwise;
  if (it == file.metadata.end() || !absl::SimpleAtoi(it->second, &value)) {
    return absl::DataLossError(
        absl::StrCat("checkpoint file: metadata '", key, "' is missing or not a number"));
  }
  return value;
}

// Which tensor-parallel rank wrote a file (0 of 1 without tensor parallelism).
absl::StatusOr<tensor_parallel> tp_of(const tensor::named_tensors& file) {
  TROUPE_ASSIGN_OR_RETURN(const int64_t rank, metadata_int(file, "tp_rank", 0));
  TROUPE_ASSIGN_OR_RETURN(const int64_t size, metadata_int(file, "tp_size", 1));
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::DataLossError(
        absl::StrCat("checkpoint file: tensor-parallel rank ", rank, " of ", size));
  }
  return tensor_parallel{static_cast<int>(rank), static_cast<int>(size)};
}

// The flat format's range [begin, end) of the whole model's buffer.
absl::Status add_flat(const tensor::named_tensors& file, const decoder_layout& whole,
                      whole_moments& out) {
  TROUPE_ASSIGN_OR_RETURN(const int64_t begin, metadata_int(file, "begin"));
  TROUPE_ASSIGN_OR_RETURN(const int64_t end, metadata_int(file, "end"));
  TROUPE_ASSIGN_OR_RETURN(const tensor::tensor m, file.get("m"));
  TROUPE_ASSIGN_OR_RETURN(const tensor::tensor v, file.get("v"));
  if (begin < 0 || end < begin || m.numel() != end - begin || v.numel() != end - begin) {
    return absl::DataLossError(
        absl::StrCat("optimizer state: range [", begin, ", ", end, ") does not match its moments"));
  }
  for (const auto& s : whole.slots()) {
    const int64_t a = std::max(begin, s.offset), b = std::min(end, s.offset + s.numel);
    if (b > a) out.put(a, m.data<float>() + (a - begin), v.data<float>() + (a - begin), b - a);
  }
  return absl::OkStatus();
}

// The named format's slices "m:<name>:<start>" (with their "v:" twins) of the parameters a
// tensor-parallel rank `tp` held, put at their places in the whole model's tensors.
absl::Status add_named(const tensor::named_tensors& file, const decoder_layout& whole,
                       tensor_parallel tp, whole_moments& out) {
  for (const auto& [key, m] : file.tensors) {
    if (!key.starts_with("m:")) continue;
    const size_t colon = key.rfind(':');
    int64_t start = 0;
    if (colon <= 2 || !absl::SimpleAtoi(key.substr(colon + 1), &start) || start < 0) {
      return absl::DataLossError(absl::StrCat("optimizer state: tensor '", key,
                                              "' is not named m:<parameter>:<first element>"));
    }
    TROUPE_ASSIGN_OR_RETURN(const tensor::tensor v, file.get(absl::StrCat("v", key.substr(1))));
    if (v.numel() != m.numel()) {
      return absl::DataLossError(absl::StrCat("optimizer state: '", key, "' has ", m.numel(),
                                              " elements but its v has ", v.numel()));
    }
    const std::string name = key.substr(2, colon - 2);
    auto slot = whole.find(name);
    if (!slot.ok()) continue;  // a parameter this model does not have (a critic's value head)
    const parameter_slot& s = **slot;
    const int64_t end = start + m.numel();
    for_each_shard_run(s.whole_shape, tensor_split_of(name), tp,
                       [&](int64_t local, int64_t at, int64_t n) {
                         const int64_t a = std::max(local, start), b = std::min(local + n, end);
                         if (b <= a) return;
                         out.put(s.offset + at + (a - local), m.data<float>() + (a - start),
                                 v.data<float>() + (a - start), b - a);
                       });
  }
  return absl::OkStatus();
}

// A whole tensor being put together from tensor-parallel parts.
struct assembling {
  tensor::tensor whole;
  std::vector<bool> parts;  // which ranks' parts it has
};

}  // namespace

std::string stage_model_file(int stage, tensor_parallel tp) {
  return tp.size > 1 ? absl::StrCat("model-stage-", stage, "-tp-", tp.rank, ".safetensors")
                     : absl::StrCat("model-stage-", stage, ".safetensors");
}

absl::StatusOr<tensor::named_tensors> checkpoint_model(const checkpoint::checkpoint& c) {
  if (auto whole = c.files.find("model.safetensors"); whole != c.files.end()) return whole->second;
  std::vector<std::string> order;
  std::map<std::string, assembling> tensors;
  for (const auto& [file_name, file] : c.files) {  // ordered by name: stage 0's wte first
    if (!file_name.starts_with("model-stage-")) continue;
    TROUPE_ASSIGN_OR_RETURN(const tensor_parallel tp, tp_of(file));
    for (const auto& [name, t] : file.tensors) {
      const tensor_split split = tp.size > 1 ? tensor_split_of(name) : tensor_split{};
      auto [it, added] = tensors.try_emplace(name);
      if (added) order.push_back(name);
      assembling& a = it->second;
      if (split.dim < 0) {  // whole in this file: the first copy is the one
        if (added) a.whole = t, a.parts.assign(1, true);
        continue;
      }
      tensor::shape_t shape = t.shape();
      if (shape.empty())
        return absl::DataLossError(absl::StrCat(file_name, ": ", name, " is a scalar"));
      (split.dim == 0 ? shape.front() : shape.back()) *= tp.size;
      if (added) {
        a.whole = tensor::tensor::host(shape);
        a.parts.assign(tp.size, false);
      }
      if (a.whole.shape() != shape || static_cast<int>(a.parts.size()) != tp.size) {
        return absl::DataLossError(absl::StrCat(file_name, ": its part of ", name,
                                                " does not fit the other ranks' parts"));
      }
      const float* part = t.data<float>();
      float* whole = a.whole.data<float>();
      for_each_shard_run(shape, split, tp, [&](int64_t local, int64_t at, int64_t n) {
        std::memcpy(whole + at, part + local, n * sizeof(float));
      });
      a.parts[tp.rank] = true;
    }
  }
  if (order.empty()) {
    return absl::NotFoundError(absl::StrCat(
        c.dir, " holds no model.safetensors (nor a pipeline's model-stage-<s>.safetensors)"));
  }
  tensor::named_tensors merged;
  for (const auto& name : order) {
    const assembling& a = tensors.at(name);
    const auto missing = std::find(a.parts.begin(), a.parts.end(), false);
    if (missing != a.parts.end()) {
      return absl::DataLossError(absl::StrCat(c.dir, ": tensor-parallel rank ",
                                              missing - a.parts.begin(), "'s part of ", name,
                                              " is in no file"));
    }
    merged.tensors.emplace_back(name, a.whole);
  }
  return merged;
}

tensor::named_tensors moments_file(const decoder_layout& layout, int64_t begin, int64_t end,
                                   const float* m, const float* v, int64_t steps) {
  return moments_file(layout, std::vector<param_range>{{begin, end}}, m, v, steps);
}

tensor::named_tensors moments_file(const decoder_layout& layout,
                                   const std::vector<param_range>& ranges, const float* m,
                                   const float* v, int64_t steps) {
  tensor::named_tensors out;
  for (const param_range& range : ranges) {
    for (const auto& s : layout.slots()) {
      const int64_t a = std::max(range.begin, s.offset);
      const int64_t b = std::min(range.end, s.offset + s.numel);
      if (b <= a) continue;
      const std::string suffix = absl::StrCat(s.name, ":", a - s.offset);
      tensor::tensor sm = tensor::tensor::host({b - a}), sv = tensor::tensor::host({b - a});
      std::memcpy(sm.data<float>(), m + (a - range.begin), (b - a) * sizeof(float));
      std::memcpy(sv.data<float>(), v + (a - range.begin), (b - a) * sizeof(float));
      out.tensors.emplace_back("m:" + suffix, std::move(sm));
      out.tensors.emplace_back("v:" + suffix, std::move(sv));
    }
    m += range.end - range.begin;
    v += range.end - range.begin;
  }
  out.metadata = {{"steps", std::to_string(steps)}, {"format", "named slices"}};
  if (layout.tp().size > 1) {
    out.metadata["tp_rank"] = std::to_string(layout.tp().rank);
    out.metadata["tp_size"] = std::to_string(layout.tp().size);
  }
  return out;
}

absl::StatusOr<int64_t> read_moments(const std::vector<tensor::named_tensors>& files,
                                     const decoder_layout& layout, const decoder_layout& whole,
                                     float* m, float* v) {
  whole_moments saved(whole);
  int64_t steps = -1;
  for (const auto& file : files) {
    TROUPE_ASSIGN_OR_RETURN(const int64_t saved_steps, metadata_int(file, "steps"));
    if (steps >= 0 && saved_steps != steps) {
      return absl::DataLossError("optimizer states of different steps in one checkpoint");
    }
    steps = saved_steps;
    if (file.get("m").ok()) {
      TROUPE_RETURN_IF_ERROR(add_flat(file, whole, saved));
    } else {
      TROUPE_ASSIGN_OR_RETURN(const tensor_parallel tp, tp_of(file));
      TROUPE_RETURN_IF_ERROR(add_named(file, whole, tp, saved));
    }
  }
  if (steps < 0) return absl::DataLossError("checkpoint holds no optimizer state");
  for (const auto& s : layout.slots()) {
    TROUPE_ASSIGN_OR_RETURN(const parameter_slot* w, whole.find(s.name));
    absl::Status gap;
    for_each_shard_run(
        s.whole_shape, s.split, layout.tp(), [&](int64_t local, int64_t at, int64_t n) {
          const char* held = saved.covered.data() + w->offset + at;
          const char* hole = std::find(held, held + n, 0);
          if (hole != held + n && gap.ok()) {
            gap = absl::DataLossError(absl::StrCat("optimizer state: the moments of ", s.name,
                                                   " from element ", at + (hole - held),
                                                   " are in no file of the checkpoint"));
          }
          std::memcpy(m + s.offset + local, saved.m.data() + w->offset + at, n * sizeof(float));
          std::memcpy(v + s.offset + local, saved.v.data() + w->offset + at, n * sizeof(float));
        });
    TROUPE_RETURN_IF_ERROR(gap);
  }
  return steps;
}

}  // namespace troupe::models
