#include "actors/trainer.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "kernels/adamw.hpp"
#include "kernels/matmul.hpp"
#include "runtime/base/seconds.hpp"
#include "runtime/base/status.hpp"

namespace troupe::actors {
namespace {

using clock = std::chrono::steady_clock;

}  // namespace

float lr_schedule::at(int64_t step) const {
  if (step < warmup) return peak * static_cast<float>(step + 1) / static_cast<float>(warmup);
  const double span = std::max(1, total - warmup);
  const double progress = std::min(1.0, static_cast<double>(step - warmup) / span);
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return static_cast<float>(peak * (min_ratio + (1.0 - min_ratio) * cosine));
}

absl::StatusOr<std::unique_ptr<trainer>> trainer::create(const models::decoder_layout& layout,
                                                         const trainer_options& options,
                                                         comm::communicator* group,
                                                         comm::communicator* pipe,
                                                         comm::communicator* tensor) {
  const int ranks = group ? group->size() : 1;
  if (options.global_batch < ranks) {
    return absl::InvalidArgumentError(absl::StrCat("train.batch ", options.global_batch,
                                                   " must give each of the ", ranks,
                                                   " data-parallel ranks a sequence at least"));
  }
  const pipeline_options& p = options.pipeline;
  if (p.stages > 1) {
    if (pipe == nullptr || pipe->size() != p.stages || pipe->rank() != p.stage) {
      return absl::InvalidArgumentError(absl::StrCat("pipeline stage ", p.stage, " of ", p.stages,
                                                     " needs its pipeline group (rank = stage)"));
    }
    if (options.global_batch % ranks != 0 || options.global_batch / ranks % p.micro_batches != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "train.batch ", options.global_batch, " over ", ranks,
          " data-parallel ranks does not split into ", p.micro_batches, " micro-batches each"));
    }
    if (pipeline_stage::defers_weight_gradients(p) && options.checkpoint_segment > 0) {
      return absl::InvalidArgumentError(
          "the zb1 schedule defers each weight gradient, which needs every block's activations, "
          "and activation checkpointing frees them; use schedule 1f1b with checkpointing");
    }
  }
  const models::tensor_parallel tp = layout.tp();
  if (tp.size > 1 &&
      (tensor == nullptr || tensor->size() != tp.size || tensor->rank() != tp.rank)) {
    return absl::InvalidArgumentError(absl::StrCat("tensor-parallel rank ", tp.rank, " of ",
                                                   tp.size, " needs its group (rank = tp rank)"));
  }
  if (tp.size > 1 && options.rl_rows > 0) {
    return absl::InvalidArgumentError("tensor-parallel ranks train the language model only");
  }
  if (options.zero == zero_stage::three && ranks > 1) {
    TROUPE_RETURN_IF_ERROR(check_zero3(layout, options, ranks));
  }
  std::unique_ptr<trainer> t(new trainer(layout, options, group, p.stages > 1 ? pipe : nullptr,
                                         tp.size > 1 ? tensor : nullptr));
  if (options.zero == zero_stage::three && ranks > 1) {
    TROUPE_ASSIGN_OR_RETURN(t->zero3_, zero3_parameters::create(layout, *group));
    t->params_ = t->zero3_->params();
    t->grads_ = t->zero3_->grads();
    t->optimizer_ =
        std::make_unique<models::adamw_optimizer>(layout, t->zero3_->owned(), options.adamw);
    t->pipeline_->set_block_hooks(t->zero3_->hooks());
    // Every rank initialises the whole model (the same elements wherever it runs) and keeps its
    // chunks.
    layout.initialize(t->params_.data<float>(), options.seed);
    t->zero3_->release_all();
    return t;
  }
  const int64_t padded = t->shard_ * t->ranks_;
  TROUPE_ASSIGN_OR_RETURN(t->params_, tensor::tensor::zeros({padded}, tensor::dtype::f32));
  TROUPE_ASSIGN_OR_RETURN(t->grads_, tensor::tensor::zeros({padded}, tensor::dtype::f32));
  const bool sharded = options.zero != zero_stage::none && t->ranks_ > 1;
  if (sharded) {  // an unsharded optimizer updates the parameters in place
    TROUPE_ASSIGN_OR_RETURN(t->shard_buffer_,
                            tensor::tensor::zeros({t->shard_}, tensor::dtype::f32));
  }
  if (options.shard_replicas && sharded) {
    for (tensor::tensor* b : {&t->replica_, &t->incoming_, &t->outgoing_}) {
      TROUPE_ASSIGN_OR_RETURN(*b, tensor::tensor::zeros({2 * t->shard_}, tensor::dtype::f32));
    }
  }
  layout.initialize(t->params_.data<float>(), options.seed);
  return t;
}

