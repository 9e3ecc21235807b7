#include "runtime/cluster/node_agent.hpp"

#include <algorithm>

#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "runtime/actor/io_work_stealing.hpp"
#include "runtime/actor/messages.hpp"
#include "runtime/cluster/head_client.hpp"
#include "runtime/cluster/msgpack_view.hpp"
#include "runtime/cluster/zmq_util.hpp"

namespace troupe::cluster {
namespace {

using clock = std::chrono::steady_clock;

// A member record as the head sends it: {node, endpoint, state, head}.
peer peer_of(const map_view& m) {
  peer p;
  p.node = m.get_string("node", "").value_or("");
  p.endpoint = m.get_string("endpoint", "").value_or("");
  const std::string state = m.get_string("state", "alive").value_or("alive");
  p.state = state == "alive"  ? member_state::alive
            : state == "left" ? member_state::left
                              : member_state::dead;
  if (const msgpack::object* h = m.find("head"); h && h->type == msgpack::type::BOOLEAN) {
    p.head = h->via.boolean;
  }
  return p;
}

std::string hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

}  // namespace

node_agent::node_agent(zmq::context_t& context, caf::actor_system& system, node_options options,
                       metrics::registry& metrics)
    : context_(context),
      system_(system),
      options_(std::move(options)),
      metrics_(metrics),
      frames_on_workers_(metrics.get_counter(
          "troupe_peer_frames_total", "Frames from peer nodes, by the thread that received them",
          {{"thread", "worker"}})),
      frames_on_node_thread_(metrics.get_counter(
          "troupe_peer_frames_total", "Frames from peer nodes, by the thread that received them",
          {{"thread", "node"}})),
      lost_in_flush_(metrics.get_counter("troupe_remote_undeliverable_total",
                                         "Actor messages between nodes that could not be delivered",
                                         {{"what", "outgoing"}, {"reason", "send_failed"}})),
      head_(context, zmq::socket_type::dealer),
      head_handshakes_(context, head_) {
  configure_socket(head_, 4 * options_.max_frame_bytes);
  head_.set(zmq::sockopt::routing_id, random_identity());
  secure_client(head_, options_.credentials);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

absl::StatusOr<std::unique_ptr<node_agent>> node_agent::start(zmq::context_t& context,
                                                              caf::actor_system& system,
                                                              node_options options,
                                                              metrics::registry& metrics,
                                                              const on_joined_fn& on_joined) {
  std::unique_ptr<node_agent> agent(new node_agent(context, system, std::move(options), metrics));
  if (auto s = agent->join(); !s.ok()) return s;
  if (on_joined) {
    if (auto s = on_joined(*agent); !s.ok()) return s;
  }
  agent->workers_poll_inbox_ = actor::attach_idle_io(system, agent->inbox_);
  agent->thread_ = std::thread([a = agent.get()] { a->loop(); });
  return agent;
}

absl::Status node_agent::join() {
  auto gate = curve_gate::open(context_, options_.credentials);
  if (!gate.ok()) return gate.status();
  gate_ = std::move(*gate);
  zmq::socket_t router(context_, zmq::socket_type::router);
  configure_socket(router, 4 * options_.max_frame_bytes);
  secure_server(router, options_.credentials);
  auto bound = bind_socket(router, absl::StrCat("tcp://", options_.bind_host, ":0"));
  if (!bound.ok()) return bound.status();
  endpoint_ = *bound;
  inbox_ = std::make_shared<peer_inbox>(
      std::move(router), [this](const std::vector<zmq::message_t>& frames,
                                caf::execution_unit* here) { on_peer_frame(frames, here); });
  try {
    head_.connect(options_.head);
  } catch (const zmq::error_t& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot connect to the head at ", options_.head, ": ", e.what()));
  }
  map_builder payload;
  payload.add("token", options_.credentials.token)
      .add("endpoint", endpoint_)
      .add("host", hostname())
      .add("pid", static_cast<int64_t>(getpid()))
      .add("resources", std::map<std::string, uint64_t>{{"cores", options_.res.cores},
                                                        {"memory_bytes", options_.res.memory_bytes},
                                                        {"gpus", options_.res.gpus}});
  if (options_.as_head) payload.add("head", true);
  if (options_.as_head || options_.watch_members) payload.add("watch", true);
  envelope h;
  h.type = "join";
  h.corr = next_corr_++;
  const std::string frame = encode(h, payload.bytes());
  const auto deadline = clock::now() + options_.join_timeout;
  if (auto s = send_to_server(head_, head_handshakes_, frame, deadline, options_.head,
                              options_.credentials);
      !s.ok()) {
    return s;
  }
  zmq::pollitem_t item{head_.handle(), 0, ZMQ_POLLIN, 0};
  while (clock::now() < deadline) {
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(50));
    } catch (const zmq::error_t&) {
      continue;
    }
    if (const auto failed = head_handshakes_.take(); !failed.empty()) {
      return handshake_refused(failed.front(), options_.head, options_.credentials);
    }
    auto frames = try_recv(head_);
    if (!frames.ok()) return frames.status();
    if (frames->empty()) continue;
    auto reply = decode(static_cast<const char*>((*frames)[0].data()), (*frames)[0].size(),
                        options_.max_frame_bytes);
    if (!reply.ok())
      return absl::Status(reply.status().code(),
                          absl::StrCat("bad reply from the head: ", reply.status().message()));
    if (reply->header.type == "error") {
      const absl::Status s = status_of_error(*reply);
      return absl::Status(s.code(), absl::StrCat("the head refused the join: ", s.message()));
    }
    if (reply->header.type != "joined") continue;
    auto map = map_view::of(reply->payload, "joined payload");
    if (!map.ok()) return map.status();
    auto node = map->get_string("node");
    if (!node.ok()) return node.status();
    id_ = *node;
    app_config_ = map->get_string("config", "").value_or("");
    heartbeat_interval_ =
        std::chrono::milliseconds(map->get_uint("heartbeat_interval_ms", 500).value_or(500));
    heartbeat_misses_ = static_cast<int>(map->get_uint("heartbeat_misses", 4).value_or(4));
    messaging_ = std::make_unique<remote_messaging>(
        system_, id_,
        [this](const std::string& to, absl::string_view f) { return send_to_peer(to, f); },
        options_.request_timeout, metrics_);
    if (const msgpack::object* members = map->find("members")) {
      apply_members(*members, map->get_uint("epoch", 0).value_or(0), false);
    }
    return absl::OkStatus();
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "no answer from the head at ", options_.head, " within ", options_.join_timeout.count(),
      " ms; is `troupe head` running there?",
      options_.credentials.curve ? absl::StrCat(" Does ", options_.credentials.keys_dir,
                                                " hold the keys it was started with?")
                                 : ""));
}

