#include "runtime/comm/counted_communicator.hpp"

namespace troupe::comm {
namespace {

class counted_communicator final : public communicator {
 public:
  counted_communicator(std::unique_ptr<communicator> inner, metrics::registry& metrics,
                       const std::string& name)
      : inner_(std::move(inner)), stats_(metrics.actor(name)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  uint64_t epoch() const override { return inner_->epoch(); }

  absl::Status allreduce(const tensor::tensor& data, reduce_op op) override {
    return counted_call([&] { return inner_->allreduce(data, op); });
  }
  absl::Status reduce_scatter(const tensor::tensor& in, const tensor::tensor& out,
                              reduce_op op) override {
    return counted_call([&] { return inner_->reduce_scatter(in, out, op); });
  }
  absl::Status allgather(const tensor::tensor& in, const tensor::tensor& out) override {
    return counted_call([&] { return inner_->allgather(in, out); });
  }
  absl::Status broadcast(const tensor::tensor& data, int root) override {
    return counted_call([&] { return inner_->broadcast(data, root); });
  }
  absl::Status broadcast_in_pieces(const tensor::tensor& data, int root, int64_t piece_bytes,
                                   const piece_fn& on_piece) override {
    return counted_call(
        [&] { return inner_->broadcast_in_pieces(data, root, piece_bytes, on_piece); });
  }
  absl::Status send(const tensor::tensor& data, int peer, uint32_t tag) override {
    return counted_call([&] { return inner_->send(data, peer, tag); });
  }
  absl::Status recv(const tensor::tensor& data, int peer, uint32_t tag) override {
    return counted_call([&] { return inner_->recv(data, peer, tag); });
  }
  absl::Status exchange(const std::vector<transfer>& sends,
                        const std::vector<transfer>& recvs) override {
    return counted_call([&] { return inner_->exchange(sends, recvs); });
  }
  absl::Status barrier() override {
    return counted_call([&] { return inner_->barrier(); });
  }
  void abort(const std::string& reason) override { inner_->abort(reason); }

 private:
  // Runs one operation as one message of the group's statistics.
  template <class F>
  absl::Status counted_call(const F& operation) {
    (void)stats_->begin();  // an operation is long: every one is timed
    const uint64_t start = metrics::cycle_clock::now();
    absl::Status s = operation();
    stats_->record(static_cast<uint64_t>(static_cast<double>(metrics::cycle_clock::now() - start) *
                                         metrics::cycle_clock::nanos_per_tick()));
    return s;
  }

  std::unique_ptr<communicator> inner_;
  std::shared_ptr<metrics::actor_stats> stats_;
};

}  // namespace

std::unique_ptr<communicator> counted(std::unique_ptr<communicator> inner,
                                      metrics::registry& metrics, const std::string& name) {
  return std::make_unique<counted_communicator>(std::move(inner), metrics, name);
}

}  // namespace troupe::comm
