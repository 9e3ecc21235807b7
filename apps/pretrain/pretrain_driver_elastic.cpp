#include "apps/pretrain/pretrain_driver.hpp"

// The driver's elastic part (schedule.elastic): the group's generations, lost members, joiners
// and the waits below min. The loop they resume is in pretrain_driver.cpp.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/base/seconds.hpp"

namespace troupe::apps {
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

std::vector<pretrain_driver::command> pretrain_driver::after_regroup() {
  for (const auto& r : asking_.reports) {
    if (r.step != step_) {
      return fail_with(
          absl::InternalError(absl::StrCat("after regrouping, a trainer continues from step ",
                                           r.step, " but the committed step is ", step_)));
    }
  }
  formed_ = asking_.generation;
  formed_members_ = asking_.members;
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
  auto rest = regroup_or_wait();
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

actor::group_change::source pretrain_driver::state_source() const {
  using source = actor::group_change::source;
  const source rollback = restart_step() > 0 ? source::checkpoint : source::initial;
  if (formed_ == 0) return rollback;  // the first generation: a fresh run's, or a resume's
  if (!schedule_.elastic->sharded) return source::members;  // every rank holds everything
  const int n = static_cast<int>(formed_members_.size());
  const auto alive = [&](int i) {
    return std::find(members_.begin(), members_.end(), formed_members_[i]) != members_.end();
  };
  for (int i = 0; i < n; ++i) {
    // Rank i's shard is with it, or in the replica that rank i - 1 keeps.
    if (!alive(i) && !(schedule_.elastic->replicas && n > 1 && alive((i + n - 1) % n))) {
      return rollback;
    }
  }
  return source::members;
}

std::vector<pretrain_driver::command> pretrain_driver::regroup_or_wait() {
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
  using source = actor::group_change::source;
  const source from = state_source();
  std::vector<command> out;
  if (from != source::members && formed_ > 0) {
    const int64_t restart = restart_step();
    out.push_back(note{
        run::severity::warning,
        "rolled_back",
        absl::StrCat("a lost rank's optimizer shard has no replica (parallel.shard_replicas), so ",
                     members_.size(), " rank", members_.size() == 1 ? "" : "s", " go back to ",
                     from == source::checkpoint ? absl::StrCat("checkpoint ", restart)
                                                : std::string("the initial state"),
                     " in place and redo ", step_ - restart, " step",
                     step_ - restart == 1 ? "" : "s"),
        {{"step", restart}, {"redone", step_ - restart}}});
    step_ = restart;
    resume_ = then::next_step;
  }
  auto asked = ask(phase::regrouping);
  out.insert(out.end(), asked.begin(), asked.end());
  out.push_back(regroup_all{generation_, from, formed_, step_, step_ * schedule_.batch});
  return out;
}

// Every survivor has answered the request a lost member interrupted.
std::vector<pretrain_driver::command> pretrain_driver::recover() {
  std::vector<command> out;
  if (phase_ == phase::stepping) {
    // The survivors the step completed on hold the step every rank's gradients made; with
    // ZeRO-1/2 it stands only when it completed on all of them (each holds only its shard).
    int survivors = 0, completed = 0, committed_on = -1;
    for (size_t r = 0; r < asking_.ok.size(); ++r) {
      if (std::find(members_.begin(), members_.end(), asking_.members[r]) == members_.end()) {
        continue;
      }
      ++survivors;
      if (!asking_.ok[r]) continue;
      ++completed;
      if (committed_on < 0) committed_on = static_cast<int>(r);
    }
    const bool commit =
        schedule_.elastic->sharded ? completed > 0 && completed == survivors : completed > 0;
    if (commit) {
      last_ = asking_.reports[committed_on];
      step_ = last_.step;  // the state every rank continues from
      resume_ = then::after_step;
    } else {
      resume_ = then::next_step;
      out.push_back(
          note{run::severity::warning,
               "step_redone",
               absl::StrCat("step ", step_ + 1, " is redone by ", members_.size(), " rank",
                            members_.size() == 1 ? "" : "s",
                            completed == 0 ? " (no rank applied it)"
                                           : " (it did not complete on every rank; those that "
                                             "applied it roll it back)"),
               {{"step", step_ + 1}, {"world_size", members_.size()}}});
    }
  } else if (phase_ == phase::evaluating) {
    resume_ = then::redo_eval;
  }  // a regroup interrupted keeps what it was to be followed by
  auto rest = regroup_or_wait();
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

std::vector<pretrain_driver::command> pretrain_driver::on_lost(const std::string& name,
                                                               const std::string& why) {
  if (done_) return {};
  if (!schedule_.elastic) {
    auto it = std::find(members_.begin(), members_.end(), name);
    if (it == members_.end()) return {};
    return fail_with(absl::UnavailableError(absl::StrCat(
        name, place_of(static_cast<int>(it - members_.begin())), " was lost: ", why,
        "; a fixed dp x pp x tp grid cannot go on without it (roles.trainer.elastic regroups the "
        "data-parallel dimension only)")));
  }
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
    auto rest = regroup_or_wait();
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

}  // namespace troupe::apps
