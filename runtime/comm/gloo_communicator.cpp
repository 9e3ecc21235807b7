#include "runtime/comm/gloo_communicator.hpp"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <functional>
#include <mutex>
#include <vector>

#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include "absl/strings/str_cat.h"
#include "runtime/comm/gloo_ring.hpp"

namespace troupe::comm {
namespace {

using tensor::dtype;

// How often a forming group asks whether it was cancelled, and what it then says.
constexpr std::chrono::milliseconds cancel_poll{100};
constexpr absl::string_view cancelled_message = "cancelled while forming";
// How many times its timeout a tcp pair of Debian's Gloo waits for its peer to connect.
constexpr int gloo_connect_wait_factor = 5;

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

// The communicator API over a gloo_ring: argument checks, one operation at a time, and the
// group's failure. Any failure closes the group's connections, so the peers' waits fail too
// instead of running out their timeouts (Gloo's ring otherwise wakes only a dead rank's two
// neighbours).
class gloo_communicator final : public communicator {
 public:
  gloo_communicator(std::shared_ptr<gloo::rendezvous::Context> context,
                    std::shared_ptr<gloo::transport::Device> device, group_options options)
      : ring_(std::move(context), options.rank, options.size, options.timeout),
        device_(std::move(device)),
        options_(std::move(options)) {}

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  uint64_t epoch() const override { return options_.epoch; }

  absl::Status allreduce(const tensor::tensor& data, reduce_op op) override {
    TROUPE_RETURN_IF_ERROR(check_host(data, "allreduce"));
    TROUPE_RETURN_IF_ERROR(check_average(op, data.type(), "allreduce"));
    TROUPE_RETURN_IF_ERROR(guarded("allreduce", [&] {
      with_element_type(data.type(), [&](auto element) {
        using T = decltype(element);
        ring_.reduce_scatter(data.data<T>(), data.numel());
      });
      ring_.allgather(static_cast<char*>(data.raw()), data.numel(),
                      tensor::dtype_size(data.type()));
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
        ring_.reduce_scatter(in.data<T>(), in.numel());
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
    return guarded("allgather",
                   [&] { ring_.allgather(all, out.numel(), tensor::dtype_size(out.type())); });
  }

  absl::Status broadcast(const tensor::tensor& data, int root) override {
    TROUPE_RETURN_IF_ERROR(check_host(data, "broadcast"));
    TROUPE_RETURN_IF_ERROR(check_rank(root, "broadcast root"));
    return guarded("broadcast", [&] { ring_.broadcast(data.raw(), data.nbytes(), root); });
  }

  absl::Status broadcast_in_pieces(const tensor::tensor& data, int root, int64_t piece_bytes,
                                   const piece_fn& on_piece) override {
    TROUPE_RETURN_IF_ERROR(check_host(data, "broadcast"));
    TROUPE_RETURN_IF_ERROR(check_rank(root, "broadcast root"));
    if (piece_bytes <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("gloo broadcast: pieces of ", piece_bytes, " bytes; give at least 1"));
    }
    return guarded("broadcast", [&] {
      ring_.broadcast(data.raw(), data.nbytes(), root, static_cast<size_t>(piece_bytes),
                      [&](size_t offset, size_t bytes) {
                        on_piece(static_cast<int64_t>(offset), static_cast<int64_t>(bytes));
                      });
    });
  }

  absl::Status send(const tensor::tensor& data, int peer, uint32_t tag) override {
    TROUPE_RETURN_IF_ERROR(check_host(data, "send"));
    TROUPE_RETURN_IF_ERROR(check_peer(peer, "send peer"));
    return guarded("send", [&] { ring_.send(data.raw(), data.nbytes(), peer, tag); });
  }

  absl::Status recv(const tensor::tensor& data, int peer, uint32_t tag) override {
    TROUPE_RETURN_IF_ERROR(check_host(data, "recv"));
    TROUPE_RETURN_IF_ERROR(check_peer(peer, "recv peer"));
    return guarded("recv", [&] { ring_.recv(data.raw(), data.nbytes(), peer, tag); });
  }

  absl::Status exchange(const std::vector<transfer>& sends,
                        const std::vector<transfer>& recvs) override {
    std::vector<gloo_ring::piece> out, in;
    for (auto [list, pieces, what] :
         {std::tuple{&sends, &out, "exchange send"}, std::tuple{&recvs, &in, "exchange receive"}}) {
      for (const transfer& t : *list) {
        TROUPE_RETURN_IF_ERROR(check_host(t.data, what));
        TROUPE_RETURN_IF_ERROR(check_peer(t.peer, what));
        pieces->push_back({t.data.raw(), t.data.nbytes(), t.peer, t.tag});
      }
    }
    return guarded("exchange", [&] { ring_.exchange(out, in); });
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
    ring_.abort();
  }

 private:
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
      ring_.close();
      std::lock_guard lock(state_mutex_);
      const bool timed_out = std::strstr(e.what(), "imed out") != nullptr;
      absl::Status s =
          ring_.aborted() ? failure_
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

  gloo_ring ring_;
  std::shared_ptr<gloo::transport::Device> device_;
  group_options options_;
  std::mutex op_mutex_;     // one operation at a time, in call order
  std::mutex state_mutex_;  // failure_
  absl::Status failure_;
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
    // A pair takes its timeout from the context as it is made, and the listening side of a pair
    // waits five times that for its peer to connect: the pairs get a fifth, so that a rank that
    // published its address and was lost before connecting fails the group within the timeout.
    // (Every transfer's wait is given the full timeout by gloo_ring.)
    context->setTimeout(
        std::max(options.timeout / gloo_connect_wait_factor, std::chrono::milliseconds(1)));
    store_adapter adapter(store, prefix, options.timeout, options.cancelled);
    context->connectFullMesh(adapter, device);
    context->setTimeout(options.timeout);
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
        std::strstr(e.what(), "imed out") != nullptr ||
        std::strstr(e.what(), "Connect timeout") != nullptr) {
      return absl::DeadlineExceededError(absl::StrCat(what, " within ", options.timeout.count(),
                                                      " ms (a rank did not arrive): ", e.what()));
    }
    return absl::UnavailableError(absl::StrCat(what, ": ", e.what()));
  }
}

}  // namespace troupe::comm
