#include "runtime/comm/nccl_communicator.hpp"

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include <cuda_runtime.h>
#include <nccl.h>

#include "absl/strings/str_cat.h"
#include "runtime/tensor/cuda_status.hpp"

namespace troupe::comm {
namespace {

using tensor::dtype;
using clock = std::chrono::steady_clock;

absl::Status nccl_status(ncclResult_t r, const char* what) {
  if (r == ncclSuccess || r == ncclInProgress) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat(what, ": NCCL error ", static_cast<int>(r), ": ", ncclGetErrorString(r)));
}

absl::StatusOr<ncclDataType_t> nccl_type(dtype t) {
  switch (t) {
    case dtype::f32:
      return ncclFloat32;
    case dtype::bf16:
      return ncclBfloat16;
    case dtype::i32:
      return ncclInt32;
  }
  return absl::InvalidArgumentError("unknown dtype");
}

absl::Status check_device(const tensor::tensor& t, int device, const char* what) {
  if (!t.where().is_cuda() || t.where().index != device || !t.is_contiguous()) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl ", what, ": needs a contiguous tensor on cuda:", device, ", got ",
                     t.description(), " (host tensors go through Gloo)"));
  }
  return absl::OkStatus();
}

class nccl_communicator final : public communicator {
 public:
  nccl_communicator(ncclComm_t comm, cudaStream_t stream, int* barrier_word, int device,
                    group_options options)
      : comm_(comm),
        stream_(stream),
        barrier_word_(barrier_word),
        device_(device),
        options_(std::move(options)) {}

  ~nccl_communicator() override {
    cudaSetDevice(device_);
    if (failure_.ok()) {
      ncclCommDestroy(comm_);
    } else if (!aborted_comm_) {
      ncclCommAbort(comm_);
    }
    cudaFree(barrier_word_);
    cudaStreamDestroy(stream_);
  }

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  uint64_t epoch() const override { return options_.epoch; }

  absl::Status allreduce(const tensor::tensor& data, reduce_op op) override {
    TROUPE_RETURN_IF_ERROR(check_device(data, device_, "allreduce"));
    TROUPE_ASSIGN_OR_RETURN(ncclDataType_t type, nccl_type(data.type()));
    return run("allreduce", [&] {
      return ncclAllReduce(data.raw(), data.raw(), data.numel(), type, to_nccl(op), comm_, stream_);
    });
  }

  absl::Status reduce_scatter(const tensor::tensor& in, const tensor::tensor& out,
                              reduce_op op) override {
    TROUPE_RETURN_IF_ERROR(check_device(in, device_, "reduce_scatter"));
    TROUPE_RETURN_IF_ERROR(check_device(out, device_, "reduce_scatter"));
    if (in.type() != out.type() || in.numel() != out.numel() * options_.size) {
      return absl::InvalidArgumentError(absl::StrCat("nccl reduce_scatter: in ", in.description(),
                                                     " must hold ", options_.size, " x out ",
                                                     out.description()));
    }
    TROUPE_ASSIGN_OR_RETURN(ncclDataType_t type, nccl_type(in.type()));
    return run("reduce_scatter", [&] {
      return ncclReduceScatter(in.raw(), out.raw(), out.numel(), type, to_nccl(op), comm_, stream_);
    });
  }

  absl::Status allgather(const tensor::tensor& in, const tensor::tensor& out) override {
    TROUPE_RETURN_IF_ERROR(check_device(in, device_, "allgather"));
    TROUPE_RETURN_IF_ERROR(check_device(out, device_, "allgather"));
    if (in.type() != out.type() || out.numel() != in.numel() * options_.size) {
      return absl::InvalidArgumentError(absl::StrCat("nccl allgather: out ", out.description(),
                                                     " must hold ", options_.size, " x in ",
                                                     in.description()));
    }
    TROUPE_ASSIGN_OR_RETURN(ncclDataType_t type, nccl_type(in.type()));
    return run("allgather", [&] {
      return ncclAllGather(in.raw(), out.raw(), in.numel(), type, comm_, stream_);
    });
  }

