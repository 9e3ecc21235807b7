#include "actors/token_text.hpp"

#include <array>

namespace troupe::actors {

std::string_view token_text_of(const std::vector<std::string>* table, int32_t token) {
  static const std::array<char, 256> bytes = [] {
    std::array<char, 256> b{};
    for (int i = 0; i < 256; ++i)
      b[i] = static_cast<char>(i);
    return b;
  }();
  if (table == nullptr) {
    return token >= 0 && token < 256 ? std::string_view(&bytes[token], 1) : std::string_view();
  }
  return token >= 0 && static_cast<size_t>(token) < table->size()
             ? std::string_view((*table)[token])
             : std::string_view();
}

}  // namespace troupe::actors
