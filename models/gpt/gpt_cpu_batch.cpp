#include "models/gpt/gpt_cpu_batch.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/matmul.hpp"
#include "kernels/residual.hpp"

namespace troupe::models {

gpt_cpu_batch::gpt_cpu_batch(const gpt_layout& layout, int max_batch, int threads)
    : layout_(layout) {
  const int requested = std::max(1, threads);
  threads = std::max(1, std::min(threads, max_batch));
  pool_ = std::make_unique<kernels::cpu::thread_pool>(threads);
  const int per_replica = (max_batch + threads - 1) / threads;
  for (int i = 0; i < threads; ++i) {
    // A lone replica may use every core inside its kernels; several use one core each.
    replicas_.push_back(
        std::make_unique<gpt_cpu_stage>(layout, per_replica, threads == 1 ? pool_.get() : nullptr));
  }
  replica_grads_.assign(threads > 1 ? threads : 0, std::vector<float>(layout.total()));
  // OpenBLAS threads are process-wide: one per replica's core, or every core for a lone replica
  // (which also spreads its attention heads over the pool).
  kernels::cpu::set_blas_threads(threads > 1 ? 1 : requested);
}

loss_sum gpt_cpu_batch::run(const float* params, float* grads, int batch, int seq,
                            const int32_t* tokens, const int32_t* targets, float loss_scale) {
  const int n = std::min<int>(threads(), batch);
  if (n == 1) {
    loss_sum loss = replicas_[0]->forward(params, batch, seq, tokens, nullptr, targets);
    replicas_[0]->backward(params, grads, nullptr, loss_scale);
    return loss;
  }
  std::vector<loss_sum> losses(n);
  pool_->run(n, [&](int64_t r) {
    const int first = static_cast<int>(int64_t{batch} * r / n);
    const int count = static_cast<int>(int64_t{batch} * (r + 1) / n) - first;
    const int64_t offset = int64_t{first} * seq;
    std::vector<float>& g = replica_grads_[r];
    std::memset(g.data(), 0, g.size() * sizeof(float));
    losses[r] =
        replicas_[r]->forward(params, count, seq, tokens + offset, nullptr, targets + offset);
    replicas_[r]->backward(params, g.data(), nullptr, loss_scale);
  });
  // grads += sum of the replica gradients, each thread one slice, replicas in a fixed order.
  const int64_t total = layout_.total();
  pool_->run(n, [&](int64_t part) {
    const int64_t begin = total * part / n, end = total * (part + 1) / n;
    for (int r = 0; r < n; ++r) {
      kernels::cpu::accumulate(grads + begin, replica_grads_[r].data() + begin, end - begin);
    }
  });
  loss_sum loss;
  for (const auto& l : losses)
    loss.sum += l.sum, loss.tokens += l.tokens;
  return loss;
}

loss_sum gpt_cpu_batch::evaluate(const float* params, int batch, int seq, const int32_t* tokens,
                                 const int32_t* targets) {
  const int n = std::min<int>(threads(), batch);
  std::vector<loss_sum> losses(n);
  auto slice = [&](int64_t r) {
    const int first = static_cast<int>(int64_t{batch} * r / n);
    const int count = static_cast<int>(int64_t{batch} * (r + 1) / n) - first;
    const int64_t offset = int64_t{first} * seq;
    losses[r] =
        replicas_[r]->forward(params, count, seq, tokens + offset, nullptr, targets + offset);
  };
  if (n == 1) {
    slice(0);
  } else {
    pool_->run(n, slice);
  }
  loss_sum loss;
  for (const auto& l : losses)
    loss.sum += l.sum, loss.tokens += l.tokens;
  return loss;
}

}  // namespace troupe::models
