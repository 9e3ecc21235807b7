#pragma once

// Reads a source role's whole stream in place: pretraining's data.source, whose records each
// trainer rank reads from an instance of the role in its own process.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "caf/actor_system.hpp"
#include "runtime/actor/interfaces.hpp"

namespace troupe::actors {

/// A source's records in stream order, without CAF: which records to ask for next, and a check
/// of each answer. A source answers by position, so the answer to (next(), ask()) holds records
/// next(), next() + 1, ... and an empty answer ends the stream.
class record_collector {
 public:
  /// `source` names the source in errors; `max_records` (0: no limit) ends the stream early.
  record_collector(std::string source, uint64_t max_records);

  [[nodiscard]] uint64_t next() const { return records_.size(); }
  /// How many records to ask for: a batch, or what is left of `max_records`.
  [[nodiscard]] uint32_t ask() const;
  /// Takes the answer to (next(), ask()). True when the stream ended; INVALID_ARGUMENT naming
  /// the source when the answer holds records that were not asked for or skips one.
  [[nodiscard]] absl::StatusOr<bool> take(actor::source_batch batch);

  [[nodiscard]] std::vector<std::string>& records() { return records_; }

 private:
  std::string source_;
  uint64_t max_records_;
  std::vector<std::string> records_;
};

/// Every record of `source`, from record 0 until it answers none (or `max_records`, when not
/// 0). Each answer must come within `timeout` (DEADLINE_EXCEEDED naming `name` otherwise); a
/// source that fails or answers out of order is an error naming it. Blocks the calling thread:
/// the source must not need it (spawn it detached when the caller is an actor).
[[nodiscard]] absl::StatusOr<std::vector<std::string>> read_records(
    caf::actor_system& system, const actor::source_actor& source, const std::string& name,
    uint64_t max_records, std::chrono::milliseconds timeout);

}  // namespace troupe::actors
