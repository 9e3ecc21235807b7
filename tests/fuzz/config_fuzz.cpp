// A config as `troupe launch CONFIG --set ...` reads it: the input's first line is one `--set`
// override, the rest the YAML file; the result is checked against the app spec's schema.

#include "runtime/config/app_spec.hpp"
#include "runtime/config/document.hpp"
#include "runtime/config/parse_context.hpp"
#include "tests/fuzz/fuzz_target.hpp"

namespace {

void load_config(absl::string_view input) {
  using namespace troupe::config;
  const size_t line_end = std::min(input.find('\n'), input.size());
  auto doc = document::load_string(input.substr(std::min(line_end + 1, input.size())), "fuzz.yaml");
  if (!doc.ok()) return;
  if (!doc->apply_override(input.substr(0, line_end)).ok()) return;
  diagnostics diag;
  const parse_context ctx(*doc, diag);
  app_spec spec;
  (void)app_spec_schema().parse(doc->root(), ctx, spec);
  (void)diag.status();
}

}  // namespace

TROUPE_FUZZ_TARGET(config, load_config)
