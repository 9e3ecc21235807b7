#include "actors/zero3_parameters.hpp"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.hpp"
#include "runtime/tensor/allocator.hpp"

namespace troupe::actors {
namespace {

absl::StatusOr<tensor::tensor> reserve(int64_t n) {
  return tensor::tensor::empty({n}, tensor::dtype::f32, tensor::reserved_host_allocator());
}

template <typename Unit>
bool splits_evenly(const Unit& u, int ranks) {
  return u.chunk * ranks == u.range.end - u.range.begin;
}

// The largest chunk of a unit that does not split evenly over the ranks: its collectives go
// through staging buffers, padded; the others' run in place. 0 when every unit splits evenly.
template <typename Unit>
int64_t padded_chunk(const std::vector<Unit>& units, int ranks) {
  int64_t chunk = 0;
  for (const Unit& u : units) {
    if (!splits_evenly(u, ranks)) chunk = std::max(chunk, u.chunk);
  }
  return chunk;
}

}  // namespace

absl::StatusOr<std::unique_ptr<zero3_parameters>> zero3_parameters::create(
    const models::decoder_layout& layout, comm::communicator& group) {
  if (layout.tp().size > 1) {
    return absl::InvalidArgumentError(
        "ZeRO-3 shards whole parameters over the data-parallel group: not with tensor "
        "parallelism (use zero 1 or 2)");
  }
  std::unique_ptr<zero3_parameters> z(new zero3_parameters(layout, group));
  const int64_t total = layout.total();
  TROUPE_ASSIGN_OR_RETURN(z->params_, reserve(total));
  TROUPE_ASSIGN_OR_RETURN(z->grads_, reserve(total));
  TROUPE_ASSIGN_OR_RETURN(z->local_, reserve(total));
  if (const int64_t chunk = padded_chunk(z->units_, z->ranks_); chunk > 0) {
    for (tensor::tensor* staging : {&z->gathered_, &z->scattered_}) {
      TROUPE_ASSIGN_OR_RETURN(*staging,
                              tensor::tensor::zeros({chunk * z->ranks_}, tensor::dtype::f32));
    }
    TROUPE_ASSIGN_OR_RETURN(z->mine_, tensor::tensor::zeros({chunk}, tensor::dtype::f32));
  }
  z->queue_ = std::make_unique<comm::collective_queue>(group);
  return z;
}

std::vector<zero3_parameters::unit> zero3_parameters::units_of(const models::decoder_layout& layout,
                                                               int rank, int ranks) {
  const models::layer_range layers = layout.range();
  std::vector<unit> units;
  const auto add = [&](int64_t begin, int64_t end, bool block) {
    unit u;
    u.range = {begin, end};
    u.block = block;
    u.chunk = (end - begin + ranks - 1) / ranks;
    u.own.begin = std::min(end, begin + rank * u.chunk);
    u.own.end = std::min(end, u.own.begin + u.chunk);
    units.push_back(u);
  };
  const int64_t blocks_begin = layers.last > layers.first ? layout.block(layers.first).ln1_w : 0;
  const int64_t blocks_end = layers.has_head(layout.config()) ? layout.lnf_w() : layout.total();
  if (blocks_begin > 0) add(0, blocks_begin, false);
  for (int l = layers.first; l < layers.last; ++l)
    add(layout.block(l).ln1_w, l + 1 < layers.last ? layout.block(l + 1).ln1_w : blocks_end, true);
  if (blocks_end < layout.total()) add(blocks_end, layout.total(), false);
  return units;
}

zero3_parameters::zero3_parameters(const models::decoder_layout& layout, comm::communicator& group)
    : layout_(layout),
      rank_(group.rank()),
      ranks_(group.size()),
      units_(units_of(layout, rank_, ranks_)) {
  first_layer_ = layout.range().first;
  last_layer_ = layout.range().last;
  first_block_ = -1;
  for (size_t i = 0; i < units_.size(); ++i) {
    const unit& u = units_[i];
    if (!u.block) outside_.push_back(static_cast<int>(i));
    if (u.block && first_block_ < 0) first_block_ = static_cast<int>(i);
    if (u.own.end > u.own.begin) owned_.push_back(u.own);
  }
}

zero3_parameters::footprint zero3_parameters::memory(const models::decoder_layout& layout,
                                                     int ranks) {
  // What a step holds at once: one block's parameters in use while the next one's arrive; one
  // block's local gradients computed while the one before is reduce-scattered; the units
  // outside the blocks in both; and the staging buffers create() makes for units that do not
  // split evenly.
  footprint f;
  const std::vector<unit> units = units_of(layout, 0, ranks);
  int64_t block = 0, outside = 0;
  for (const unit& u : units) {
    const int64_t n = u.range.end - u.range.begin;
    f.chunks += u.chunk;
    if (u.block) {
      block = std::max(block, n);
    } else {
      outside += n;
    }
  }
  const int64_t staging = padded_chunk(units, ranks);
  f.gathered = 2 * block + outside + staging * (ranks + 1);
  f.local = 2 * block + outside + staging * ranks;
  return f;
}

absl::Status zero3_parameters::begin_step(bool gradients, int passes) {
  status_ = absl::OkStatus();
  training_ = gradients;
  passes_left_ = passes;
  if (gradients) {
    float* g = grads_.data<float>();
    for (const models::param_range& r : owned_)
      std::fill(g + r.begin, g + r.end, 0.0f);
  }
  for (int u : outside_) {
    if (gradients) {
      const models::param_range& r = units_[u].range;
      // A reduce-scatter of the last step may still read them.
      TROUPE_RETURN_IF_ERROR(queue_->wait(units_[u].scattered));
      std::fill(local() + r.begin, local() + r.end, 0.0f);
    }
    finish_gather(u);
  }
  if (first_layer_ < last_layer_) start_gather(block_unit(first_layer_));  // prefetch
  return status_;
}

models::decoder_cpu_stage::block_hooks zero3_parameters::hooks() {
  return {[this](int layer, bool backward) { acquire(layer, backward); },
          [this](int layer, bool backward) { after(layer, backward); }};
}

void zero3_parameters::start_gather(int u) {
  const unit& x = units_[u];
  in_flight_ = u;
  in_flight_ticket_ = queue_->submit([this, &x](comm::communicator& group) -> absl::Status {
    if (splits_evenly(x, ranks_)) {  // every rank's chunk straight into its place
      TROUPE_ASSIGN_OR_RETURN(tensor::tensor in, params_.narrow(0, x.own.begin, x.chunk));
      TROUPE_ASSIGN_OR_RETURN(tensor::tensor out,
                              params_.narrow(0, x.range.begin, x.range.end - x.range.begin));
      return group.allgather(in, out);
    }
    // This rank's chunk (the last one padded with zeros) to every rank, every rank's in
    // gathered_.
    const int64_t mine = x.own.end - x.own.begin;
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor in, mine_.narrow(0, 0, x.chunk));
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor out, gathered_.narrow(0, 0, x.chunk * ranks_));
    std::memcpy(in.data<float>(), params_.data<float>() + x.own.begin, mine * sizeof(float));
    std::fill(in.data<float>() + mine, in.data<float>() + x.chunk, 0.0f);
    return group.allgather(in, out);
  });
}

