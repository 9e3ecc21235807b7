#include "runtime/comm/gloo_communicator.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace troupe::comm {
namespace {

using tensor::dtype;

// Slot prefix of troupe's own send/recv (Gloo's collectives use 0x01-0x08).
constexpr uint8_t point_to_point_slot = 0x71;
// Reduce-scatter algorithm instances kept, least recently used dropped first: enough for a few
// gradient buckets; every live instance's bound buffers cost the shared device loop time.
constexpr size_t max_cached_reduce_scatters = 4;

// Gloo's Store interface over ours. Gloo expects exceptions from a store; they are caught in
// make_gloo_communicator, so none leaves this file.
class store_adapter final : public gloo::rendezvous::Store {
 public:
  store_adapter(rendezvous_store& store, std::string prefix, std::chrono::milliseconds timeout)
      : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    absl::Status s = store_.set(prefix_ + key, std::string(data.begin(), data.end()));
    if (!s.ok()) throw gloo::IoException(std::string(s.message()));
  }
  std::vector<char> get(const std::string& key) override {
    absl::StatusOr<std::string> v = store_.wait(prefix_ + key, timeout_);
    if (!v.ok()) throw gloo::IoException(std::string(v.status().message()));
    return {v->begin(), v->end()};
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& t) override {
    for (const auto& key : keys) {
      absl::StatusOr<std::string> v = store_.wait(prefix_ + key, t);
      if (!v.ok()) throw gloo::IoException(std::string(v.status().message()));
    }
  }

 private:
  rendezvous_store& store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
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

// out = a + b, Gloo's allreduce signature.
template <class T>
void add_into(void* out, const void* a, const void* b, size_t n) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i)
    o[i] = add(x[i], y[i]);
}

// x += y, Gloo's reduce-scatter signature.
template <class T>
void add_in_place(T* x, const T* y, size_t n) {
  for (size_t i = 0; i < n; ++i)
    x[i] = add(x[i], y[i]);
}

