#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "runtime/actor/message_types.hpp"
#include "runtime/cluster/membership.hpp"

namespace troupe::cluster {

/// A member of the cluster as a node sees it.
struct peer {
  std::string node;
  std::string endpoint;
  member_state state = member_state::alive;
  bool head = false;
};

/// What a node knows of the other members, and the envelopes that wait while it asks the head
/// about one. The head pushes every departure and death to every node (so every node refuses a
/// fenced member), but joins only to the nodes that watch (the head's own node, whose supervisor
/// follows them). Every other node learns of a member the first time it sends to it or hears
/// from it, with a `member` request to the head: a storm of n joins costs the head O(n) frames,
/// not O(n^2). Meanwhile the envelopes to and from that member wait here, in order.
///
///   unknown --first envelope--> asking --the head's answer--> opening (held envelopes delivered)
///   --> known
///
/// Not thread-safe: the node agent locks around it.
class peer_directory {
 public:
  /// Envelopes that may wait for one member before more are refused.
  static constexpr size_t max_waiting = 4096;
  /// Members asked about at once before envelopes from more unknown senders are refused (a peer
  /// connection that names a new sender in every envelope must not grow this without bound).
  static constexpr size_t max_asking = 1024;

  struct decision {
    enum kind { pass, held, refused };
    kind what = pass;
    bool ask_head = false;         // held, and the head is not asked about this node yet
    const peer* record = nullptr;  // pass: the live member
    absl::Status why;              // refused
  };

  /// An envelope for `node`: pass it to the live member, or hold a copy of it.
  [[nodiscard]] decision outgoing(const std::string& node, absl::string_view envelope);

  /// An envelope from `node`: pass it on, or hold `envelope()`, or refuse it (not a live member).
  [[nodiscard]] decision incoming(const std::string& node,
                                  const std::function<std::string()>& envelope);

  /// What waited for a member once the head said who it is.
  struct released {
    bool was_asked = false;  // false: a push answered first, nothing to do
    bool alive = false;
    peer record;                        // what the head said
    std::vector<std::string> outgoing;  // alive: send these, in order, before anything else
    std::vector<std::string> incoming;  // alive: deliver these, in order, then call `opened`
    size_t dropped_incoming = 0;        // not alive: envelopes from it dropped
  };

  /// The head's answer about `node`: its record, or nullopt when it is no member. Nothing when
  /// the node was not being asked about (a push told first).
  [[nodiscard]] released learn(const std::string& node, const std::optional<peer>& record);

  /// Envelopes from `node` that arrived while the released ones were delivered; once there are
  /// none the member is open and its envelopes pass.
  [[nodiscard]] std::vector<std::string> opened(const std::string& node);

  /// Records from the head: a join's list (`delta` false: where this node starts, no changes) or
  /// a push of changed ones. Returns the changes: "joined" for a new live member, "dead" or
  /// "left" for a member that was alive or unknown. Envelopes held for a member that is gone are
  /// dropped (those from it counted in `dropped_incoming`).
  [[nodiscard]] std::vector<actor::member_event> apply(const std::vector<peer>& records,
                                                       uint64_t epoch, bool delta,
                                                       size_t* dropped_incoming = nullptr);

  /// Every member known, with its state.
  [[nodiscard]] std::vector<peer> known() const;

 private:
  enum class stage { asking, opening, known };
  struct entry {
    peer record;
    stage at = stage::known;
    std::deque<std::string> out;  // waiting to be sent (asking)
    std::deque<std::string> in;   // waiting to be delivered (asking, opening)
  };
  // A refusal for `node`, which is not alive.
  static absl::Status not_alive(const entry& e);
  // The refusal of an unknown sender or receiver while max_asking others are asked about.
  static decision too_many_unknown(const std::string& node);
  // The entry for a node not known yet: asking.
  entry& ask(const std::string& node);

  std::map<std::string, entry> entries_;
  size_t asking_ = 0;  // entries at stage::asking
};

}  // namespace troupe::cluster
