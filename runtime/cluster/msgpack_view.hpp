#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "msgpack.hpp"

namespace troupe::cluster {

/// Typed, checked access to a msgpack map with string keys, as peers send them. Every accessor
/// reports a missing key or a wrong type as INVALID_ARGUMENT naming `what` and the key, so bad
/// input from the network becomes an error reply, never a crash.
class map_view {
 public:
  /// A view of `object`, which must be a map; `what` names it in errors ("join payload").
  [[nodiscard]] static absl::StatusOr<map_view> of(const msgpack::object& object,
                                                   absl::string_view what);

  /// The value under `key`, or nullptr.
  [[nodiscard]] const msgpack::object* find(absl::string_view key) const;

  [[nodiscard]] absl::StatusOr<std::string> get_string(absl::string_view key) const;
  [[nodiscard]] absl::StatusOr<std::string> get_string(absl::string_view key,
                                                       std::string fallback) const;
  /// A string or a bin.
  [[nodiscard]] absl::StatusOr<std::string> get_bytes(absl::string_view key) const;
  [[nodiscard]] absl::StatusOr<uint64_t> get_uint(absl::string_view key) const;
  [[nodiscard]] absl::StatusOr<uint64_t> get_uint(absl::string_view key, uint64_t fallback) const;
  [[nodiscard]] absl::StatusOr<int64_t> get_int(absl::string_view key, int64_t fallback) const;
  /// A float or an integer (msgpack packs integral floats as integers).
  [[nodiscard]] absl::StatusOr<double> get_double(absl::string_view key, double fallback) const;
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> get_strings(absl::string_view key) const;

 private:
  map_view(const msgpack::object_map& map, std::string what) : map_(&map), what_(std::move(what)) {}
  absl::Status wrong_type(absl::string_view key, absl::string_view expected) const;
  absl::Status missing(absl::string_view key) const;
  // The value `o` found under `key`, checked.
  absl::StatusOr<std::string> string_of(absl::string_view key, const msgpack::object& o) const;
  absl::StatusOr<uint64_t> uint_of(absl::string_view key, const msgpack::object& o) const;

  const msgpack::object_map* map_;
  std::string what_;
};

}  // namespace troupe::cluster
