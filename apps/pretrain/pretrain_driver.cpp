#include "apps/pretrain/pretrain_driver.hpp"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace troupe::apps {
namespace {

double seconds(pretrain_driver::clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

pretrain_driver::pretrain_driver(pretrain_schedule schedule, std::function<clock::time_point()> now)
    : schedule_(schedule), now_(std::move(now)), step_(schedule.first_step) {}

bool pretrain_driver::all_answered() {
  return ++answers_ == schedule_.ranks;
}

std::vector<pretrain_driver::command> pretrain_driver::start() {
  started_ = now_();
  return next_or_finish();
}

std::vector<pretrain_driver::command> pretrain_driver::on_step(int rank,
                                                               const actor::step_report& r) {
  if (phase_ != phase::stepping) return {};
  if (rank == 0) last_ = r;
  // The slowest rank sets the step's pace: keep the largest time of each kind.
  step_data_s_ = std::max(step_data_s_, r.data_s);
  step_compute_s_ = std::max(step_compute_s_, r.compute_s);
  step_comm_s_ = std::max(step_comm_s_, r.comm_s);
  if (!all_answered()) return {};
  return after_step();
}

std::vector<pretrain_driver::command> pretrain_driver::after_step() {
  step_ = last_.step;
  const double step_s = seconds(now_() - step_started_);
  std::vector<command> out;
  out.push_back(
      metrics_row{{{"step", step_},
                   {"loss", last_.loss},
                   {"lr", last_.lr},
                   {"grad_norm", last_.grad_norm},
                   {"tokens_per_s", step_s > 0 ? schedule_.tokens_per_step / step_s : 0.0},
                   {"time_s",
                    {{"step", step_s},
                     {"data", step_data_s_},
                     {"compute", step_compute_s_},
                     {"comm", step_comm_s_}}}}});
  const bool last_step = step_ >= schedule_.end();
  const bool eval_due =
      last_step || (schedule_.eval_every > 0 && step_ % schedule_.eval_every == 0);
  if (eval_due) {
    phase_ = phase::evaluating;
    answers_ = 0;
    out.push_back(eval_all{});
    return out;
  }
  auto rest = after_eval();
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

std::vector<pretrain_driver::command> pretrain_driver::on_eval(int rank, double loss) {
  if (phase_ != phase::evaluating) return {};
  if (rank == 0) val_loss_ = loss;
  if (!all_answered()) return {};
  std::vector<command> out = {metrics_row{{{"step", step_}, {"val_loss", val_loss_}}}};
  auto rest = after_eval();
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

std::vector<pretrain_driver::command> pretrain_driver::after_eval() {
  const bool last_step = step_ >= schedule_.end();
  const bool checkpoint_due =
      schedule_.checkpoint_every > 0 && (step_ % schedule_.checkpoint_every == 0 || last_step);
  std::vector<command> out;
  if (checkpoint_due) {
    saving_[step_];
    out.push_back(checkpoint_all{step_});
  }
  auto rest = next_or_finish();
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

std::vector<pretrain_driver::command> pretrain_driver::on_saved(
    const actor::checkpoint_shard& shard) {
  auto it = saving_.find(shard.step);
  if (done_ || it == saving_.end()) return {};
  it->second.shards.push_back(shard);
  if (static_cast<int>(it->second.shards.size()) < schedule_.ranks) return {};
  commit c{shard.step, {}, -1};
  double stall_s = 0, write_s = 0;  // the slowest rank's
  for (const auto& s : it->second.shards) {
    c.files.insert(c.files.end(), s.files.begin(), s.files.end());
    if (s.rank == 0) c.cursor = s.cursor;
    stall_s = std::max(stall_s, s.stall_s);
    write_s = std::max(write_s, s.write_s);
  }
  saving_.erase(it);
  committed_ = std::max(committed_, c.step);
  stall_s_ = std::max(stall_s_, stall_s);
  std::vector<command> out = {
      metrics_row{{{"step", c.step}, {"checkpoint", {{"stall_s", stall_s}, {"write_s", write_s}}}}},
      std::move(c)};
  if (phase_ == phase::draining && saving_.empty()) {
    auto rest = next_or_finish();
    out.insert(out.end(), rest.begin(), rest.end());
  }
  return out;
}

std::vector<pretrain_driver::command> pretrain_driver::next_or_finish() {
  if (step_ >= schedule_.end()) {
    if (!saving_.empty()) {
      phase_ = phase::draining;  // finish once every checkpoint is committed
      return {};
    }
    phase_ = phase::finished;
    done_ = true;
    const double elapsed = seconds(now_() - started_);
    const int64_t trained = step_ - schedule_.first_step;
    nlohmann::json summary = {
        {"steps", step_},
        {"train_loss", last_.loss},
        {"val_loss", val_loss_},
        {"tokens_per_s", elapsed > 0 ? trained * schedule_.tokens_per_step / elapsed : 0.0},
        {"elapsed_s", elapsed}};
    if (committed_ >= 0) {
      summary["checkpoint_step"] = committed_;
      summary["checkpoint_stall_s"] = stall_s_;
    }
    return {finish{std::move(summary)}};
  }
  phase_ = phase::stepping;
  answers_ = 0;
  step_data_s_ = step_compute_s_ = step_comm_s_ = 0;
  step_started_ = now_();
  return {step_all{}};
}

std::vector<pretrain_driver::command> pretrain_driver::stop() {
  if (done_ || stopped_) return {};
  // The step in flight (or, between a step and its evaluation, the step just done) is the last.
  const int64_t last = std::max<int64_t>(phase_ == phase::stepping ? step_ + 1 : step_, 1);
  if (last >= schedule_.end()) return {};  // it ends there anyway
  stopped_ = true;
  schedule_.stop_after = last;
  if (phase_ == phase::idle) return next_or_finish();
  return {};  // the answers in flight lead to the end
}

std::vector<pretrain_driver::command> pretrain_driver::on_error(int rank,
                                                                const absl::Status& error) {
  if (done_) return {};
  done_ = true;
  phase_ = phase::finished;
  return {fail{absl::Status(error.code(), absl::StrCat("trainer rank ", rank, " failed at step ",
                                                       step_ + 1, ": ", error.message()))}};
}

}  // namespace troupe::apps