absl::Status trainer::check_zero3(const models::decoder_layout& layout,
                                  const trainer_options& options, int ranks) {
  if (options.pipeline.stages > 1 || layout.tp().size > 1) {
    return absl::InvalidArgumentError(
        "ZeRO-3 shards a whole model over the data-parallel group: not with pipeline stages or "
        "tensor parallelism (zero 1 or 2 compose with them)");
  }
  if (options.rl_rows > 0 || options.elastic) {
    return absl::InvalidArgumentError(
        "ZeRO-3 trains the language model of a fixed group: not an RL role, not elastic (use zero "
        "1 or 2)");
  }
  if (options.checkpoint_segment > 1) {
    return absl::InvalidArgumentError(
        "ZeRO-3 gathers one block at a time, and activation checkpointing every_k recomputes k "
        "blocks at once: use activation_checkpointing blocks");
  }
  const int local = options.global_batch / ranks;
  const int rows = options.micro_batch > 0 ? std::min(options.micro_batch, local) : local;
  if (options.global_batch % ranks != 0 || local % rows != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ZeRO-3: train.batch ", options.global_batch, " over ", ranks,
        " data-parallel ranks must split into equal passes of train.micro_batch ", rows));
  }
  return absl::OkStatus();
}

trainer_memory trainer::memory(const models::decoder_layout& layout, const trainer_options& options,
                               int ranks) {
  const int local_batch = std::max((options.global_batch + ranks - 1) / ranks, options.rl_rows);
  if (options.zero == zero_stage::three && ranks > 1) {  // as zero3_parameters holds them
    const zero3_parameters::footprint f = zero3_parameters::memory(layout, ranks);
    const int rows =
        options.micro_batch > 0 ? std::min(options.micro_batch, local_batch) : local_batch;
    return {(f.chunks + f.gathered) * 4, (f.chunks + f.local) * 4, 2 * f.chunks * 4,
            models::decoder_cpu_stage::activation_bytes(layout, rows, options.checkpoint_segment)};
  }
  // As the constructor and create() size them.
  const int64_t shard = (layout.total() + ranks - 1) / ranks, padded = shard * ranks;
  const bool sharded = options.zero != zero_stage::none && ranks > 1;
  trainer_memory m;
  m.parameters = padded * 4;
  m.gradients = padded * 4;
  m.optimizer = 2 * (sharded ? shard : padded) * 4;
  if (sharded) m.optimizer += shard * 4;  // the updated shard, before it is all-gathered
  if (sharded && options.shard_replicas) m.optimizer += 3 * 2 * shard * 4;
  int rows = options.micro_batch > 0 ? std::min(options.micro_batch, local_batch) : local_batch;
  if (options.pipeline.stages > 1 || layout.tp().size > 1) {  // a pipeline_stage's copies
    rows = local_batch / options.pipeline.micro_batches;
    m.activations = pipeline_stage::copies(options.pipeline) *
                    models::decoder_cpu_stage::activation_bytes(
                        layout, rows, options.checkpoint_segment,
                        pipeline_stage::defers_weight_gradients(options.pipeline));
  } else {
    const int replicas = std::max(1, std::min(options.threads, rows));
    m.activations =
        replicas * models::decoder_cpu_stage::activation_bytes(
                       layout, (rows + replicas - 1) / replicas, options.checkpoint_segment);
  }
  return m;
}

