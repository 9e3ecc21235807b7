#include "runtime/comm/gloo_communicator.hpp"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <functional>
#include <mutex>
#include <type_traits>
#include <vector>

#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "absl/strings/str_cat.h"
#include "runtime/base/even_split.hpp"

namespace troupe::comm {
namespace {

using tensor::dtype;

// Slot prefixes of troupe's send/recv and of its ring collectives (Gloo's own use 0x01-0x08).
constexpr uint8_t point_to_point_slot = 0x71;
constexpr uint8_t collective_slot = 0x72;
// The reduce-scatter's receive segment: small enough that summing one overlaps receiving the
// next, large enough that per-message costs vanish.
constexpr int64_t segment_bytes = 1 << 20;
// How often a forming group asks whether it was cancelled, and what it then says.
constexpr std::chrono::milliseconds cancel_poll{100};
constexpr absl::string_view cancelled_message = "cancelled while forming";

// Gloo's Store interface over ours. Gloo expects exceptions from a store; they are caught in
// make_gloo_communicator, so none leaves this file.
class store_adapter final : public gloo::rendezvous::Store {
 public:
  store_adapter(rendezvous_store& store, std::string prefix, std::chrono::milliseconds timeout,
                std::function<bool()> cancelled)
      : store_(store),
        prefix_(std::move(prefix)),
        timeout_(timeout),
        cancelled_(std::move(cancelled)) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    absl::Status s = store_.set(prefix_ + key, std::string(data.begin(), data.end()));
    if (!s.ok()) throw gloo::IoException(std::string(s.message()));
  }
  std::vector<char> get(const std::string& key) override {
    const std::string v = wait_for(key, timeout_);
    return {v.begin(), v.end()};
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& t) override {
    for (const auto& key : keys)
      wait_for(key, t);
  }

 private:
  // The key's value; without a cancel hook one wait, with one in slices between which it asks.
  std::string wait_for(const std::string& key, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      const auto slice = cancelled_ ? std::min(left, cancel_poll) : left;
      absl::StatusOr<std::string> v =
          store_.wait(prefix_ + key, std::max(slice, std::chrono::milliseconds{0}));
      if (v.ok()) return *std::move(v);
      if (v.status().code() != absl::StatusCode::kDeadlineExceeded || left <= slice) {
        throw gloo::IoException(std::string(v.status().message()));
      }
      if (cancelled_()) throw gloo::IoException(std::string(cancelled_message));
    }
  }

  rendezvous_store& store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
  std::function<bool()> cancelled_;
};

absl::Status check_host(const tensor::tensor& t, const char* what) {
  if (!t.where().is_cpu() || !t.is_contiguous()) {
    return absl::InvalidArgumentError(
        absl::StrCat("gloo ", what, ": needs a contiguous host tensor, got ", t.description(),
                     " (CUDA tensors go through the NCCL communicator)"));
  }
  return absl::OkStatus();
}

// Element types the communicator reduces; bf16 is summed in f32 and rounded once per addition.
template <class F>
void with_element_type(dtype type, F&& f) {
  switch (type) {
    case dtype::f32:
      return f(float{});
    case dtype::i32:
      return f(int32_t{});
    case dtype::bf16:
      return f(tensor::bf16{});
  }
}

template <class T>
T add(T a, T b) {
  if constexpr (std::is_same_v<T, tensor::bf16>) {
    return T(static_cast<float>(a) + static_cast<float>(b));
  } else {
    return a + b;
  }
}

// x += y.
template <class T>
void add_in_place(T* x, const T* y, size_t n) {
  for (size_t i = 0; i < n; ++i)
    x[i] = add(x[i], y[i]);
}

// avg = sum / ranks; integers have no average.
absl::Status check_average(reduce_op op, dtype type, const char* what) {
  if (op == reduce_op::avg && type == dtype::i32) {
    return absl::InvalidArgumentError(
        absl::StrCat("gloo ", what, ": avg needs an f32 or bf16 tensor; sum i32 values instead"));
  }
  return absl::OkStatus();
}

