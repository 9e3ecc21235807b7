// The plugin's own test (ctest runs it): the logic, without troupe running.

#include <cstdio>

#include "{{name}}.hpp"

int main() {
  int failures = 0;
  auto expect = [&](double got, double want, const char* what) {
    if (got != want) {
      std::fprintf(stderr, "%s: got %g, want %g\n", what, got, want);
      ++failures;
    }
  };
  expect({{name}}_plugin::score("", "abcd", true), 1.0, "all letters");
  expect({{name}}_plugin::score("", "ab12", true), 0.5, "half letters");
  expect({{name}}_plugin::score("", "abcd", false), 0.5, "ran out of tokens");
  if (failures == 0) std::puts("{{name}}_test: ok");
  return failures == 0 ? 0 : 1;
}
