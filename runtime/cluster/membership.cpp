#include "runtime/cluster/membership.hpp"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace troupe::cluster {

const char* to_string(member_state s) {
  switch (s) {
    case member_state::alive:
      return "alive";
    case member_state::dead:
      return "dead";
    case member_state::left:
      return "left";
  }
  return "dead";
}

member& membership::admit(std::string id, std::string endpoint, std::string host, int64_t pid,
                          resources res, clock::time_point now) {
  member m;
  m.id = id;
  m.endpoint = std::move(endpoint);
  m.host = std::move(host);
  m.pid = pid;
  m.res = res;
  m.joined_epoch = ++epoch_;
  m.last_heartbeat = now;
  return members_[id] = std::move(m);
}

const member& membership::add_head(std::string endpoint, std::string host, int64_t pid,
                                   resources res, clock::time_point now) {
  member& m = admit("head", std::move(endpoint), std::move(host), pid, res, now);
  m.head = true;
  return m;
}

const member& membership::update_head(std::string endpoint, std::string host, int64_t pid,
                                      resources res) {
  member& m = members_.at("head");
  m.endpoint = std::move(endpoint);
  m.host = std::move(host);
  m.pid = pid;
  m.res = res;
  return m;
}

const member& membership::join(std::string endpoint, std::string host, int64_t pid, resources res,
                               clock::time_point now) {
  return admit(absl::StrCat("w", next_worker_++), std::move(endpoint), std::move(host), pid, res,
               now);
}

absl::Status membership::heartbeat(absl::string_view id, clock::time_point now) {
  auto it = members_.find(id);
  if (it == members_.end()) {
    return absl::NotFoundError(absl::StrCat("no member '", id, "'; join first"));
  }
  member& m = it->second;
  if (m.state == member_state::dead) {
    return absl::FailedPreconditionError(
        absl::StrCat("member ", id, " was declared dead at epoch ", m.removed_epoch, " after ",
                     failure_timeout().count(),
                     " ms without a heartbeat; it cannot resume, join again as a "
                     "new member"));
  }
  if (m.state == member_state::left) {
    return absl::FailedPreconditionError(
        absl::StrCat("member ", id, " left at epoch ", m.removed_epoch, "; join again"));
  }
  m.last_heartbeat = now;
  return absl::OkStatus();
}

absl::Status membership::leave(absl::string_view id) {
  auto it = members_.find(id);
  if (it == members_.end() || it->second.state != member_state::alive) {
    return absl::NotFoundError(absl::StrCat("no live member '", id, "'"));
  }
  it->second.state = member_state::left;
  it->second.removed_epoch = ++epoch_;
  return absl::OkStatus();
}

std::vector<std::string> membership::detect_failures(clock::time_point now) {
  std::vector<std::string> dead;
  for (auto& [id, m] : members_) {
    if (m.head || m.state != member_state::alive) continue;
    if (now - m.last_heartbeat > failure_timeout()) {
      m.state = member_state::dead;
      m.removed_epoch = ++epoch_;
      dead.push_back(id);
    }
  }
  return dead;
}

absl::Status membership::set_actors(absl::string_view id, std::vector<std::string> actors) {
  auto it = members_.find(id);
  if (it == members_.end()) return absl::NotFoundError(absl::StrCat("no member '", id, "'"));
  it->second.actors = std::move(actors);
  return absl::OkStatus();
}

const member* membership::locate(absl::string_view name) const {
  for (const auto& [id, m] : members_) {
    if (m.state == member_state::alive &&
        std::find(m.actors.begin(), m.actors.end(), name) != m.actors.end()) {
      return &m;
    }
  }
  return nullptr;
}

const member* membership::find(absl::string_view id) const {
  auto it = members_.find(id);
  return it == members_.end() ? nullptr : &it->second;
}

std::vector<const member*> membership::all() const {
  std::vector<const member*> out;
  for (const auto& [id, m] : members_)
    out.push_back(&m);
  return out;
}

std::vector<const member*> membership::alive() const {
  std::vector<const member*> out;
  for (const auto& [id, m] : members_) {
    if (m.state == member_state::alive) out.push_back(&m);
  }
  return out;
}

}  // namespace troupe::cluster
