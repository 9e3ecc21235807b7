#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "apps/serve/generation_reply.hpp"
#include "apps/serve/openai_api.hpp"
#include "apps/serve/serve_metrics.hpp"
#include "runtime/http/http_server.hpp"

namespace troupe::apps {

/// The serving app's HTTP server (http::http_server, one event loop): /v1/completions,
/// /v1/chat/completions (streamed as Server-Sent Events or whole), /v1/models, vLLM's
/// /tokenize and /detokenize, /health and /metrics. It parses and checks requests, numbers them,
/// and hands them to the router through `hooks`; the router answers each with accepted() or
/// refused(), then its events, which the request's reply (generation_reply) turns into its answer
/// as the client reads. Once draining, it refuses new requests (503) and /health says so, while
/// the ones it has finish.
class http_front_end {
 public:
  struct hooks {
    std::function<void(actor::generation_request)> submit;
    std::function<void(uint64_t id)> cancel;  ///< the client went away
  };
  struct settings {
    std::string host = "127.0.0.1";
    int port = 0;
    std::string token;  ///< bearer token; empty: none
    api_limits limits;
    http::http_limits http;
    std::string tls_cert;  ///< with tls_key: HTTPS; both empty: HTTP
    std::string tls_key;
    std::shared_ptr<serve_metrics> metrics;  ///< counted here, exported at /metrics
    /// The model's text and tokens (troupe's byte vocabulary unless the model has its own);
    /// it must outlive the front end.
    const models::model_vocabulary* vocabulary = &models::byte_vocabulary();
  };

  [[nodiscard]] static absl::StatusOr<std::unique_ptr<http_front_end>> start(settings s, hooks h);
  ~http_front_end();

  [[nodiscard]] int port() const { return port_; }

  /// The router's answers about request `id` (any thread).
  void accepted(uint64_t id);
  void refused(uint64_t id, api_error error);
  void deliver(const actor::generation_event& event);

  /// Refuse new requests from now on (any thread).
  void drain() { draining_ = true; }
  /// Requests whose HTTP exchange has not ended.
  [[nodiscard]] size_t open_requests();

 private:
  http_front_end(settings s, hooks h);
  void install_routes();
  std::shared_ptr<generation_stream> find(uint64_t id);
  // Numbers `n` generations and opens a stream for each, before they are submitted: the first id.
  std::pair<uint64_t, std::vector<std::shared_ptr<generation_stream>>> open_streams(int n);
  // What the replies need of the front end.
  reply_context context();

  settings settings_;
  hooks hooks_;
  std::unique_ptr<http::http_server> server_;
  int port_ = 0;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<bool> draining_{false};  // new requests are refused
  std::mutex mu_;
  std::map<uint64_t, std::shared_ptr<generation_stream>> streams_;
};

}  // namespace troupe::apps
