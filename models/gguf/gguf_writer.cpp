#include "models/gguf/gguf_writer.hpp"

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.hpp"
#include "runtime/tensor/dtype.hpp"

namespace troupe::models::gguf {
namespace {

static_assert(std::endian::native == std::endian::little, "GGUF is little-endian");

constexpr uint32_t gguf_version = 3;
constexpr uint64_t alignment = 32;

// GGUF's value types (gguf.h).
enum class value_type : uint32_t {
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
};

uint16_t f16_bits(float f) {
  return std::bit_cast<uint16_t>(static_cast<_Float16>(f));
}

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

uint64_t padded(uint64_t n) {
  return (n + alignment - 1) / alignment * alignment;
}

int64_t element_count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

uint64_t encoded_size(int64_t elements, tensor_type type) {
  switch (type) {
    case tensor_type::f32:
      return 4 * elements;
    case tensor_type::f16:
    case tensor_type::bf16:
      return 2 * elements;
    case tensor_type::q8_0:
      return elements / q8_0_block * (2 + q8_0_block);
  }
  return 0;
}

}  // namespace

const char* tensor_type_name(tensor_type t) {
  switch (t) {
    case tensor_type::f32:
      return "F32";
    case tensor_type::f16:
      return "F16";
    case tensor_type::bf16:
      return "BF16";
    case tensor_type::q8_0:
      return "Q8_0";
  }
  return "?";
}

std::string encode_tensor(std::span<const float> values, tensor_type type) {
  std::string out;
  out.reserve(encoded_size(static_cast<int64_t>(values.size()), type));
  switch (type) {
    case tensor_type::f32:
      out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
      break;
    case tensor_type::f16:
      for (float v : values)
        put(out, f16_bits(v));
      break;
    case tensor_type::bf16:
      for (float v : values)
        put(out, tensor::bf16(v).bits);
      break;
    case tensor_type::q8_0:
      for (size_t b = 0; b + q8_0_block <= values.size(); b += q8_0_block) {
        float amax = 0.0f;
        for (int64_t i = 0; i < q8_0_block; ++i)
          amax = std::max(amax, std::fabs(values[b + i]));
        const float d = amax / 127.0f;
        const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
        put(out, f16_bits(d));
        for (int64_t i = 0; i < q8_0_block; ++i)
          put(out, static_cast<int8_t>(std::round(values[b + i] * inverse)));
      }
      break;
  }
  return out;
}

void gguf_writer::set_string(std::string key, std::string value) {
  metadata_.emplace_back(std::move(key), std::move(value));
}
void gguf_writer::set_u32(std::string key, uint32_t value) {
  metadata_.emplace_back(std::move(key), value);
}
void gguf_writer::set_i32(std::string key, int32_t value) {
  metadata_.emplace_back(std::move(key), value);
}
void gguf_writer::set_f32(std::string key, float value) {
  metadata_.emplace_back(std::move(key), value);
}
void gguf_writer::set_bool(std::string key, bool value) {
  metadata_.emplace_back(std::move(key), value);
}
void gguf_writer::set_strings(std::string key, std::vector<std::string> values) {
  metadata_.emplace_back(std::move(key), array(std::move(values)));
}
void gguf_writer::set_i32s(std::string key, std::vector<int32_t> values) {
  metadata_.emplace_back(std::move(key), array(std::move(values)));
}

absl::Status gguf_writer::add_tensor(std::string name, std::vector<int64_t> dims, tensor_type type,
                                     std::span<const float> values) {
  if (dims.empty() || element_count(dims) != static_cast<int64_t>(values.size())) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF tensor '", name, "': ", values.size(),
                                                   " values do not fill its dimensions"));
  }
  if (type == tensor_type::q8_0 && dims[0] % q8_0_block != 0) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF tensor '", name, "': rows of ", dims[0],
                                                   " values cannot be Q8_0 (blocks of 32)"));
  }
  tensors_.push_back({std::move(name), std::move(dims), type, values, {}});
  return absl::OkStatus();
}

absl::Status gguf_writer::add_tensor(std::string name, std::vector<int64_t> dims, tensor_type type,
                                     std::vector<float> values) {
  const std::span<const float> view(values);
  TROUPE_RETURN_IF_ERROR(add_tensor(std::move(name), std::move(dims), type, view));
  tensors_.back().owned = std::move(values);  // the buffer (and so the view) stays put
  return absl::OkStatus();
}

absl::Status gguf_writer::write(const std::string& path) const {
  std::string header = "GGUF";
  put<uint32_t>(header, gguf_version);
  put<uint64_t>(header, tensors_.size());
  put<uint64_t>(header, metadata_.size());
  for (const auto& [key, v] : metadata_) {
    put_string(header, key);
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::string>) {
            put(header, value_type::string);
            put_string(header, x);
          } else if constexpr (std::is_same_v<T, uint32_t>) {
            put(header, value_type::u32);
            put(header, x);
          } else if constexpr (std::is_same_v<T, int32_t>) {
            put(header, value_type::i32);
            put(header, x);
          } else if constexpr (std::is_same_v<T, float>) {
            put(header, value_type::f32);
            put(header, x);
          } else if constexpr (std::is_same_v<T, bool>) {
            put(header, value_type::boolean);
            put<int8_t>(header, x ? 1 : 0);
          } else {
            put(header, value_type::array);
            std::visit(
                [&](const auto& items) {
                  using E = typename std::decay_t<decltype(items)>::value_type;
                  put(header,
                      std::is_same_v<E, std::string> ? value_type::string : value_type::i32);
                  put<uint64_t>(header, items.size());
                  for (const E& item : items) {
                    if constexpr (std::is_same_v<E, std::string>) {
                      put_string(header, item);
                    } else {
                      put(header, item);
                    }
                  }
                },
                x);
          }
        },
        v);
  }
  uint64_t offset = 0;
  for (const tensor& t : tensors_) {
    put_string(header, t.name);
    put<uint32_t>(header, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims)
      put<int64_t>(header, d);
    put<uint32_t>(header, static_cast<uint32_t>(t.type));
    put<uint64_t>(header, offset);
    offset = padded(offset + encoded_size(element_count(t.dims), t.type));
  }
  header.resize(padded(header.size()), '\0');

  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", temporary));
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const tensor& t : tensors_) {
      std::string bytes = encode_tensor(t.values, t.type);
      bytes.resize(padded(bytes.size()), '\0');
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    out.flush();
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", temporary));
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot rename ", temporary, " to ", path, ": ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace troupe::models::gguf
