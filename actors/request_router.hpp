#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "actors/batch_scheduler.hpp"
#include "actors/prefix_affinity.hpp"

namespace troupe::actors {

/// The serving router's decisions, without CAF: which inference worker runs each request, what
/// waits, what is refused, and what reaches the client.
///
/// - A request goes to the live worker with the fewest outstanding tokens (prompt plus the
///   tokens it may still produce, over the requests it runs); a worker takes at most
///   `max_per_worker` requests, the rest wait in a queue of at most `max_queue` (beyond which
///   the request is refused: HTTP 429).
/// - Each request's stream is numbered: the router forwards a token once, in order. When a
///   worker is lost, its requests are replayed (at the front of the queue) from their prompts;
///   seeded sampling reproduces the tokens, and the ones the client already has are dropped, so
///   the stream continues without a repeat or a gap.
/// - A client that goes away cancels its request wherever it is.
/// - A draining worker (autoscaling takes it away) gets no new requests; those it runs finish.
/// - With prefix caching on the workers (`prefix_block_size` > 0), a request goes instead to the
///   worker that was sent the longest prefix of its prompt (cache-aware routing, as SGLang's
///   router does; prefix_affinity), unless that worker's outstanding tokens exceed the least
///   loaded one's by more than the prefix would save.
class request_router {
 public:
  struct options {
    int max_queue = 256;
    int max_per_worker = 64;
    int prefix_block_size = 0;  ///< the workers' KV block size with prefix caching; 0: off
    int prefix_blocks = 512;    ///< blocks remembered per worker (its KV cache's)
  };

  /// Start `request` on `worker`.
  struct dispatch {
    std::string worker;
    generation_request request;
  };
  /// Stop request `id` on `worker`.
  struct cancel_on {
    std::string worker;
    uint64_t id;
  };
  /// Send the client of `id` these tokens (output indices first_index...), or the end.
  struct deliver {
    generation_event event;
  };
  using command = std::variant<dispatch, cancel_on, deliver>;

  explicit request_router(options o)
      : options_(o), affinity_(std::max(1, o.prefix_block_size), o.prefix_blocks) {}

  /// Accepts a request (dispatched or queued), or refuses it: RESOURCE_EXHAUSTED when the queue
  /// is full, ALREADY_EXISTS for an id in use.
  [[nodiscard]] absl::StatusOr<std::vector<command>> submit(generation_request request);
  /// The client of `id` is gone.
  std::vector<command> cancel(uint64_t id);

  std::vector<command> add_worker(const std::string& worker);
  /// Whether `worker` gets new requests: a draining one does not (it finishes those it has); one
  /// that serves again takes queued requests at once.
  std::vector<command> set_draining(const std::string& worker, bool draining);
  /// A worker left or died: its requests are replayed elsewhere.
  std::vector<command> remove_worker(const std::string& worker);
  /// An event from `worker` about one of its requests.
  std::vector<command> on_event(const std::string& worker, const generation_event& event);
  /// `worker` refused or failed request `id` with `error`: it ends, with that error, for the
  /// client (the returned event carries reason `cancelled`; the caller reports the error).
  std::vector<command> on_failed(const std::string& worker, uint64_t id);

  [[nodiscard]] size_t queued() const { return queue_.size(); }
  [[nodiscard]] size_t in_flight() const { return placed_.size(); }
  [[nodiscard]] int64_t load(const std::string& worker) const;
  /// The requests `worker` runs.
  [[nodiscard]] size_t running_on(const std::string& worker) const;
  [[nodiscard]] size_t workers() const { return workers_.size(); }
  [[nodiscard]] uint64_t replays() const { return replays_; }

 private:
  struct tracked {
    generation_request request;
    int delivered = 0;   // output tokens the client has
    std::string worker;  // empty while queued
  };
  // Tokens `t` may still cost its worker.
  static int64_t cost(const tracked& t);
  // Dispatches queued requests while some worker has room.
  std::vector<command> drain();
  // Whether `worker`, running `running` requests, takes another.
  bool takes_more(const std::string& worker, size_t running) const;
  std::optional<std::string> least_loaded() const;
  // The worker for a request whose prompt's block hash chain is `chain` (empty without prefix
  // caching): `least_loaded`, or one holding more of its prefix (above).
  std::string choose(std::string least_loaded, std::span<const uint64_t> chain) const;

  options options_;
  std::map<uint64_t, tracked> requests_;
  std::deque<uint64_t> queue_;
  std::map<std::string, std::map<uint64_t, bool>> workers_;  // worker -> its requests
  std::map<uint64_t, std::string> placed_;
  std::set<std::string> draining_;
  uint64_t replays_ = 0;
  prefix_affinity affinity_;
};

}  // namespace troupe::actors
