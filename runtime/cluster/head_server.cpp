#include "runtime/cluster/head_server.hpp"

#include <algorithm>

#include <pthread.h>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/cluster/zmq_util.hpp"

namespace troupe::cluster {

absl::StatusOr<std::unique_ptr<head_server>> head_server::start(
    zmq::context_t& context, std::string listen, head_options options, size_t max_frame_bytes,
    metrics::registry& metrics, run::event_log& events) {
  auto gate = curve_gate::open(context, options.credentials);
  if (!gate.ok()) return gate.status();
  zmq::socket_t socket(context, zmq::socket_type::router);
  configure_socket(socket, 4 * max_frame_bytes);
  socket.set(zmq::sockopt::router_mandatory, 1);
  // Connections not yet accepted that the kernel queues (ZeroMQ's default: 100). A join storm
  // past the queue loses SYNs, whose retries wait 1, 3, 7 ... s. Linux caps the queue at
  // net.core.somaxconn (4096 by default; docs/cluster.md says when to raise it).
  socket.set(zmq::sockopt::backlog, 65535);
  secure_server(socket, options.credentials);
  auto handshakes = std::make_unique<handshake_watch>(context, socket);
  auto endpoint = bind_socket(socket, listen);
  if (!endpoint.ok()) return endpoint.status();
  options.endpoint = *endpoint;
  options.metrics_text = [&metrics] { return metrics.prometheus_text(); };
  return std::unique_ptr<head_server>(
      new head_server(std::move(socket), std::move(handshakes), std::move(*gate), *endpoint,
                      std::move(options), max_frame_bytes, metrics, events));
}

head_server::head_server(zmq::socket_t socket, std::unique_ptr<handshake_watch> handshakes,
                         std::shared_ptr<curve_gate> gate, std::string endpoint,
                         head_options options, size_t max_frame_bytes, metrics::registry& metrics,
                         run::event_log& events)
    : gate_(std::move(gate)),
      socket_(std::move(socket)),
      handshakes_(std::move(handshakes)),
      endpoint_(std::move(endpoint)),
      logic_(std::move(options), std::chrono::steady_clock::now()),
      max_frame_bytes_(max_frame_bytes),
      metrics_(metrics),
      events_(events),
      view_(metrics) {
  thread_ = std::thread([this] { loop(); });
  recorder_ = std::thread([this] { record_loop(); });
}

head_server::~head_server() {
  stop();
}

void head_server::stop(absl::string_view reason) {
  if (!thread_.joinable()) return;
  stop_reason_ = std::string(reason);
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_.store(true);
  }
  stop_cv_.notify_all();
  thread_.join();
  recorder_.join();
}

void head_server::retire(std::string node, std::string reason) {
  std::lock_guard<std::mutex> lock(retire_mu_);
  to_retire_.emplace_back(std::move(node), std::move(reason));
}

void head_server::reject(const std::string& identity, const absl::Status& why) {
  metrics_
      .get_counter("troupe_rejected_frames_total", "Frames refused by the control plane",
                   {{"where", "head"}, {"reason", rejection_reason(why)}})
      .inc();
  events_.emit(run::severity::debug, "frame_rejected", std::string(why.message()),
               {{"reason", rejection_reason(why)}});
  envelope h;
  h.type = "error";
  h.src = "head";
  const std::string frame = encode(h, map_builder()
                                          .add("code", absl::StatusCodeToString(why.code()))
                                          .add("message", std::string(why.message()))
                                          .bytes());
  (void)send(socket_, {identity, frame});
}

void head_server::count_refused_handshakes() {
  for (const auto& f : handshakes_->take()) {
    const char* reason = f.key_refused ? "key_not_allowed" : "handshake_failed";
    metrics_
        .get_counter("troupe_auth_refused_total",
                     "Connections to the head refused in the CURVE handshake", {{"reason", reason}})
        .inc();
    events_.emit(run::severity::warning, "auth_refused",
                 f.key_refused ? "refused a connection whose CURVE key is not the cluster's"
                               : "refused a connection whose handshake failed (no CURVE, or "
                                 "another cluster's keys)",
                 {{"reason", reason}});
  }
}

void head_server::serve(const std::vector<zmq::message_t>& frames) {
  // A DEALER's message arrives as [identity, envelope].
  const std::string identity = frames[0].to_string();
  if (frames.size() != 2) {
    reject(identity, absl::InvalidArgumentError(
                         absl::StrCat("expected one frame per message, got ", frames.size() - 1)));
    return;
  }
  auto request =
      decode(static_cast<const char*>(frames[1].data()), frames[1].size(), max_frame_bytes_);
  if (!request.ok()) {
    reject(identity, request.status());
    return;
  }
  deliver(logic_.on_request(identity, *request, std::chrono::steady_clock::now()));
  report();  // counted before the next frame, which may be the metrics request that shows them
}

