#include "runtime/cluster/remote_messaging.hpp"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/actor/status_bridge.hpp"
#include "runtime/cluster/message_codec.hpp"

namespace troupe::cluster {
namespace {

// The message id a remote request gets here: its correlation id, as a normal-priority request.
caf::message_id remote_request_id(uint64_t corr) {
  return caf::message_id{
      (corr & caf::message_id::request_id_mask) |
      (caf::message_id::normal_message_category << caf::message_id::category_offset)};
}

// `h` with `content` as its payload, encoded in one pass into this thread's buffer, which the
// thread's next call overwrites; fails for content with no wire form.
absl::StatusOr<absl::string_view> frame_of(const envelope& h,
                                           const caf::type_erased_tuple& content) {
  constexpr size_t small = 1 << 10, kept = 64 << 10;
  thread_local msgpack::sbuffer buffer(small);
  if (buffer.size() > kept) {
    buffer = msgpack::sbuffer(small);  // a thread does not hold on to its largest message
  } else {
    buffer.clear();
  }
  absl::Status status;
  encode_to(buffer, h, [&](packer& pk) { status = encode_message(content, pk); });
  if (!status.ok()) return status;
  return absl::string_view(buffer.data(), buffer.size());
}

caf::actor_companion* companion_of(const caf::actor& handle) {
  return caf::actor_cast<caf::actor_companion*>(handle);
}

}  // namespace

remote_messaging::remote_messaging(caf::actor_system& system, std::string self_node, send_fn send,
                                   std::chrono::milliseconds request_timeout,
                                   metrics::registry& metrics)
    : system_(system),
      self_(std::move(self_node)),
      send_(std::move(send)),
      request_timeout_(request_timeout),
      metrics_(metrics) {}

remote_messaging::~remote_messaging() {
  // Nothing may call back into this object once it is gone: every proxy and companion stops.
  const absl::Status reason = absl::UnavailableError(absl::StrCat("node ", self_, " stopped"));
  std::vector<std::string> nodes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, p] : proxies_)
      nodes.push_back(p.node);
    for (const auto& [key, c] : companions_)
      nodes.push_back(key.first);
    for (const auto& [corr, p] : pending_)
      nodes.push_back(p.node);
  }
  for (const auto& node : nodes)
    on_node_lost(node, reason);
}

envelope remote_messaging::header(std::string type, std::string dst, uint64_t corr,
                                  uint64_t from) const {
  envelope h;
  h.type = std::move(type);
  h.src = self_;
  h.dst = std::move(dst);
  h.corr = corr;
  h.epoch = epoch_.load();
  h.from = from;
  return h;
}

void remote_messaging::count(const char* what, absl::string_view reason) {
  metrics_
      .get_counter("troupe_remote_undeliverable_total",
                   "Actor messages between nodes that could not be delivered",
                   {{"what", what}, {"reason", std::string(reason)}})
      .inc();
}

void remote_messaging::publish(const std::string& name, caf::actor handle) {
  std::lock_guard<std::mutex> lock(mu_);
  published_[name] = std::move(handle);
}

void remote_messaging::unpublish(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  published_.erase(name);
}

std::vector<std::string> remote_messaging::published() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, handle] : published_)
    names.push_back(name);
  return names;
}

caf::actor remote_messaging::proxy(const std::string& name, const std::string& node) {
  caf::actor stale;
  caf::actor handle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = proxies_.find(name); it != proxies_.end()) {
      if (it->second.node == node) return it->second.handle;
      stale = it->second.handle;
    }
    handle = system_.spawn<caf::actor_companion>();
    // A weak reference: a strong one in its own handler would keep the proxy alive forever.
    caf::actor_addr self_addr = handle.address();
    companion_of(handle)->on_enqueue([this, name, node, self_addr](caf::mailbox_element_ptr e) {
      forward(name, node, caf::actor_cast<caf::strong_actor_ptr>(self_addr), std::move(e));
    });
    proxies_[name] = {handle, node};
  }
  if (stale) {
    auto* c = companion_of(stale);
    c->on_enqueue(nullptr);
    c->cleanup(actor::to_error(absl::UnavailableError(absl::StrCat(name, " moved to node ", node))),
               nullptr);
  }
  return handle;
}

