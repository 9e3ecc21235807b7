#include "actors/pipeline_stage.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <optional>

#include "absl/strings/str_cat.h"
#include "actors/stage_link.hpp"
#include "runtime/base/seconds.hpp"
#include "runtime/base/status.hpp"

namespace troupe::actors {
namespace {

using clock = std::chrono::steady_clock;
using kind = pipeline_action::kind;

// The most micro-batches a stage's plan holds at once (forward done, backward, or its weight
// half, not yet).
int peak_in_flight(const std::vector<pipeline_action>& plan) {
  int now = 0, peak = 0;
  for (const auto& a : plan) {
    if (a.op == kind::forward) peak = std::max(peak, ++now);
    if (a.op == kind::backward || a.op == kind::backward_weight) --now;
  }
  return peak;
}

}  // namespace

pipeline_stage::pipeline_stage(const models::decoder_layout& layout,
                               const pipeline_options& options, int micro_rows,
                               kernels::cpu::thread_pool* pool, int checkpoint_segment,
                               comm::communicator* tensor)
    : layout_(layout),
      options_(options),
      micro_rows_(micro_rows),
      plan_(
          stage_schedule(options.schedule, options.stages, options.stage, options.micro_batches)) {
  for (int i = 0; i < copies(options); ++i) {
    copies_.push_back(std::make_unique<models::decoder_cpu_stage>(
        layout, micro_rows, pool, checkpoint_segment, defers_weight_gradients(options)));
  }
  const int64_t n = int64_t{micro_rows} * layout.config().ctx * layout.config().dim;
  in_ = tensor::tensor::host({n});
  out_ = tensor::tensor::host({n});
  if (tensor != nullptr) {
    // The stage's sums over the tensor-parallel group go through a buffer the group can address.
    tensor_sum_ = tensor::tensor::host({n});
    for (auto& copy : copies_) {
      copy->set_tensor_allreduce([this, tensor](float* data, int64_t count) -> absl::Status {
        const auto started = clock::now();
        TROUPE_ASSIGN_OR_RETURN(tensor::tensor part, tensor_sum_.narrow(0, 0, count));
        std::memcpy(part.data<float>(), data, count * sizeof(float));
        TROUPE_RETURN_IF_ERROR(tensor_parallel_sum(*tensor, part));
        std::memcpy(data, part.data<float>(), count * sizeof(float));
        tensor_sum_s_ += seconds_since(started);
        return absl::OkStatus();
      });
    }
  }
}

int pipeline_stage::copies(const pipeline_options& o) {
  return std::max(1,
                  peak_in_flight(stage_schedule(o.schedule, o.stages, o.stage, o.micro_batches)));
}

int64_t pipeline_stage::activation_bytes() const {
  int64_t bytes = 0;
  for (const auto& c : copies_)
    bytes += c->activation_bytes();
  return bytes;
}

absl::StatusOr<models::loss_sum> pipeline_stage::train(const float* params, float* grads,
                                                       const actor::token_batch& local,
                                                       float loss_scale, comm::communicator* pipe) {
  const int m = options_.micro_batches, r = micro_rows_, T = local.ctx;
  const int C = layout_.config().dim;
  if (local.batch != m * r || static_cast<int>(local.tokens.size()) != local.batch * T) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline stage ", options_.stage, ": a batch of ", local.batch,
                     " sequences is not ", m, " micro-batches of ", r));
  }
  const auto started = clock::now();
  double busy = 0;
  tensor_sum_s_ = 0;
  const int64_t hidden = int64_t{r} * T * C;
  std::vector<int> copy_of(m, -1);  // which copy holds micro-batch mb's activations
  std::vector<int> free_copies(copies_.size());
  for (size_t i = 0; i < copies_.size(); ++i)
    free_copies[i] = static_cast<int>(copies_.size() - 1 - i);
  const stage_link link(pipe, options_.stage, options_.stages);
  std::optional<comm::transfer> pending;  // the last unit's output, not yet sent
  // A weight gradient needs nothing from the neighbours: the output before it goes out meanwhile
  // (the group sees one operation at a time, in the same order as ever).
  std::future<absl::Status> sending;
  auto sent = [&]() -> absl::Status { return sending.valid() ? sending.get() : absl::OkStatus(); };
  models::loss_sum loss;
  for (const pipeline_action& a : plan_) {
    const int mb = a.micro_batch;
    const size_t offset = static_cast<size_t>(mb) * r * T;
    const bool backward = a.op == kind::backward || a.op == kind::backward_input;
    if (a.op == kind::backward_weight) {
      if (pending && !sending.valid()) {
        sending = std::async(std::launch::async, [&link, send = *std::move(pending)] {
          return link.exchange({send}, {});
        });
        pending.reset();
      }
    } else {
      TROUPE_RETURN_IF_ERROR(sent());
      // What this unit needs from a neighbour, received together with the last unit's output.
      std::vector<comm::transfer> recvs;
      if (a.op == kind::forward && !first()) recvs.push_back(link.activations_in(in_, mb));
      if (backward && !last()) recvs.push_back(link.gradients_in(in_, mb));
      if (pending || !recvs.empty()) {
        std::vector<comm::transfer> sends;
        if (pending) sends.push_back(*std::move(pending));
        pending.reset();
        TROUPE_RETURN_IF_ERROR(link.exchange(sends, recvs));
      }
    }
    const auto unit_started = clock::now();
    if (a.op == kind::forward) {
      if (free_copies.empty()) {
        return absl::InternalError("pipeline stage: more micro-batches in flight than copies");
      }
      copy_of[mb] = free_copies.back();
      free_copies.pop_back();
      models::decoder_cpu_stage& stage = *copies_[copy_of[mb]];
      const models::loss_sum part = stage.forward(
          params, r, T, first() ? local.tokens.data() + offset : nullptr,
          first() ? nullptr : in_.data<float>(), last() ? local.targets.data() + offset : nullptr);
      if (last()) {
        loss.sum += part.sum;
        loss.tokens += part.tokens;
      } else {
        std::memcpy(out_.data<float>(), stage.hidden_out(), hidden * sizeof(float));
        pending = link.activations_out(out_, mb);
      }
    } else if (backward) {
      models::decoder_cpu_stage& stage = *copies_[copy_of[mb]];
      const float* dhidden = last() ? nullptr : in_.data<float>();
      if (a.op == kind::backward) {
        stage.backward(params, grads, dhidden, loss_scale);
      } else {
        stage.backward_input(params, grads, dhidden, loss_scale);
      }
      if (!first()) {
        std::memcpy(out_.data<float>(), stage.dhidden_in(), hidden * sizeof(float));
        pending = link.gradients_out(out_, mb);
      }
    } else {
      copies_[copy_of[mb]]->backward_weights(grads);
    }
    TROUPE_RETURN_IF_ERROR(copies_[copy_of[mb]]->take_comm_status());
    if (a.op == kind::backward || a.op == kind::backward_weight) {
      free_copies.push_back(copy_of[mb]);
      copy_of[mb] = -1;
    }
    busy += seconds_since(unit_started);
  }
  TROUPE_RETURN_IF_ERROR(sent());
  if (pending) TROUPE_RETURN_IF_ERROR(link.exchange({*std::move(pending)}, {}));
  times_.busy_s = busy;
  times_.idle_s = seconds_since(started) - busy;
  times_.tensor_sum_s = tensor_sum_s_;
  return loss;
}

