// The plugin's own test (ctest runs it): the logic, without troupe running.

#include <cstdio>

#include "{{name}}.hpp"

int main() {
  if ({{name}}_plugin::transform("ab", 3) != "ababab") {
    std::fprintf(stderr, "transform(\"ab\", 3) should be \"ababab\"\n");
    return 1;
  }
  std::puts("{{name}}_test: ok");
  return 0;
}