template <class T>
const gloo::ReductionFunction<T>* sum_reduction() {
  static const gloo::ReductionFunction<T> sum(gloo::ReductionType::CUSTOM, &add_in_place<T>);
  return &sum;
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

class gloo_communicator final : public communicator {
 public:
  gloo_communicator(std::shared_ptr<gloo::rendezvous::Context> context,
                    std::shared_ptr<gloo::rendezvous::Context> reduce_scatter_context,
                    std::shared_ptr<gloo::transport::Device> device, group_options options)
      : context_(std::move(context)),
        reduce_scatter_context_(std::move(reduce_scatter_context)),
        device_(std::move(device)),
        options_(std::move(options)) {}

  ~gloo_communicator() override = default;

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  uint64_t epoch() const override { return options_.epoch; }

  absl::Status allreduce(const tensor::tensor& data, reduce_op op) override {
    TROUPE_RETURN_IF_ERROR(check_host(data, "allreduce"));
    TROUPE_RETURN_IF_ERROR(check_average(op, data.type(), "allreduce"));
    TROUPE_RETURN_IF_ERROR(guarded("allreduce", [&] {
      gloo::AllreduceOptions opts(context_);
      // Gloo takes the element size from the pointer type.
      with_element_type(data.type(), [&](auto element) {
        using T = decltype(element);
        opts.setOutput<T>(data.data<T>(), data.numel());
        opts.setReduceFunction(&add_into<T>);
      });
      opts.setTimeout(options_.timeout);
      opts.setTag(next_tag());
      gloo::allreduce(opts);
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
      with_element_type(in.type(), [&](auto element) { halving_doubling<decltype(element)>(in); });
    }));
    // Halving-doubling leaves this rank's reduced chunk at the start of `in`.
    if (out.raw() != in.raw()) std::memcpy(out.raw(), in.raw(), out.nbytes());
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
    return guarded("allgather", [&] {
      gloo::AllgatherOptions opts(context_);
      opts.setInput(static_cast<char*>(in.raw()), in.nbytes());
      opts.setOutput(static_cast<char*>(out.raw()), out.nbytes());
      opts.setTimeout(options_.timeout);
      opts.setTag(next_tag());
      gloo::allgather(opts);
    });
  }

  absl::Status broadcast(const tensor::tensor& data, int root) override {
    TROUPE_RETURN_IF_ERROR(check_host(data, "broadcast"));
    TROUPE_RETURN_IF_ERROR(check_rank(root, "broadcast root"));
    return guarded("broadcast", [&] {
      gloo::BroadcastOptions opts(context_);
      opts.setOutput(static_cast<char*>(data.raw()), data.nbytes());
      opts.setRoot(root);
      opts.setTimeout(options_.timeout);
      opts.setTag(next_tag());
      gloo::broadcast(opts);
    });
  }

  absl::Status send(const tensor::tensor& data, int peer, uint32_t tag) override {
    TROUPE_RETURN_IF_ERROR(check_host(data, "send"));
    TROUPE_RETURN_IF_ERROR(check_peer(peer, "send peer"));
    return guarded("send", [&] {
      auto buf = context_->createUnboundBuffer(data.raw(), data.nbytes());
      buf->send(peer, gloo::Slot::build(point_to_point_slot, tag));
      wait_send(*buf, "send");
    });
  }

  absl::Status recv(const tensor::tensor& data, int peer, uint32_t tag) override {
    TROUPE_RETURN_IF_ERROR(check_host(data, "recv"));
    TROUPE_RETURN_IF_ERROR(check_peer(peer, "recv peer"));
    return guarded("recv", [&] {
      auto buf = context_->createUnboundBuffer(data.raw(), data.nbytes());
      buf->recv(peer, gloo::Slot::build(point_to_point_slot, tag));
      wait_recv(*buf, "recv");
    });
  }

  absl::Status barrier() override {
    return guarded("barrier", [&] {
      gloo::BarrierOptions opts(context_);
      opts.setTimeout(options_.timeout);
      opts.setTag(next_tag());
      gloo::barrier(opts);
    });
  }

  void abort(const std::string& reason) override {
    {
      std::lock_guard lock(state_mutex_);
      if (!failure_.ok()) return;
      failure_ = absl::AbortedError(absl::StrCat(group_name(), " was aborted: ", reason));
    }
    aborted_.store(true);
    std::lock_guard lock(buffer_mutex_);
    for (auto* buf : waiting_) {  // wake the transfers troupe waits on itself
      buf->abortWaitRecv();
      buf->abortWaitSend();
    }
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

  uint32_t next_tag() { return tag_++; }

  // Runs one operation: refused once the group has failed; a Gloo exception (timeout, a peer
  // gone) becomes a Status and fails the group, since its connections are then unusable.
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

  void wait_send(gloo::transport::UnboundBuffer& buf, const char* what) { wait(buf, what, true); }
  void wait_recv(gloo::transport::UnboundBuffer& buf, const char* what) { wait(buf, what, false); }
  void wait(gloo::transport::UnboundBuffer& buf, const char* what, bool sending) {
    {
      std::lock_guard lock(buffer_mutex_);
      waiting_.push_back(&buf);
    }
    const bool done = aborted_.load() ? false
                      : sending       ? buf.waitSend(options_.timeout)
                                      : buf.waitRecv(options_.timeout);
    {
      std::lock_guard lock(buffer_mutex_);
      std::erase(waiting_, &buf);
    }
    if (!done) {
      throw gloo::IoException(absl::StrCat(what, " aborted or timed out"));
    }
  }

  // Gloo's halving-doubling reduce-scatter binds its buffers to the pairs when it is built, and
  // bound buffers slow the pairs' other traffic, so it runs on a context of its own. Building
  // binds (a handshake), so instances are kept per (buffer, size): a training loop reuses the
  // same gradient buckets every step.
  template <class T>
  void halving_doubling(const tensor::tensor& in) {
    const auto key = std::make_tuple(in.raw(), in.numel(), in.type());
    auto it = reduce_scatters_.find(key);
    if (it == reduce_scatters_.end()) {
      if (reduce_scatters_.size() >= max_cached_reduce_scatters) {
        reduce_scatters_.erase(std::min_element(
            reduce_scatters_.begin(), reduce_scatters_.end(),
            [](const auto& a, const auto& b) { return a.second.last_used < b.second.last_used; }));
      }
      const int chunk = static_cast<int>(in.numel() / options_.size);
      auto algorithm = std::make_unique<gloo::ReduceScatterHalvingDoubling<T>>(
          reduce_scatter_context_, std::vector<T*>{in.data<T>()}, static_cast<int>(in.numel()),
          std::vector<int>(options_.size, chunk), sum_reduction<T>());
      it = reduce_scatters_.emplace(key, cached_algorithm{std::move(algorithm), 0}).first;
    }
    it->second.last_used = ++uses_;
    it->second.algorithm->run();
  }

  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::shared_ptr<gloo::rendezvous::Context> reduce_scatter_context_;
  std::shared_ptr<gloo::transport::Device> device_;
  group_options options_;
  uint32_t tag_ = 1;
  struct cached_algorithm {
    std::unique_ptr<gloo::Algorithm> algorithm;
    uint64_t last_used;
  };
  std::map<std::tuple<void*, int64_t, dtype>, cached_algorithm> reduce_scatters_;
  uint64_t uses_ = 0;
  std::mutex op_mutex_;     // one operation at a time, in call order
  std::mutex state_mutex_;  // failure_
  absl::Status failure_;
  std::atomic<bool> aborted_{false};
  std::mutex buffer_mutex_;  // waiting_
  std::vector<gloo::transport::UnboundBuffer*> waiting_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<communicator>> make_gloo_communicator(rendezvous_store& store,
                                                                     const group_options& options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(absl::StrCat("group '", options.name, "': rank ",
                                                   options.rank, " of size ", options.size,
                                                   " is not a rank of the group"));
  }
  const std::string prefix = absl::StrCat("comm/", options.name, "/", options.epoch, "/");
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.host;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto connect = [&](const std::string& key_prefix) {
      auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.size);
      context->setTimeout(options.timeout);
      store_adapter adapter(store, key_prefix, options.timeout);
      context->connectFullMesh(adapter, device);
      return context;
    };
    auto context = connect(prefix);
    auto reduce_scatter_context = connect(prefix + "reduce_scatter/");
    return std::unique_ptr<communicator>(new gloo_communicator(
        std::move(context), std::move(reduce_scatter_context), std::move(device), options));
  } catch (const std::exception& e) {
    const std::string what =
        absl::StrCat("group '", options.name, "' (epoch ", options.epoch, "): rank ", options.rank,
                     " of ", options.size, " could not connect to every other rank");
    if (std::strstr(e.what(), "not set within") != nullptr ||
        std::strstr(e.what(), "imed out") != nullptr) {
      return absl::DeadlineExceededError(absl::StrCat(what, " within ", options.timeout.count(),
                                                      " ms (a rank did not arrive): ", e.what()));
    }
    return absl::UnavailableError(absl::StrCat(what, ": ", e.what()));
  }
}

}  // namespace troupe::comm