absl::StatusOr<models::loss_sum> pipeline_stage::evaluate(const float* params,
                                                          const actor::token_batch& batch,
                                                          comm::communicator* pipe) {
  const int T = batch.ctx, C = layout_.config().dim;
  models::decoder_cpu_stage& stage = *copies_.front();
  const stage_link link(pipe, options_.stage, options_.stages);
  models::loss_sum loss;
  std::optional<comm::transfer> pending;
  int mb = 0;
  for (int row = 0; row < batch.batch; row += micro_rows_, ++mb) {
    const int rows = std::min(micro_rows_, batch.batch - row);
    const size_t offset = static_cast<size_t>(row) * T;
    std::vector<comm::transfer> recvs;
    TROUPE_ASSIGN_OR_RETURN(tensor::tensor in, in_.narrow(0, 0, int64_t{rows} * T * C));
    if (!first()) recvs.push_back(link.activations_in(in, mb));
    if (pending || !recvs.empty()) {
      std::vector<comm::transfer> sends;
      if (pending) sends.push_back(*std::move(pending));
      pending.reset();
      TROUPE_RETURN_IF_ERROR(link.exchange(sends, recvs));
    }
    const models::loss_sum part = stage.forward(
        params, rows, T, first() ? batch.tokens.data() + offset : nullptr,
        first() ? nullptr : in_.data<float>(), last() ? batch.targets.data() + offset : nullptr);
    TROUPE_RETURN_IF_ERROR(stage.take_comm_status());
    if (last()) {
      loss.sum += part.sum;
      loss.tokens += part.tokens;
    } else {
      TROUPE_ASSIGN_OR_RETURN(tensor::tensor out, out_.narrow(0, 0, int64_t{rows} * T * C));
      std::memcpy(out.data<float>(), stage.hidden_out(), out.nbytes());
      pending = link.activations_out(out, mb);
    }
  }
  if (pending) TROUPE_RETURN_IF_ERROR(link.exchange({*std::move(pending)}, {}));
  return loss;
}

}  // namespace troupe::actors
