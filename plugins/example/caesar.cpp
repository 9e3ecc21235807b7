#include "caesar.hpp"

namespace troupe::example {

std::string caesar_shift(absl::string_view text, int shift) {
  shift = ((shift % 26) + 26) % 26;
  std::string out(text);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>('a' + (c - 'a' + shift) % 26);
    if (c >= 'A' && c <= 'Z') c = static_cast<char>('A' + (c - 'A' + shift) % 26);
  }
  return out;
}

}  // namespace troupe::example