void remote_messaging::forget(const std::string& name, const absl::Status& reason) {
  caf::actor handle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = proxies_.find(name);
    if (it == proxies_.end()) return;
    handle = it->second.handle;
    proxies_.erase(it);
  }
  auto* c = companion_of(handle);
  caf::actor_addr addr = handle.address();
  c->on_enqueue([reason, addr](caf::mailbox_element_ptr e) {
    fail(e->sender, e->mid, caf::actor_cast<caf::strong_actor_ptr>(addr), reason);
  });
  c->cleanup(actor::to_error(reason), nullptr);
}

void remote_messaging::fail(const caf::strong_actor_ptr& sender, caf::message_id mid,
                            const caf::strong_actor_ptr& responder, const absl::Status& error) {
  if (!sender || !mid.is_request()) return;
  sender->enqueue(caf::make_mailbox_element(responder, mid.response_id(), {},
                                            caf::make_message(actor::to_error(error))),
                  nullptr);
}

void remote_messaging::forward(const std::string& dst, const std::string& node,
                               caf::strong_actor_ptr proxy, caf::mailbox_element_ptr e) {
  const bool request = e->mid.is_request();
  if (e->mid.is_response()) {
    count("outgoing", "response_to_proxy");
    return;
  }
  const uint64_t from = e->sender ? e->sender->id() : 0;
  const uint64_t corr = request ? next_corr_++ : 0;
  auto frame =
      frame_of(header(request ? "actor.req" : "actor.send", dst, corr, from), e->content());
  if (!frame.ok()) {
    if (request) {
      fail(e->sender, e->mid, proxy, frame.status());
    } else {
      count("outgoing", "no_wire_form");
    }
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Actor ids are never reused, so an entry, once there, stays right.
    if (e->sender) exported_.try_emplace(from, caf::actor_cast<caf::weak_actor_ptr>(e->sender));
    if (request) {
      pending_[corr] = {corr, e->sender, e->mid, proxy, node, dst, clock::now() + request_timeout_};
    }
  }
  if (auto s = send_(node, *frame); !s.ok()) {
    if (!request) {
      count("outgoing", "unreachable");
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.erase(corr);
    }
    fail(e->sender, e->mid, proxy,
         absl::UnavailableError(
             absl::StrCat("cannot reach ", dst, " on node ", node, ": ", s.message())));
  }
}

caf::strong_actor_ptr remote_messaging::companion_for_locked(const std::string& node,
                                                             uint64_t from) {
  auto [it, added] = companions_.try_emplace({node, from});
  if (added) {
    it->second = system_.spawn<caf::actor_companion>();
    companion_of(it->second)->on_enqueue([this, node, from](caf::mailbox_element_ptr e) {
      reply(node, from, std::move(e));
    });
  }
  return caf::actor_cast<caf::strong_actor_ptr>(it->second);
}

void remote_messaging::send_error_response(const std::string& node, uint64_t corr,
                                           const absl::Status& error) {
  auto frame = frame_of(header("actor.resp", "", corr, 0),
                        caf::make_message(actor::to_error(error)).content());
  if (!frame.ok() || !send_(node, *frame).ok()) count("outgoing", "unreachable");
}

void remote_messaging::reply(const std::string& node, uint64_t from, caf::mailbox_element_ptr e) {
  const bool response = e->mid.is_response();
  const uint64_t corr = e->mid.request_id().integer_value() & caf::message_id::request_id_mask;
  if (!response && from == 0) {
    count("reply", "anonymous_sender");
    return;
  }
  auto frame = frame_of(response ? header("actor.resp", "", corr, 0)
                                 : header("actor.send", absl::StrCat("#", from), 0, 0),
                        e->content());
  if (!frame.ok()) {
    if (response) {
      send_error_response(node, corr, frame.status());
    } else {
      count("reply", "no_wire_form");
    }
    return;
  }
  if (!send_(node, *frame).ok()) count("reply", "unreachable");
}

bool remote_messaging::on_envelope(const received_envelope& env, caf::execution_unit* here) {
  const std::string& type = env.header.type;
  if (type == "actor.resp") {
    on_response(env, here);
  } else if (type == "actor.req" || type == "actor.send") {
    on_message(env, type == "actor.req", here);
  } else {
    return false;
  }
  return true;
}

