#pragma once

#include <map>
#include <mutex>
#include <string>

#include "runtime/actor/message_types.hpp"
#include "runtime/metrics/registry.hpp"

namespace troupe::apps {

/// The serving app's figures, kept in the process's registry (so the head's /metrics has them
/// too) and exported with the rest of it at the serving API's GET /metrics: responses by HTTP
/// status, time to first token and inter-token latency (measured where the router hands tokens
/// to the HTTP threads), queue depth, requests in flight and dispatched to each worker, and the
/// workers' KV blocks in use, batch sizes, prefix-cache queries and hits (vLLM's, in prompt
/// tokens) and speculative decoding's drafts (from their poll reports). Updated from the router and
/// the HTTP threads.
class serve_metrics {
 public:
  explicit serve_metrics(metrics::registry& registry);

  void response(int http_status);
  /// A request (or a replay) went to `worker`.
  void dispatched(const std::string& worker);
  /// `tokens` arrived for a request submitted `since_submit` seconds ago whose previous tokens
  /// (`earlier` of them) arrived `since_last` seconds ago.
  void tokens_arrived(int tokens, int earlier, double since_submit, double since_last);
  void router_state(size_t queued, size_t in_flight, size_t workers);
  void replayed(uint64_t requests) { replays_.inc(requests); }
  /// The autoscaler's target and the workers it drains.
  void autoscale_state(int target, size_t draining);
  /// A worker's latest report; a worker that is gone no longer counts.
  void worker_state(const std::string& worker, const actor::worker_report& report);
  void worker_gone(const std::string& worker);
  /// The HTTP server's connections, and the reply bytes it holds for clients yet to read them.
  void http_state(int connections, size_t buffered_bytes);

  [[nodiscard]] std::string prometheus_text() const { return registry_.prometheus_text(); }

 private:
  void sum_workers();  // with mu_ held

  metrics::registry& registry_;
  metrics::histogram& ttft_;
  metrics::histogram& inter_token_;
  metrics::histogram& batch_size_;
  metrics::gauge &queue_depth_, &in_flight_, &workers_;
  metrics::gauge &kv_blocks_used_, &kv_blocks_total_, &running_;
  metrics::counter &replays_, &prefix_cache_queries_, &prefix_cache_hits_;
  metrics::counter &spec_drafts_, &spec_draft_tokens_, &spec_accepted_tokens_;
  std::mutex mu_;
  std::map<std::string, actor::worker_report> workers_state_;  // without events
};

}  // namespace troupe::apps
