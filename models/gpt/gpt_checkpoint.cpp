#include "models/gpt/gpt_checkpoint.hpp"

#include <algorithm>
#include <cstring>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/base/status.hpp"

namespace troupe::models {
namespace {

// A slice of one parameter's moments: elements [start, start + length) of the flattened
// parameter, read from `m` and `v`.
struct slice {
  int64_t start = 0, length = 0;
  const float* m = nullptr;
  const float* v = nullptr;
};

absl::StatusOr<int64_t> metadata_int(const tensor::named_tensors& file, const char* key) {
  auto it = file.metadata.find(key);
  int64_t value = 0;
  if (it == file.metadata.end() || !absl::SimpleAtoi(it->second, &value)) {
    return absl::DataLossError(
        absl::StrCat("optimizer state: metadata '", key, "' is missing or not a number"));
  }
  return value;
}

// The flat format's range [begin, end) of `layout`'s buffer, as slices of its parameters.
absl::Status add_flat(const tensor::named_tensors& file, const gpt_layout& layout,
                      std::map<std::string, std::vector<slice>>& slices) {
  TROUPE_ASSIGN_OR_RETURN(const int64_t begin, metadata_int(file, "begin"));
  TROUPE_ASSIGN_OR_RETURN(const int64_t end, metadata_int(file, "end"));
  TROUPE_ASSIGN_OR_RETURN(const tensor::tensor m, file.get("m"));
  TROUPE_ASSIGN_OR_RETURN(const tensor::tensor v, file.get("v"));
  if (begin < 0 || end < begin || m.numel() != end - begin || v.numel() != end - begin) {
    return absl::DataLossError(
        absl::StrCat("optimizer state: range [", begin, ", ", end, ") does not match its moments"));
  }
  for (const auto& s : layout.slots()) {
    const int64_t a = std::max(begin, s.offset), b = std::min(end, s.offset + s.numel);
    if (b > a) {
      slices[s.name].push_back(
          {a - s.offset, b - a, m.data<float>() + (a - begin), v.data<float>() + (a - begin)});
    }
  }
  return absl::OkStatus();
}

// The named format's slices: "m:<name>:<start>" with its "v:" twin.
absl::Status add_named(const tensor::named_tensors& file,
                       std::map<std::string, std::vector<slice>>& slices) {
  for (const auto& [key, m] : file.tensors) {
    if (!key.starts_with("m:")) continue;
    const size_t colon = key.rfind(':');
    int64_t start = 0;
    if (colon <= 2 || !absl::SimpleAtoi(key.substr(colon + 1), &start) || start < 0) {
      return absl::DataLossError(absl::StrCat("optimizer state: tensor '", key,
                                              "' is not named m:<parameter>:<first element>"));
    }
    TROUPE_ASSIGN_OR_RETURN(const tensor::tensor v, file.get("v" + key.substr(1)));
    if (v.numel() != m.numel()) {
      return absl::DataLossError(absl::StrCat("optimizer state: '", key, "' has ", m.numel(),
                                              " elements but its v has ", v.numel()));
    }
    slices[key.substr(2, colon - 2)].push_back(
        {start, m.numel(), m.data<float>(), v.data<float>()});
  }
  return absl::OkStatus();
}

}  // namespace

std::string stage_model_file(int stage) {
  return absl::StrCat("model-stage-", stage, ".safetensors");
}

absl::StatusOr<tensor::named_tensors> checkpoint_model(const checkpoint::checkpoint& c) {
  if (auto whole = c.files.find("model.safetensors"); whole != c.files.end()) return whole->second;
  tensor::named_tensors merged;
  for (const auto& [name, file] : c.files) {  // ordered by name: stage 0's wte first
    if (!name.starts_with("model-stage-")) continue;
    for (const auto& [tensor_name, t] : file.tensors) {
      if (!merged.get(tensor_name).ok()) merged.tensors.emplace_back(tensor_name, t);
    }
  }
  if (merged.tensors.empty()) {
    return absl::NotFoundError(absl::StrCat(
        c.dir, " holds no model.safetensors (nor a pipeline's model-stage-<s>.safetensors)"));
  }
  return merged;
}

tensor::named_tensors moments_file(const gpt_layout& layout, int64_t begin, int64_t end,
                                   const float* m, const float* v, int64_t steps) {
  tensor::named_tensors out;
  for (const auto& s : layout.slots()) {
    const int64_t a = std::max(begin, s.offset), b = std::min(end, s.offset + s.numel);
    if (b <= a) continue;
    const std::string suffix = absl::StrCat(s.name, ":", a - s.offset);
    tensor::tensor sm = tensor::tensor::host({b - a}), sv = tensor::tensor::host({b - a});
    std::memcpy(sm.data<float>(), m + (a - begin), (b - a) * sizeof(float));
    std::memcpy(sv.data<float>(), v + (a - begin), (b - a) * sizeof(float));
    out.tensors.emplace_back("m:" + suffix, std::move(sm));
    out.tensors.emplace_back("v:" + suffix, std::move(sv));
  }
  out.metadata = {{"steps", std::to_string(steps)}, {"format", "named slices"}};
  return out;
}

absl::StatusOr<int64_t> read_moments(const std::vector<tensor::named_tensors>& files,
                                     const gpt_layout& layout, const gpt_layout& flat_layout,
                                     float* m, float* v) {
  std::map<std::string, std::vector<slice>> slices;
  int64_t steps = -1;
  for (const auto& file : files) {
    TROUPE_ASSIGN_OR_RETURN(const int64_t saved_steps, metadata_int(file, "steps"));
    if (steps >= 0 && saved_steps != steps) {
      return absl::DataLossError("optimizer states of different steps in one checkpoint");
    }
    steps = saved_steps;
    TROUPE_RETURN_IF_ERROR(file.get("m").ok() ? add_flat(file, flat_layout, slices)
                                              : add_named(file, slices));
  }
  if (steps < 0) return absl::DataLossError("checkpoint holds no optimizer state");
  for (const auto& s : layout.slots()) {
    std::vector<char> covered(s.numel, 0);
    for (const slice& x : slices[s.name]) {
      const int64_t length = std::min(x.length, s.numel - x.start);
      if (length <= 0) continue;
      std::memcpy(m + s.offset + x.start, x.m, length * sizeof(float));
      std::memcpy(v + s.offset + x.start, x.v, length * sizeof(float));
      std::fill(covered.begin() + x.start, covered.begin() + x.start + length, 1);
    }
    const auto gap = std::find(covered.begin(), covered.end(), 0);
    if (gap != covered.end()) {
      return absl::DataLossError(absl::StrCat("optimizer state: the moments of ", s.name,
                                              " from element ", gap - covered.begin(),
                                              " are in no file of the checkpoint"));
    }
  }
  return steps;
}

}  // namespace troupe::models
