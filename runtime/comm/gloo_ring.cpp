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

// Slot prefixes of troupe's send/recv, of its ring collectives and of the watch receive (Gloo's
// own use 0x01-0x08).
constexpr uint8_t point_to_point_slot = 0x71;
constexpr uint8_t collective_slot = 0x72;
constexpr uint8_t watch_slot = 0x73;
// The watch receive's wait: until a connection fails or the ring goes (a century).
constexpr std::chrono::milliseconds watch_wait = std::chrono::hours(24 * 365 * 100);
// The reduce-scatter's receive segment and the broadcast's piece: small enough that summing or
// passing on one overlaps receiving the next, large enough that per-message costs vanish.
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

// A transfer buffer of operation `what` that stop() can reach while the operation waits on it.
// Its sends and receives are posted and waited for here, in order; one that goes with
// transfers still posted (its operation failed) closes the connections first, so that no pair
// touches it afterwards.
class gloo_ring::tracked_buffer {
 public:
  tracked_buffer(gloo_ring& ring, const char* what, void* data, size_t bytes)
      : ring_(ring), what_(what), buf_(ring.context_->createUnboundBuffer(data, bytes)) {
    std::lock_guard lock(ring_.buffer_mutex_);
    ring_.live_.push_back(buf_.get());
  }
  ~tracked_buffer() {
    if (sends_ + receives_ > 0) ring_.close();
    std::lock_guard lock(ring_.buffer_mutex_);
    std::erase(ring_.live_, buf_.get());
  }
  tracked_buffer(const tracked_buffer&) = delete;
  tracked_buffer& operator=(const tracked_buffer&) = delete;

  void send(int peer, uint64_t slot, size_t offset, size_t bytes) {
    post(true, peer, slot, offset, bytes);
  }
  void recv(int peer, uint64_t slot, size_t offset, size_t bytes) {
    post(false, peer, slot, offset, bytes);
  }
  // Waits for the oldest posted send (receive) to complete; throws when it fails, times out or
  // the ring stopped. The buffer joined live_ before its posts checked, so a stop since wakes it.
  void wait_send() { wait(true); }
  void wait_recv() { wait(false); }

 private:
  void post(bool sending, int peer, uint64_t slot, size_t offset, size_t bytes) {
    throw_if_stopped();
    ++(sending ? sends_ : receives_);
    try {
      if (sending)
        buf_->send(peer, slot, offset, bytes);
      else
        buf_->recv(peer, slot, offset, bytes);
    } catch (const std::exception&) {
      throw_if_stopped();  // a stop closed the pair meanwhile: its reason, not the closed pair's
      throw;
    }
  }
  void throw_if_stopped() const {
    if (ring_.stopped_.load()) throw stopped();
  }
  gloo::IoException stopped() const {
    return gloo::IoException(absl::StrCat(what_, ": ", ring_.stop_reason_));
  }
  void wait(bool sending) {
    if (!(sending ? buf_->waitSend(ring_.timeout_) : buf_->waitRecv(ring_.timeout_)))
      throw stopped();  // woken by stop()
    --(sending ? sends_ : receives_);
  }

  gloo_ring& ring_;
  const char* what_;
  std::unique_ptr<gloo::transport::UnboundBuffer> buf_;
  int64_t sends_ = 0, receives_ = 0;  // posted, not yet waited for
};

gloo_ring::gloo_ring(std::shared_ptr<gloo::rendezvous::Context> context, int rank, int size,
                     std::chrono::milliseconds timeout)
    : context_(std::move(context)),
      rank_(rank),
      size_(size),
      timeout_(timeout),
      watch_(context_->createUnboundBuffer(nullptr, 0)) {
  if (size_ == 1) return;  // no connections to watch
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) watch_->recv(peer, gloo::Slot::build(watch_slot, 0), 0, 0);
  }
  watcher_ = std::thread([this] { watch_peers(); });
}

gloo_ring::~gloo_ring() {
  if (!watcher_.joinable()) return;
  watch_->abortWaitRecv();
  watcher_.join();
}

void gloo_ring::watch_peers() {
  try {
    // No peer sends on the watch slot: the wait ends when a pair fails or ~gloo_ring wakes it.
    (void)watch_->waitRecv(nullptr, watch_wait);
  } catch (const std::exception& e) {
    stop(absl::StrCat("a connection to a peer failed: ", e.what()));
  }
}

uint64_t gloo_ring::next_slot() {
  return gloo::Slot::build(collective_slot, tag_++);
}

void gloo_ring::stop(const std::string& reason) {
  {
    std::lock_guard lock(buffer_mutex_);
    if (stopped_.load()) return;
    stop_reason_ = reason;
    stopped_.store(true);  // from here every post and wait fails with the reason
  }
  // Closed before a wait is woken: once no pair reads into or writes from a buffer, its
  // operation may unwind and free it.
  close();
  std::lock_guard lock(buffer_mutex_);
  for (auto* buf : live_) {
    buf->abortWaitRecv();
    buf->abortWaitSend();
  }
}

