#include "models/decoder/decoder_cpu_batch.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/matmul.hpp"
#include "kernels/residual.hpp"

namespace troupe::models {
namespace {

// Replica r's rows when `batch` rows are split over n replicas in whole groups of `together`.
struct row_slice {
  int first, count;
};
row_slice slice_of(int batch, int together, int64_t r, int n) {
  const int64_t groups = batch / together;
  const int first = static_cast<int>(together * (groups * r / n));
  const int end = static_cast<int>(together * (groups * (r + 1) / n));
  return {first, end - first};
}

}  // namespace

decoder_cpu_batch::decoder_cpu_batch(const decoder_layout& layout, int max_batch, int threads,
                                     int checkpoint_segment)
    : layout_(layout), buckets_(layout.backward_buckets()) {
  const int requested = std::max(1, threads);
  threads = std::max(1, std::min(threads, max_batch));
  pool_ = std::make_unique<kernels::cpu::thread_pool>(threads);
  // A slice of whole pairs (an objective's rows_together) may be a row longer than an even
  // split.
  const int per_replica = (max_batch + threads - 1) / threads + (threads > 1 ? 1 : 0);
  for (int i = 0; i < threads; ++i) {
    // A lone replica may use every core inside its kernels; several use one core each.
    replicas_.push_back(std::make_unique<decoder_cpu_stage>(
        layout, per_replica, threads == 1 ? pool_.get() : nullptr, checkpoint_segment));
  }
  replica_grads_.assign(threads > 1 ? threads : 0, std::vector<float>(layout.total()));
  scratch_.resize(threads);
  // OpenBLAS threads are process-wide: one per replica's core, or every core for a lone replica
  // (which also spreads its attention heads over the pool).
  kernels::cpu::set_blas_threads(threads > 1 ? 1 : requested);
}

int64_t decoder_cpu_batch::activation_bytes() const {
  int64_t bytes = 0;
  for (const auto& r : replicas_)
    bytes += r->activation_bytes();
  return bytes;
}

loss_sum decoder_cpu_batch::run(const float* params, float* grads, int batch, int seq,
                                const int32_t* tokens, const int32_t* targets, float loss_scale,
                                const gradients_ready& ready) {
  return run_seeded(params, grads, batch, seq, tokens, targets, {loss_scale, nullptr}, ready);
}

loss_sum decoder_cpu_batch::run(const float* params, float* grads, int batch, int seq,
                                const int32_t* tokens, const int32_t* targets,
                                const token_objective& objective, const gradients_ready& ready) {
  return run_seeded(params, grads, batch, seq, tokens, targets, {0, &objective, nullptr}, ready);
}

void decoder_cpu_batch::run(const float* params, float* grads, int batch, int seq,
                            const int32_t* tokens, const value_objective& objective,
                            const gradients_ready& ready) {
  run_seeded(params, grads, batch, seq, tokens, nullptr, {0, nullptr, &objective}, ready);
}

loss_sum decoder_cpu_batch::forward_and_seed(int r, const float* params, float* g, int first,
                                             int count, int seq, const int32_t* tokens,
                                             const int32_t* targets, const seeding& seed) {
  decoder_cpu_stage& stage = *replicas_[r];
  const int64_t offset = int64_t{first} * seq, n = int64_t{count} * seq;
  const token_objective* o = seed.objective;
  const loss_sum loss =
      stage.forward(params, count, seq, tokens + offset, nullptr,
                    targets ? targets + offset : nullptr, o ? o->temperature : 1.0f);
  objective_scratch& s = scratch_[r];
  if (seed.value != nullptr) {
    s.dloss.assign(n, 0.0f);
    seed.value->seed(offset, n, stage.values(), s.dloss.data());
    stage.backward_head(params, g, value_objective_grad{s.dloss.data()});
    return loss;
  }
  if (o == nullptr) {
    stage.backward_head(params, g, nullptr, seed.loss_scale);
    return loss;
  }
  s.dloss.assign(n, 0.0f);
  float* entropies = nullptr;
  float* dentropy = nullptr;
  if (o->entropy) {
    s.entropies.resize(n);
    s.dentropy.assign(n, 0.0f);
    stage.entropies(entropies = s.entropies.data());
    dentropy = s.dentropy.data();
  }
  o->seed(offset, n, stage.token_losses(), entropies, s.dloss.data(), dentropy);
  stage.backward_head(params, g, {s.dloss.data(), entropies, dentropy});
  return loss;
}

loss_sum decoder_cpu_batch::run_seeded(const float* params, float* grads, int batch, int seq,
                                       const int32_t* tokens, const int32_t* targets,
                                       const seeding& seed, const gradients_ready& ready) {
  const int together = seed.rows_together();
  const int n = std::min<int>(threads(), batch / together);
  const layer_range range = layout_.range();
  // Bucket i finishes with block last-1-i; the rest (the embeddings) with the embedding pass.
  const std::vector<param_range>& buckets = buckets_;
  size_t finished = 0;
  if (n == 1) {
    decoder_cpu_stage& r = *replicas_[0];
    const loss_sum loss = forward_and_seed(0, params, grads, 0, batch, seq, tokens, targets, seed);
    for (int l = range.last - 1; l >= range.first; --l) {
      r.backward_block(params, grads, l);
      if (ready) ready(buckets[finished]);
      ++finished;
    }
    r.backward_embedding(grads);
    for (; finished < buckets.size(); ++finished) {
      if (ready) ready(buckets[finished]);
    }
    return loss;
  }
  // Each replica runs a slice of the batch single-threaded into its own gradients; then
  // grads += the replicas' gradients, each thread one slice, replicas in a fixed order, so the
  // result does not depend on timing. Buckets to report make the replicas meet after every
  // block (each bucket summed as soon as all have finished it); without, they meet once.
  const bool phased = static_cast<bool>(ready);
  std::vector<loss_sum> losses(n);
  pool_->run(n, [&](int64_t r) {
    const auto [first, count] = slice_of(batch, together, r, n);
    std::vector<float>& g = replica_grads_[r];
    std::memset(g.data(), 0, g.size() * sizeof(float));
    losses[r] = forward_and_seed(static_cast<int>(r), params, g.data(), first, count, seq, tokens,
                                 targets, seed);
    if (!phased) {
      for (int l = range.last - 1; l >= range.first; --l)
        replicas_[r]->backward_block(params, g.data(), l);
      replicas_[r]->backward_embedding(g.data());
    }
  });
  const auto sum_bucket = [&](param_range b) {
    pool_->run(n, [&](int64_t part) {
      const int64_t begin = b.begin + (b.end - b.begin) * part / n;
      const int64_t end = b.begin + (b.end - b.begin) * (part + 1) / n;
      for (int r = 0; r < n; ++r) {
        kernels::cpu::accumulate(grads + begin, replica_grads_[r].data() + begin, end - begin);
      }
    });
    if (ready) ready(b);
  };
  if (!phased) {
    sum_bucket({0, layout_.total()});
  } else {
    for (int l = range.last - 1; l >= range.first; --l) {
      pool_->run(
          n, [&](int64_t r) { replicas_[r]->backward_block(params, replica_grads_[r].data(), l); });
      sum_bucket(buckets[finished++]);
    }
    pool_->run(n, [&](int64_t r) { replicas_[r]->backward_embedding(replica_grads_[r].data()); });
    for (; finished < buckets.size(); ++finished)
      sum_bucket(buckets[finished]);
  }
  loss_sum loss;
  for (const auto& l : losses)
    loss.sum += l.sum, loss.tokens += l.tokens;
  return loss;
}

loss_sum decoder_cpu_batch::forward_slices(const float* params, int batch, int seq,
                                           const int32_t* tokens, const int32_t* targets,
                                           float temperature,
                                           const std::function<void(int, int, int)>& done) {
  const int n = std::min<int>(threads(), batch);
  std::vector<loss_sum> losses(n);
  auto slice = [&](int64_t r) {
    const auto [first, count] = slice_of(batch, 1, r, n);
    const int64_t offset = int64_t{first} * seq;
    losses[r] = replicas_[r]->forward(params, count, seq, tokens + offset, nullptr,
                                      targets ? targets + offset : nullptr, temperature);
    if (done) done(static_cast<int>(r), first, count);
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

loss_sum decoder_cpu_batch::evaluate(const float* params, int batch, int seq, const int32_t* tokens,
                                     const int32_t* targets) {
  return forward_slices(params, batch, seq, tokens, targets, 1.0f, nullptr);
}

void decoder_cpu_batch::log_probs(const float* params, int batch, int seq, const int32_t* tokens,
                                  const int32_t* targets, float temperature, float* out) {
  forward_slices(params, batch, seq, tokens, targets, temperature,
                 [&](int r, int first, int count) {
                   const float* losses = replicas_[r]->token_losses();
                   float* slice = out + int64_t{first} * seq;
                   for (int64_t i = 0; i < int64_t{count} * seq; ++i)
                     slice[i] = 0.0f - losses[i];  // +0, not -0, where ignored
                 });
}

void decoder_cpu_batch::values(const float* params, int batch, int seq, const int32_t* tokens,
                               float* out) {
  forward_slices(params, batch, seq, tokens, nullptr, 1.0f, [&](int r, int first, int count) {
    const float* v = replicas_[r]->values();
    std::copy(v, v + int64_t{count} * seq, out + int64_t{first} * seq);
  });
}

}  // namespace troupe::models