trainer::trainer(const models::decoder_layout& layout, const trainer_options& options,
                 comm::communicator* group, comm::communicator* pipe, comm::communicator* tensor)
    : layout_(layout), options_(options), group_(group), pipe_(pipe), tensor_(tensor) {
  if (group_ != nullptr) {
    rank_ = group_->rank();
    ranks_ = group_->size();
  }
  shard_ = (layout.total() + ranks_ - 1) / ranks_;
  // The largest share of the global batch (even_split: the first ranks take one more).
  const int local_batch = std::max((options.global_batch + ranks_ - 1) / ranks_, options.rl_rows);
  pass_rows_ = options.micro_batch > 0 ? std::min(options.micro_batch, local_batch) : local_batch;
  const bool zero3 = options.zero == zero_stage::three && ranks_ > 1;
  if (pipe_ != nullptr || tensor_ != nullptr || zero3) {
    // A stage's units (a tensor-parallel rank's too: its sums go in the same order on every
    // rank; a ZeRO-3 rank's: its gathers too) run one after the other on this thread; its cores
    // spread attention heads and OpenBLAS's weight gradients (whose idle threads would
    // otherwise spin on other cores).
    if (options.threads > 1) pool_ = std::make_unique<kernels::cpu::thread_pool>(options.threads);
    kernels::cpu::set_blas_threads(options.threads);
    pipeline_options stage = options.pipeline;
    if (zero3) {  // one stage, the share in passes of micro_batch
      stage = {};
      stage.micro_batches = local_batch / pass_rows_;
    } else {
      pass_rows_ = local_batch / options.pipeline.micro_batches;
    }
    pipeline_ = std::make_unique<pipeline_stage>(layout, stage, pass_rows_, pool_.get(),
                                                 options.checkpoint_segment, tensor_);
  } else {
    model_ = std::make_unique<models::decoder_cpu_batch>(layout, pass_rows_, options.threads,
                                                         options.checkpoint_segment);
  }
  if (group_ != nullptr && ranks_ > 1 && !zero3) {
    buckets_ = std::make_unique<comm::collective_queue>(*group_);
  }
  const bool sharded = options.zero != zero_stage::none;
  const int64_t begin = sharded ? rank_ * shard_ : 0;
  const int64_t end = sharded ? begin + shard_ : shard_ * ranks_;
  // (ZeRO-3's is over the chunks of zero3_parameters: create() makes it.)
  if (!zero3) {
    optimizer_ = std::make_unique<models::adamw_optimizer>(layout, begin, end, options.adamw);
  }
  replica_begin_ = ((rank_ + 1) % ranks_) * shard_;
  const pipeline_options& p = options.pipeline;
  const bool tied_copy = pipe_ != nullptr && p.stage == p.stages - 1 && p.stage != 0;
  for (const auto& s : layout.slots()) {
    const bool replicated = layout.tp().size > 1 && s.split.dim < 0;
    if (replicated) replicated_.push_back({s.offset, s.offset + s.numel});
    if ((tied_copy && s.offset == layout.wte()) || (replicated && layout.tp().rank != 0)) continue;
    counted_.push_back({s.offset, s.offset + s.numel});
  }
}

absl::StatusOr<step_report> trainer::step(const token_batch& local) {
  if (layout_.has_value_head() || options_.preference) return pair_step(local);
  // The mean over the global batch's targets: every position of text windows, the responses'
  // of supervised examples.
  const float loss_scale =
      local.global_targets > 0
          ? 1.0f / static_cast<float>(local.global_targets)
          : 1.0f / (static_cast<float>(options_.global_batch) * static_cast<float>(local.ctx));
  models::loss_sum loss;
  const gradient_pass pass = [&](int row, int rows,
                                 const models::decoder_cpu_batch::gradients_ready& ready) {
    if (pipeline_) {  // the stage's schedule over every micro-batch of the share
      TROUPE_ASSIGN_OR_RETURN(
          loss, pipeline_->train(params_.data<float>(), pass_grads(), local, loss_scale, pipe_));
      return absl::OkStatus();
    }
    const size_t offset = static_cast<size_t>(row) * local.ctx;
    const models::loss_sum part =
        model_->run(params_.data<float>(), grads_.data<float>(), rows, local.ctx,
                    local.tokens.data() + offset, local.targets.data() + offset, loss_scale, ready);
    loss.sum += part.sum;
    loss.tokens += part.tokens;
    return absl::OkStatus();
  };
  step_report report;
  std::vector<float> totals;
  TROUPE_RETURN_IF_ERROR(accumulate_and_apply(
      local.batch, pass_rows_, pass,
      [&] {
        return std::vector<float>{static_cast<float>(loss.sum), static_cast<float>(loss.tokens)};
      },
      totals, report));
  report.loss = totals[0] / totals[1];
  return report;
}

absl::StatusOr<int> trainer::pair_pass_rows(const char* objective) const {
  const int rows = pass_rows_ - pass_rows_ % 2;
  if (rows < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        objective, "'s pass holds whole preference pairs, and this trainer's passes hold ",
        pass_rows_, " row; give it a micro-batch of at least one pair"));
  }
  return rows;
}

absl::StatusOr<step_report> trainer::pair_step(const token_batch& local) {
  const bool reward_model = layout_.has_value_head();
  TROUPE_RETURN_IF_ERROR(not_on_a_pipeline(reward_model ? "a reward model's step" : "a DPO step"));
  TROUPE_RETURN_IF_ERROR(reward_model ? validate_pairs(local) : validate_dpo_pairs(local));
  TROUPE_ASSIGN_OR_RETURN(const int pass_rows,
                          pair_pass_rows(reward_model ? "a reward model" : "DPO"));
  // The mean over the global batch's pairs (the data loader counts them).
  const int64_t pairs = local.global_targets > 0 ? local.global_targets : local.batch / 2;
  const float loss_scale = 1.0f / static_cast<float>(pairs);
  std::optional<reward_pair_pass> rm;
  std::optional<dpo_pair_pass> dpo;
  if (reward_model) {
    rm.emplace(local, loss_scale);
  } else {
    dpo.emplace(local, *options_.preference, loss_scale);
  }
  const gradient_pass pass = [&](int row, int rows,
                                 const models::decoder_cpu_batch::gradients_ready& ready) {
    const size_t offset = static_cast<size_t>(row) * local.ctx;
    const int32_t* tokens = local.tokens.data() + offset;
    if (rm) {
      model_->run(params_.data<float>(), grads_.data<float>(), rows, local.ctx, tokens,
                  rm->objective(row), ready);
    } else {
      model_->run(params_.data<float>(), grads_.data<float>(), rows, local.ctx, tokens,
                  local.targets.data() + offset, dpo->objective(row), ready);
    }
    return absl::OkStatus();
  };
  step_report report;
  std::vector<float> totals;
  TROUPE_RETURN_IF_ERROR(accumulate_and_apply(
      local.batch, pass_rows, pass,
      [&] { return (rm ? pair_sums::of(local, rm->rewards()) : dpo->sums()).to_floats(); }, totals,
      report));
  const pair_sums s = pair_sums::from_floats(totals.data());
  report.loss = s.loss / s.pairs;
  report.pairs = s.means();
  return report;
}

