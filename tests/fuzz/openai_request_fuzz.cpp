// What an HTTP client sends the serving front end: the request head as the HTTP server scans and
// parses it, and the body as /v1/completions, /v1/chat/completions, /tokenize and /detokenize
// parse it.

#include "apps/serve/openai_api.hpp"
#include "runtime/http/request_head.hpp"
#include "tests/fuzz/fuzz_target.hpp"

namespace {

void parse_request(absl::string_view input) {
  using namespace troupe::apps;
  troupe::http::http_limits limits;
  limits.max_url_bytes = 256;
  limits.max_header_bytes = 1024;
  size_t head = 0;
  if (troupe::http::scan_request_head(input, limits, &head) == troupe::http::head_scan::complete) {
    (void)troupe::http::parse_request_head(input.substr(0, head), limits);
  }
  const api_limits model{"troupe-tiny", 64, 16};
  (void)parse_completion(input, model, /*chat=*/false);
  (void)parse_completion(input, model, /*chat=*/true);
  (void)tokenize(input, model);
  (void)detokenize(input, model);
}

}  // namespace

TROUPE_FUZZ_TARGET(openai_request, parse_request)