void head_server::deliver(const std::vector<head_logic::outgoing>& out) {
  for (const auto& o : out) {
    if (auto s = send(socket_, {o.identity, o.frame}); !s.ok()) {
      metrics_.get_counter("troupe_undeliverable_frames_total", "Frames the head could not send")
          .inc();
    }
  }
}

void head_server::report() {
  for (const auto& n : logic_.take_notices()) {
    const auto level = n.type == "member_joined" || n.type == "member_left"
                           ? run::severity::info
                           : run::severity::warning;
    events_.emit(level, n.type, n.message, {{"node", n.node}, {"epoch", logic_.members().epoch()}});
    if (n.type == "join_refused") {
      metrics_.get_counter("troupe_rejected_joins_total", "Joins refused for bad credentials")
          .inc();
    }
  }
  for (const auto& reason : logic_.take_rejections()) {
    metrics_
        .get_counter("troupe_rejected_frames_total", "Frames refused by the control plane",
                     {{"where", "head"}, {"reason", reason}})
        .inc();
  }
  for (const auto& bytes : logic_.take_forwarded_events()) {
    auto event = nlohmann::json::from_msgpack(bytes, true, false);
    if (event.is_object()) events_.forward(std::move(event));
  }
}

void head_server::loop() {
  pthread_setname_np(pthread_self(), "troupe.head");
  using clock = std::chrono::steady_clock;
  zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}};
  auto next_tick = clock::now();
  while (!stopping_.load()) {
    // Until the next tick or publication is due: between them the thread sleeps.
    const auto wait = std::clamp(std::chrono::ceil<std::chrono::milliseconds>(
                                     std::min(next_tick, next_publish_) - clock::now()),
                                 std::chrono::milliseconds(0), tick_interval);
    try {
      zmq::poll(items, 1, wait);
    } catch (const zmq::error_t&) {
      continue;  // EINTR
    }
    for (int n = 0; n < 1000; ++n) {  // drain, but let ticks happen under a flood
      auto frames = try_recv(socket_);
      if (!frames.ok() || frames->empty()) break;
      serve(*frames);
    }
    std::vector<std::pair<std::string, std::string>> retiring;
    {
      std::lock_guard<std::mutex> lock(retire_mu_);
      retiring.swap(to_retire_);
    }
    for (const auto& [node, reason] : retiring)
      deliver(logic_.retire(node, reason));
    if (clock::now() >= next_tick) {
      deliver(logic_.on_tick(clock::now()));
      next_tick = clock::now() + tick_interval;
      count_refused_handshakes();
    }
    report();
    observe(clock::now());
  }
  deliver(logic_.shutdown(stop_reason_));
  report();
}

void head_server::observe(std::chrono::steady_clock::time_point now) {
  using std::chrono::milliseconds;
  if (now < next_publish_) return;
  next_publish_ = now + milliseconds(250);
  view_.publish(logic_.status_payload(now), logic_.worker_metrics());
}

void head_server::record_loop() {
  pthread_setname_np(pthread_self(), "troupe.record");
  using clock = std::chrono::steady_clock;
  auto next = clock::now();
  while (!stopping_.load()) {
    {
      std::unique_lock<std::mutex> lock(stop_mu_);
      if (stop_cv_.wait_until(lock, next, [this] { return stopping_.load(); })) break;
    }
    const auto started = clock::now();
    const metrics::merged_exposition merged = view_.metrics();
    if (merged.dropped_lines > 0) {
      metrics_
          .get_counter("troupe_metrics_dropped_lines_total",
                       "Malformed lines in the metrics workers sent, dropped from the scrape")
          .inc(merged.dropped_lines);
    }
    history_.record(events_.elapsed_seconds(), merged.text);
    stuck_.report(metrics::parse_samples(merged.text), events_);
    const uint64_t refused = history_.refused();
    metrics_
        .get_counter("troupe_history_refused_samples_total",
                     "Samples of series beyond the history's limit, not kept for charts")
        .inc(refused - history_refused_);
    history_refused_ = refused;
    // Every second, or less often when a round takes long (thousands of members): the recorder
    // keeps to a fifth of a core.
    next = std::max(started + std::chrono::seconds(1), clock::now() + 4 * (clock::now() - started));
  }
}

}  // namespace troupe::cluster