absl::StatusOr<actor::rl_step_report> trainer::rl_step(
    int rows, const gradient_pass& pass, const std::function<std::vector<float>()>& local_sums,
    const std::function<actor::rl_step_report(const std::vector<float>&)>& to_report) {
  step_report base;
  std::vector<float> sums;
  TROUPE_RETURN_IF_ERROR(accumulate_and_apply(rows, pass_rows_, pass, local_sums, sums, base));
  actor::rl_step_report report = to_report(sums);
  report.step = base.step;
  report.grad_norm = base.grad_norm;
  report.lr = base.lr;
  report.compute_s = base.compute_s;
  report.comm_s = base.comm_s;
  return report;
}

absl::StatusOr<actor::rl_step_report> trainer::step(const actor::rl_batch& local,
                                                    const policy_objective& objective) {
  if (layout_.has_value_head()) {
    return absl::FailedPreconditionError("a policy step asked of a value-head model (a critic)");
  }
  TROUPE_RETURN_IF_ERROR(not_on_a_pipeline("an RL policy step"));
  TROUPE_RETURN_IF_ERROR(validate(local, objective));
  policy_objective_pass pg(objective, local);
  const gradient_pass pass = [&](int row, int rows,
                                 const models::decoder_cpu_batch::gradients_ready& ready) {
    const size_t offset = static_cast<size_t>(row) * local.ctx;
    model_->run(params_.data<float>(), grads_.data<float>(), rows, local.ctx,
                local.tokens.data() + offset, local.targets.data() + offset,
                pg.token_objective(row), ready);
    return absl::OkStatus();
  };
  return rl_step(
      local.batch, pass, [&] { return pg.local_sums(); }, policy_objective_pass::report);
}

absl::StatusOr<actor::rl_step_report> trainer::step(const actor::rl_batch& local,
                                                    const value_objective& objective) {
  if (!layout_.has_value_head()) {
    return absl::FailedPreconditionError("a critic step asked of a model without a value head");
  }
  TROUPE_RETURN_IF_ERROR(not_on_a_pipeline("an RL critic step"));
  TROUPE_RETURN_IF_ERROR(validate(local, objective));
  value_objective_pass vf(objective, local);
  const gradient_pass pass = [&](int row, int rows,
                                 const models::decoder_cpu_batch::gradients_ready& ready) {
    const size_t offset = static_cast<size_t>(row) * local.ctx;
    model_->run(params_.data<float>(), grads_.data<float>(), rows, local.ctx,
                local.tokens.data() + offset, vf.objective(row), ready);
    return absl::OkStatus();
  };
  return rl_step(
      local.batch, pass, [&] { return vf.local_sums(); }, value_objective_pass::report);
}

absl::Status trainer::not_on_a_pipeline(const char* what) const {
  if (!pipeline_) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(what,
                   " asked of a pipeline stage or tensor-parallel rank: they train the "
                   "language model only"));
}

absl::Status trainer::check_replicated_gradients() {
  // A checksum of every replicated gradient, gathered from every rank: equal bits, or the ranks
  // went apart (a kernel or a sum that is not the same on every rank) and the step is refused.
  const float* grads = grads_.data<float>();
  double sum = 0, squares = 0;
  for (const models::param_range& r : replicated_) {
    for (int64_t i = r.begin; i < r.end; ++i)
      sum += grads[i];
    squares += kernels::cpu::sum_of_squares(grads + r.begin, r.end - r.begin);
  }
  tensor::tensor mine = tensor::tensor::host({2});
  mine.data<float>()[0] = static_cast<float>(sum);
  mine.data<float>()[1] = static_cast<float>(squares);
  tensor::tensor all = tensor::tensor::host({2 * int64_t{tensor_->size()}});
  TROUPE_RETURN_IF_ERROR(tensor_->allgather(mine, all));
  const float* got = all.data<float>();
  for (int r = 1; r < tensor_->size(); ++r) {
    if (got[2 * r] != got[0] || got[2 * r + 1] != got[1]) {
      return absl::InternalError(absl::StrCat(
          "the replicated parameters' gradients (LayerNorms, output biases, position embedding) "
          "differ "
          "across the tensor-parallel group: rank 0's sum ",
          got[0], " (squares ", got[1], "), rank ", r, "'s ", got[2 * r], " (", got[2 * r + 1],
          "); its ranks must run the same kernels on the same inputs"));
    }
  }
  return absl::OkStatus();
}

