#include "apps/pretrain/pretrain_driver.hpp"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace troupe::apps {
namespace {

double seconds(pretrain_driver::clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

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
    step_data_s_ = step_compute_s_ = step_comm_s_ = 0;
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
  return regroup_or_wait(0);
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
  return asking_.all_answered() ? after_answers() : std::vector<command>{};
}

std::vector<pretrain_driver::command> pretrain_driver::on_eval(int rank, double loss,
                                                               uint64_t generation) {
  if (!current(phase::evaluating, generation) || rank < 0 ||
      rank >= static_cast<int>(asking_.answered.size()) || asking_.answered[rank]) {
    return {};
  }
  asking_.answered[rank] = asking_.ok[rank] = true;
  asking_.reports[rank].loss = loss;
  return asking_.all_answered() ? after_answers() : std::vector<command>{};
}

std::vector<pretrain_driver::command> pretrain_driver::on_regrouped(
    int rank, const absl::StatusOr<int64_t>& steps, uint64_t generation) {
  if (!current(phase::regrouping, generation) || rank < 0 ||
      rank >= static_cast<int>(asking_.answered.size()) || asking_.answered[rank]) {
    return {};
  }
  if (!steps.ok()) return on_error(rank, steps.status(), generation);
  asking_.answered[rank] = asking_.ok[rank] = true;
  asking_.reports[rank].step = *steps;
  return asking_.all_answered() ? after_answers() : std::vector<command>{};
}

std::vector<pretrain_driver::command> pretrain_driver::on_error(int rank, const absl::Status& error,
                                                                uint64_t generation) {
  if (done_) return {};
  const absl::Status named(error.code(), absl::StrCat("trainer rank ", rank, " failed at step ",
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
      val_loss_ = asking_.reports[0].loss;
      std::vector<command> out = {metrics_row{{{"step", step_}, {"val_loss", val_loss_}}}};
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

std::vector<pretrain_driver::command> pretrain_driver::after_regroup() {
  for (const auto& r : asking_.reports) {
    if (r.step != step_) {
      return fail_with(
          absl::InternalError(absl::StrCat("after regrouping, a trainer continues from step ",
                                           r.step, " but the committed step is ", step_)));
    }
  }
  formed_ = asking_.generation;
  lost_during_request_ = false;
  std::vector<command> out;
  const bool first = formed_ == 1;
  if (recovering_) out.push_back(recovered{seconds(now_() - lost_at_)});
  recovering_ = false;
  out.push_back(group_whole{});
  out.push_back(note{
      run::severity::info,
      first ? "group_formed" : "group_rebuilt",
      absl::StrCat(
          "trainer group generation ", formed_, ": ", members_.size(), " rank",
          members_.size() == 1 ? "" : "s",
          first ? "" : absl::StrFormat(", %.2f s after the change", seconds(now_() - lost_at_))),
      {{"generation", formed_},
       {"world_size", members_.size()},
       {"seconds", first ? 0.0 : seconds(now_() - lost_at_)}}});
  std::vector<command> rest;
  switch (resume_) {
    case then::next_step:
      rest = next_or_finish();
      break;
    case then::after_step:
      rest = after_step();
      break;
    case then::redo_eval:
      rest = ask(phase::evaluating);
      break;
    case then::after_eval:
      rest = after_eval();
      break;
  }
  resume_ = then::next_step;
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
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
  if (schedule_.batch > 0) row["first_sample"] = (step_ - 1) * schedule_.batch;
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
      return regroup_or_wait(0);
    }
  }
  return ask(phase::stepping);
}

std::vector<pretrain_driver::command> pretrain_driver::admit_joiners() {
  std::vector<command> out;
  for (const auto& name : joiners_) {
    members_.push_back(name);
    out.push_back(note{
        run::severity::info,
        "rank_joined",
        absl::StrCat(name, " joins as trainer rank ", members_.size() - 1, " at step ", step_ + 1),
        {{"name", name}, {"rank", members_.size() - 1}, {"step", step_ + 1}}});
  }
  joiners_.clear();
  ++generation_;
  lost_at_ = now_();
  resume_ = then::next_step;
  auto rest = regroup_or_wait(0);
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

std::vector<pretrain_driver::command> pretrain_driver::regroup_or_wait(int source) {
  if (static_cast<int>(members_.size()) < schedule_.elastic->min) {
    phase_ = phase::waiting;
    waiting_since_ = now_();
    return {note{run::severity::warning,
                 "waiting_for_workers",
                 absl::StrCat(members_.size(), " trainer", members_.size() == 1 ? "" : "s",
                              " left, below roles.trainer.elastic.min ", schedule_.elastic->min,
                              "; waiting for a worker to join"),
                 {{"world_size", members_.size()}, {"min", schedule_.elastic->min}}},
            wake_after{schedule_.elastic->worker_wait}};
  }
  auto out = ask(phase::regrouping);
  out.push_back(regroup_all{generation_, source, step_ * schedule_.batch});
  return out;
}

// Every survivor has answered the request a lost member interrupted.
std::vector<pretrain_driver::command> pretrain_driver::recover() {
  std::vector<command> out;
  int source = 0;
  if (phase_ == phase::stepping) {
    // A survivor whose step completed holds the step every rank's gradients made.
    int committed_on = -1;
    for (size_t r = 0; r < asking_.ok.size() && committed_on < 0; ++r) {
      if (!asking_.ok[r]) continue;
      auto it = std::find(members_.begin(), members_.end(), asking_.members[r]);
      if (it != members_.end()) {
        committed_on = static_cast<int>(r);
        source = static_cast<int>(it - members_.begin());
      }
    }
    if (committed_on >= 0) {
      last_ = asking_.reports[committed_on];
      step_ = last_.step;  // the state every rank continues from
      resume_ = then::after_step;
    } else {
      resume_ = then::next_step;
      out.push_back(
          note{run::severity::warning,
               "step_redone",
               absl::StrCat("step ", step_ + 1, " is redone by ", members_.size(), " rank",
                            members_.size() == 1 ? "" : "s", " (no rank applied it)"),
               {{"step", step_ + 1}, {"world_size", members_.size()}}});
    }
  } else if (phase_ == phase::evaluating) {
    resume_ = then::redo_eval;
  }  // a regroup interrupted keeps what it was to be followed by
  auto rest = regroup_or_wait(source);
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

std::vector<pretrain_driver::command> pretrain_driver::on_lost(const std::string& name,
                                                               const std::string& why) {
  if (done_ || !schedule_.elastic) return {};
  if (auto j = std::find(joiners_.begin(), joiners_.end(), name); j != joiners_.end()) {
    joiners_.erase(j);
    return {};
  }
  auto it = std::find(members_.begin(), members_.end(), name);
  if (it == members_.end()) return {};
  const int rank = static_cast<int>(it - members_.begin());
  members_.erase(it);
  ++generation_;
  lost_at_ = now_();
  recovering_ = true;
  std::vector<command> out = {
      note{run::severity::warning,
           "rank_lost",
           absl::StrCat("trainer rank ", rank, " (", name, ") lost: ", why, "; ", members_.size(),
                        " left"),
           {{"name", name}, {"rank", rank}, {"world_size", members_.size()}, {"why", why}}}};
  if (!saving_.empty()) {
    // Its shards would never come; the next checkpoint is taken by the new group.
    out.push_back(note{run::severity::warning,
                       "checkpoint_abandoned",
                       absl::StrCat("checkpoint of step ", saving_.begin()->first,
                                    " abandoned: ", name, " did not save its part"),
                       {{"step", saving_.begin()->first}}});
    saving_.clear();
    if (phase_ == phase::draining) resume_ = then::after_eval;
  }
  if (phase_ == phase::stepping || phase_ == phase::evaluating || phase_ == phase::regrouping) {
    lost_during_request_ = true;
    auto asked = std::find(asking_.members.begin(), asking_.members.end(), name);
    if (asked != asking_.members.end()) {
      const size_t r = asked - asking_.members.begin();
      if (!asking_.answered[r]) {
        asking_.answered[r] = true;
        asking_.ok[r] = false;
        if (asking_.failure.ok()) asking_.failure = absl::UnavailableError(name + " was lost");
      }
    }
    if (!asking_.all_answered()) {
      out.push_back(abort_all{generation_});  // survivors blocked on it are released
      return out;
    }
    auto rest = recover();
    out.insert(out.end(), rest.begin(), rest.end());
    return out;
  }
  if (phase_ == phase::draining) {
    auto rest = regroup_or_wait(0);
    out.insert(out.end(), rest.begin(), rest.end());
  }
  return out;  // waiting: still waiting, for one more
}

std::vector<pretrain_driver::command> pretrain_driver::on_joined(const std::string& name) {
  if (done_ || !schedule_.elastic) return {};
  if (std::find(members_.begin(), members_.end(), name) != members_.end() ||
      std::find(joiners_.begin(), joiners_.end(), name) != joiners_.end()) {
    return {};
  }
  if (static_cast<int>(members_.size() + joiners_.size()) >= schedule_.elastic->max) {
    return {note{run::severity::warning,
                 "rank_not_admitted",
                 absl::StrCat(name, " is not admitted: the group is at roles.trainer.elastic.max ",
                              schedule_.elastic->max),
                 {{"name", name}}}};
  }
  joiners_.push_back(name);
  if (phase_ == phase::waiting) return admit_joiners();
  return {note{run::severity::info,
               "rank_joining",
               absl::StrCat(name, " joins the trainer group at the next step boundary"),
               {{"name", name}}}};
}

std::vector<pretrain_driver::command> pretrain_driver::on_timer() {
  if (done_ || !schedule_.elastic) return {};
  const auto now = now_();
  if (phase_ == phase::waiting && now - waiting_since_ >= schedule_.elastic->worker_wait) {
    return fail_with(absl::UnavailableError(
        absl::StrCat("only ", members_.size(), " trainer", members_.size() == 1 ? "" : "s",
                     " left, below roles.trainer.elastic.min ", schedule_.elastic->min,
                     ", and no worker joined within ", seconds(schedule_.elastic->worker_wait),
                     " s (cluster.worker_wait_s); start one with "
                     "`troupe worker --join HEAD`, or relaunch with --resume RUN_DIR")));
  }
  const bool asked =
      phase_ == phase::stepping || phase_ == phase::evaluating || phase_ == phase::regrouping;
  if (asked && asking_.all_answered() && !asking_.failure.ok() && !lost_during_request_ &&
      now - failed_at_ >= schedule_.elastic->loss_wait) {
    return fail_with(asking_.failure);  // a failure no lost rank explains
  }
  return {};
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

std::vector<pretrain_driver::command> pretrain_driver::fail_with(absl::Status why) {
  if (done_) return {};
  done_ = true;
  phase_ = phase::finished;
  return {fail{std::move(why)}};
}

}  // namespace troupe::apps
