#include "runtime/tensor/safetensors.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace troupe::tensor {
namespace {

constexpr uint64_t max_header_bytes = uint64_t{100} << 20;

absl::Status file_error(const std::string& path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(path, ": ", what));
}

struct entry {
  std::string name;
  dtype type;
  shape_t shape;
  uint64_t begin, end;
};

absl::StatusOr<entry> parse_entry(const std::string& path, const std::string& name,
                                  const nlohmann::json& j, uint64_t data_bytes) {
  auto bad = [&](absl::string_view what) {
    return file_error(path, absl::StrCat("tensor '", name, "': ", what));
  };
  if (!j.is_object() || !j.contains("dtype") || !j.contains("shape") ||
      !j.contains("data_offsets")) {
    return bad("needs an object with dtype, shape and data_offsets");
  }
  if (!j["dtype"].is_string()) return bad("dtype is not a string");
  absl::StatusOr<dtype> type = dtype_from_safetensors(j["dtype"].get<std::string>());
  if (!type.ok()) return bad(type.status().message());
  entry e{name, *type, {}, 0, 0};
  if (!j["shape"].is_array()) return bad("shape is not an array");
  for (const auto& s : j["shape"]) {
    if (!s.is_number_unsigned()) return bad("shape holds a value that is not a size");
    e.shape.push_back(s.get<int64_t>());
  }
  const auto& offsets = j["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    return bad("data_offsets must be [begin, end]");
  }
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  const uint64_t expected = shape_numel(e.shape) * dtype_size(e.type);
  if (e.end < e.begin || e.end - e.begin != expected) {
    return bad(absl::StrCat("data_offsets [", e.begin, ", ", e.end, ") hold ", e.end - e.begin,
                            " bytes but ", dtype_name(e.type), shape_string(e.shape), " needs ",
                            expected));
  }
  if (e.end > data_bytes) {
    return bad(absl::StrCat("data ends at byte ", e.end, " but the file holds only ", data_bytes,
                            " data bytes (truncated?)"));
  }
  return e;
}

}  // namespace

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
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  if (size < 8) {
    return file_error(path, absl::StrCat("is ", size,
                                         " bytes, shorter than the 8-byte header "
                                         "length (not a safetensors file, or truncated)"));
  }
  unsigned char prefix[8];
  in.read(reinterpret_cast<char*>(prefix), 8);
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i)
    length = (length << 8) | prefix[i];
  if (length > max_header_bytes || 8 + length > size) {
    return file_error(path, absl::StrCat("header length ", length, " does not fit the ", size,
                                         "-byte file (not a safetensors file, or truncated)"));
  }
  std::string json(length, '\0');
  in.read(json.data(), static_cast<std::streamsize>(length));
  nlohmann::json header = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return file_error(path, "the header is not a JSON object");
  }
  const uint64_t data_bytes = size - 8 - length;

  named_tensors out;
  std::vector<entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) return file_error(path, "__metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) {
          return file_error(path, absl::StrCat("__metadata__ value '", k, "' is not a string"));
        }
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    TROUPE_ASSIGN_OR_RETURN(entry e, parse_entry(path, name, value, data_bytes));
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(),
            [](const entry& a, const entry& b) { return a.begin < b.begin; });
  uint64_t covered = 0;
  for (const entry& e : entries) {
    if (e.begin != covered) {
      return file_error(
          path, absl::StrCat("tensor '", e.name, "' starts at data byte ", e.begin,
                             " but the previous tensor ends at ", covered, " (overlap or hole)"));
    }
    covered = e.end;
  }
  if (covered != data_bytes) {
    return file_error(path, absl::StrCat("the tensors cover ", covered,
                                         " data bytes but the file "
                                         "holds ",
                                         data_bytes));
  }
  for (const entry& e : entries) {
    TROUPE_ASSIGN_OR_RETURN(tensor t, tensor::empty(e.shape, e.type));
    in.seekg(static_cast<std::streamoff>(8 + length + e.begin));
    in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
    if (!in) return file_error(path, absl::StrCat("reading tensor '", e.name, "' failed"));
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

}  // namespace troupe::tensor