void remote_messaging::on_response(const received_envelope& env, caf::execution_unit* here) {
  const envelope& h = env.header;
  pending_request p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(h.corr);
    if (it == pending_.end()) {
      count("incoming", "late_response");
      return;
    }
    p = std::move(it->second);
    pending_.erase(it);
  }
  auto msg = decode_message(env.payload);
  if (!msg.ok()) {
    fail(p.sender, p.mid, p.proxy,
         absl::InvalidArgumentError(
             absl::StrCat("malformed response from node ", h.src, ": ", msg.status().message())));
    return;
  }
  if (p.sender) {
    p.sender->enqueue(caf::make_mailbox_element(p.proxy, p.mid.response_id(), {}, std::move(*msg)),
                      here);
  }
}

void remote_messaging::on_message(const received_envelope& env, bool request,
                                  caf::execution_unit* here) {
  const envelope& h = env.header;
  caf::strong_actor_ptr target;
  caf::strong_actor_ptr sender;
  {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t aid = 0;
    if (!h.dst.empty() && h.dst[0] == '#' &&
        absl::SimpleAtoi(absl::string_view(h.dst).substr(1), &aid)) {
      if (auto it = exported_.find(aid); it != exported_.end()) {
        target = caf::actor_cast<caf::strong_actor_ptr>(it->second);
      }
    } else if (auto it = published_.find(h.dst); it != published_.end()) {
      target = caf::actor_cast<caf::strong_actor_ptr>(it->second);
    }
    if (target) sender = companion_for_locked(h.src, h.from);
  }
  if (!target) {
    if (request) {
      send_error_response(
          h.src, h.corr,
          absl::UnavailableError(absl::StrCat("no actor '", h.dst, "' on node ", self_)));
    } else {
      count("incoming", "no_such_actor");
    }
    return;
  }
  auto msg = decode_message(env.payload);
  if (!msg.ok()) {
    if (request) {
      send_error_response(h.src, h.corr, msg.status());
    } else {
      count("incoming", "malformed");
    }
    return;
  }
  target->enqueue(caf::make_mailbox_element(std::move(sender),
                                            request ? remote_request_id(h.corr) : caf::message_id{},
                                            {}, std::move(*msg)),
                  here);
}

template <class Pred>
std::vector<remote_messaging::pending_request> remote_messaging::take_pending_locked(Pred which) {
  std::vector<pending_request> taken;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (which(it->second)) {
      taken.push_back(std::move(it->second));
      pending_.erase(it++);
    } else {
      ++it;
    }
  }
  // Requesters learn of failures in the order they asked (the table is unordered).
  std::sort(taken.begin(), taken.end(),
            [](const pending_request& a, const pending_request& b) { return a.corr < b.corr; });
  return taken;
}

void remote_messaging::on_node_lost(const std::string& node, const absl::Status& reason) {
  std::vector<pending_request> failed;
  std::vector<caf::actor> dead;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failed = take_pending_locked([&](const pending_request& p) { return p.node == node; });
    for (auto it = proxies_.begin(); it != proxies_.end();) {
      if (it->second.node == node) {
        dead.push_back(it->second.handle);
        it = proxies_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = companions_.begin(); it != companions_.end();) {
      if (it->first.first == node) {
        dead.push_back(it->second);
        companions_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (const auto& p : failed)
    fail(p.sender, p.mid, p.proxy, reason);
  for (const auto& handle : dead) {
    auto* c = companion_of(handle);
    caf::actor_addr addr = handle.address();
    c->on_enqueue([reason, addr](caf::mailbox_element_ptr e) {
      fail(e->sender, e->mid, caf::actor_cast<caf::strong_actor_ptr>(addr), reason);
    });
    c->cleanup(actor::to_error(reason), nullptr);
  }
}

void remote_messaging::sweep(clock::time_point now) {
  std::vector<pending_request> expired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = exported_.begin(); it != exported_.end();) {
      if (!it->second.lock()) {
        exported_.erase(it++);
      } else {
        ++it;
      }
    }
    expired = take_pending_locked([&](const pending_request& p) { return p.deadline <= now; });
  }
  for (const auto& p : expired) {
    fail(p.sender, p.mid, p.proxy,
         absl::DeadlineExceededError(absl::StrCat("no response from ", p.dst, " on node ", p.node,
                                                  " within ", request_timeout_.count(), " ms")));
  }
}

}  // namespace troupe::cluster