void zero3_parameters::finish_gather(int u) {
  if (in_flight_ != u) {
    if (in_flight_ >= 0) fail(queue_->wait(in_flight_ticket_));  // a prefetch not needed after all
    start_gather(u);
  }
  in_flight_ = -1;
  fail(queue_->wait(in_flight_ticket_));
  if (!status_.ok() || splits_evenly(units_[u], ranks_)) return;
  const models::param_range& r = units_[u].range;
  // gathered_ holds the chunks in rank order, the unit's elements first (then the padding).
  std::memcpy(params_.data<float>() + r.begin, gathered_.data<float>(),
              (r.end - r.begin) * sizeof(float));
}

void zero3_parameters::start_scatter(int u) {
  unit& x = units_[u];
  x.scattered = queue_->submit([this, u](comm::communicator& group) -> absl::Status {
    const unit& x = units_[u];
    const int64_t n = x.range.end - x.range.begin;
    // In place (this rank's sums land at the unit's start), or padded in scattered_.
    const bool even = splits_evenly(x, ranks_);
    const tensor::tensor& buffer = even ? local_ : scattered_;
    const int64_t at = even ? x.range.begin : 0;
    if (!even) {
      std::memcpy(scattered_.data<float>(), local() + x.range.begin, n * sizeof(float));
      std::fill(scattered_.data<float>() + n, scattered_.data<float>() + x.chunk * ranks_, 0.0f);
    }
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor in, buffer.narrow(0, at, x.chunk * ranks_));
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor out, buffer.narrow(0, at, x.chunk));
    TROUPE_RETURN_IF_ERROR(group.reduce_scatter(in, out, comm::reduce_op::sum));
    const float* work = out.data<float>();
    float* sums = grads_.data<float>() + x.own.begin;
    for (int64_t i = 0; i < x.own.end - x.own.begin; ++i)
      sums[i] += work[i];
    tensor::release_pages(local() + x.range.begin, n * sizeof(float));
    return absl::OkStatus();
  });
}