void scale(const tensor::tensor& t, float factor) {
  if (t.type() == dtype::bf16) {
    tensor::bf16* p = t.data<tensor::bf16>();
    for (int64_t i = 0; i < t.numel(); ++i)
      p[i] = tensor::bf16(static_cast<float>(p[i]) * factor);
    return;
  }
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] *= factor;
}

// Ring collectives run on Gloo's TCP transport (its pairs, framing and epoll loop) with buffers
// this class owns, not Gloo's algorithm objects: Debian's Gloo cannot interrupt an algorithm that
// is blocked on a stopped peer, but every wait here is on a buffer abort() can wake, so a
// survivor is released at once (docs/elastic.md). Any failure closes the group's connections, so
// the peers' waits fail too instead of running out their timeouts (Gloo's ring otherwise wakes
// only a dead rank's two neighbours).
class gloo_communicator final : public communicator {
 public:
  gloo_communicator(std::shared_ptr<gloo::rendezvous::Context> context,
                    std::shared_ptr<gloo::transport::Device> device, group_options options)
      : context_(std::move(context)), device_(std::move(device)), options_(std::move(options)) {}

  ~gloo_communicator() override = default;

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  uint64_t epoch() const override { return options_.epoch; }

  absl::Status allreduce(const tensor::tensor& data, reduce_op op) override {
    TROUPE_RETURN_IF_ERROR(check_host(data, "allreduce"));
    TROUPE_RETURN_IF_ERROR(check_average(op, data.type(), "allreduce"));
    TROUPE_RETURN_IF_ERROR(guarded("allreduce", [&] {
      const even_split chunks{data.numel(), options_.size};
      with_element_type(data.type(), [&](auto element) {
        using T = decltype(element);
        reduce_scatter_ring(data.data<T>(), chunks);
      });
      allgather_ring(static_cast<char*>(data.raw()), chunks, tensor::dtype_size(data.type()));
    }));
    if (op == reduce_op::avg) scale(data, 1.0f / options_.size);
    return absl::OkStatus();
  }

  absl::Status reduce_scatter(const tensor::tensor& in, const tensor::tensor& out,
                              reduce_op op) override {
    TROUPE_RETURN_IF_ERROR(check_host(in, "reduce_scatter"));
    TROUPE_RETURN_IF_ERROR(check_host(out, "reduce_scatter"));
    if (in.type() != out.type() || in.numel() != out.numel() * options_.size) {
      return absl::InvalidArgumentError(absl::StrCat("gloo reduce_scatter: in ", in.description(),
                                                     " must hold ", options_.size, " x out ",
                                                     out.description(), " of the same dtype"));
    }
    TROUPE_RETURN_IF_ERROR(check_average(op, in.type(), "reduce_scatter"));
    TROUPE_RETURN_IF_ERROR(guarded("reduce_scatter", [&] {
      with_element_type(in.type(), [&](auto element) {
        using T = decltype(element);
        reduce_scatter_ring(in.data<T>(), even_split{in.numel(), options_.size});
      });
    }));
    // The ring leaves this rank's reduced chunk in place; `out` may be the first chunk.
    const char* mine = static_cast<const char*>(in.raw()) + options_.rank * out.nbytes();
    if (out.raw() != mine) std::memmove(out.raw(), mine, out.nbytes());
    if (op == reduce_op::avg) scale(out, 1.0f / options_.size);
    return absl::OkStatus();
  }

  absl::Status allgather(const tensor::tensor& in, const tensor::tensor& out) override {
    TROUPE_RETURN_IF_ERROR(check_host(in, "allgather"));
    TROUPE_RETURN_IF_ERROR(check_host(out, "allgather"));
    if (in.type() != out.type() || out.numel() != in.numel() * options_.size) {
      return absl::InvalidArgumentError(absl::StrCat("gloo allgather: out ", out.description(),
                                                     " must hold ", options_.size, " x in ",
                                                     in.description(), " of the same dtype"));
    }
    char* all = static_cast<char*>(out.raw());
    if (in.raw() != all + options_.rank * in.nbytes()) {
      std::memmove(all + options_.rank * in.nbytes(), in.raw(), in.nbytes());
    }
    return guarded("allgather", [&] {
      allgather_ring(all, even_split{out.numel(), options_.size}, tensor::dtype_size(out.type()));
    });
  }

