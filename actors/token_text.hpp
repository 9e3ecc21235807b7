#pragma once

// A token's bytes as the output's text holds them, which stop strings and structured output are
// matched on.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::actors {

/// (*table)[token]; with no table, troupe's byte vocabulary's (token t is the byte t); empty for
/// an id outside either.
[[nodiscard]] std::string_view token_text_of(const std::vector<std::string>* table, int32_t token);

}  // namespace troupe::actors
