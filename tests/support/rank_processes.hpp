#pragma once

// What the communicator tests' rank processes (gloo_rank, nccl_rank) need: a head in the test's
// process whose key-value store they rendezvous through, and their reports.

#include <memory>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "runtime/cluster/head_server.hpp"
#include "tests/support/subprocess.hpp"

namespace troupe::testing {

/// A rank process's report: the JSON object on the last line of its stdout (libraries such as
/// NCCL may print before it); an empty object, and a test failure, when there is none.
inline nlohmann::json report_of(const process_result& r) {
  std::string_view out = r.out;
  while (!out.empty() && out.back() == '\n')
    out.remove_suffix(1);
  auto j = nlohmann::json::parse(out.substr(out.rfind('\n') + 1), nullptr, false);
  EXPECT_TRUE(j.is_object()) << "stdout: " << r.out << "\nstderr: " << r.err;
  return j.is_object() ? j : nlohmann::json::object();
}

/// The head, with the token "secret".
class store_head {
 public:
  static constexpr const char* token = "secret";

  /// Starts the head on a free loopback port; a failure fails the calling test.
  void start() {
    auto head = cluster::head_server::start(
        context_, "tcp://127.0.0.1:0",
        {.credentials = {.token = token}, .app_config = {}, .endpoint = {}, .metrics_text = {}},
        1 << 20, metrics_, events_);
    ASSERT_TRUE(head.ok()) << head.status();
    head_ = std::move(*head);
  }

  [[nodiscard]] std::string endpoint() const { return head_->endpoint(); }

 private:
  zmq::context_t context_{1};
  metrics::registry metrics_;
  run::event_log events_;
  std::unique_ptr<cluster::head_server> head_;
};

}  // namespace troupe::testing
