#include "runtime/cluster/peer_directory.hpp"

#include "absl/strings/str_cat.h"

namespace troupe::cluster {

absl::Status peer_directory::not_alive(const entry& e) {
  return absl::UnavailableError(absl::StrCat("node ", e.record.node, " is not a live member (",
                                             to_string(e.record.state), ")"));
}

peer_directory::decision peer_directory::too_many_unknown(const std::string& node) {
  return {.what = decision::refused,
          .why = absl::UnavailableError(
              absl::StrCat("node ", node, " is not known yet and ", max_asking,
                           " other members are being asked about already"))};
}

peer_directory::entry& peer_directory::ask(const std::string& node) {
  ++asking_;
  entry& e = entries_[node];
  e.record.node = node;
  e.at = stage::asking;
  return e;
}

peer_directory::decision peer_directory::outgoing(const std::string& node,
                                                  absl::string_view envelope) {
  auto it = entries_.find(node);
  const bool first = it == entries_.end();
  if (first && asking_ >= max_asking) return too_many_unknown(node);
  entry& e = first ? ask(node) : it->second;
  if (e.at != stage::asking) {
    if (e.record.state != member_state::alive)
      return {.what = decision::refused, .why = not_alive(e)};
    return {.what = decision::pass, .record = &e.record};
  }
  if (e.out.size() >= max_waiting) {
    return {.what = decision::refused,
            .why = absl::UnavailableError(absl::StrCat(
                max_waiting, " messages for node ", node,
                " already wait for the head to say where it is; is the head overloaded?"))};
  }
  e.out.emplace_back(envelope);
  return {.what = decision::held, .ask_head = first};
}

peer_directory::decision peer_directory::incoming(const std::string& node,
                                                  const std::function<std::string()>& envelope) {
  auto it = entries_.find(node);
  const bool first = it == entries_.end();
  if (first && asking_ >= max_asking) return too_many_unknown(node);
  entry& e = first ? ask(node) : it->second;
  if (e.at == stage::known) {
    if (e.record.state != member_state::alive)
      return {.what = decision::refused, .why = not_alive(e)};
    return {.what = decision::pass, .record = &e.record};
  }
  if (e.in.size() >= max_waiting) {
    return {.what = decision::refused,
            .why = absl::UnavailableError(absl::StrCat(max_waiting, " messages from node ", node,
                                                       " already wait for the head"))};
  }
  e.in.push_back(envelope());
  return {.what = decision::held, .ask_head = first};
}

peer_directory::released peer_directory::learn(const std::string& node,
                                               const std::optional<peer>& record) {
  auto it = entries_.find(node);
  if (it == entries_.end() || it->second.at != stage::asking) return {};
  entry& e = it->second;
  --asking_;
  released out{.was_asked = true};
  out.record = record.value_or(peer{.node = node, .state = member_state::dead});
  out.alive = out.record.state == member_state::alive;
  if (!out.alive && !record) {
    // No such member: nothing is kept of a name a peer made up.
    out.dropped_incoming = e.in.size();
    entries_.erase(it);
    return out;
  }
  e.record = out.record;
  if (out.alive) {
    e.at = stage::opening;
    out.outgoing.assign(e.out.begin(), e.out.end());
    out.incoming.assign(e.in.begin(), e.in.end());
  } else {
    e.at = stage::known;
    out.dropped_incoming = e.in.size();
  }
  e.out.clear();
  e.in.clear();
  return out;
}

std::vector<std::string> peer_directory::opened(const std::string& node) {
  auto it = entries_.find(node);
  if (it == entries_.end() || it->second.at != stage::opening) return {};
  entry& e = it->second;
  std::vector<std::string> more(e.in.begin(), e.in.end());
  e.in.clear();
  if (more.empty()) e.at = stage::known;
  return more;
}

std::vector<actor::member_event> peer_directory::apply(const std::vector<peer>& records,
                                                       uint64_t epoch, bool delta,
                                                       size_t* dropped_incoming) {
  std::vector<actor::member_event> changes;
  for (const peer& p : records) {
    if (p.node.empty()) continue;
    auto it = entries_.find(p.node);
    const bool known = it != entries_.end() && it->second.at != stage::asking;
    const bool was_alive = known && it->second.record.state == member_state::alive;
    const bool alive = p.state == member_state::alive;
    if (alive && !known && delta) {
      changes.push_back({"joined", p.node, epoch});
    } else if (!alive && (was_alive || (!known && delta))) {
      changes.push_back({to_string(p.state), p.node, epoch});
    }
    entry& e = entries_[p.node];
    e.record = p;
    if (alive && e.at == stage::asking) {
      // The answer to come finds the member known: what waited leaves with `learn`'s path.
      continue;
    }
    if (!alive) {
      if (e.at == stage::asking) --asking_;
      if (dropped_incoming != nullptr) *dropped_incoming += e.in.size();
      e.out.clear();
      e.in.clear();
      e.at = stage::known;
    }
  }
  return changes;
}

std::vector<peer> peer_directory::known() const {
  std::vector<peer> out;
  for (const auto& [node, e] : entries_) {
    if (e.at != stage::asking) out.push_back(e.record);
  }
  return out;
}

}  // namespace troupe::cluster
