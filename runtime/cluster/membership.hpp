#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace troupe::cluster {

/// What a node offers.
struct resources {
  uint32_t cores = 0;
  uint64_t memory_bytes = 0;
  uint32_t gpus = 0;
};

enum class member_state { alive, dead, left };

[[nodiscard]] const char* to_string(member_state s);

/// One node of the cluster as the head sees it.
struct member {
  std::string id;
  /// Where its peers reach its actors (its ROUTER), e.g. "tcp://127.0.0.1:41234".
  std::string endpoint;
  std::string host;
  int64_t pid = 0;
  resources res;
  bool head = false;
  member_state state = member_state::alive;
  /// The epoch that admitted it, and for dead or departed members the one that removed it.
  uint64_t joined_epoch = 0;
  uint64_t removed_epoch = 0;
  std::chrono::steady_clock::time_point last_heartbeat;
  /// Names of the actors it hosts.
  std::vector<std::string> actors;
};

/// The head's membership registry, without sockets or clocks: every join, departure and death
/// bumps the epoch; a member whose heartbeats stop for `interval * misses` is declared dead, and
/// a dead member never comes back under its old identity.
///
///   (join) --> alive --heartbeats stop--> dead
///              alive --leave--> left
class membership {
 public:
  using clock = std::chrono::steady_clock;

  membership(std::chrono::milliseconds heartbeat_interval, int misses)
      : interval_(heartbeat_interval), misses_(misses) {}

  /// Registers the head itself (id "head"); it is never declared dead.
  const member& add_head(std::string endpoint, std::string host, int64_t pid, resources res,
                         clock::time_point now);

  /// Records where the head's own node agent is reached, once it joins.
  const member& update_head(std::string endpoint, std::string host, int64_t pid, resources res);

  /// Admits a worker under a new id ("w1", "w2", ...; ids are never reused).
  const member& join(std::string endpoint, std::string host, int64_t pid, resources res,
                     clock::time_point now);

  /// Records a heartbeat. Unknown, dead and departed members are refused with the reason.
  [[nodiscard]] absl::Status heartbeat(absl::string_view id, clock::time_point now);

  /// A member leaves on purpose.
  [[nodiscard]] absl::Status leave(absl::string_view id);

  /// Declares dead every member whose heartbeats stopped; returns their ids.
  [[nodiscard]] std::vector<std::string> detect_failures(clock::time_point now);

  /// Records the actors a member hosts.
  [[nodiscard]] absl::Status set_actors(absl::string_view id, std::vector<std::string> actors);

  /// The live member hosting actor `name`.
  [[nodiscard]] const member* locate(absl::string_view name) const;

  [[nodiscard]] const member* find(absl::string_view id) const;
  [[nodiscard]] std::vector<const member*> all() const;
  [[nodiscard]] std::vector<const member*> alive() const;
  [[nodiscard]] uint64_t epoch() const { return epoch_; }
  [[nodiscard]] std::chrono::milliseconds failure_timeout() const { return interval_ * misses_; }

 private:
  member& admit(std::string id, std::string endpoint, std::string host, int64_t pid, resources res,
                clock::time_point now);

  std::chrono::milliseconds interval_;
  int misses_;
  uint64_t epoch_ = 0;
  uint64_t next_worker_ = 1;
  std::map<std::string, member, std::less<>> members_;
};

}  // namespace troupe::cluster
