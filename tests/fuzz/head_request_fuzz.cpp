// Requests to the head, as head_server hands them to head_logic: each envelope of the input (back
// to back, so that a join can come before the requests only members may make) from one of two
// client connections, with time moving on between them.

#include "runtime/cluster/envelope.hpp"
#include "runtime/cluster/head_logic.hpp"
#include "tests/fuzz/fuzz_target.hpp"

namespace {

void serve_requests(absl::string_view input) {
  using namespace troupe::cluster;
  auto now = head_logic::clock::time_point();
  head_options options;
  options.credentials.token = "t";
  options.endpoint = "tcp://127.0.0.1:1";
  head_logic head(std::move(options), now);
  int n = 0;
  for (frame_reader reader(input.data(), input.size(), 1 << 20); !reader.done(); ++n) {
    auto request = reader.next();
    if (!request.ok()) return;
    now += std::chrono::milliseconds(100 * (n % 7));
    (void)head.on_request(n % 3 == 2 ? "client-b" : "client-a", *request, now);
    (void)head.on_tick(now);
  }
  (void)head.take_notices();
  (void)head.take_rejections();
  (void)head.take_forwarded_events();
}

}  // namespace

TROUPE_FUZZ_TARGET(head_request, serve_requests)
