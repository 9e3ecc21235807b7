#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "runtime/actor/message_types.hpp"

namespace troupe::actors {

/// Options of the built-in `sink/digest` role (it has none).
struct digest_sink_options {};

/// Consumes a stream in sequence order and keeps counts and a digest of it: FNV-1a (64 bit) over
/// each payload followed by a zero byte, so equal digests mean equal ordered streams.
class digest_sink {
 public:
  /// Takes item `seq`; fails unless it is the next one in order.
  [[nodiscard]] absl::Status consume(uint64_t seq, absl::string_view payload);

  /// Counts and digest so far ("fnv1a64:" + 16 hex digits).
  [[nodiscard]] actor::sink_report report() const;

 private:
  static constexpr uint64_t fnv_offset = 0xcbf29ce484222325ull;
  static constexpr uint64_t fnv_prime = 0x100000001b3ull;

  uint64_t next_seq_ = 0;
  uint64_t bytes_ = 0;
  uint64_t hash_ = fnv_offset;
};

}  // namespace troupe::actors