node_agent::~node_agent() {
  stop();
  if (workers_poll_inbox_) actor::detach_idle_io(system_);
  if (inbox_) inbox_->close();  // no frame is handled from here on
  messaging_.reset();           // fails whatever is still pending, before the sockets go
  std::lock_guard<std::mutex> lock(mu_);
  links_.clear();
  if (wake_fd_ >= 0) close(wake_fd_);
}

std::vector<peer> node_agent::peers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return directory_.known();
}

void node_agent::to_head(std::string frame) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    head_queue_.push_back(std::move(frame));
  }
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

void node_agent::publish(const std::string& name, caf::actor handle) {
  messaging_->publish(name, std::move(handle));
  envelope h{.type = "actors", .src = id_};
  to_head(encode(h, map_builder().add("actors", messaging_->published()).bytes()));
}

void node_agent::unpublish(const std::string& name) {
  messaging_->unpublish(name);
  envelope h{.type = "actors", .src = id_};
  to_head(encode(h, map_builder().add("actors", messaging_->published()).bytes()));
}

caf::actor node_agent::remote(const std::string& name, const std::string& node) {
  return messaging_->proxy(name, node);
}

void node_agent::forget(const std::string& name, const absl::Status& reason) {
  messaging_->forget(name, reason);
}

absl::StatusOr<caf::actor> node_agent::resolve(const std::string& name,
                                               std::chrono::milliseconds timeout) {
  const uint64_t corr = next_corr_++;
  std::future<absl::StatusOr<std::string>> reply;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reply = head_calls_[corr].get_future();
  }
  envelope h{.type = "resolve", .src = id_, .corr = corr};
  to_head(encode(h, map_builder().add("name", name).bytes()));
  if (reply.wait_for(timeout) != std::future_status::ready) {
    std::lock_guard<std::mutex> lock(mu_);
    head_calls_.erase(corr);
    return absl::DeadlineExceededError(
        absl::StrCat("the head did not resolve '", name, "' within ", timeout.count(), " ms"));
  }
  auto frame = reply.get();
  if (!frame.ok()) return frame.status();
  auto env = decode(frame->data(), frame->size(), options_.max_frame_bytes);
  if (!env.ok()) return env.status();
  auto map = map_view::of(env->payload, "resolved payload");
  if (!map.ok()) return map.status();
  auto node = map->get_string("node");
  if (!node.ok()) return node.status();
  return remote(name, *node);
}

