#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace troupe::apps::rlhf {

/// The rollout workers of an RLHF run, without CAF: who is in the weight-sync group (ranks 1..
/// after the policy's rank 0, in order), who waits to join it, and which worker holds which
/// generation request, so that a lost worker's requests go to the others and a joiner gets
/// prompts only after a sync gave it the current weights.
///
/// The sync group is formed anew at a new epoch whenever its members changed since the last
/// sync; joiners are admitted at the next sync (begin_sync), which the controller runs at the
/// start of every RL step.
class rollout_pool {
 public:
  /// The workers placed at the start, in rank order.
  explicit rollout_pool(std::vector<std::string> members);

  /// A worker that appeared mid-run (a worker joined, or a lost one was restarted elsewhere):
  /// it joins the group at the next sync. False when it is already known.
  bool add(const std::string& name);
  /// Requests of a lost worker, given to another.
  struct reassignment {
    std::string to;
    std::vector<uint64_t> ids;
  };
  /// A worker is gone: it leaves the group (or the joiners), and its unfinished requests are
  /// spread over the other members, round-robin. False in `known` when it was not a worker.
  std::vector<reassignment> remove(const std::string& name, bool* known = nullptr);

  /// The policy rank that sends the weights (rank 0 of the group): another one than the last
  /// sync's (the policy's group lost its rank 0) forms the group anew.
  void set_sender(const std::string& name) {
    if (name != sender_) changed_ = true;
    sender_ = name;
  }
  /// The next sync: joiners become members; the epoch moves on when the members changed.
  /// Returns the epoch.
  uint64_t begin_sync();
  [[nodiscard]] uint64_t epoch() const { return epoch_; }
  /// The members, in sync-group rank order (member i is rank 1 + i).
  [[nodiscard]] const std::vector<std::string>& members() const { return members_; }
  [[nodiscard]] bool is_member(const std::string& name) const;
  /// Whether the members changed since the sync in flight began (a loss during it).
  [[nodiscard]] bool changed_since_sync() const { return changed_; }

  /// Gives requests `ids` to the members round-robin (request i to member i % members), in the
  /// order given: member name -> its ids.
  std::map<std::string, std::vector<uint64_t>> assign(const std::vector<uint64_t>& ids);
  /// Request `id`, which `worker` holds, has ended. False when `worker` does not hold it (an
  /// answer of a worker whose requests went elsewhere).
  bool finish(const std::string& worker, uint64_t id);
  /// Whether `worker` holds unfinished request `id`.
  [[nodiscard]] bool holds(const std::string& worker, uint64_t id) const;
  /// How many unfinished requests `worker` holds.
  [[nodiscard]] size_t unfinished(const std::string& worker) const;

 private:
  std::vector<std::string> members_, joiners_;
  std::string sender_;
  std::map<std::string, std::set<uint64_t>> held_;  // unfinished requests by worker
  uint64_t epoch_ = 0;
  bool changed_ = true;  // the first sync forms the group
  size_t next_ = 0;      // round-robin position for reassignments
};

}  // namespace troupe::apps::rlhf