  absl::Status broadcast(const tensor::tensor& data, int root) override {
    TROUPE_RETURN_IF_ERROR(check_host(data, "broadcast"));
    TROUPE_RETURN_IF_ERROR(check_rank(root, "broadcast root"));
    return guarded("broadcast", [&] {
      if (options_.size == 1) return;
      const uint64_t slot = next_slot();
      tracked_buffer buf(*this, data.raw(), data.nbytes());
      if (options_.rank != root) {
        buf->recv(root, slot);
        wait(buf, "broadcast", false);
        return;
      }
      for (int peer = 0; peer < options_.size; ++peer) {
        if (peer != root) buf->send(peer, slot);
      }
      for (int peer = 1; peer < options_.size; ++peer)
        wait(buf, "broadcast", true);
    });
  }

  absl::Status send(const tensor::tensor& data, int peer, uint32_t tag) override {
    TROUPE_RETURN_IF_ERROR(check_host(data, "send"));
    TROUPE_RETURN_IF_ERROR(check_peer(peer, "send peer"));
    return guarded("send", [&] {
      tracked_buffer buf(*this, data.raw(), data.nbytes());
      buf->send(peer, gloo::Slot::build(point_to_point_slot, tag));
      wait(buf, "send", true);
    });
  }

  absl::Status recv(const tensor::tensor& data, int peer, uint32_t tag) override {
    TROUPE_RETURN_IF_ERROR(check_host(data, "recv"));
    TROUPE_RETURN_IF_ERROR(check_peer(peer, "recv peer"));
    return guarded("recv", [&] {
      tracked_buffer buf(*this, data.raw(), data.nbytes());
      buf->recv(peer, gloo::Slot::build(point_to_point_slot, tag));
      wait(buf, "recv", false);
    });
  }

  absl::Status barrier() override {
    return allreduce(tensor::tensor::host({1}, dtype::i32), reduce_op::sum);
  }

  void abort(const std::string& reason) override {
    {
      std::lock_guard lock(state_mutex_);
      if (!failure_.ok()) return;
      failure_ = absl::AbortedError(absl::StrCat(group_name(), " was aborted: ", reason));
    }
    aborted_.store(true);
    // Closed first: once no pair reads into a buffer any more, its wait may end.
    context_->closeConnections();
    std::lock_guard lock(buffer_mutex_);
    for (auto* buf : live_) {
      buf->abortWaitRecv();
      buf->abortWaitSend();
    }
  }

 private:
  // A transfer buffer abort() can reach while an operation waits on it.
  class tracked_buffer {
   public:
    tracked_buffer(gloo_communicator& group, void* data, size_t bytes)
        : group_(group), buf_(group.context_->createUnboundBuffer(data, bytes)) {
      std::lock_guard lock(group_.buffer_mutex_);
      group_.live_.push_back(buf_.get());
    }
    ~tracked_buffer() {
      std::lock_guard lock(group_.buffer_mutex_);
      std::erase(group_.live_, buf_.get());
    }
    tracked_buffer(const tracked_buffer&) = delete;
    tracked_buffer& operator=(const tracked_buffer&) = delete;
    gloo::transport::UnboundBuffer* operator->() const { return buf_.get(); }
    gloo::transport::UnboundBuffer& operator*() const { return *buf_; }

   private:
    gloo_communicator& group_;
    std::unique_ptr<gloo::transport::UnboundBuffer> buf_;
  };

  std::string group_name() const {
    return absl::StrCat("group '", options_.name, "' (epoch ", options_.epoch, ", rank ",
                        options_.rank, " of ", options_.size, ")");
  }