absl::Status trainer::sum_tied_embedding() {
  const pipeline_options& p = options_.pipeline;
  const bool first = p.stage == 0, last = p.stage == p.stages - 1;
  if (!first && !last) return absl::OkStatus();
  // The first stage's wte gradient (from the embedding) and the last stage's copy's (from the
  // head) swapped and added: the same sum, the same bits, on both (addition commutes).
  // (This tensor-parallel rank's rows of it: the same rows on both stages.)
  const int64_t n = int64_t{layout_.local_vocab()} * layout_.config().dim;
  TROUPE_ASSIGN_OR_RETURN(tensor::tensor mine, grads_.narrow(0, layout_.wte(), n));
  tensor::tensor theirs = tensor::tensor::host({n});
  const int peer = first ? p.stages - 1 : 0;
  TROUPE_RETURN_IF_ERROR(pipe_->exchange({{mine, peer, 0}}, {{theirs, peer, 0}}));
  float* g = mine.data<float>();
  const float* other = theirs.data<float>();
  for (int64_t i = 0; i < n; ++i)
    g[i] += other[i];
  return absl::OkStatus();
}

absl::Status trainer::check_sequences(const char* what, const actor::rl_batch& local,
                                      bool targets) {
  const size_t n = static_cast<size_t>(local.batch) * local.ctx;
  if (local.batch < 1 || local.tokens.size() != n || (targets && local.targets.size() != n)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", local.tokens.size(), " tokens and ",
                                                   local.targets.size(), " targets for batch ",
                                                   local.batch, " x ctx ", local.ctx));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> trainer::log_probs(const actor::rl_batch& local,
                                                      float temperature) {
  if (layout_.has_value_head()) {
    return absl::FailedPreconditionError("log-probs asked of a value-head model (a critic)");
  }
  TROUPE_RETURN_IF_ERROR(not_on_a_pipeline("log-probs"));
  TROUPE_RETURN_IF_ERROR(check_sequences("log_probs", local, true));
  std::vector<float> out(static_cast<size_t>(local.batch) * local.ctx);
  for (int row = 0; row < local.batch; row += pass_rows_) {
    const int rows = std::min(pass_rows_, local.batch - row);
    const size_t offset = static_cast<size_t>(row) * local.ctx;
    model_->log_probs(params_.data<float>(), rows, local.ctx, local.tokens.data() + offset,
                      local.targets.data() + offset, temperature, out.data() + offset);
  }
  return out;
}

absl::StatusOr<std::vector<float>> trainer::values(const actor::rl_batch& local) {
  if (!layout_.has_value_head()) {
    return absl::FailedPreconditionError("values asked of a model without a value head");
  }
  TROUPE_RETURN_IF_ERROR(not_on_a_pipeline("values"));
  TROUPE_RETURN_IF_ERROR(check_sequences("values", local, false));
  std::vector<float> out(static_cast<size_t>(local.batch) * local.ctx);
  for (int row = 0; row < local.batch; row += pass_rows_) {
    const int rows = std::min(pass_rows_, local.batch - row);
    const size_t offset = static_cast<size_t>(row) * local.ctx;
    model_->values(params_.data<float>(), rows, local.ctx, local.tokens.data() + offset,
                   out.data() + offset);
  }
  return out;
}

