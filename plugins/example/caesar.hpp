#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace troupe::example {

/// Options of the `stage/caesar` role.
struct caesar_options {
  /// Letters are rotated by this many places; 13 twice is the identity.
  int shift = 13;
};

/// Rotates ASCII letters by `shift` places, keeping case; other bytes pass unchanged.
[[nodiscard]] std::string caesar_shift(absl::string_view text, int shift);

}  // namespace troupe::example