void zero3_parameters::release(float* buffer, int u, bool keep_own) {
  const unit& x = units_[u];
  if (!keep_own) {
    tensor::release_pages(buffer + x.range.begin, (x.range.end - x.range.begin) * sizeof(float));
    return;
  }
  tensor::release_pages(buffer + x.range.begin, (x.own.begin - x.range.begin) * sizeof(float));
  tensor::release_pages(buffer + x.own.end, (x.range.end - x.own.end) * sizeof(float));
}

void zero3_parameters::acquire(int layer, bool backward) {
  const int u = block_unit(layer);
  if (held_ != u) finish_gather(u);
  held_ = -1;
  // What comes next: the block below (backward) or above (forward); after the first block's
  // backward, the next pass's first block; the last block's backward follows its forward with
  // it kept, so nothing is fetched then.
  int next = -1;
  if (backward) {
    if (layer > first_layer_) {
      next = block_unit(layer - 1);
    } else if (passes_left_ > 1) {
      next = block_unit(first_layer_);
    }
  } else if (layer + 1 < last_layer_) {
    next = block_unit(layer + 1);
  } else if (!training_) {
    next = block_unit(first_layer_);
  }
  if (next >= 0 && next != u && status_.ok()) start_gather(next);
  if (backward) {
    const models::param_range& r = units_[u].range;
    fail(queue_->wait(units_[u].scattered));  // the last pass's reduce-scatter read them
    std::fill(local() + r.begin, local() + r.end, 0.0f);
  }
}

void zero3_parameters::after(int layer, bool backward) {
  const int u = block_unit(layer);
  if (backward) {
    if (status_.ok()) start_scatter(u);
    if (layer == first_layer_) --passes_left_;
  } else if (training_ && layer + 1 == last_layer_) {
    held_ = u;  // its backward is next
    return;
  }
  release(params_.data<float>(), u, true);
}

void zero3_parameters::gather_pass() {
  for (int l = first_layer_; l < last_layer_; ++l) {
    acquire(l, false);
    after(l, false);
  }
}

absl::Status zero3_parameters::end_step(bool gradients) {
  if (gradients && status_.ok()) {
    for (int u : outside_)
      start_scatter(u);
  }
  fail(queue_->wait());
  in_flight_ = held_ = -1;
  for (size_t u = 0; u < units_.size(); ++u)
    release(params_.data<float>(), static_cast<int>(u), true);
  return status_;
}

absl::Status zero3_parameters::gather_all() {
  status_ = absl::OkStatus();
  for (size_t u = 0; u < units_.size() && status_.ok(); ++u)
    finish_gather(static_cast<int>(u));
  return status_;
}

void zero3_parameters::release_all() {
  for (size_t u = 0; u < units_.size(); ++u) {
    release(params_.data<float>(), static_cast<int>(u), true);
    release(local(), static_cast<int>(u), false);
  }
}

zero3_parameters::resident zero3_parameters::resident_bytes() const {
  const size_t bytes = layout_.total() * sizeof(float);
  return {
      tensor::resident_bytes(params_.data<float>(), bytes),
      tensor::resident_bytes(grads_.data<float>(), bytes) + tensor::resident_bytes(local(), bytes)};
}

}  // namespace troupe::actors
