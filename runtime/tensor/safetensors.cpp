#include "runtime/tensor/safetensors.hpp"

#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/base/status.hpp"
#include "runtime/tensor/mapped_safetensors.hpp"

namespace troupe::tensor {

absl::StatusOr<tensor> named_tensors::get(const std::string& name) const {
  for (const auto& [n, t] : tensors) {
    if (n == name) return t;
  }
  return absl::NotFoundError(absl::StrCat("no tensor named '", name, "'"));
}

absl::Status write_safetensors(const std::string& path, const named_tensors& file) {
  nlohmann::json header = nlohmann::json::object();
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  std::vector<tensor> host;
  uint64_t offset = 0;
  for (const auto& [name, t] : file.tensors) {
    if (name == "__metadata__" || header.contains(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor name '", name, "' is reserved or used twice"));
    }
    tensor h = t;
    if (!t.where().is_cpu() || !t.is_contiguous()) {
      TROUPE_ASSIGN_OR_RETURN(h, t.to(device::cpu()));
    }
    header[name] = {{"dtype", safetensors_dtype_name(t.type())},
                    {"shape", std::vector<int64_t>(t.shape().begin(), t.shape().end())},
                    {"data_offsets", {offset, offset + h.nbytes()}}};
    offset += h.nbytes();
    host.push_back(std::move(h));
  }
  std::string json = header.dump();
  json.resize((json.size() + 7) / 8 * 8, ' ');
  const uint64_t length = json.size();
  unsigned char prefix[8];
  for (int i = 0; i < 8; ++i)
    prefix[i] = static_cast<unsigned char>(length >> (8 * i));

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open for writing"));
  out.write(reinterpret_cast<const char*>(prefix), 8);
  out.write(json.data(), static_cast<std::streamsize>(json.size()));
  for (const tensor& h : host) {
    out.write(static_cast<const char*>(h.raw()), static_cast<std::streamsize>(h.nbytes()));
  }
  out.flush();
  if (!out) return absl::DataLossError(absl::StrCat(path, ": write failed (disk full?)"));
  return absl::OkStatus();
}

absl::StatusOr<named_tensors> read_safetensors(const std::string& path) {
  TROUPE_ASSIGN_OR_RETURN(mapped_safetensors file, mapped_safetensors::open(path));
  named_tensors out;
  out.metadata = file.metadata();
  for (const auto& e : file.entries()) {
    // troupe's own tensors: F32, BF16 and I32 (F16 comes only from Hugging Face checkpoints).
    absl::StatusOr<dtype> type = dtype_from_safetensors(e.dtype);
    if (!type.ok()) {
      return absl::DataLossError(
          absl::StrCat(path, ": tensor '", e.name, "': ", type.status().message()));
    }
    TROUPE_ASSIGN_OR_RETURN(tensor t, tensor::empty(e.shape, *type));
    std::memcpy(t.raw(), e.data, e.bytes);
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

}  // namespace troupe::tensor