absl::Status trainer::accumulate_and_apply(int rows, int pass_rows, const gradient_pass& pass,
                                           const std::function<std::vector<float>()>& local_sums,
                                           std::vector<float>& sums, step_report& report) {
  const auto compute_start = clock::now();
  float* params = params_.data<float>();
  float* grads = grads_.data<float>();
  if (!zero3_) TROUPE_RETURN_IF_ERROR(tensor::zero(grads_));  // (ZeRO-3: begin_step, its chunks)
  // With overlap_comm (and without ZeRO-2) the gradients are all-reduced bucket by bucket as the
  // last pass's backward finishes them, overlapping the layers still to go; otherwise they are
  // all-reduced (ZeRO-2: reduce-scattered) afterwards.
  const bool zero2 = options_.zero == zero_stage::two && ranks_ > 1;
  // (A pipeline stage's gradients are final only once its whole schedule has run.)
  const bool overlap = ranks_ > 1 && !zero2 && options_.overlap_comm && !pipeline_;
  const models::decoder_cpu_batch::gradients_ready start_allreduce = [&](models::param_range b) {
    absl::StatusOr<tensor::tensor> bucket = grads_.narrow(0, b.begin, b.end - b.begin);
    TROUPE_CHECK(bucket.ok());  // the buckets lie inside the buffer
    buckets_->allreduce(*std::move(bucket), comm::reduce_op::sum);
  };
  if (zero3_) {
    // The stage's passes, each block's gradients reduce-scattered as its backward ends.
    TROUPE_RETURN_IF_ERROR(zero3_->begin_step(true, pipeline_->options().micro_batches));
    const absl::Status passed = pass(0, rows, nullptr);
    const absl::Status scattered = zero3_->end_step(true);
    TROUPE_RETURN_IF_ERROR(passed);
    TROUPE_RETURN_IF_ERROR(scattered);
  } else if (pipeline_) {
    // One pass: the stage's schedule over every micro-batch; the data-parallel sum follows it.
    TROUPE_RETURN_IF_ERROR(pass(0, rows, nullptr));
  } else {
    for (int row = 0; row < rows; row += pass_rows) {
      const int part = std::min(pass_rows, rows - row);
      const bool last_pass = row + part >= rows;
      TROUPE_RETURN_IF_ERROR(pass(row, part, overlap && last_pass ? start_allreduce : nullptr));
    }
  }
  report.compute_s += seconds_since(compute_start);

  // Sum the rest of the gradients (and the statistics) over the ranks.
  auto comm_start = clock::now();
  if (pipe_) TROUPE_RETURN_IF_ERROR(sum_tied_embedding());
  if (tensor_) TROUPE_RETURN_IF_ERROR(check_replicated_gradients());
  sums = local_sums();
  tensor::tensor totals = tensor::tensor::host({static_cast<int64_t>(sums.size())});
  std::copy(sums.begin(), sums.end(), totals.data<float>());
  if (overlap) TROUPE_RETURN_IF_ERROR(buckets_->wait());
  if (ranks_ > 1) {
    TROUPE_RETURN_IF_ERROR(group_->allreduce(totals, comm::reduce_op::sum));
    if (zero2) {
      // This rank's summed shard lands at the start of the buffer; move it to its place.
      TROUPE_ASSIGN_OR_RETURN(tensor::tensor first, grads_.narrow(0, 0, shard_));
      TROUPE_RETURN_IF_ERROR(group_->reduce_scatter(grads_, first, comm::reduce_op::sum));
      std::memmove(grads + rank_ * shard_, grads, shard_ * sizeof(float));
    } else if (!overlap && !zero3_) {
      TROUPE_RETURN_IF_ERROR(group_->allreduce(grads_, comm::reduce_op::sum));
    }
  }
  // A pipeline's statistics (the loss is the last stage's) are summed over its stages too.
  if (pipe_) TROUPE_RETURN_IF_ERROR(pipe_->allreduce(totals, comm::reduce_op::sum));
  std::copy(totals.data<float>(), totals.data<float>() + sums.size(), sums.begin());

  // The global gradient norm: with ZeRO-2 (ZeRO-3) each rank holds one shard (its chunks), so
  // partial sums are added;
  // a pipeline's stages and a tensor-parallel group's ranks add theirs (counted_: what only
  // this rank counts).
  const auto counted_squares = [&](int64_t begin, int64_t end) {
    double sum = 0;
    for (const models::param_range& r : counted_) {
      const int64_t a = std::max(begin, r.begin), b = std::min(end, r.end);
      if (b > a) sum += kernels::cpu::sum_of_squares(grads + a, b - a);
    }
    return sum;
  };
  double squares = 0;
  if (zero2 || zero3_) {
    double mine = 0;
    if (zero3_) {
      for (const models::param_range& r : zero3_->owned())
        mine += counted_squares(r.begin, r.end);
    } else {
      mine = counted_squares(rank_ * shard_, (rank_ + 1) * shard_);
    }
    tensor::tensor partial = tensor::tensor::host({1});
    partial.data<float>()[0] = static_cast<float>(mine);
    TROUPE_RETURN_IF_ERROR(group_->allreduce(partial, comm::reduce_op::sum));
    squares = partial.data<float>()[0];
  } else {
    squares = counted_squares(0, shard_ * ranks_);
  }
  for (comm::communicator* across : {pipe_, tensor_}) {
    if (across == nullptr) continue;
    tensor::tensor partial = tensor::tensor::host({1});
    partial.data<float>()[0] = static_cast<float>(squares);
    TROUPE_RETURN_IF_ERROR(across->allreduce(partial, comm::reduce_op::sum));
    squares = partial.data<float>()[0];
  }
  report.comm_s += seconds_since(comm_start);
  report.grad_norm = std::sqrt(squares);
  const float clip = options_.grad_clip > 0 && report.grad_norm > options_.grad_clip
                         ? static_cast<float>(options_.grad_clip / report.grad_norm)
                         : 1.0f;

  const auto update_start = clock::now();
  report.lr = options_.lr.at(optimizer_->steps());
  // (A ZeRO-3 rank updates its chunks in place; the next gathers read them.)
  const bool sharded = options_.zero != zero_stage::none && ranks_ > 1 && !zero3_;
  undo_.armed = undo_.committed = false;
  if (sharded) {
    float* mine = params + rank_ * shard_;
    std::memcpy(shard_buffer_.data<float>(), mine, shard_ * sizeof(float));
    if (options_.elastic) {
      undo_.m = optimizer_->first_moment();
      undo_.v = optimizer_->second_moment();
      undo_.steps = optimizer_->steps();
      undo_.armed = true;
    }
    optimizer_->step(params, grads, static_cast<float>(report.lr), clip);
    // The updated shard goes to shard_buffer_ and params_ keeps the old one, so that a step
    // failing from here on leaves this rank's parameters as they were.
    std::swap_ranges(mine, mine + shard_, shard_buffer_.data<float>());
    report.compute_s += seconds_since(update_start);
    TROUPE_RETURN_IF_ERROR(gather_and_commit(report));
  } else {
    optimizer_->step(params, grads, static_cast<float>(report.lr), clip);
    report.compute_s += seconds_since(update_start);
  }
  report.step = optimizer_->steps();
  return absl::OkStatus();
}