  absl::Status broadcast(const tensor::tensor& data, int root) override {
    TROUPE_RETURN_IF_ERROR(check_device(data, device_, "broadcast"));
    if (root < 0 || root >= options_.size) {
      return absl::InvalidArgumentError(
          absl::StrCat("nccl broadcast root ", root, " is not a rank of ", group_name()));
    }
    TROUPE_ASSIGN_OR_RETURN(ncclDataType_t type, nccl_type(data.type()));
    return run("broadcast", [&] {
      return ncclBroadcast(data.raw(), data.raw(), data.numel(), type, root, comm_, stream_);
    });
  }

  absl::Status send(const tensor::tensor& data, int peer, uint32_t) override {
    TROUPE_RETURN_IF_ERROR(check_device(data, device_, "send"));
    TROUPE_RETURN_IF_ERROR(check_peer(peer, "send"));
    TROUPE_ASSIGN_OR_RETURN(ncclDataType_t type, nccl_type(data.type()));
    return run("send",
               [&] { return ncclSend(data.raw(), data.numel(), type, peer, comm_, stream_); });
  }

  absl::Status recv(const tensor::tensor& data, int peer, uint32_t) override {
    TROUPE_RETURN_IF_ERROR(check_device(data, device_, "recv"));
    TROUPE_RETURN_IF_ERROR(check_peer(peer, "recv"));
    TROUPE_ASSIGN_OR_RETURN(ncclDataType_t type, nccl_type(data.type()));
    return run("recv",
               [&] { return ncclRecv(data.raw(), data.numel(), type, peer, comm_, stream_); });
  }

  absl::Status exchange(const std::vector<transfer>& sends,
                        const std::vector<transfer>& recvs) override {
    for (const auto* list : {&sends, &recvs}) {
      for (const transfer& t : *list) {
        TROUPE_RETURN_IF_ERROR(check_device(t.data, device_, "exchange"));
        TROUPE_RETURN_IF_ERROR(check_peer(t.peer, "exchange"));
        TROUPE_RETURN_IF_ERROR(nccl_type(t.data.type()).status());
      }
    }
    return run("exchange", [&] {
      ncclResult_t r = ncclGroupStart();
      for (const transfer& t : sends) {
        if (r != ncclSuccess) break;
        r = ncclSend(t.data.raw(), t.data.numel(), *nccl_type(t.data.type()), t.peer, comm_,
                     stream_);
      }
      for (const transfer& t : recvs) {
        if (r != ncclSuccess) break;
        r = ncclRecv(t.data.raw(), t.data.numel(), *nccl_type(t.data.type()), t.peer, comm_,
                     stream_);
      }
      const ncclResult_t ended = ncclGroupEnd();  // every ncclGroupStart needs its end
      return r != ncclSuccess ? r : ended;
    });
  }

  absl::Status barrier() override {
    return run("barrier", [&] {
      return ncclAllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclSum, comm_, stream_);
    });
  }

  void abort(const std::string& reason) override {
    std::lock_guard lock(state_mutex_);
    if (!failure_.ok()) return;
    failure_ = absl::AbortedError(absl::StrCat(group_name(), " was aborted: ", reason));
    abort_requested_.store(true);  // the waiting operation aborts the communicator
  }

 private:
  static ncclRedOp_t to_nccl(reduce_op op) { return op == reduce_op::avg ? ncclAvg : ncclSum; }

  std::string group_name() const {
    return absl::StrCat("group '", options_.name, "' (epoch ", options_.epoch, ", rank ",
                        options_.rank, " of ", options_.size, ")");
  }

  absl::Status check_peer(int peer, const char* what) const {
    if (peer < 0 || peer >= options_.size || peer == options_.rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("nccl ", what, " peer ", peer, " is not another rank of ", group_name()));
    }
    return absl::OkStatus();
  }

  // Enqueues one operation and polls its stream and the communicator's asynchronous error until
  // it is done, the deadline passes or abort() is called; then the communicator is aborted.
  template <class Enqueue>
  absl::Status run(const char* what, Enqueue enqueue) {
    std::lock_guard op_lock(op_mutex_);
    {
      std::lock_guard lock(state_mutex_);
      if (!failure_.ok()) {
        return absl::FailedPreconditionError(absl::StrCat("nccl ", what, ": ", failure_.message(),
                                                          "; form a new group at the next epoch"));
      }
    }
    TROUPE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    absl::Status s = nccl_status(enqueue(), what);
    const auto deadline = clock::now() + options_.timeout;
    while (s.ok()) {
      // A non-blocking communicator may still be enqueueing (ncclInProgress); only then does the
      // stream hold the operation.
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      s = nccl_status(async, what);
      if (!s.ok()) break;
      if (async == ncclSuccess) {
        const cudaError_t q = cudaStreamQuery(stream_);
        if (q == cudaSuccess) return absl::OkStatus();
        if (q != cudaErrorNotReady) {
          s = tensor::cuda_status(q, what, __FILE__, __LINE__);
          break;
        }
      }
      if (abort_requested_.load()) {
        std::lock_guard lock(state_mutex_);
        s = failure_;
        break;
      }
      if (clock::now() > deadline) {
        s = absl::DeadlineExceededError(
            absl::StrCat("nccl ", what, " in ", group_name(), " did not finish within ",
                         options_.timeout.count(), " ms (a rank is missing or stuck)"));
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    std::lock_guard lock(state_mutex_);
    if (failure_.ok()) failure_ = s;
    ncclCommAbort(comm_);  // never leave kernels spinning on a peer that will not come
    aborted_comm_ = true;
    return s;
  }

  ncclComm_t comm_;
  cudaStream_t stream_;
  int* barrier_word_;
  int device_;
  group_options options_;
  std::mutex op_mutex_;
  std::mutex state_mutex_;
  absl::Status failure_;
  std::atomic<bool> abort_requested_{false};
  bool aborted_comm_ = false;
};

}  // namespace

