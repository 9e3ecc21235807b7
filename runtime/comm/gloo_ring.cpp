#include "runtime/comm/gloo_ring.hpp"

#include <algorithm>
#include <deque>
#include <type_traits>

#include <gloo/common/error.h>
#include <gloo/types.h>

#include "absl/strings/str_cat.h"
#include "runtime/tensor/tensor.hpp"

namespace troupe::comm {
namespace {

// Slot prefixes of troupe's send/recv and of its ring collectives (Gloo's own use 0x01-0x08).
constexpr uint8_t point_to_point_slot = 0x71;
constexpr uint8_t collective_slot = 0x72;
// The reduce-scatter's receive segment: small enough that summing one overlaps receiving the
// next, large enough that per-message costs vanish.
constexpr int64_t segment_bytes = 1 << 20;

// x += y; bf16 is summed in f32 and rounded once per addition.
template <class T>
void add_in_place(T* x, const T* y, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, tensor::bf16>) {
      x[i] = T(static_cast<float>(x[i]) + static_cast<float>(y[i]));
    } else {
      x[i] = x[i] + y[i];
    }
  }
}

}  // namespace

// A transfer buffer abort() can reach while an operation waits on it.
class gloo_ring::tracked_buffer {
 public:
  tracked_buffer(gloo_ring& ring, void* data, size_t bytes)
      : ring_(ring), buf_(ring.context_->createUnboundBuffer(data, bytes)) {
    std::lock_guard lock(ring_.buffer_mutex_);
    ring_.live_.push_back(buf_.get());
  }
  ~tracked_buffer() {
    std::lock_guard lock(ring_.buffer_mutex_);
    std::erase(ring_.live_, buf_.get());
  }
  tracked_buffer(const tracked_buffer&) = delete;
  tracked_buffer& operator=(const tracked_buffer&) = delete;
  gloo::transport::UnboundBuffer* operator->() const { return buf_.get(); }

 private:
  gloo_ring& ring_;
  std::unique_ptr<gloo::transport::UnboundBuffer> buf_;
};

uint64_t gloo_ring::next_slot() {
  return gloo::Slot::build(collective_slot, tag_++);
}

// Waits for one send or receive of `buf` to complete; throws when it fails, times out or is
// aborted. A buffer joins live_ before this check, so an abort in between still wakes it.
void gloo_ring::wait(tracked_buffer& buf, const char* what, bool sending) {
  const bool done = aborted_.load() ? false
                    : sending       ? buf->waitSend(timeout_)
                                    : buf->waitRecv(timeout_);
  if (!done) throw gloo::IoException(absl::StrCat(what, " aborted"));
}

void gloo_ring::abort() {
  aborted_.store(true);
  // Closed first: once no pair reads into a buffer any more, its wait may end.
  context_->closeConnections();
  std::lock_guard lock(buffer_mutex_);
  for (auto* buf : live_) {
    buf->abortWaitRecv();
    buf->abortWaitSend();
  }
}

// Ring reduce-scatter: after P - 1 steps chunk `rank` holds the sum over the ranks. Step s
// sends chunk rank - s - 1 to the right and adds chunk rank - s - 2 from the left. What arrives
// is received in segments into two alternating scratch halves, so the sum of one segment
// overlaps the transfer of the next, and each receive is posted two segments ahead (into the
// next step too): Gloo holds a send until the receiver says it is ready, and a receive posted
// early has said so already.
template <class T>
void gloo_ring::reduce_scatter(T* data, int64_t n) {
  if (size_ == 1) return;
  const even_split chunks{n, size_};
  const int64_t segment = std::min(std::max<int64_t>(1, segment_bytes / sizeof(T)), chunks.size(0));
  struct piece {
    int step;
    int64_t at, len;  // elements of data
  };
  const auto pieces = [&](int chunk, int step) {
    std::vector<piece> out;
    for (int64_t at = 0; at < chunks.size(chunk); at += segment)
      out.push_back({step, chunks.begin(chunk) + at, std::min(segment, chunks.size(chunk) - at)});
    return out;
  };
  std::vector<uint64_t> slots;
  std::vector<piece> arriving;  // every step's, in order
  for (int step = 0; step < size_ - 1; ++step) {
    slots.push_back(next_slot());
    for (const piece& p : pieces(ring_index(-step - 2), step))
      arriving.push_back(p);
  }
  scratch_.resize(2 * segment * sizeof(T));
  T* halves[2] = {reinterpret_cast<T*>(scratch_.data()),
                  reinterpret_cast<T*>(scratch_.data()) + segment};
  tracked_buffer out(*this, data, n * sizeof(T));
  tracked_buffer in0(*this, halves[0], segment * sizeof(T));
  tracked_buffer in1(*this, halves[1], segment * sizeof(T));
  tracked_buffer* in[2] = {&in0, &in1};
  const auto post = [&](size_t g) {
    (*in[g % 2])->recv(left(), slots[arriving[g].step], 0, arriving[g].len * sizeof(T));
  };
  for (size_t g = 0; g < std::min<size_t>(2, arriving.size()); ++g)
    post(g);
  size_t g = 0;
  for (int step = 0; step < size_ - 1; ++step) {
    const std::vector<piece> sending = pieces(ring_index(-step - 1), step);
    for (const piece& p : sending)
      out->send(right(), slots[step], p.at * sizeof(T), p.len * sizeof(T));
    for (; g < arriving.size() && arriving[g].step == step; ++g) {
      wait(*in[g % 2], "reduce", false);
      add_in_place(data + arriving[g].at, halves[g % 2], arriving[g].len);
      if (g + 2 < arriving.size()) post(g + 2);
    }
    for (size_t k = 0; k < sending.size(); ++k)
      wait(out, "reduce", true);
  }
}