void node_agent::subscribe(caf::actor listener) {
  std::lock_guard<std::mutex> lock(mu_);
  listeners_.push_back(std::move(listener));
}

void node_agent::forward_event(const nlohmann::json& event) {
  nlohmann::json tagged = event;
  tagged["node"] = id_;
  const auto bytes = nlohmann::json::to_msgpack(tagged);
  envelope h{.type = "event", .src = id_};
  to_head(encode(
      h, map_builder()
             .add_bin("event",
                      absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()))
             .bytes()));
}

absl::StatusOr<std::shared_ptr<peer_link>> node_agent::link_locked(const peer& p) {
  auto& slot = links_[p.node];
  if (!slot) {
    zmq::socket_t socket(context_, zmq::socket_type::dealer);
    configure_socket(socket, 4 * options_.max_frame_bytes);
    secure_client(socket, options_.credentials);
    try {
      socket.connect(p.endpoint);
    } catch (const zmq::error_t& e) {
      links_.erase(p.node);
      return absl::UnavailableError(
          absl::StrCat("cannot connect to node ", p.node, " at ", p.endpoint, ": ", e.what()));
    }
    slot = std::make_shared<peer_link>(
        std::move(socket), peer_link::limits{.max_frame_bytes = options_.max_frame_bytes},
        lost_in_flush_);
  }
  return slot;
}

absl::Status node_agent::send_to_peer(const std::string& node, absl::string_view envelope) {
  std::shared_ptr<peer_link> link;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto d = directory_.outgoing(node, envelope);
    if (d.what == peer_directory::decision::refused) return d.why;
    if (d.what == peer_directory::decision::pass) {
      auto l = link_locked(*d.record);
      if (!l.ok()) return l.status();
      link = std::move(*l);
    }
    if (d.ask_head) ask_head_about_locked(node);
  }
  return link ? link->send(envelope) : absl::OkStatus();
}

