#include "runtime/cluster/head_logic.hpp"

#include "absl/strings/str_cat.h"
#include "runtime/base/status.hpp"
#include "runtime/cluster/msgpack_view.hpp"

namespace troupe::cluster {
namespace {

// Compares secrets in time independent of where they differ.
bool same_secret(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

int64_t millis(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

// The 4 fields of a member record a node agent keeps: node, endpoint, state, head.
void pack_peer_fields(packer& pk, const member& m) {
  pk.pack("node");
  pk.pack(m.id);
  pk.pack("endpoint");
  pk.pack(m.endpoint);
  pk.pack("state");
  pk.pack(to_string(m.state));
  pk.pack("head");
  pk.pack(m.head);
}

}  // namespace

bool head_logic::token_accepted(absl::string_view token) const {
  return options_.credentials.curve.has_value() || same_secret(token, options_.credentials.token);
}

head_logic::head_logic(head_options options, clock::time_point now)
    : options_(std::move(options)),
      members_(options_.heartbeat_interval, options_.heartbeat_misses),
      now_(now) {
  members_.add_head(options_.endpoint, "", 0, {}, now);
}

head_logic::outgoing head_logic::reply(const std::string& identity, const envelope& request,
                                       std::string type,
                                       const std::function<void(packer&)>& payload) const {
  envelope h;
  h.type = std::move(type);
  h.src = "head";
  h.dst = request.src;
  h.corr = request.corr;
  h.epoch = members_.epoch();
  return {identity, encode(h, payload)};
}

head_logic::outgoing head_logic::value_reply(const std::string& identity, const envelope& request,
                                             const std::string& value) const {
  return reply(identity, request, "kv.value", [&](packer& pk) {
    pk.pack_map(1);
    pk.pack("value");
    pk.pack_bin(static_cast<uint32_t>(value.size()));
    pk.pack_bin_body(value.data(), static_cast<uint32_t>(value.size()));
  });
}

head_logic::outgoing head_logic::error(const std::string& identity, const envelope& request,
                                       const absl::Status& status) const {
  return reply(identity, request, "error", [&](packer& pk) {
    pk.pack_map(2);
    pk.pack("code");
    pk.pack(absl::StatusCodeToString(status.code()));
    pk.pack("message");
    pk.pack(std::string(status.message()));
  });
}

std::string head_logic::member_of(const std::string& identity) const {
  auto it = member_by_identity_.find(identity);
  return it == member_by_identity_.end() ? std::string() : it->second;
}

std::vector<head_logic::outgoing> head_logic::on_request(const std::string& identity,
                                                         const received_envelope& request,
                                                         clock::time_point now) {
  now_ = now;
  static const std::map<std::string, std::pair<handler, bool /*members only*/>> handlers = {
      {"hello", {&head_logic::on_hello, false}},        {"join", {&head_logic::on_join, false}},
      {"heartbeat", {&head_logic::on_heartbeat, true}}, {"leave", {&head_logic::on_leave, true}},
      {"actors", {&head_logic::on_actors, true}},       {"event", {&head_logic::on_event, true}},
      {"resolve", {&head_logic::on_resolve, false}},    {"status", {&head_logic::on_status, false}},
      {"metrics", {&head_logic::on_metrics, false}},    {"kv.set", {&head_logic::on_kv_set, false}},
      {"kv.get", {&head_logic::on_kv_get, false}},      {"kv.add", {&head_logic::on_kv_add, false}},
      {"kv.wait", {&head_logic::on_kv_wait, false}},    {"member", {&head_logic::on_member, true}},
  };
  const envelope& h = request.header;
  auto it = handlers.find(h.type);
  if (it == handlers.end()) {
    rejections_.push_back("unknown_type");
    return {error(identity, h,
                  absl::UnimplementedError(absl::StrCat("unknown message type '", h.type,
                                                        "'; docs/protocol.md lists the types")))};
  }
  const auto [fn, members_only] = it->second;
  if (h.type != "hello" && h.type != "join" && member_of(identity).empty()) {
    // Clients that have not joined prove themselves with the token on every request.
    std::string token;
    if (auto map = map_view::of(request.payload, h.type); map.ok()) {
      token = map->get_string("token", "").value_or("");
    }
    if (members_only || !token_accepted(token)) {
      rejections_.push_back("unauthenticated");
      return {error(identity, h,
                    absl::PermissionDeniedError(
                        members_only ? absl::StrCat("'", h.type, "' is for members; join first")
                                     : "missing or wrong cluster token"))};
    }
  }
  return (this->*fn)(identity, request, now);
}

std::vector<head_logic::outgoing> head_logic::on_hello(const std::string& identity,
                                                       const received_envelope& r,
                                                       clock::time_point) {
  return {reply(identity, r.header, "hello", [&](packer& pk) {
    pk.pack_map(2);
    pk.pack("version");
    pk.pack(protocol_version);
    pk.pack("epoch");
    pk.pack(members_.epoch());
  })};
}

std::vector<head_logic::outgoing> head_logic::on_join(const std::string& identity,
                                                      const received_envelope& r,
                                                      clock::time_point now) {
  auto map = map_view::of(r.payload, "join payload");
  if (!map.ok()) return {error(identity, r.header, map.status())};
  const std::string token = map->get_string("token", "").value_or("");
  if (!token_accepted(token)) {
    notices_.push_back(
        {"join_refused",
         absl::StrCat("refused a join from ", r.header.src.empty() ? "a client" : r.header.src,
                      ": ", token.empty() ? "no cluster token" : "wrong cluster token"),
         ""});
    return {error(
        identity, r.header,
        absl::PermissionDeniedError("join refused: missing or wrong cluster token (set --token, "
                                    "TROUPE_CLUSTER_TOKEN or cluster.token)"))};
  }
  if (!member_of(identity).empty()) {
    return {error(identity, r.header,
                  absl::AlreadyExistsError(
                      absl::StrCat("this connection already joined as ", member_of(identity))))};
  }
  auto endpoint = map->get_string("endpoint");
  if (!endpoint.ok()) return {error(identity, r.header, endpoint.status())};
  resources res;
  if (const msgpack::object* o = map->find("resources")) {
    auto rmap = map_view::of(*o, "join resources");
    if (!rmap.ok()) return {error(identity, r.header, rmap.status())};
    res.cores = static_cast<uint32_t>(rmap->get_uint("cores", 0).value_or(0));
    res.memory_bytes = rmap->get_uint("memory_bytes", 0).value_or(0);
    res.gpus = static_cast<uint32_t>(rmap->get_uint("gpus", 0).value_or(0));
  }
  const std::string host = map->get_string("host", "").value_or("");
  const int64_t pid = map->get_int("pid", 0).value_or(0);
  const bool as_head = map->find("head") != nullptr;
  const member* m = nullptr;
  if (as_head) {
    // The head process's own node agent takes the "head" member's identity.
    if (identity_by_member_.count("head")) {
      return {
          error(identity, r.header, absl::AlreadyExistsError("the head's node already joined"))};
    }
    m = &members_.update_head(*endpoint, host, pid, res);
  } else {
    m = &members_.join(*endpoint, host, pid, res, now);
    notices_.push_back(
        {"member_joined",
         absl::StrCat(m->id, " joined from ", host.empty() ? *endpoint : host, " (pid ", pid, ", ",
                      res.cores, res.cores == 1 ? " core" : " cores", ", epoch ", members_.epoch(),
                      ")"),
         m->id});
  }
  member_by_identity_[identity] = m->id;
  identity_by_member_[m->id] = identity;
  changed_.insert(m->id);
  const bool watches = map->find("watch") != nullptr;
  if (watches) watchers_.insert(m->id);
  std::vector<outgoing> out = {reply(identity, r.header, "joined", [&](packer& pk) {
    pk.pack_map(6);
    pk.pack("node");
    pk.pack(m->id);
    pk.pack("epoch");
    pk.pack(members_.epoch());
    pk.pack("heartbeat_interval_ms");
    pk.pack(static_cast<uint64_t>(options_.heartbeat_interval.count()));
    pk.pack("heartbeat_misses");
    pk.pack(options_.heartbeat_misses);
    pk.pack("config");
    pk.pack(options_.app_config);
    pk.pack("members");
    // A watcher gets every member; any other node the head (once its node agent joined) and
    // itself, and asks for the rest when it needs them ("member"): a storm of n joins costs
    // O(n), not O(n^2).
    if (watches) {
      pack_peers(pk, members_.all());
    } else {
      pack_peers(pk, {members_.find("head"), m});
    }
  })};
  return out;
}

std::vector<head_logic::outgoing> head_logic::on_member(const std::string& identity,
                                                        const received_envelope& r,
                                                        clock::time_point) {
  auto map = map_view::of(r.payload, "member payload");
  if (!map.ok()) return {error(identity, r.header, map.status())};
  auto node = map->get_string("node");
  if (!node.ok()) return {error(identity, r.header, node.status())};
  const member* m = members_.find(*node);
  if (m == nullptr) {
    return {error(identity, r.header,
                  absl::NotFoundError(absl::StrCat("no member is called '", *node, "'")))};
  }
  if (!told_of(*m)) {
    return {error(identity, r.header,
                  absl::UnavailableError("the head's node agent has not joined yet: nothing on "
                                         "the head takes messages before it has"))};
  }
  return {reply(identity, r.header, "member", [&](packer& pk) {
    pk.pack_map(4);
    pack_peer_fields(pk, *m);
  })};
}

std::vector<head_logic::outgoing> head_logic::on_heartbeat(const std::string& identity,
                                                           const received_envelope& r,
                                                           clock::time_point now) {
  const std::string node = member_of(identity);
  if (auto s = members_.heartbeat(node, now); !s.ok()) return {error(identity, r.header, s)};
  if (auto map = map_view::of(r.payload, "heartbeat"); map.ok()) {
    if (auto text = map->get_string("metrics", ""); text.ok() && !text->empty()) {
      metrics_by_member_[node] = std::make_shared<const std::string>(std::move(*text));
    }
  }
  return {reply(identity, r.header, "heartbeat.ok", [&](packer& pk) {
    pk.pack_map(1);
    pk.pack("epoch");
    pk.pack(members_.epoch());
  })};
}

std::vector<head_logic::outgoing> head_logic::on_leave(const std::string& identity,
                                                       const received_envelope& r,
                                                       clock::time_point) {
  const std::string node = member_of(identity);
  if (auto s = depart(node, "left"); !s.ok()) return {error(identity, r.header, s)};
  return {reply(identity, r.header, "left", [](packer& pk) { pk.pack_map(0); })};
}

std::vector<head_logic::outgoing> head_logic::on_actors(const std::string& identity,
                                                        const received_envelope& r,
                                                        clock::time_point) {
  auto map = map_view::of(r.payload, "actors payload");
  if (!map.ok()) return {error(identity, r.header, map.status())};
  auto names = map->get_strings("actors");
  if (!names.ok()) return {error(identity, r.header, names.status())};
  if (auto s = members_.set_actors(member_of(identity), std::move(*names)); !s.ok()) {
    return {error(identity, r.header, s)};
  }
  return {reply(identity, r.header, "actors.ok", [](packer& pk) { pk.pack_map(0); })};
}

std::vector<head_logic::outgoing> head_logic::on_event(const std::string& identity,
                                                       const received_envelope& r,
                                                       clock::time_point) {
  auto map = map_view::of(r.payload, "event payload");
  if (!map.ok()) return {error(identity, r.header, map.status())};
  auto event = map->get_bytes("event");
  if (!event.ok()) return {error(identity, r.header, event.status())};
  forwarded_events_.push_back(std::move(*event));
  return {};
}

std::vector<head_logic::outgoing> head_logic::on_resolve(const std::string& identity,
                                                         const received_envelope& r,
                                                         clock::time_point) {
  auto map = map_view::of(r.payload, "resolve payload");
  if (!map.ok()) return {error(identity, r.header, map.status())};
  auto name = map->get_string("name");
  if (!name.ok()) return {error(identity, r.header, name.status())};
  const member* m = members_.locate(*name);
  if (m == nullptr) {
    return {error(
        identity, r.header,
        absl::NotFoundError(absl::StrCat("no live member hosts an actor named '", *name, "'")))};
  }
  return {reply(identity, r.header, "resolved", [&](packer& pk) {
    pk.pack_map(3);
    pk.pack("name");
    pk.pack(*name);
    pk.pack("node");
    pk.pack(m->id);
    pk.pack("endpoint");
    pk.pack(m->endpoint);
  })};
}

void head_logic::pack_peers(packer& pk, const std::vector<const member*>& list) const {
  std::vector<const member*> told;
  for (const member* m : list) {
    if (told_of(*m)) told.push_back(m);
  }
  pk.pack_array(static_cast<uint32_t>(told.size()));
  for (const member* m : told) {
    pk.pack_map(4);
    pack_peer_fields(pk, *m);
  }
}

void head_logic::pack_members(packer& pk, clock::time_point now) const {
  const auto list = members_.all();
  pk.pack_array(static_cast<uint32_t>(list.size()));
  for (const member* m : list) {
    pk.pack_map(10);
    pack_peer_fields(pk, *m);
    pk.pack("host");
    pk.pack(m->host);
    pk.pack("pid");
    pk.pack(m->pid);
    pk.pack("joined_epoch");
    pk.pack(m->joined_epoch);
    pk.pack("heartbeat_age_ms");
    pk.pack(m->head ? int64_t{0} : millis(now - m->last_heartbeat));
    pk.pack("resources");
    pk.pack_map(3);
    pk.pack("cores");
    pk.pack(m->res.cores);
    pk.pack("memory_bytes");
    pk.pack(m->res.memory_bytes);
    pk.pack("gpus");
    pk.pack(m->res.gpus);
    pk.pack("actors");
    pk.pack(m->actors);
  }
}

std::vector<head_logic::outgoing> head_logic::on_status(const std::string& identity,
                                                        const received_envelope& r,
                                                        clock::time_point now) {
  envelope h{.type = "status",
             .src = "head",
             .dst = r.header.src,
             .corr = r.header.corr,
             .epoch = members_.epoch()};
  return {{identity, encode(h, status_payload(now))}};
}

std::string head_logic::status_payload(clock::time_point now) const {
  msgpack::sbuffer buf;
  packer pk(buf);
  {
    pk.pack_map(5);
    pk.pack("epoch");
    pk.pack(members_.epoch());
    // What the running job publishes about itself under "job/" (the elastic trainer group).
    const auto job = kv_.with_prefix(job_key_prefix);
    pk.pack("job");
    pk.pack_map(static_cast<uint32_t>(job.size()));
    for (const auto& [key, value] : job) {
      pk.pack(key.substr(job_key_prefix.size()));
      pk.pack(value);
    }
    pk.pack("kv_keys");
    pk.pack(static_cast<uint64_t>(kv_.size()));
    pk.pack("failure_timeout_ms");
    pk.pack(static_cast<int64_t>(members_.failure_timeout().count()));
    pk.pack("members");
    pack_members(pk, now);
  }
  return std::string(buf.data(), buf.size());
}

std::vector<std::pair<std::string, std::shared_ptr<const std::string>>> head_logic::worker_metrics()
    const {
  return {metrics_by_member_.begin(), metrics_by_member_.end()};
}

std::vector<head_logic::outgoing> head_logic::on_metrics(const std::string& identity,
                                                         const received_envelope& r,
                                                         clock::time_point) {
  const std::string text = options_.metrics_text ? options_.metrics_text() : std::string();
  return {reply(identity, r.header, "metrics", [&](packer& pk) {
    pk.pack_map(1);
    pk.pack("text");
    pk.pack(text);
  })};
}

std::vector<head_logic::outgoing> head_logic::on_kv_set(const std::string& identity,
                                                        const received_envelope& r,
                                                        clock::time_point) {
  auto map = map_view::of(r.payload, "kv.set payload");
  if (!map.ok()) return {error(identity, r.header, map.status())};
  auto key = map->get_string("key");
  auto value = map->get_bytes("value");
  if (!key.ok()) return {error(identity, r.header, key.status())};
  if (!value.ok()) return {error(identity, r.header, value.status())};
  auto woken = kv_.set(*key, *value);
  if (!woken.ok()) return {error(identity, r.header, woken.status())};
  auto out = release_waiters(*woken, *value);
  out.push_back(reply(identity, r.header, "kv.ok", [](packer& pk) { pk.pack_map(0); }));
  return out;
}

std::vector<head_logic::outgoing> head_logic::on_kv_get(const std::string& identity,
                                                        const received_envelope& r,
                                                        clock::time_point) {
  auto map = map_view::of(r.payload, "kv.get payload");
  if (!map.ok()) return {error(identity, r.header, map.status())};
  auto key = map->get_string("key");
  if (!key.ok()) return {error(identity, r.header, key.status())};
  auto value = kv_.get(*key);
  if (!value) {
    return {
        error(identity, r.header, absl::NotFoundError(absl::StrCat("kv: no key '", *key, "'")))};
  }
  return {value_reply(identity, r.header, *value)};
}

std::vector<head_logic::outgoing> head_logic::on_kv_add(const std::string& identity,
                                                        const received_envelope& r,
                                                        clock::time_point) {
  auto map = map_view::of(r.payload, "kv.add payload");
  if (!map.ok()) return {error(identity, r.header, map.status())};
  auto key = map->get_string("key");
  auto delta = map->get_int("delta", 1);
  if (!key.ok()) return {error(identity, r.header, key.status())};
  if (!delta.ok()) return {error(identity, r.header, delta.status())};
  auto result = kv_.add(*key, *delta);
  if (!result.ok()) return {error(identity, r.header, result.status())};
  auto out = release_waiters(result->woken, absl::StrCat(result->value));
  out.push_back(reply(identity, r.header, "kv.count", [&](packer& pk) {
    pk.pack_map(1);
    pk.pack("value");
    pk.pack(result->value);
  }));
  return out;
}

std::vector<head_logic::outgoing> head_logic::on_kv_wait(const std::string& identity,
                                                         const received_envelope& r,
                                                         clock::time_point now) {
  auto map = map_view::of(r.payload, "kv.wait payload");
  if (!map.ok()) return {error(identity, r.header, map.status())};
  auto key = map->get_string("key");
  auto timeout = map->get_uint("timeout_ms", 30000);
  if (!key.ok()) return {error(identity, r.header, key.status())};
  if (!timeout.ok()) return {error(identity, r.header, timeout.status())};
  const kv_store::waiter_id id = next_waiter_++;
  auto value = kv_.wait(*key, id, now + std::chrono::milliseconds(*timeout));
  if (!value.ok()) return {error(identity, r.header, value.status())};
  if (value->has_value()) return {value_reply(identity, r.header, **value)};
  waiters_[id] = {identity, r.header.corr, *key};
  return {};
}

std::vector<head_logic::outgoing> head_logic::release_waiters(
    const std::vector<kv_store::waiter_id>& woken, const std::string& value) {
  std::vector<outgoing> out;
  for (auto id : woken) {
    auto it = waiters_.find(id);
    if (it == waiters_.end()) continue;
    envelope request;
    request.corr = it->second.corr;
    out.push_back(value_reply(it->second.identity, request, value));
    waiters_.erase(it);
  }
  return out;
}

std::vector<head_logic::outgoing> head_logic::broadcast_changes() {
  std::vector<outgoing> out;
  std::vector<const member*> changed;  // for watchers
  // For everyone: departures, deaths, and the head's own record (every node knows the head, and
  // its node's endpoint replaces the head server's once the head's node agent joins).
  std::vector<const member*> for_all;
  for (const auto& id : std::exchange(changed_, {})) {
    const member* m = members_.find(id);
    if (m == nullptr) continue;
    changed.push_back(m);
    if (m->state != member_state::alive || m->head) for_all.push_back(m);
  }
  const auto push = [&](const std::vector<const member*>& records) {
    if (records.empty()) return std::string();
    envelope h{.type = "members", .src = "head", .epoch = members_.epoch()};
    return encode(h, [&](packer& pk) {
      pk.pack_map(3);
      pk.pack("epoch");
      pk.pack(members_.epoch());
      pk.pack("delta");
      pk.pack(true);
      pk.pack("members");
      pack_peers(pk, records);
    });
  };
  const std::string to_watchers = push(changed);
  const std::string to_others = push(for_all);
  for (const member* m : members_.alive()) {
    const std::string& frame = watchers_.count(m->id) ? to_watchers : to_others;
    if (frame.empty()) continue;
    if (auto it = identity_by_member_.find(m->id); it != identity_by_member_.end()) {
      out.push_back({it->second, frame});
    }
  }
  return out;
}

std::vector<head_logic::outgoing> head_logic::on_tick(clock::time_point now) {
  now_ = now;
  std::vector<outgoing> out;
  for (auto id : kv_.expire(now)) {
    auto it = waiters_.find(id);
    if (it == waiters_.end()) continue;
    envelope request;
    request.corr = it->second.corr;
    out.push_back(error(it->second.identity, request,
                        absl::DeadlineExceededError(
                            absl::StrCat("kv: timed out waiting for key '", it->second.key, "'"))));
    waiters_.erase(it);
  }
  const auto dead = members_.detect_failures(now);
  for (const auto& node : dead) {
    changed_.insert(node);
    notices_.push_back(
        {"member_dead",
         absl::StrCat(node, " declared dead: no heartbeat for ", members_.failure_timeout().count(),
                      " ms (epoch ", members_.find(node)->removed_epoch, ")"),
         node});
  }
  // A dead or departed member's metrics leave the scrape.
  std::erase_if(metrics_by_member_, [&](const auto& entry) {
    const member* m = members_.find(entry.first);
    return m == nullptr || m->state != member_state::alive;
  });
  // The changes since the last tick, in one push of their records: a storm of n joins costs a
  // few waves of n small pushes, not one wave per join, nor the whole list each time.
  auto pushes = broadcast_changes();
  out.insert(out.end(), pushes.begin(), pushes.end());
  return out;
}

std::string head_logic::shutdown_frame(absl::string_view reason) const {
  envelope h;
  h.type = "shutdown";
  h.src = "head";
  h.epoch = members_.epoch();
  return encode(h, [&](packer& pk) {
    pk.pack_map(1);
    pk.pack("reason");
    pk.pack(std::string(reason));
  });
}

absl::Status head_logic::depart(const std::string& node, absl::string_view how) {
  TROUPE_RETURN_IF_ERROR(members_.leave(node));
  notices_.push_back(
      {"member_left", absl::StrCat(node, " ", how, " (epoch ", members_.epoch(), ")"), node});
  changed_.insert(node);
  return absl::OkStatus();
}

std::vector<head_logic::outgoing> head_logic::retire(const std::string& node,
                                                     absl::string_view reason) {
  auto identity = identity_by_member_.find(node);
  const member* m = members_.find(node);
  if (identity == identity_by_member_.end() || m == nullptr || m->head ||
      !depart(node, absl::StrCat("retired: ", reason)).ok()) {
    return {};
  }
  return {{identity->second, shutdown_frame(reason)}};
}

std::vector<head_logic::outgoing> head_logic::shutdown(absl::string_view reason) {
  std::vector<outgoing> out;
  const std::string frame = shutdown_frame(reason);
  for (const member* m : members_.alive()) {
    if (m->head) continue;
    if (auto it = identity_by_member_.find(m->id); it != identity_by_member_.end()) {
      out.push_back({it->second, frame});
    }
  }
  return out;
}

std::vector<head_logic::notice> head_logic::take_notices() {
  return std::exchange(notices_, {});
}

std::vector<std::string> head_logic::take_rejections() {
  return std::exchange(rejections_, {});
}

std::vector<std::string> head_logic::take_forwarded_events() {
  return std::exchange(forwarded_events_, {});
}

}  // namespace troupe::cluster
