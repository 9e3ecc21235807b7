#include "runtime/tensor/mapped_safetensors.hpp"

#include <algorithm>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace troupe::tensor {
namespace {

constexpr uint64_t max_header_bytes = uint64_t{100} << 20;

absl::Status file_error(const std::string& path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(path, ": ", what));
}

// Bytes per element of the dtypes a mapping reads; 0 for others.
uint64_t element_bytes(const std::string& dtype) {
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "BF16" || dtype == "F16") return 2;
  return 0;
}

struct located {
  mapped_safetensors::entry e;
  uint64_t begin, end;
};

absl::StatusOr<located> parse_entry(const std::string& path, const std::string& name,
                                    const nlohmann::json& j, uint64_t data_bytes) {
  auto bad = [&](absl::string_view what) {
    return file_error(path, absl::StrCat("tensor '", name, "': ", what));
  };
  if (!j.is_object() || !j.contains("dtype") || !j.contains("shape") ||
      !j.contains("data_offsets")) {
    return bad("needs an object with dtype, shape and data_offsets");
  }
  if (!j["dtype"].is_string()) return bad("dtype is not a string");
  located l;
  l.e.name = name;
  l.e.dtype = j["dtype"].get<std::string>();
  const uint64_t size = element_bytes(l.e.dtype);
  if (size == 0) {
    return bad(absl::StrCat("dtype '", l.e.dtype,
                            "' is not supported; troupe reads F32, BF16, F16 and I32"));
  }
  if (!j["shape"].is_array()) return bad("shape is not an array");
  for (const auto& s : j["shape"]) {
    if (!s.is_number_unsigned() || s.get<uint64_t>() > (uint64_t{1} << 40)) {
      return bad("shape holds a value that is not a size");
    }
    l.e.shape.push_back(s.get<int64_t>());
  }
  const auto& offsets = j["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    return bad("data_offsets must be [begin, end]");
  }
  l.begin = offsets[0].get<uint64_t>();
  l.end = offsets[1].get<uint64_t>();
  uint64_t expected = size;
  for (int64_t d : l.e.shape) {
    if (d != 0 && expected > (uint64_t{1} << 50) / static_cast<uint64_t>(d)) {
      return bad("its shape is too large");
    }
    expected *= static_cast<uint64_t>(d);
  }
  if (l.end < l.begin || l.end - l.begin != expected) {
    return bad(absl::StrCat("data_offsets [", l.begin, ", ", l.end, ") hold ", l.end - l.begin,
                            " bytes but ", l.e.dtype, shape_string(l.e.shape), " needs ",
                            expected));
  }
  if (l.end > data_bytes) {
    return bad(absl::StrCat("data ends at byte ", l.end, " but the file holds only ", data_bytes,
                            " data bytes (truncated?)"));
  }
  l.e.bytes = expected;
  return l;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF, bits;
  if (exponent == 0x1F) {  // inf or NaN
    bits = sign | 0x7F800000u | (mantissa << 13);
  } else if (exponent != 0) {  // normal
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {  // zero
    bits = sign;
  } else {  // subnormal: normalize
    exponent = 113;
    while ((mantissa & 0x400) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3FF) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace

absl::StatusOr<mapped_safetensors> mapped_safetensors::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::NotFoundError(absl::StrCat(path, ": not a regular file"));
  }
  mapped_safetensors m;
  m.path_ = path;
  m.size_ = static_cast<size_t>(st.st_size);
  if (m.size_ > 0) {
    void* base = mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (base == MAP_FAILED) {
      ::close(fd);
      return absl::ResourceExhaustedError(absl::StrCat(path, ": cannot map ", m.size_, " bytes"));
    }
    m.base_ = base;
  }
  ::close(fd);  // the mapping stays
  const auto* bytes = static_cast<const unsigned char*>(m.base_);
  if (m.size_ < 8) {
    return file_error(path, absl::StrCat("is ", m.size_,
                                         " bytes, shorter than the 8-byte header "
                                         "length (not a safetensors file, or truncated)"));
  }
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i)
    length = (length << 8) | bytes[i];
  if (length > max_header_bytes || 8 + length > m.size_) {
    return file_error(path, absl::StrCat("header length ", length, " does not fit the ", m.size_,
                                         "-byte file (not a safetensors file, or truncated)"));
  }
  const nlohmann::json header = nlohmann::json::parse(
      reinterpret_cast<const char*>(bytes + 8), reinterpret_cast<const char*>(bytes + 8 + length),
      nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return file_error(path, "the header is not a JSON object");
  }
  const uint64_t data_bytes = m.size_ - 8 - length;
  std::vector<located> all;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) return file_error(path, "__metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) {
          return file_error(path, absl::StrCat("__metadata__ value '", k, "' is not a string"));
        }
        m.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    auto l = parse_entry(path, name, value, data_bytes);
    if (!l.ok()) return l.status();
    all.push_back(std::move(*l));
  }
  std::sort(all.begin(), all.end(),
            [](const located& a, const located& b) { return a.begin < b.begin; });
  uint64_t covered = 0;
  for (const located& l : all) {
    if (l.begin != covered) {
      return file_error(
          path, absl::StrCat("tensor '", l.e.name, "' starts at data byte ", l.begin,
                             " but the previous tensor ends at ", covered, " (overlap or hole)"));
    }
    covered = l.end;
  }
  if (covered != data_bytes) {
    return file_error(path, absl::StrCat("the tensors cover ", covered,
                                         " data bytes but the file holds ", data_bytes));
  }
  for (located& l : all) {
    l.e.data = bytes + 8 + length + l.begin;
    m.entries_.push_back(std::move(l.e));
  }
  return m;
}

mapped_safetensors::mapped_safetensors(mapped_safetensors&& other) noexcept
    : path_(std::move(other.path_)),
      base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      entries_(std::move(other.entries_)),
      metadata_(std::move(other.metadata_)) {}

mapped_safetensors& mapped_safetensors::operator=(mapped_safetensors&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) munmap(base_, size_);
    path_ = std::move(other.path_);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    entries_ = std::move(other.entries_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

mapped_safetensors::~mapped_safetensors() {
  if (base_ != nullptr) munmap(base_, size_);
}

const mapped_safetensors::entry* mapped_safetensors::find(const std::string& name) const {
  for (const entry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

absl::Status copy_as_f32(const mapped_safetensors::entry& e, float* out) {
  const uint64_t n = e.bytes / (e.dtype == "F32" ? 4 : 2);
  if (e.dtype == "F32") {
    std::memcpy(out, e.data, e.bytes);
  } else if (e.dtype == "BF16") {
    const auto* in = static_cast<const unsigned char*>(e.data);
    for (uint64_t i = 0; i < n; ++i) {
      const uint32_t bits =
          (static_cast<uint32_t>(in[2 * i]) | static_cast<uint32_t>(in[2 * i + 1]) << 8) << 16;
      std::memcpy(out + i, &bits, sizeof(float));
    }
  } else if (e.dtype == "F16") {
    const auto* in = static_cast<const unsigned char*>(e.data);
    for (uint64_t i = 0; i < n; ++i)
      out[i] = half_to_float(static_cast<uint16_t>(in[2 * i] | in[2 * i + 1] << 8));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", e.name, "' is ", e.dtype, ", not a float type"));
  }
  return absl::OkStatus();
}

}  // namespace troupe::tensor