void node_agent::ask_head_about_locked(const std::string& node) {
  const uint64_t corr = next_corr_++;
  member_questions_[corr] = node;
  envelope h{.type = "member", .src = id_, .corr = corr};
  head_queue_.push_back(encode(h, map_builder().add("node", node).bytes()));
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

void node_agent::on_member_answer(const std::string& node, const std::optional<peer>& record,
                                  const absl::Status& refused) {
  peer_directory::released r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    r = directory_.learn(node, record);
    if (!r.was_asked) return;
    if (r.alive && !r.outgoing.empty()) {
      // Sent under the lock: a sender that comes meanwhile finds the member open and must not
      // overtake these. Back to back, a batch to a frame, as a job's messages travel.
      auto link = link_locked(r.record);
      std::string batch;
      size_t in_batch = 0;
      const auto send_batch = [&] {
        if (!link.ok() || !(*link)->send(batch).ok()) lost_in_flush_.inc(in_batch);
        batch.clear();
        in_batch = 0;
      };
      for (const auto& envelope : r.outgoing) {
        if (!batch.empty() && batch.size() + envelope.size() > peer_link::limits{}.batch_bytes) {
          send_batch();
        }
        batch += envelope;
        ++in_batch;
      }
      send_batch();
    }
  }
  if (!r.alive) {
    for (size_t i = 0; i < r.dropped_incoming; ++i)
      reject("not_a_member");
    // What was sent to it fails now, as it would have at once had it been known; with the
    // head's reason when it named none.
    messaging_->on_node_lost(
        node, absl::UnavailableError(
                  record ? absl::StrCat("node ", node, " is not a live member (",
                                        to_string(r.record.state), ")")
                         : absl::StrCat("node ", node, " is not a member: ", refused.message())));
    return;
  }
  for (auto batch = std::move(r.incoming);;) {
    for (const auto& envelope : batch)
      deliver(envelope.data(), envelope.size(), nullptr, true);
    std::lock_guard<std::mutex> lock(mu_);
    batch = directory_.opened(node);
    if (batch.empty()) break;
  }
}

void node_agent::reject(const char* reason) {
  metrics_
      .get_counter("troupe_rejected_frames_total", "Frames refused by the control plane",
                   {{"where", "node"}, {"reason", reason}})
      .inc();
}

void node_agent::reject(const absl::Status& why) {
  reject(rejection_reason(why));
}

void node_agent::apply_members(const msgpack::object& list, uint64_t epoch, bool delta) {
  if (list.type != msgpack::type::ARRAY) return;
  std::vector<peer> records;
  for (uint32_t i = 0; i < list.via.array.size; ++i) {
    if (auto m = map_view::of(list.via.array.ptr[i], "member"); m.ok()) {
      records.push_back(peer_of(*m));
    }
  }
  std::vector<actor::member_event> changes;
  std::vector<caf::actor> listeners;
  size_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    changes = directory_.apply(records, epoch, delta, &dropped);
    for (const auto& c : changes) {
      if (c.kind != "joined") links_.erase(c.node);
    }
    // A live member's record pushed again has a new endpoint (the head's, once its node agent
    // joined): the next send connects there.
    for (const auto& p : records) {
      if (delta && p.state == member_state::alive) links_.erase(p.node);
    }
    listeners = listeners_;
  }
  for (size_t i = 0; i < dropped; ++i)
    reject("not_a_member");
  epoch_.store(epoch);
  if (messaging_) messaging_->set_epoch(epoch);
  for (const auto& c : changes) {
    if (c.kind != "joined") {
      if (c.node == id_) {
        finish(absl::FailedPreconditionError(
            absl::StrCat("the head declared this node (", id_, ") ", c.kind)));
        continue;
      }
      messaging_->on_node_lost(c.node, absl::UnavailableError(absl::StrCat(
                                           "node ", c.node, " ", c.kind == "dead" ? "died" : "left",
                                           " (epoch ", epoch, ")")));
    }
    for (const auto& l : listeners)
      caf::anon_send(l, c);
  }
}