template void gloo_ring::reduce_scatter<float>(float*, int64_t);
template void gloo_ring::reduce_scatter<int32_t>(int32_t*, int64_t);
template void gloo_ring::reduce_scatter<tensor::bf16>(tensor::bf16*, int64_t);

// Ring allgather in place: step s passes chunk rank - s to the right and receives chunk
// rank - s - 1 from the left straight into place. Every receive is posted first (each into its
// own chunk); one pair delivers them in step order.
void gloo_ring::allgather(char* data, int64_t n, size_t element) {
  if (size_ == 1) return;
  const even_split chunks{n, size_};
  tracked_buffer out(*this, data, n * element);
  tracked_buffer in(*this, data, n * element);
  std::vector<uint64_t> slots;
  for (int step = 0; step < size_ - 1; ++step) {
    slots.push_back(next_slot());
    const int got = ring_index(-step - 1);
    in->recv(left(), slots[step], chunks.begin(got) * element, chunks.size(got) * element);
  }
  for (int step = 0; step < size_ - 1; ++step) {
    const int sent = ring_index(-step);
    out->send(right(), slots[step], chunks.begin(sent) * element, chunks.size(sent) * element);
    wait(in, "gather", false);  // chunk rank - step - 1: the next step's to pass on
  }
  for (int step = 0; step < size_ - 1; ++step)
    wait(out, "gather", true);
}

// From the root to each other rank: every piece posted at once.
void gloo_ring::broadcast(void* data, size_t bytes, int root, size_t piece,
                          const std::function<void(size_t, size_t)>& on_piece) {
  const size_t pieces = std::max<size_t>(1, (bytes + piece - 1) / piece);
  const auto piece_at = [&](size_t p) {
    return std::pair{p * piece, std::min(piece, bytes - p * piece)};
  };
  const auto report = [&](size_t p) {
    if (const auto [offset, length] = piece_at(p); length > 0) on_piece(offset, length);
  };
  if (size_ == 1) {
    for (size_t p = 0; p < pieces; ++p)
      report(p);
    return;
  }
  const uint64_t slot = next_slot();
  // One buffer per peer: a pair completes its transfers in order, so each buffer's k-th
  // completion is piece k.
  std::deque<tracked_buffer> buffers;
  if (rank_ != root) {
    tracked_buffer& buf = buffers.emplace_back(*this, data, bytes);
    for (size_t p = 0; p < pieces; ++p) {
      const auto [offset, length] = piece_at(p);
      buf->recv(root, slot, offset, length);
    }
    for (size_t p = 0; p < pieces; ++p) {
      wait(buf, "broadcast", false);
      report(p);
    }
    return;
  }
  std::vector<int> peers;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != root) {
      peers.push_back(peer);
      buffers.emplace_back(*this, data, bytes);
    }
  }
  for (size_t p = 0; p < pieces; ++p) {
    const auto [offset, length] = piece_at(p);
    for (size_t i = 0; i < peers.size(); ++i)
      buffers[i]->send(peers[i], slot, offset, length);
  }
  // Piece p is reported once piece p - 1 has gone to the first peer: while p is being sent.
  for (size_t p = 0; p < pieces; ++p) {
    if (p > 0) wait(buffers[0], "broadcast", true);
    report(p);
  }
  wait(buffers[0], "broadcast", true);
  for (size_t i = 1; i < peers.size(); ++i) {
    for (size_t p = 0; p < pieces; ++p)
      wait(buffers[i], "broadcast", true);
  }
}

// From the root to each other rank, in one piece.
void gloo_ring::broadcast(void* data, size_t bytes, int root) {
  broadcast(data, bytes, root, std::max<size_t>(bytes, 1), [](size_t, size_t) {});
}

void gloo_ring::send(void* data, size_t bytes, int peer, uint32_t tag) {
  tracked_buffer buf(*this, data, bytes);
  buf->send(peer, gloo::Slot::build(point_to_point_slot, tag));
  wait(buf, "send", true);
}

void gloo_ring::recv(void* data, size_t bytes, int peer, uint32_t tag) {
  tracked_buffer buf(*this, data, bytes);
  buf->recv(peer, gloo::Slot::build(point_to_point_slot, tag));
  wait(buf, "recv", false);
}

void gloo_ring::exchange(const std::vector<piece>& sends, const std::vector<piece>& recvs) {
  std::deque<tracked_buffer> posted;  // tracked buffers neither move nor copy
  for (const piece& p : sends) {
    posted.emplace_back(*this, p.data, p.bytes);
    posted.back()->send(p.peer, gloo::Slot::build(point_to_point_slot, p.tag));
  }
  for (const piece& p : recvs) {
    posted.emplace_back(*this, p.data, p.bytes);
    posted.back()->recv(p.peer, gloo::Slot::build(point_to_point_slot, p.tag));
  }
  for (size_t i = 0; i < posted.size(); ++i)
    wait(posted[i], "exchange", i < sends.size());
}

}  // namespace troupe::comm