absl::Status trainer::gather_and_commit(step_report& report) {
  const auto comm_start = clock::now();
  // The gradients are spent: their buffer receives the new parameters.
  TROUPE_RETURN_IF_ERROR(group_->allgather(shard_buffer_, grads_));
  report.comm_s += seconds_since(comm_start);
  if (replica_.defined()) {
    const auto replica_start = clock::now();
    // This rank's new moments to the rank that keeps its replica (the previous one); the next
    // rank's into incoming_.
    float* out = outgoing_.data<float>();
    std::copy(optimizer_->first_moment().begin(), optimizer_->first_moment().end(), out);
    std::copy(optimizer_->second_moment().begin(), optimizer_->second_moment().end(), out + shard_);
    const int left = (rank_ + ranks_ - 1) % ranks_, right = (rank_ + 1) % ranks_;
    TROUPE_RETURN_IF_ERROR(group_->exchange({{outgoing_, left, 0}}, {{incoming_, right, 0}}));
    report.replica_s = seconds_since(replica_start);
    report.comm_s += report.replica_s;
    std::swap(replica_, incoming_);
  }
  std::swap(params_, grads_);
  undo_.committed = true;
  return absl::OkStatus();
}

absl::StatusOr<double> trainer::evaluate(const std::vector<token_batch>& batches) {
  models::loss_sum mine;
  if (zero3_) {
    TROUPE_ASSIGN_OR_RETURN(mine, evaluate_zero3(batches));
  }
  for (size_t i = rank_; i < batches.size() && !zero3_; i += ranks_) {
    const token_batch& b = batches[i];
    if (pipeline_) {
      TROUPE_ASSIGN_OR_RETURN(const models::loss_sum l,
                              pipeline_->evaluate(params_.data<float>(), b, pipe_));
      mine.sum += l.sum;
      mine.tokens += l.tokens;
      continue;
    }
    // In passes the model has room for (a batch made for a smaller world may be larger).
    for (int row = 0; row < b.batch; row += pass_rows_) {
      const int rows = std::min(pass_rows_, b.batch - row);
      const size_t offset = static_cast<size_t>(row) * b.ctx;
      const models::loss_sum l = model_->evaluate(
          params_.data<float>(), rows, b.ctx, b.tokens.data() + offset, b.targets.data() + offset);
      mine.sum += l.sum;
      mine.tokens += l.tokens;
    }
  }
  tensor::tensor totals = tensor::tensor::host({2});
  totals.data<float>()[0] = static_cast<float>(mine.sum);
  totals.data<float>()[1] = static_cast<float>(mine.tokens);
  if (ranks_ > 1) TROUPE_RETURN_IF_ERROR(group_->allreduce(totals, comm::reduce_op::sum));
  if (pipe_) TROUPE_RETURN_IF_ERROR(pipe_->allreduce(totals, comm::reduce_op::sum));
  if (totals.data<float>()[1] == 0) {
    return absl::FailedPreconditionError("evaluation: no held-out tokens");
  }
  return totals.data<float>()[0] / totals.data<float>()[1];
}

