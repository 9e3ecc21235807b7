#include "apps/serve/serve_metrics.hpp"

namespace troupe::apps {
namespace {

const std::vector<double> latency_seconds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                             0.25,  0.5,    1,     2.5,  5,     10,   30};
const std::vector<double> sequences = {1, 2, 4, 8, 16, 32, 64, 128, 256};

}  // namespace

serve_metrics::serve_metrics(metrics::registry& registry)
    : registry_(registry),
      ttft_(registry_.get_histogram("troupe_serve_time_to_first_token_seconds",
                                    "From a request's arrival to its first token.",
                                    latency_seconds)),
      inter_token_(registry_.get_histogram("troupe_serve_inter_token_latency_seconds",
                                           "Between successive tokens of a request.",
                                           latency_seconds)),
      batch_size_(registry_.get_histogram("troupe_serve_batch_size",
                                          "Sequences in one engine iteration.", sequences)),
      queue_depth_(registry_.get_gauge("troupe_serve_queue_depth",
                                       "Requests waiting in the router for a worker.")),
      in_flight_(registry_.get_gauge("troupe_serve_in_flight", "Requests on workers.")),
      workers_(registry_.get_gauge("troupe_serve_workers", "Inference workers serving.")),
      kv_blocks_used_(registry_.get_gauge("troupe_serve_kv_blocks_in_use",
                                          "KV cache blocks held by sequences, all workers.")),
      kv_blocks_total_(
          registry_.get_gauge("troupe_serve_kv_blocks_capacity", "KV cache blocks, all workers.")),
      running_(registry_.get_gauge("troupe_serve_running_sequences",
                                   "Sequences in the workers' batches.")),
      replays_(registry_.get_counter("troupe_serve_replays_total",
                                     "Requests replayed on another worker after theirs was lost.")),
      prefix_cache_queries_(registry_.get_counter(
          "troupe_serve_prefix_cache_queries_total",
          "Prompt tokens looked up in the workers' prefix caches (vLLM's prefix_cache_queries).")),
      prefix_cache_hits_(registry_.get_counter(
          "troupe_serve_prefix_cache_hits_total",
          "Prompt tokens found in the workers' prefix caches (vLLM's prefix_cache_hits).")),
      spec_drafts_(registry_.get_counter(
          "troupe_serve_spec_decode_num_drafts_total",
          "Decode steps that checked draft tokens (vLLM's spec_decode_num_drafts).")),
      spec_draft_tokens_(
          registry_.get_counter("troupe_serve_spec_decode_num_draft_tokens_total",
                                "Draft tokens checked (vLLM's spec_decode_num_draft_tokens).")),
      spec_accepted_tokens_(registry_.get_counter(
          "troupe_serve_spec_decode_num_accepted_tokens_total",
          "Draft tokens the model accepted (vLLM's spec_decode_num_accepted_tokens).")) {}

void serve_metrics::http_state(int connections, size_t buffered_bytes) {
  registry_.get_gauge("troupe_serve_http_connections", "Connections open to the serving API.")
      .set(connections);
  registry_
      .get_gauge("troupe_serve_http_reply_buffer_bytes",
                 "Reply bytes held for clients that have not read them yet (serve.http."
                 "reply_buffer_bytes bounds each).")
      .set(static_cast<double>(buffered_bytes));
}

void serve_metrics::autoscale_state(int target, size_t draining) {
  registry_
      .get_gauge("troupe_serve_autoscale_target_workers",
                 "Workers the autoscaler asks for (roles.worker.autoscale).")
      .set(target);
  registry_
      .get_gauge("troupe_serve_draining_workers",
                 "Workers finishing their requests before autoscaling stops them.")
      .set(static_cast<double>(draining));
}

void serve_metrics::response(int http_status) {
  registry_
      .get_counter("troupe_serve_responses_total", "HTTP responses by status.",
                   {{"status", std::to_string(http_status)}})
      .inc();
}

void serve_metrics::dispatched(const std::string& worker) {
  registry_
      .get_counter("troupe_serve_dispatched_total", "Requests (and replays) sent to each worker.",
                   {{"worker", worker}})
      .inc();
}

void serve_metrics::tokens_arrived(int tokens, int earlier, double since_submit,
                                   double since_last) {
  if (tokens <= 0) return;
  if (earlier == 0) {
    ttft_.observe(since_submit);  // the rest of a first delivery has no gap to measure
    return;
  }
  // Tokens delivered together were produced over the time since the previous ones.
  for (int i = 0; i < tokens; ++i)
    inter_token_.observe(since_last / tokens);
}

void serve_metrics::router_state(size_t queued, size_t in_flight, size_t workers) {
  queue_depth_.set(static_cast<double>(queued));
  in_flight_.set(static_cast<double>(in_flight));
  workers_.set(static_cast<double>(workers));
}

void serve_metrics::worker_state(const std::string& worker, const actor::worker_report& report) {
  for (int32_t n : report.batch_sizes)
    batch_size_.observe(n);
  prefix_cache_queries_.inc(report.prefix_cache_queries);
  prefix_cache_hits_.inc(report.prefix_cache_hits);
  spec_drafts_.inc(report.spec_decode_drafts);
  spec_draft_tokens_.inc(report.spec_decode_draft_tokens);
  spec_accepted_tokens_.inc(report.spec_decode_accepted_tokens);
  std::lock_guard lock(mu_);
  actor::worker_report& kept = workers_state_[worker];
  kept.kv_blocks_used = report.kv_blocks_used;
  kept.kv_blocks_total = report.kv_blocks_total;
  kept.running = report.running;
  sum_workers();
}

void serve_metrics::worker_gone(const std::string& worker) {
  std::lock_guard lock(mu_);
  workers_state_.erase(worker);
  sum_workers();
}

void serve_metrics::sum_workers() {
  double used = 0, total = 0, running = 0;
  for (const auto& [name, r] : workers_state_) {
    used += r.kv_blocks_used;
    total += r.kv_blocks_total;
    running += r.running;
  }
  kv_blocks_used_.set(used);
  kv_blocks_total_.set(total);
  running_.set(running);
}

}  // namespace troupe::apps
