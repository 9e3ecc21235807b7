#pragma once

// The logic of the role stage/{{name}}, without troupe's actors: what {{name}}_test.cpp tests.

#include <string>
#include <string_view>

namespace {{name}}_plugin {

/// The role's options: the `options:` of a config's stage/{{name}} role.
struct options {
  /// How many times each item's text is repeated.
  int times = 2;
};

/// `text` repeated `times` times.
inline std::string transform(std::string_view text, int times) {
  std::string out;
  for (int i = 0; i < times; ++i)
    out.append(text);
  return out;
}

}  // namespace {{name}}_plugin