pair_sums trainer::pair_sums_of(const token_batch& b, int pass_rows) {
  // Forward only, in passes: a reward model's values, DPO's log-probs.
  const bool reward_model = layout_.has_value_head();
  std::vector<float> out(static_cast<size_t>(b.batch) * b.ctx);
  for (int row = 0; row < b.batch; row += pass_rows) {
    const int rows = std::min(pass_rows, b.batch - row);
    const size_t offset = static_cast<size_t>(row) * b.ctx;
    if (reward_model) {
      model_->values(params_.data<float>(), rows, b.ctx, b.tokens.data() + offset,
                     out.data() + offset);
    } else {
      model_->log_probs(params_.data<float>(), rows, b.ctx, b.tokens.data() + offset,
                        b.targets.data() + offset, 1.0f, out.data() + offset);
    }
  }
  if (!reward_model) return dpo_pair_sums(b, out.data(), *options_.preference);
  const std::vector<int> scored = scored_positions(b);
  std::vector<float> rewards(b.batch);
  for (int row = 0; row < b.batch; ++row)
    rewards[row] = out[static_cast<size_t>(row) * b.ctx + scored[row]];
  return pair_sums::of(b, rewards);
}

absl::StatusOr<pair_sums> trainer::pair_sums_over_group(const pair_sums& mine) {
  const std::vector<float> local = mine.to_floats();
  tensor::tensor totals = tensor::tensor::host({static_cast<int64_t>(local.size())});
  std::copy(local.begin(), local.end(), totals.data<float>());
  if (ranks_ > 1) TROUPE_RETURN_IF_ERROR(group_->allreduce(totals, comm::reduce_op::sum));
  return pair_sums::from_floats(totals.data<float>());
}

absl::StatusOr<pair_sums> trainer::evaluate_pairs(const std::vector<token_batch>& batches) {
  const bool reward_model = layout_.has_value_head();
  if (!reward_model && !options_.preference) {
    return absl::FailedPreconditionError(
        "pairs evaluated by a language model without a preference loss (options.preference)");
  }
  const char* objective = reward_model ? "a reward model" : "DPO";
  TROUPE_RETURN_IF_ERROR(
      not_on_a_pipeline(reward_model ? "a reward model's evaluation" : "a DPO evaluation"));
  TROUPE_ASSIGN_OR_RETURN(const int pass_rows, pair_pass_rows(objective));
  pair_sums mine;
  for (size_t i = rank_; i < batches.size(); i += ranks_) {
    const token_batch& b = batches[i];
    TROUPE_RETURN_IF_ERROR(reward_model ? validate_pairs(b) : validate_dpo_pairs(b));
    mine.add(pair_sums_of(b, pass_rows));
  }
  TROUPE_ASSIGN_OR_RETURN(const pair_sums all, pair_sums_over_group(mine));
  if (all.pairs == 0) return absl::FailedPreconditionError("evaluation: no held-out pairs");
  return all;
}

absl::StatusOr<actor::eval_report> trainer::held_out_report(
    const std::vector<token_batch>& batches) {
  if (!layout_.has_value_head() && !options_.preference) {
    TROUPE_ASSIGN_OR_RETURN(const double loss, evaluate(batches));
    return actor::eval_report{.loss = loss};
  }
  TROUPE_ASSIGN_OR_RETURN(const pair_sums s, evaluate_pairs(batches));
  return actor::eval_report{.loss = s.loss / s.pairs, .pairs = s.means()};
}

absl::StatusOr<models::loss_sum> trainer::evaluate_zero3(const std::vector<token_batch>& batches) {
  // Rank r takes batches r, r + ranks, ...; every block's gather is a collective, so in each
  // round every rank runs as many forward passes as the round's largest batch needs, the
  // missing ones as gathers alone.
  const auto passes = [&](size_t i) {
    return i < batches.size() ? (batches[i].batch + pass_rows_ - 1) / pass_rows_ : 0;
  };
  models::loss_sum mine;
  TROUPE_RETURN_IF_ERROR(zero3_->begin_step(false, 0));
  absl::Status failed;
  for (size_t round = 0; round * ranks_ < batches.size() && failed.ok(); ++round) {
    int most = 0;
    for (int r = 0; r < ranks_; ++r)
      most = std::max(most, passes(round * ranks_ + r));
    const size_t i = round * ranks_ + rank_;
    if (i < batches.size()) {
      absl::StatusOr<models::loss_sum> l =
          pipeline_->evaluate(params_.data<float>(), batches[i], nullptr);
      if (!l.ok()) {
        failed = l.status();
        break;
      }
      mine.sum += l->sum;
      mine.tokens += l->tokens;
    }
    for (int p = passes(i); p < most; ++p)
      zero3_->gather_pass();
  }
  const absl::Status ended = zero3_->end_step(false);
  TROUPE_RETURN_IF_ERROR(failed);
  TROUPE_RETURN_IF_ERROR(ended);
  return mine;
}

}  // namespace troupe::actors