void node_agent::on_head_frame(const received_envelope& env) {
  const envelope& h = env.header;
  if (h.type == "members") {
    if (auto map = map_view::of(env.payload, "members payload"); map.ok()) {
      const msgpack::object* delta = map->find("delta");
      if (const msgpack::object* list = map->find("members")) {
        apply_members(
            *list, h.epoch,
            delta != nullptr && delta->type == msgpack::type::BOOLEAN && delta->via.boolean);
      }
    }
    return;
  }
  if (h.type == "shutdown") {
    std::string reason = "the head shut the cluster down";
    if (auto map = map_view::of(env.payload, "shutdown payload"); map.ok()) {
      reason = map->get_string("reason", reason).value_or(reason);
    }
    finish(absl::CancelledError(reason));
    return;
  }
  std::optional<std::string> asked_about;
  std::promise<absl::StatusOr<std::string>> call;
  bool awaited = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = member_questions_.find(h.corr); it != member_questions_.end()) {
      asked_about = it->second;
      member_questions_.erase(it);
    } else if (auto it = head_calls_.find(h.corr); it != head_calls_.end()) {
      call = std::move(it->second);
      head_calls_.erase(it);
      awaited = true;
    }
  }
  if (asked_about) {
    // "member" with the record, or an error: no such member, or not one yet (the head's node).
    std::optional<peer> record;
    absl::Status refused;
    if (h.type == "member") {
      auto map = map_view::of(env.payload, "member payload");
      if (map.ok())
        record = peer_of(*map);
      else
        refused = map.status();  // a malformed answer is named, not left blank
    } else {
      refused = status_of_error(env);
    }
    on_member_answer(*asked_about, record, refused);
    return;
  }
  if (awaited) {
    if (h.type == "error") {
      call.set_value(status_of_error(env));
    } else {
      call.set_value(encode(h, [&](packer& pk) { pk.pack(env.payload); }));
    }
    return;
  }
  if (h.type == "error") {
    // A refused heartbeat: this node was declared dead and must not carry on as if alive.
    const absl::Status s = status_of_error(env);
    if (s.code() == absl::StatusCode::kFailedPrecondition ||
        s.code() == absl::StatusCode::kNotFound) {
      finish(
          absl::FailedPreconditionError(absl::StrCat("the head refused this node: ", s.message())));
    }
  }
}

void node_agent::on_peer_frame(const std::vector<zmq::message_t>& frames,
                               caf::execution_unit* here) {
  (here != nullptr ? frames_on_workers_ : frames_on_node_thread_).inc();
  if (frames.size() != 2) {
    reject("malformed");  // not a routed message of one frame
    return;
  }
  const char* data = static_cast<const char*>(frames[1].data());
  const size_t size = frames[1].size();
  if (size > options_.max_frame_bytes) {
    reject("oversized");
    return;
  }
  deliver(data, size, here, false);
}

void node_agent::deliver(const char* data, size_t size, caf::execution_unit* here, bool held) {
  // One or more envelopes back to back, all from one node: its membership is looked up once.
  std::string member;
  for (frame_reader reader(data, size, options_.max_frame_bytes); !reader.done();) {
    auto env = reader.next();
    if (!env.ok()) {
      reject(env.status());
      continue;
    }
    const envelope& h = env->header;
    if (h.src != member && !held) {
      std::lock_guard<std::mutex> lock(mu_);
      const auto d = directory_.incoming(
          h.src, [&] { return encode(h, [&](packer& pk) { pk.pack(env->payload); }); });
      if (d.what != peer_directory::decision::pass) {
        if (d.what == peer_directory::decision::refused) reject("not_a_member");
        if (d.ask_head) ask_head_about_locked(h.src);
        continue;
      }
      member = h.src;
    }
    if (!messaging_->on_envelope(*env, here)) reject("unknown_type");
  }
}

void node_agent::finish(absl::Status reason) {
  {
    std::lock_guard<std::mutex> lock(done_mu_);
    if (done_) return;
    done_ = true;
    done_reason_ = std::move(reason);
  }
  stopping_.store(true);
  done_cv_.notify_all();
}

absl::Status node_agent::wait() {
  std::unique_lock<std::mutex> lock(done_mu_);
  done_cv_.wait(lock, [this] { return done_; });
  return done_reason_.code() == absl::StatusCode::kCancelled ? absl::OkStatus() : done_reason_;
}

std::optional<absl::Status> node_agent::wait_for(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(done_mu_);
  if (!done_cv_.wait_for(lock, timeout, [this] { return done_; })) return std::nullopt;
  return done_reason_.code() == absl::StatusCode::kCancelled ? absl::OkStatus() : done_reason_;
}