void gloo_ring::abort() {
  aborted_.store(true);
  stop("aborted");
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
  tracked_buffer out(*this, "reduce", data, n * sizeof(T));
  tracked_buffer in0(*this, "reduce", halves[0], segment * sizeof(T));
  tracked_buffer in1(*this, "reduce", halves[1], segment * sizeof(T));
  tracked_buffer* in[2] = {&in0, &in1};
  const auto post = [&](size_t g) {
    in[g % 2]->recv(left(), slots[arriving[g].step], 0, arriving[g].len * sizeof(T));
  };
  for (size_t g = 0; g < std::min<size_t>(2, arriving.size()); ++g)
    post(g);
  size_t g = 0;
  for (int step = 0; step < size_ - 1; ++step) {
    const std::vector<piece> sending = pieces(ring_index(-step - 1), step);
    for (const piece& p : sending)
      out.send(right(), slots[step], p.at * sizeof(T), p.len * sizeof(T));
    for (; g < arriving.size() && arriving[g].step == step; ++g) {
      in[g % 2]->wait_recv();
      add_in_place(data + arriving[g].at, halves[g % 2], arriving[g].len);
      if (g + 2 < arriving.size()) post(g + 2);
    }
    for (size_t k = 0; k < sending.size(); ++k)
      out.wait_send();
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
  tracked_buffer out(*this, "gather", data, n * element);
  tracked_buffer in(*this, "gather", data, n * element);
  std::vector<uint64_t> slots;
  for (int step = 0; step < size_ - 1; ++step) {
    slots.push_back(next_slot());
    const int got = ring_index(-step - 1);
    in.recv(left(), slots[step], chunks.begin(got) * element, chunks.size(got) * element);
  }
  for (int step = 0; step < size_ - 1; ++step) {
    const int sent = ring_index(-step);
    out.send(right(), slots[step], chunks.begin(sent) * element, chunks.size(sent) * element);
    in.wait_recv();  // chunk rank - step - 1: the next step's to pass on
  }
  for (int step = 0; step < size_ - 1; ++step)
    out.wait_send();
}

// A pipelined chain along the ring from the root: the root sends every piece to its right;
// each other rank receives them from its left (all posted at once, so that Gloo's receiver-ready
// notifications have gone out) and, unless it is the last, passes each on to its right as it
// arrives. The root sends the bytes once instead of once per receiver, and consecutive hops copy
// at the same time.
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
  const int hop = ring_index(-root);  // the root's is 0
  // A pair completes its transfers in order: the buffer's k-th receive (send) is piece k.
  tracked_buffer buf(*this, "broadcast", data, bytes);
  const auto pass_on = [&](size_t p) {
    const auto [offset, length] = piece_at(p);
    buf.send(right(), slot, offset, length);
  };
  if (hop == 0) {
    for (size_t p = 0; p < pieces; ++p)
      pass_on(p);
    // Piece p is reported once piece p - 1 has gone: while p is being sent.
    for (size_t p = 0; p < pieces; ++p) {
      if (p > 0) buf.wait_send();
      report(p);
    }
    buf.wait_send();
    return;
  }
  const bool last = hop == size_ - 1;
  for (size_t p = 0; p < pieces; ++p) {
    const auto [offset, length] = piece_at(p);
    buf.recv(left(), slot, offset, length);
  }
  for (size_t p = 0; p < pieces; ++p) {
    buf.wait_recv();
    if (!last) pass_on(p);
    report(p);
  }
  if (last) return;
  for (size_t p = 0; p < pieces; ++p)
    buf.wait_send();
}

// Pipelined in segments.
void gloo_ring::broadcast(void* data, size_t bytes, int root) {
  broadcast(data, bytes, root, segment_bytes, [](size_t, size_t) {});
}

void gloo_ring::send(void* data, size_t bytes, int peer, uint32_t tag) {
  tracked_buffer buf(*this, "send", data, bytes);
  buf.send(peer, gloo::Slot::build(point_to_point_slot, tag), 0, bytes);
  buf.wait_send();
}

void gloo_ring::recv(void* data, size_t bytes, int peer, uint32_t tag) {
  tracked_buffer buf(*this, "recv", data, bytes);
  buf.recv(peer, gloo::Slot::build(point_to_point_slot, tag), 0, bytes);
  buf.wait_recv();
}

void gloo_ring::exchange(const std::vector<piece>& sends, const std::vector<piece>& recvs) {
  std::deque<tracked_buffer> posted;  // tracked buffers neither move nor copy
  for (const piece& p : recvs) {
    posted.emplace_back(*this, "exchange", p.data, p.bytes);
    posted.back().recv(p.peer, gloo::Slot::build(point_to_point_slot, p.tag), 0, p.bytes);
  }
  for (const piece& p : sends) {
    posted.emplace_back(*this, "exchange", p.data, p.bytes);
    posted.back().send(p.peer, gloo::Slot::build(point_to_point_slot, p.tag), 0, p.bytes);
  }
  for (size_t i = 0; i < posted.size(); ++i) {
    if (i < recvs.size())
      posted[i].wait_recv();
    else
      posted[i].wait_send();
  }
}

}  // namespace troupe::comm
