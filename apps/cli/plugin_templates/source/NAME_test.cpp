// The plugin's own test (ctest runs it): the logic, without troupe running.

#include <cstdio>

#include "{{name}}.hpp"

int main() {
  if ({{name}}_plugin::record(7) != "record 7") {
    std::fprintf(stderr, "record(7) should be \"record 7\"\n");
    return 1;
  }
  std::puts("{{name}}_test: ok");
  return 0;
}
