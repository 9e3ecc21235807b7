#include "apps/pretrain/pretrain_driver.hpp"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/base/seconds.hpp"

namespace troupe::apps {
pretrain_driver::pretrain_driver(pretrain_schedule schedule, std::function<clock::time_point()> now,
                                 std::vector<std::string> members)
    : schedule_(schedule),
      now_(std::move(now)),
      step_(schedule.first_step),
      members_(std::move(members)) {
  if (members_.empty() && !schedule_.elastic) {
    for (int r = 0; r < schedule_.ranks; ++r)
      members_.push_back(absl::StrCat("trainer/", r));
  }
}

bool pretrain_driver::asking::all_answered() const {
  return std::all_of(answered.begin(), answered.end(), [](bool a) { return a; });
}

std::vector<pretrain_driver::command> pretrain_driver::ask(phase p) {
  phase_ = p;
  const size_t n = members_.size();
  asking_ = {generation_,
             members_,
             std::vector<bool>(n),
             std::vector<bool>(n),
             std::vector<actor::step_report>(n),
             {}};
  if (p == phase::stepping) {
    step_data_s_ = step_compute_s_ = step_comm_s_ = step_replica_s_ = 0;
    step_started_ = now_();
    return {step_all{}};
  }
  if (p == phase::evaluating) return {eval_all{}};
  return {};
}

bool pretrain_driver::current(phase p, uint64_t generation) const {
  return !done_ && phase_ == p && generation == asking_.generation;
}

std::vector<pretrain_driver::command> pretrain_driver::start() {
  started_ = now_();
  if (!schedule_.elastic) return next_or_finish();
  generation_ = 1;
  resume_ = then::next_step;
  return regroup_or_wait();
}

std::vector<pretrain_driver::command> pretrain_driver::on_step(int rank,
                                                               const actor::step_report& r,
                                                               uint64_t generation) {
  if (!current(phase::stepping, generation) || rank < 0 ||
      rank >= static_cast<int>(asking_.answered.size()) || asking_.answered[rank]) {
    return {};
  }
  asking_.answered[rank] = asking_.ok[rank] = true;
  asking_.reports[rank] = r;
  // The slowest rank sets the step's pace: keep the largest time of each kind.
  step_data_s_ = std::max(step_data_s_, r.data_s);
  step_compute_s_ = std::max(step_compute_s_, r.compute_s);
  step_comm_s_ = std::max(step_comm_s_, r.comm_s);
  step_replica_s_ = std::max(step_replica_s_, r.replica_s);
  return asking_.all_answered() ? after_answers() : std::vector<command>{};
}

std::vector<pretrain_driver::command> pretrain_driver::on_eval(int rank,
                                                               const actor::eval_report& report,
                                                               uint64_t generation) {
  if (!current(phase::evaluating, generation) || rank < 0 ||
      rank >= static_cast<int>(asking_.answered.size()) || asking_.answered[rank]) {
    return {};
  }
  asking_.answered[rank] = asking_.ok[rank] = true;
  held_out_ = report;
  return asking_.all_answered() ? after_answers() : std::vector<command>{};
}

std::vector<pretrain_driver::command> pretrain_driver::on_error(int rank, const absl::Status& error,
                                                                uint64_t generation) {
  if (done_) return {};
  const absl::Status named(error.code(),
                           absl::StrCat("trainer rank ", rank, place_of(rank), " failed at step ",
                                        step_ + 1, ": ", error.message()));
  if (!schedule_.elastic) return fail_with(named);
  const bool asked =
      phase_ == phase::stepping || phase_ == phase::evaluating || phase_ == phase::regrouping;
  if (!asked || generation != asking_.generation || rank < 0 ||
      rank >= static_cast<int>(asking_.answered.size()) || asking_.answered[rank]) {
    return {};
  }
  asking_.answered[rank] = true;
  if (asking_.failure.ok()) asking_.failure = named;
  return asking_.all_answered() ? after_answers() : std::vector<command>{};
}

std::vector<pretrain_driver::command> pretrain_driver::after_answers() {
  if (std::find(asking_.ok.begin(), asking_.ok.end(), false) != asking_.ok.end()) {
    // Some rank failed: a lost member explains it, or one is expected to be declared soon.
    if (lost_during_request_) return recover();
    failed_at_ = now_();
    return {wake_after{schedule_.elastic->loss_wait}};
  }
  switch (phase_) {
    case phase::stepping: {
      last_ = asking_.reports[0];
      if (absl::Status s = check_samples(); !s.ok()) return fail_with(s);
      return after_step();
    }
    case phase::evaluating: {
      val_loss_ = held_out_.loss;
      nlohmann::json row = {{"step", step_}, {"val_loss", val_loss_}};
      add_pair_metrics(row, "val_", held_out_.pairs);
      std::vector<command> out = {metrics_row{std::move(row)}};
      auto rest = after_eval();
      out.insert(out.end(), rest.begin(), rest.end());
      return out;
    }
    case phase::regrouping:
      return after_regroup();
    default:
      return {};
  }
}

absl::Status pretrain_driver::check_samples() const {
  if (schedule_.batch <= 0) return absl::OkStatus();
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const auto& r : asking_.reports) {
    if (r.samples > 0) ranges.emplace_back(r.first_sample, r.samples);
  }
  if (ranges.empty()) return absl::OkStatus();  // ranks that do not say
  std::sort(ranges.begin(), ranges.end());
  const int64_t begin = (last_.step - 1) * schedule_.batch;
  int64_t next = begin;
  for (const auto& [first, n] : ranges) {
    if (first != next) break;
    next += n;
  }
  if (next == begin + schedule_.batch && ranges.front().first == begin) return absl::OkStatus();
  std::string got;
  for (const auto& [first, n] : ranges)
    absl::StrAppend(&got, got.empty() ? "" : ", ", "[", first, ", ", first + n, ")");
  return absl::DataLossError(absl::StrCat("step ", last_.step, " trained on samples ", got,
                                          " instead of exactly [", begin, ", ",
                                          begin + schedule_.batch, ")"));
}