  absl::Status check_rank(int rank, const char* what) const {
    if (rank < 0 || rank >= options_.size) {
      return absl::InvalidArgumentError(
          absl::StrCat("gloo ", what, " ", rank, " is not a rank of ", group_name()));
    }
    return absl::OkStatus();
  }
  absl::Status check_peer(int peer, const char* what) const {
    if (peer == options_.rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("gloo ", what, " ", peer, " is this rank itself in ", group_name()));
    }
    return check_rank(peer, what);
  }

  uint64_t next_slot() { return gloo::Slot::build(collective_slot, tag_++); }
  int right() const { return (options_.rank + 1) % options_.size; }
  int left() const { return (options_.rank + options_.size - 1) % options_.size; }
  int ring_index(int offset) const {
    return ((options_.rank + offset) % options_.size + options_.size) % options_.size;
  }

  // Ring reduce-scatter, summing in place: after P - 1 steps chunk `rank` of `data` holds the
  // sum over the ranks. Step s sends chunk rank - s - 1 to the right and adds chunk rank - s - 2
  // from the left. What arrives is received in segments into two alternating scratch halves, so
  // the sum of one segment overlaps the transfer of the next, and each receive is posted two
  // segments ahead (into the next step too): Gloo holds a send until the receiver says it is
  // ready, and a receive posted early has said so already.
  template <class T>
  void reduce_scatter_ring(T* data, const even_split& chunks) {
    if (options_.size == 1) return;
    const int64_t segment =
        std::min(std::max<int64_t>(1, segment_bytes / sizeof(T)), chunks.size(0));
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
    for (int step = 0; step < options_.size - 1; ++step) {
      slots.push_back(next_slot());
      for (const piece& p : pieces(ring_index(-step - 2), step))
        arriving.push_back(p);
    }
    scratch_.resize(2 * segment * sizeof(T));
    T* halves[2] = {reinterpret_cast<T*>(scratch_.data()),
                    reinterpret_cast<T*>(scratch_.data()) + segment};
    tracked_buffer out(*this, data, chunks.total * sizeof(T));
    tracked_buffer in0(*this, halves[0], segment * sizeof(T));
    tracked_buffer in1(*this, halves[1], segment * sizeof(T));
    tracked_buffer* in[2] = {&in0, &in1};
    const auto post = [&](size_t g) {
      (*in[g % 2])->recv(left(), slots[arriving[g].step], 0, arriving[g].len * sizeof(T));
    };
    for (size_t g = 0; g < std::min<size_t>(2, arriving.size()); ++g)
      post(g);
    size_t g = 0;
    for (int step = 0; step < options_.size - 1; ++step) {
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

  // Ring allgather in place: chunk `rank` is this rank's; step s passes chunk rank - s to the
  // right and receives chunk rank - s - 1 from the left straight into place. Every receive is
  // posted first (each into its own chunk); one pair delivers them in step order.
  void allgather_ring(char* data, const even_split& chunks, size_t element) {
    if (options_.size == 1) return;
    tracked_buffer out(*this, data, chunks.total * element);
    tracked_buffer in(*this, data, chunks.total * element);
    std::vector<uint64_t> slots;
    for (int step = 0; step < options_.size - 1; ++step) {
      slots.push_back(next_slot());
      const int got = ring_index(-step - 1);
      in->recv(left(), slots[step], chunks.begin(got) * element, chunks.size(got) * element);
    }
    for (int step = 0; step < options_.size - 1; ++step) {
      const int sent = ring_index(-step);
      out->send(right(), slots[step], chunks.begin(sent) * element, chunks.size(sent) * element);
      wait(in, "gather", false);  // chunk rank - step - 1: the next step's to pass on
    }
    for (int step = 0; step < options_.size - 1; ++step)
      wait(out, "gather", true);
  }

  // Runs one operation: refused once the group has failed; a Gloo exception (timeout, a peer
  // gone) becomes a Status and fails the group. Its connections are closed at once, so every
  // peer's wait fails within a round trip.
  absl::Status guarded(const char* what, const std::function<void()>& op) {
    std::lock_guard op_lock(op_mutex_);
    {
      std::lock_guard lock(state_mutex_);
      if (!failure_.ok()) {
        return absl::FailedPreconditionError(absl::StrCat("gloo ", what, ": ", failure_.message(),
                                                          "; form a new group at the next epoch"));
      }
    }
    try {
      op();
      return absl::OkStatus();
    } catch (const std::exception& e) {
      context_->closeConnections();
      std::lock_guard lock(state_mutex_);
      const bool timed_out = std::strstr(e.what(), "imed out") != nullptr;
      absl::Status s =
          aborted_.load() ? failure_
          : timed_out
              ? absl::DeadlineExceededError(absl::StrCat(
                    "gloo ", what, " in ", group_name(), " did not finish within ",
                    options_.timeout.count(), " ms (a rank is missing or stuck): ", e.what()))
              : absl::UnavailableError(
                    absl::StrCat("gloo ", what, " in ", group_name(), " failed: ", e.what()));
      if (failure_.ok()) failure_ = s;
      return s;
    }
  }

  // Waits for one send or receive of `buf` to complete; throws when it fails, times out or is
  // aborted. A buffer joins live_ before this check, so an abort in between still wakes it.
  void wait(tracked_buffer& buf, const char* what, bool sending) {
    const bool done = aborted_.load() ? false
                      : sending       ? buf->waitSend(options_.timeout)
                                      : buf->waitRecv(options_.timeout);
    if (!done) throw gloo::IoException(absl::StrCat(what, " aborted"));
  }

  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::shared_ptr<gloo::transport::Device> device_;
  group_options options_;
  uint32_t tag_ = 1;
  std::vector<char> scratch_;  // the reduce-scatter's receive halves
  std::mutex op_mutex_;        // one operation at a time, in call order
  std::mutex state_mutex_;     // failure_
  absl::Status failure_;
  std::atomic<bool> aborted_{false};
  std::mutex buffer_mutex_;  // live_
  std::vector<gloo::transport::UnboundBuffer*> live_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<communicator>> make_gloo_communicator(rendezvous_store& store,
                                                                     const group_options& options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(absl::StrCat("group '", options.name, "': rank ",
                                                   options.rank, " of size ", options.size,
                                                   " is not a rank of the group"));
  }
  // Gloo writes with writev and no MSG_NOSIGNAL: without this, a rank writing to a peer that
  // died would be killed by SIGPIPE instead of seeing the error.
  static const bool sigpipe_ignored = [] { return std::signal(SIGPIPE, SIG_IGN) != SIG_ERR; }();
  (void)sigpipe_ignored;
  const std::string prefix = absl::StrCat("comm/", options.name, "/", options.epoch, "/");
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.host;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.size);
    context->setTimeout(options.timeout);
    store_adapter adapter(store, prefix, options.timeout, options.cancelled);
    context->connectFullMesh(adapter, device);
    return std::unique_ptr<communicator>(
        new gloo_communicator(std::move(context), std::move(device), options));
  } catch (const std::exception& e) {
    const std::string what =
        absl::StrCat("group '", options.name, "' (epoch ", options.epoch, "): rank ", options.rank,
                     " of ", options.size, " could not connect to every other rank");
    if (std::strstr(e.what(), std::string(cancelled_message).c_str()) != nullptr) {
      return absl::CancelledError(
          absl::StrCat(what, ": cancelled, a newer membership made the group moot"));
    }
    if (std::strstr(e.what(), "not set within") != nullptr ||
        std::strstr(e.what(), "imed out") != nullptr) {
      return absl::DeadlineExceededError(absl::StrCat(what, " within ", options.timeout.count(),
                                                      " ms (a rank did not arrive): ", e.what()));
    }
    return absl::UnavailableError(absl::StrCat(what, ": ", e.what()));
  }
}

}  // namespace troupe::comm