absl::StatusOr<std::string> nccl_version() {
  int v = 0;
  TROUPE_RETURN_IF_ERROR(nccl_status(ncclGetVersion(&v), "ncclGetVersion"));
  return absl::StrCat(v / 10000, ".", (v % 10000) / 100, ".", v % 100);
}

absl::StatusOr<std::unique_ptr<communicator>> make_nccl_communicator(rendezvous_store& store,
                                                                     const group_options& options,
                                                                     int cuda_device) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(absl::StrCat("group '", options.name, "': rank ",
                                                   options.rank, " of size ", options.size,
                                                   " is not a rank of the group"));
  }
  TROUPE_CUDA_RETURN_IF_ERROR(cudaSetDevice(cuda_device));
  const std::string key = absl::StrCat("comm/", options.name, "/", options.epoch, "/nccl_id");
  ncclUniqueId id{};
  if (options.rank == 0) {
    TROUPE_RETURN_IF_ERROR(nccl_status(ncclGetUniqueId(&id), "ncclGetUniqueId"));
    TROUPE_RETURN_IF_ERROR(store.set(key, std::string(id.internal, sizeof id.internal)));
  } else {
    TROUPE_ASSIGN_OR_RETURN(std::string bytes, store.wait(key, options.timeout));
    if (bytes.size() != sizeof id.internal) {
      return absl::DataLossError(
          absl::StrCat(key, " holds ", bytes.size(), " bytes, not an NCCL unique id"));
    }
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  TROUPE_RETURN_IF_ERROR(nccl_status(
      ncclCommInitRankConfig(&comm, options.size, id, options.rank, &config), "ncclCommInitRank"));
  const auto deadline = clock::now() + options.timeout;
  for (;;) {
    ncclResult_t state = ncclInProgress;
    ncclCommGetAsyncError(comm, &state);
    if (state == ncclSuccess) break;
    if (state != ncclInProgress || clock::now() > deadline) {
      ncclCommAbort(comm);
      if (state != ncclInProgress) return nccl_status(state, "ncclCommInitRank");
      return absl::DeadlineExceededError(
          absl::StrCat("group '", options.name, "' (epoch ", options.epoch, "): rank ",
                       options.rank, " of ", options.size, " could not form the NCCL group within ",
                       options.timeout.count(), " ms (a rank did not arrive)"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  cudaStream_t stream = nullptr;
  int* barrier_word = nullptr;
  absl::Status s = tensor::cuda_status(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                                       "cudaStreamCreate", __FILE__, __LINE__);
  if (s.ok()) {
    s = tensor::cuda_status(cudaMalloc(&barrier_word, sizeof(int)), "cudaMalloc", __FILE__,
                            __LINE__);
  }
  if (!s.ok()) {
    ncclCommAbort(comm);
    if (stream) cudaStreamDestroy(stream);
    return s;
  }
  return std::unique_ptr<communicator>(
      new nccl_communicator(comm, stream, barrier_word, cuda_device, options));
}

}  // namespace troupe::comm