void pretrain_driver::add_pair_metrics(nlohmann::json& row, const std::string& prefix,
                                       const actor::pair_metrics& m) const {
  if (m.count == 0) return;
  if (!schedule_.dpo) {  // a reward model's
    row[prefix + "accuracy"] = m.accuracy;
    row[prefix + "reward_gap"] = m.margin;
    return;
  }
  for (const auto& [name, value] : {std::pair{"rewards/chosen", m.reward_chosen},
                                    {"rewards/rejected", m.reward_rejected},
                                    {"rewards/accuracies", m.accuracy},
                                    {"rewards/margins", m.margin},
                                    {"logps/chosen", m.logp_chosen},
                                    {"logps/rejected", m.logp_rejected}}) {
    row[prefix + name] = value;
  }
}

std::vector<pretrain_driver::command> pretrain_driver::after_step() {
  step_ = last_.step;
  const double step_s = seconds(now_() - step_started_);
  std::vector<command> out;
  nlohmann::json row = {{"step", step_},
                        {"loss", last_.loss},
                        {"lr", last_.lr},
                        {"grad_norm", last_.grad_norm},
                        {"world_size", members_.size()},
                        {"tokens_per_s", step_s > 0 ? schedule_.tokens_per_step / step_s : 0.0},
                        {"time_s",
                         {{"step", step_s},
                          {"data", step_data_s_},
                          {"compute", step_compute_s_},
                          {"comm", step_comm_s_}}}};
  if (schedule_.elastic && schedule_.elastic->replicas) {
    row["time_s"]["replica"] = step_replica_s_;  // of comm: the shard replicas' refresh
  }
  if (schedule_.batch > 0) row["first_sample"] = (step_ - 1) * schedule_.batch;
  if (schedule_.dpo) add_pair_metrics(row, "", last_.pairs);
  if (schedule_.stages > 1) {
    // Replica 0's stages: what each computed and waited, and the share of the step they were
    // idle, against the schedule's with ideal costs (1F1B's and GPipe's (p - 1) / (m + p - 1)).
    nlohmann::json busy = nlohmann::json::array(), idle = nlohmann::json::array();
    double busy_sum = 0, idle_sum = 0;
    for (int s = 0; s < schedule_.stages; ++s) {
      const size_t rank = static_cast<size_t>(s) * schedule_.tensor;  // its tensor-parallel rank 0
      if (rank >= asking_.reports.size()) break;
      busy.push_back(asking_.reports[rank].stage_busy_s);
      idle.push_back(asking_.reports[rank].stage_idle_s);
      busy_sum += asking_.reports[rank].stage_busy_s;
      idle_sum += asking_.reports[rank].stage_idle_s;
    }
    stages_busy_s_ += busy_sum;
    stages_idle_s_ += idle_sum;
    row["pipeline"] = {{"busy_s", busy},
                       {"idle_s", idle},
                       {"bubble", busy_sum + idle_sum > 0 ? idle_sum / (busy_sum + idle_sum) : 0.0},
                       {"bubble_theory", schedule_.ideal_bubble}};
  }
  out.push_back(metrics_row{std::move(row)});
  const bool last_step = step_ >= schedule_.end();
  const bool eval_due =
      last_step || (schedule_.eval_every > 0 && step_ % schedule_.eval_every == 0);
  if (eval_due) {
    auto rest = ask(phase::evaluating);
    out.insert(out.end(), rest.begin(), rest.end());
    return out;
  }
  auto rest = after_eval();
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

std::vector<pretrain_driver::command> pretrain_driver::after_eval() {
  const bool last_step = step_ >= schedule_.end();
  const bool checkpoint_due = schedule_.checkpoint_every > 0 &&
                              (step_ % schedule_.checkpoint_every == 0 || last_step) &&
                              committed_ < step_ && !saving_.contains(step_);
  std::vector<command> out;
  if (checkpoint_due) {
    saving_[step_].expected = members_.size();
    out.push_back(checkpoint_all{step_, members_});
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
  if (it->second.shards.size() < it->second.expected) return {};
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

std::vector<pretrain_driver::command> pretrain_driver::on_save_failed(int64_t step, int rank,
                                                                      const absl::Status& error) {
  if (done_ || !saving_.contains(step)) return {};
  if (schedule_.elastic && absl::IsUnavailable(error)) return {};
  return fail_with(absl::Status(
      error.code(), absl::StrCat("trainer rank ", rank, place_of(rank),
                                 " could not save checkpoint ", step, ": ", error.message())));
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
        {"world_size", members_.size()},
        {"tokens_per_s", elapsed > 0 ? trained * schedule_.tokens_per_step / elapsed : 0.0},
        {"elapsed_s", elapsed}};
    add_pair_metrics(summary, "val_", held_out_.pairs);
    if (stages_busy_s_ + stages_idle_s_ > 0) {  // over this launch's steps
      summary["pipeline_bubble"] = stages_idle_s_ / (stages_busy_s_ + stages_idle_s_);
      summary["pipeline_bubble_theory"] = schedule_.ideal_bubble;
    }
    if (committed_ >= 0) {
      summary["checkpoint_step"] = committed_;
      summary["checkpoint_stall_s"] = stall_s_;
    }
    return {finish{std::move(summary)}};
  }
  if (schedule_.elastic) {
    // A step boundary: joiners are admitted, and a group that changed meanwhile is re-formed.
    if (!joiners_.empty()) return admit_joiners();
    if (formed_ != generation_) {
      resume_ = then::next_step;
      return regroup_or_wait();
    }
  }
  return ask(phase::stepping);
}

std::vector<pretrain_driver::command> pretrain_driver::stop() {
  if (done_ || stopped_) return {};
  // The step in flight (or, between a step and its evaluation, the step just done) is the last.
  const int64_t last = std::max<int64_t>(phase_ == phase::stepping ? step_ + 1 : step_, 1);
  if (last >= schedule_.end()) return {};  // it ends there anyway
  stopped_ = true;
  schedule_.stop_after = last;
  // Nothing in flight leads to the end: waiting for workers (elastic), or not started.
  if (phase_ == phase::idle || phase_ == phase::waiting) return next_or_finish();
  return {};  // the answers in flight lead to the end
}

std::string describe_place(int rank, int pp, int tp) {
  if (pp == 1 && tp == 1) return "";
  const grid_place g = grid_place_of(rank, pp, tp);
  return absl::StrCat(" (replica ", g.replica, pp > 1 ? absl::StrCat(", stage ", g.stage) : "",
                      tp > 1 ? absl::StrCat(", tp rank ", g.tp_rank) : "", ")");
}

std::string describe_grid(int dp, int pp, int tp) {
  return absl::StrCat("dp ", dp, pp > 1 ? absl::StrCat(" x pp ", pp) : "",
                      tp > 1 ? absl::StrCat(" x tp ", tp) : "");
}

std::string pretrain_driver::place_of(int rank) const {
  return describe_place(rank, schedule_.stages, schedule_.tensor);
}

std::vector<pretrain_driver::command> pretrain_driver::fail_with(absl::Status why) {
  if (done_) return {};
  done_ = true;
  phase_ = phase::finished;
  return {fail{std::move(why)}};
}

}  // namespace troupe::apps
