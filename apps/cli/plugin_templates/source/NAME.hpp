#pragma once

// The logic of the role source/{{name}}, without troupe's actors: what {{name}}_test.cpp tests.

#include <cstdint>
#include <string>

namespace {{name}}_plugin {

/// The role's options: the `options:` of a config's source/{{name}} role.
struct options {
  /// How many records the source holds.
  int64_t count = 100;
};

/// Record number `seq` (from 0). A source answers by position, so that a restarted one
/// continues exactly where the stream was: record `seq` must always be the same.
inline std::string record(uint64_t seq) { return "record " + std::to_string(seq); }

}  // namespace {{name}}_plugin
