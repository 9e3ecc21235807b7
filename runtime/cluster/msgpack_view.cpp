#include "runtime/cluster/msgpack_view.hpp"

#include "absl/strings/str_cat.h"

namespace troupe::cluster {

absl::StatusOr<map_view> map_view::of(const msgpack::object& object, absl::string_view what) {
  if (object.type != msgpack::type::MAP) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": expected a map"));
  }
  return map_view(object.via.map, std::string(what));
}

const msgpack::object* map_view::find(absl::string_view key) const {
  for (uint32_t i = 0; i < map_->size; ++i) {
    const msgpack::object& k = map_->ptr[i].key;
    if (k.type == msgpack::type::STR && absl::string_view(k.via.str.ptr, k.via.str.size) == key) {
      return &map_->ptr[i].val;
    }
  }
  return nullptr;
}

absl::Status map_view::wrong_type(absl::string_view key, absl::string_view expected) const {
  return absl::InvalidArgumentError(absl::StrCat(what_, ": '", key, "' must be ", expected));
}

absl::Status map_view::missing(absl::string_view key) const {
  return absl::InvalidArgumentError(absl::StrCat(what_, ": missing key '", key, "'"));
}

absl::StatusOr<std::string> map_view::string_of(absl::string_view key,
                                                const msgpack::object& o) const {
  if (o.type != msgpack::type::STR) return wrong_type(key, "a string");
  return std::string(o.via.str.ptr, o.via.str.size);
}

absl::StatusOr<uint64_t> map_view::uint_of(absl::string_view key, const msgpack::object& o) const {
  if (o.type != msgpack::type::POSITIVE_INTEGER) return wrong_type(key, "a non-negative integer");
  return o.via.u64;
}

absl::StatusOr<std::string> map_view::get_string(absl::string_view key) const {
  const msgpack::object* o = find(key);
  if (o == nullptr) return missing(key);
  return string_of(key, *o);
}

absl::StatusOr<std::string> map_view::get_string(absl::string_view key,
                                                 std::string fallback) const {
  const msgpack::object* o = find(key);
  if (o == nullptr) return fallback;
  return string_of(key, *o);
}

absl::StatusOr<std::string> map_view::get_bytes(absl::string_view key) const {
  const msgpack::object* o = find(key);
  if (o == nullptr) return missing(key);
  if (o->type == msgpack::type::STR) return std::string(o->via.str.ptr, o->via.str.size);
  if (o->type == msgpack::type::BIN) return std::string(o->via.bin.ptr, o->via.bin.size);
  return wrong_type(key, "a string or bin");
}

absl::StatusOr<uint64_t> map_view::get_uint(absl::string_view key) const {
  const msgpack::object* o = find(key);
  if (o == nullptr) return missing(key);
  return uint_of(key, *o);
}

absl::StatusOr<uint64_t> map_view::get_uint(absl::string_view key, uint64_t fallback) const {
  const msgpack::object* o = find(key);
  if (o == nullptr) return fallback;
  return uint_of(key, *o);
}

absl::StatusOr<int64_t> map_view::get_int(absl::string_view key, int64_t fallback) const {
  const msgpack::object* o = find(key);
  if (o == nullptr) return fallback;
  if (o->type == msgpack::type::POSITIVE_INTEGER) {
    if (o->via.u64 > static_cast<uint64_t>(INT64_MAX)) return wrong_type(key, "a 64-bit integer");
    return static_cast<int64_t>(o->via.u64);
  }
  if (o->type == msgpack::type::NEGATIVE_INTEGER) return o->via.i64;
  return wrong_type(key, "an integer");
}

absl::StatusOr<double> map_view::get_double(absl::string_view key, double fallback) const {
  const msgpack::object* o = find(key);
  if (o == nullptr) return fallback;
  switch (o->type) {
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      return o->via.f64;
    case msgpack::type::POSITIVE_INTEGER:
      return static_cast<double>(o->via.u64);
    case msgpack::type::NEGATIVE_INTEGER:
      return static_cast<double>(o->via.i64);
    default:
      return wrong_type(key, "a number");
  }
}

absl::StatusOr<std::vector<std::string>> map_view::get_strings(absl::string_view key) const {
  const msgpack::object* o = find(key);
  if (o == nullptr) return std::vector<std::string>{};
  if (o->type != msgpack::type::ARRAY) return wrong_type(key, "a list of strings");
  std::vector<std::string> out;
  for (uint32_t i = 0; i < o->via.array.size; ++i) {
    const msgpack::object& e = o->via.array.ptr[i];
    if (e.type != msgpack::type::STR) return wrong_type(key, "a list of strings");
    out.emplace_back(e.via.str.ptr, e.via.str.size);
  }
  return out;
}

}  // namespace troupe::cluster