void node_agent::stop() {
  if (!thread_.joinable()) return;
  stopping_.store(true);
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
  thread_.join();
  finish(absl::CancelledError("stopped"));
}

void node_agent::loop() {
  pthread_setname_np(pthread_self(), "troupe.node");
  // The peers' frames: polled here only when the workers cannot; otherwise drained at each turn,
  // in case every worker stays busy.
  zmq::pollitem_t items[] = {
      {head_.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake_fd_, ZMQ_POLLIN, 0}, inbox_->poll_item()};
  const int polled = workers_poll_inbox_ ? 2 : 3;
  auto last_ack = clock::now();
  auto last_turn = clock::now();
  auto next_heartbeat = clock::now();
  auto next_sweep = clock::now();
  bool head_said_bye = false;
  while (!stopping_.load()) {
    // Until the next sweep (every turn) or heartbeat is due: between them the thread sleeps (an
    // idle thread that wakes takes a core from the work of others).
    const auto until = options_.as_head ? next_sweep : std::min(next_sweep, next_heartbeat);
    const auto wait = std::clamp(std::chrono::ceil<std::chrono::milliseconds>(until - clock::now()),
                                 std::chrono::milliseconds(0), turn_interval);
    try {
      zmq::poll(items, polled, wait);
    } catch (const zmq::error_t&) {
      continue;
    }
    // A worker that found the inbox held by this drain went to sleep: wake it to wait there.
    if (inbox_->poll(nullptr, std::chrono::milliseconds(0)) && workers_poll_inbox_ &&
        inbox_->take_refused()) {
      actor::wake_idle_workers(system_);
    }
    for (int n = 0; n < 100; ++n) {
      auto frames = try_recv(head_);
      if (!frames.ok() || frames->empty()) break;
      auto env = decode(static_cast<const char*>((*frames)[0].data()), (*frames)[0].size(),
                        options_.max_frame_bytes);
      if (!env.ok()) {
        reject(env.status());
        continue;
      }
      if (env->header.type == "heartbeat.ok") last_ack = clock::now();
      if (env->header.type == "shutdown") head_said_bye = true;
      on_head_frame(*env);
    }
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t count;
      (void)!read(wake_fd_, &count, sizeof count);
    }
    std::deque<std::string> queued;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queued.swap(head_queue_);
    }
    for (const auto& frame : queued)
      (void)send(head_, {frame});
    // Frames queued by a job that still runs leave now, not only when it ends.
    std::vector<std::shared_ptr<peer_link>> links;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [node, link] : links_)
        links.push_back(link);
    }
    for (const auto& link : links)
      link->flush();
    const auto now = clock::now();
    // A long gap between turns means this process was frozen (SIGSTOP, swapping): the silence
    // was ours, so ask the head before concluding it is gone. If it declared us dead meanwhile,
    // its answer to the next heartbeat says so.
    if (now - last_turn > heartbeat_interval_) last_ack = now;
    last_turn = now;
    if (now >= next_heartbeat && !options_.as_head) {
      // The process's metrics ride along: the head serves the cluster's from its /metrics.
      envelope h{.type = "heartbeat", .src = id_, .corr = next_corr_++, .epoch = epoch_.load()};
      (void)send(head_,
                 {encode(h, map_builder().add("metrics", metrics_.prometheus_text()).bytes())});
      next_heartbeat = now + heartbeat_interval_;
    }
    if (!options_.as_head && now - last_ack > heartbeat_interval_ * heartbeat_misses_) {
      finish(absl::UnavailableError(absl::StrCat(
          "lost the head at ", options_.head, ": no heartbeat acknowledged for ",
          std::chrono::duration_cast<std::chrono::milliseconds>(now - last_ack).count(), " ms")));
    }
    if (now >= next_sweep) {
      messaging_->sweep(now);
      next_sweep = now + turn_interval;
    }
  }
  if (!head_said_bye) {
    envelope h{.type = "leave", .src = id_, .corr = next_corr_++};
    (void)send(head_, {encode(h)});
  }
}

}  // namespace troupe::cluster
