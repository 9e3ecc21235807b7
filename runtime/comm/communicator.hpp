#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/tensor/tensor.hpp"

namespace troupe::comm {

/// How allreduce and reduce_scatter combine the ranks' values.
enum class reduce_op { sum, avg };

/// One point-to-point transfer of communicator::exchange: `data` to or from rank `peer`.
struct transfer {
  tensor::tensor data;
  int peer = 0;
  uint32_t tag = 0;  ///< a send matches the peer's receive of the same tag
};

/// Who a process is in a group and how long an operation may wait.
struct group_options {
  std::string name = "world";  ///< groups with different names rendezvous separately
  int rank = 0;
  int size = 1;
  uint64_t epoch = 0;  ///< the membership epoch the group was formed at; part of its keys
  std::chrono::milliseconds timeout{30000};  ///< rendezvous and every operation
  std::string host = "127.0.0.1";            ///< the address peers connect to
  /// Polled while the group forms (every 100 ms, when set): once it returns true, forming ends
  /// with CANCELLED instead of waiting out the timeout for a rank that will not come (a newer
  /// membership made this group moot).
  std::function<bool()> cancelled;
};

/// Collectives and point-to-point transfers over a fixed set of ranks (DESIGN.md plane 3).
/// Every call blocks until done, fails after the group's timeout with DEADLINE_EXCEEDED, and
/// after abort() or any failure the group refuses further work: it is rebuilt at a new epoch,
/// never left hanging. Calls must be made in the same order on every rank.
class communicator {
 public:
  virtual ~communicator() = default;

  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int size() const = 0;
  [[nodiscard]] virtual uint64_t epoch() const = 0;

  /// data = op over every rank's data, in place.
  [[nodiscard]] virtual absl::Status allreduce(const tensor::tensor& data, reduce_op op) = 0;
  /// out (n elements) = op over the ranks of in[rank * n, (rank + 1) * n). `in` is working
  /// memory: its values afterwards are unspecified. out may be the first n elements of `in`,
  /// which saves a copy.
  [[nodiscard]] virtual absl::Status reduce_scatter(const tensor::tensor& in,
                                                    const tensor::tensor& out, reduce_op op) = 0;
  /// out (size * n elements) = every rank's in (n elements), in rank order.
  [[nodiscard]] virtual absl::Status allgather(const tensor::tensor& in,
                                               const tensor::tensor& out) = 0;
  /// data = root's data on every rank.
  [[nodiscard]] virtual absl::Status broadcast(const tensor::tensor& data, int root) = 0;
  /// What broadcast_in_pieces() calls for each piece: its offset and length in bytes.
  using piece_fn = std::function<void(int64_t offset, int64_t bytes)>;
  /// broadcast(), calling `on_piece` on the caller's thread for consecutive pieces of
  /// `piece_bytes` (the last one shorter) that cover host `data` in order: on a receiver once
  /// the piece has arrived, on the root while it is being sent (once the piece before it has
  /// gone to a first peer). A checksum fed from it reads every piece while the transfer has it
  /// in the cache. This default broadcasts the whole of `data`, then calls on_piece.
  [[nodiscard]] virtual absl::Status broadcast_in_pieces(const tensor::tensor& data, int root,
                                                         int64_t piece_bytes,
                                                         const piece_fn& on_piece);
  /// Sends data to `peer`; matched by a recv with the same tag.
  [[nodiscard]] virtual absl::Status send(const tensor::tensor& data, int peer,
                                          uint32_t tag = 0) = 0;
  [[nodiscard]] virtual absl::Status recv(const tensor::tensor& data, int peer,
                                          uint32_t tag = 0) = 0;
  /// Posts every send and every receive at once, then waits for them all, so a rank sends to
  /// some peers and receives from others (or the same ones) with no order to deadlock on, and
  /// pulls pieces from several peers at the same time (NCCL: one group of ncclSend/ncclRecv).
  /// Transfers between two ranks must be listed in the same order on both (NCCL matches them by
  /// order, Gloo by tag).
  [[nodiscard]] virtual absl::Status exchange(const std::vector<transfer>& sends,
                                              const std::vector<transfer>& recvs) = 0;
  /// Returns once every rank has called barrier.
  [[nodiscard]] virtual absl::Status barrier() = 0;

  /// Makes operations in progress on other threads fail soon and every later one fail at once.
  virtual void abort(const std::string& reason) = 0;
};

}  // namespace troupe::comm
