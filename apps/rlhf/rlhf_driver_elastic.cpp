#include "apps/rlhf/rlhf_driver.hpp"

// The controller's trainer groups: the requests asked of the policy's and the critic's ranks and
// their answers, and, for an elastic group (roles.policy.elastic, roles.critic.elastic), its
// generations: a lost member leaves at once, the survivors are released from the collective it
// blocks, the group is formed anew without it and redoes what it did not complete; a joiner is
// admitted at the next RL step. The step they resume is in rlhf_driver.cpp.

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/base/seconds.hpp"

namespace troupe::apps::rlhf {
namespace {

std::string plural(size_t n, const char* what) {
  return absl::StrCat(n, " ", what, n == 1 ? "" : "s");
}

}  // namespace

bool rlhf_driver::trainer_group::all_answered() const {
  return std::all_of(answered.begin(), answered.end(), [](bool a) { return a; });
}

void rlhf_driver::set_members(bool critic, std::vector<std::string> names) {
  groups_[critic].members = std::move(names);
}

std::vector<rlhf_driver::command> rlhf_driver::when_formed(
    trainer_group& g, std::function<std::vector<command>()> make) {
  if (!g.elastic || (g.formed == g.generation && g.asked == request::none)) return make();
  g.waiting.push_back(std::move(make));
  return g.asked == request::none ? regroup(g) : std::vector<command>{};
}

std::vector<rlhf_driver::command> rlhf_driver::ask_group(
    trainer_group& g, request what, std::function<std::vector<command>()> make) {
  const bool formed = !g.elastic || (g.formed == g.generation && g.asked == request::none);
  if (what != request::regroup && !formed) {
    return when_formed(
        g, [this, &g, what, make = std::move(make)] { return ask_group(g, what, make); });
  }
  g.asked = what;
  g.asked_generation = g.generation;
  g.asked_members = g.members;
  g.answered.assign(g.members.size(), false);
  g.ok.assign(g.members.size(), false);
  g.reports.assign(g.members.size(), {});
  g.regrouped_steps.assign(g.members.size(), -1);
  g.failure = absl::OkStatus();
  g.lost_member = false;
  return make();
}

bool rlhf_driver::take_answer(trainer_group& g, request what, int rank, uint64_t generation,
                              const absl::Status& status) {
  if (g.asked != what || generation != g.asked_generation || rank < 0 ||
      rank >= static_cast<int>(g.answered.size()) || g.answered[rank]) {
    return false;
  }
  g.answered[rank] = true;
  g.ok[rank] = status.ok();
  if (!status.ok() && g.failure.ok()) {
    g.failure =
        absl::Status(status.code(), absl::StrCat(g.asked_members[rank], ": ", status.message()));
    g.failed_at = now_();
  }
  return true;
}

std::optional<std::vector<rlhf_driver::command>> rlhf_driver::settle(trainer_group& g) {
  const bool every_ok = std::all_of(g.ok.begin(), g.ok.end(), [](bool ok) { return ok; });
  if (every_ok && !g.lost_member) {
    g.asked = request::none;
    return std::nullopt;
  }
  if (!g.lost_member) {  // a failure no loss explains (yet)
    if (!g.elastic) return failed(g.failure);
    return std::vector<command>{wake_after{schedule_.loss_wait}};
  }
  const request what = g.asked;
  g.asked = request::none;
  std::vector<command> out;
  if (what == request::update) {
    // Every rank's gradients were in the ring's sum on a survivor that completed the step: it
    // holds the committed step, and the others take its state as the group forms again.
    // Otherwise the step is redone from the state before it, on the same mini-batch.
    int committed_on = -1;
    for (size_t r = 0; r < g.ok.size() && committed_on < 0; ++r) {
      const bool survivor =
          std::find(g.members.begin(), g.members.end(), g.asked_members[r]) != g.members.end();
      if (survivor && g.ok[r]) committed_on = static_cast<int>(r);
    }
    update_track& track = tracks_[g.critic];
    if (committed_on >= 0) {
      g.steps = g.reports[committed_on].step;
      track.reports.push_back(g.reports[committed_on]);
      ++track.index;
    } else {
      out.push_back(
          note{run::severity::warning,
               "step_redone",
               absl::StrCat(g.critic ? "critic" : "policy", " optimizer step ", g.steps + 1,
                            " of RL step ", step_ + 1, " is redone by ",
                            plural(g.members.size(), "rank"), " (no survivor applied it)"),
               {{"role", g.critic ? "critic" : "policy"},
                {"step", step_ + 1},
                {"optimizer_step", g.steps + 1},
                {"world_size", g.members.size()}}});
    }
    const bool more = track.index < schedule_.updates_per_step(g.critic);
    if (more) {
      g.waiting.push_back([this, critic = g.critic] { return next_update(critic); });
    } else {
      track.active = false;
      row_[g.critic ? "timing_s/update_critic" : "timing_s/update_actor"] =
          seconds_since(phase_started_);
    }
    auto rest = regroup(g);
    out.insert(out.end(), rest.begin(), rest.end());
    if (!more && !tracks_[!g.critic].active) {
      auto end = end_step();
      out.insert(out.end(), end.begin(), end.end());
    }
    return out;
  }
  if (what == request::log_probs) {  // asked again of the new group, the rows split anew
    g.waiting.push_back([this, critic = g.critic] { return ask_log_probs(critic); });
  }
  // A regroup cut short by a loss is asked again, from the same basis.
  auto rest = regroup(g);
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

std::vector<rlhf_driver::command> rlhf_driver::regroup(trainer_group& g) {
  if (phase_ == phase::finished) return {};
  const auto& e = *g.elastic;
  if (g.size() < e.min) {
    g.below_min = true;
    g.waiting_since = now_();
    const std::string role = g.critic ? "critic" : "policy";
    return {note{run::severity::warning,
                 "waiting_for_workers",
                 absl::StrCat(plural(g.members.size(), role.c_str()), " left, below roles.", role,
                              ".elastic.min ", e.min, "; waiting for a worker to join"),
                 {{"role", role}, {"world_size", g.members.size()}, {"min", e.min}}},
            wake_after{schedule_.worker_wait}};
  }
  g.below_min = false;
  using source = actor::group_change::source;
  const source from = g.formed > 0          ? source::members
                      : resume_dir_.empty() ? source::initial
                                            : source::checkpoint;
  if (from == source::checkpoint && g.steps < 0) {
    return failed(absl::FailedPreconditionError(absl::StrCat(
        "--resume ", resume_dir_, ": its manifest's meta has no ", g.critic ? "critic" : "policy",
        "_optimizer_steps (a checkpoint of an older troupe), which an elastic group restores at; "
        "resume it with a fixed group (roles.",
        g.critic ? "critic" : "policy", ".count)")));
  }
  return ask_group(g, request::regroup, [&g, from, this] {
    return std::vector<command>{regroup_all{g.critic, g.generation, from, g.formed, g.steps,
                                            from == source::checkpoint ? resume_dir_ : ""}};
  });
}

std::vector<rlhf_driver::command> rlhf_driver::on_regrouped(bool critic, int rank,
                                                            const absl::StatusOr<int64_t>& steps,
                                                            uint64_t generation) {
  trainer_group& g = groups_[critic];
  if (phase_ == phase::finished ||
      !take_answer(g, request::regroup, rank, generation, steps.status())) {
    return {};
  }
  if (steps.ok()) g.regrouped_steps[rank] = *steps;
  if (!g.all_answered()) return {};
  if (auto recovering = settle(g)) return *std::move(recovering);
  // Every member continues from the same optimizer step: the committed one, or a resume's.
  for (int64_t s : g.regrouped_steps) {
    if (s != g.regrouped_steps.front()) {
      return failed(
          absl::InternalError(absl::StrCat("after regrouping, the ", critic ? "critic" : "policy",
                                           " ranks continue from different optimizer steps (",
                                           g.regrouped_steps.front(), " and ", s, ")")));
    }
  }
  g.steps = g.regrouped_steps.front();
  return after_regroup(g);
}

std::vector<rlhf_driver::command> rlhf_driver::after_regroup(trainer_group& g) {
  const bool first = g.formed == 0;
  g.formed = g.generation;
  std::vector<command> out;
  const std::string role = g.critic ? "critic" : "policy";
  const double took = first ? 0.0 : seconds(now_() - g.lost_at);
  out.push_back(note{
      run::severity::info,
      first ? "group_formed" : "group_rebuilt",
      absl::StrCat(role, " group generation ", g.formed, ": ", plural(g.members.size(), "rank"),
                   first ? "" : absl::StrFormat(", %.2f s after the change", took)),
      {{"role", role},
       {"generation", g.formed},
       {"world_size", g.members.size()},
       {"members", g.members},
       {"seconds", took},
       {"recovered", g.recovering}}});
  g.recovering = false;
  auto waited = run_waiting(g);
  out.insert(out.end(), waited.begin(), waited.end());
  if (begin_ && (!groups_[0].elastic || groups_[0].formed > 0) &&
      (!groups_[1].elastic || groups_[1].formed > 0)) {  // the first generations: the run starts
    auto begun = std::exchange(begin_, nullptr)();
    out.insert(out.end(), begun.begin(), begun.end());
  }
  return out;
}

std::vector<rlhf_driver::command> rlhf_driver::run_waiting(trainer_group& g) {
  // In order; a request among them takes the group, and the rest wait for its answers (the
  // handler of its last answer runs them).
  std::vector<command> out;
  while (!g.waiting.empty() && g.asked == request::none) {
    std::function<std::vector<command>()> next = std::move(g.waiting.front());
    g.waiting.erase(g.waiting.begin());
    auto more = next();
    out.insert(out.end(), more.begin(), more.end());
  }
  return out;
}

std::vector<rlhf_driver::command> rlhf_driver::admit_joiners() {
  std::vector<command> out;
  for (trainer_group& g : groups_) {
    if (!g.elastic || g.joiners.empty()) continue;
    const std::string role = g.critic ? "critic" : "policy";
    for (const auto& name : g.joiners) {
      g.members.push_back(name);
      out.push_back(note{
          run::severity::info,
          "rank_joined",
          absl::StrCat(name, " joins as ", role, " rank ", g.members.size() - 1, " at RL step ",
                       step_ + 1),
          {{"name", name}, {"role", role}, {"rank", g.members.size() - 1}, {"step", step_ + 1}}});
    }
    g.joiners.clear();
    ++g.generation;
    g.lost_at = now_();
    if (g.asked == request::none) {
      auto rest = regroup(g);
      out.insert(out.end(), rest.begin(), rest.end());
    }
  }
  return out;
}

std::vector<rlhf_driver::command> rlhf_driver::on_rank_error(bool critic, int rank,
                                                             const absl::Status& error,
                                                             uint64_t generation) {
  trainer_group& g = groups_[critic];
  if (phase_ == phase::finished) return {};
  if (!g.elastic) return failed(error);
  if (g.asked ==
      request::none) {  // a checkpoint's part: it fails the run unless a loss explains it
    if (generation != g.generation || !g.stray.ok()) return {};
    g.stray = error;
    g.stray_at = now_();
    return {wake_after{schedule_.loss_wait}};
  }
  const request what = g.asked;
  if (!take_answer(g, what, rank, generation, error)) return {};
  if (!g.all_answered()) return {};
  return settle(g).value_or(std::vector<command>{});
}

std::vector<rlhf_driver::command> rlhf_driver::on_lost(const std::string& name,
                                                       const std::string& why) {
  if (phase_ == phase::finished) return {};
  for (trainer_group& g : groups_) {
    if (auto j = std::find(g.joiners.begin(), g.joiners.end(), name); j != g.joiners.end()) {
      g.joiners.erase(j);
      return {};
    }
    auto it = std::find(g.members.begin(), g.members.end(), name);
    if (it == g.members.end()) continue;
    const std::string role = g.critic ? "critic" : "policy";
    const bool rl_loop = phase_ != phase::idle && phase_ != phase::loading_policy &&
                         phase_ != phase::warming_up && phase_ != phase::saving_initial &&
                         phase_ != phase::loading_reference;
    if (!g.elastic || !rl_loop) {
      return failed(absl::UnavailableError(
          absl::StrCat(name, " was lost (", why, ")",
                       g.elastic ? absl::StrCat(" before the first RL step; an elastic ", role,
                                                " regroups from the first RL step on")
                                 : "")));
    }
    const int rank = static_cast<int>(it - g.members.begin());
    g.stray = absl::OkStatus();  // what failed of the group is explained
    g.members.erase(it);
    ++g.generation;
    g.lost_at = now_();
    g.recovering = true;
    std::vector<command> out = {note{run::severity::warning,
                                     "rank_lost",
                                     absl::StrCat(role, " rank ", rank, " (", name, ") lost: ", why,
                                                  "; ", g.members.size(), " left"),
                                     {{"name", name},
                                      {"role", role},
                                      {"rank", rank},
                                      {"world_size", g.members.size()},
                                      {"why", why}}}};
    if (!g.critic && phase_ == phase::syncing && name == sync_sender_) {
      // The weights' sender is gone: the new group's rank 0 sends them again.
      g.waiting.push_back([this] { return resync(); });
    }
    if (phase_ == phase::saving_checkpoint) {
      // Its part would never come: the new group takes the checkpoint again.
      out.push_back(note{run::severity::warning,
                         "checkpoint_redone",
                         absl::StrCat("the checkpoint of RL step ", step_, " is taken again: ",
                                      name, " was lost before it saved its part"),
                         {{"step", step_}}});
      g.waiting.push_back([this] { return save_again(); });
    }
    if (g.asked == request::none) {
      auto rest = regroup(g);
      out.insert(out.end(), rest.begin(), rest.end());
      return out;
    }
    g.lost_member = true;
    auto asked = std::find(g.asked_members.begin(), g.asked_members.end(), name);
    if (asked != g.asked_members.end() && !g.answered[asked - g.asked_members.begin()]) {
      const size_t r = asked - g.asked_members.begin();
      g.answered[r] = true;
      g.ok[r] = false;
    }
    if (!g.all_answered()) {
      out.push_back(abort_all{g.critic, g.generation});  // survivors blocked on it go on
      return out;
    }
    auto rest = settle(g).value_or(std::vector<command>{});
    out.insert(out.end(), rest.begin(), rest.end());
    return out;
  }
  return {};
}

std::vector<rlhf_driver::command> rlhf_driver::on_joined(const std::string& name) {
  if (phase_ == phase::finished) return {};
  trainer_group& g = groups_[name.starts_with("critic/")];
  const std::string role = g.critic ? "critic" : "policy";
  if (!g.elastic || std::find(g.members.begin(), g.members.end(), name) != g.members.end() ||
      std::find(g.joiners.begin(), g.joiners.end(), name) != g.joiners.end()) {
    return {};
  }
  if (g.size() + static_cast<int>(g.joiners.size()) >= g.elastic->max) {
    return {note{run::severity::warning,
                 "rank_not_admitted",
                 absl::StrCat(name, " is not admitted: the ", role, " group is at roles.", role,
                              ".elastic.max ", g.elastic->max),
                 {{"name", name}}}};
  }
  g.joiners.push_back(name);
  if (g.below_min) return admit_joiners();  // below min: at once
  return {note{run::severity::info,
               "rank_joining",
               absl::StrCat(name, " joins the ", role, " group at the next RL step"),
               {{"name", name}, {"role", role}}}};
}

std::vector<rlhf_driver::command> rlhf_driver::on_timer() {
  if (phase_ == phase::finished) return {};
  const auto now = now_();
  for (trainer_group& g : groups_) {
    if (!g.elastic) continue;
    const std::string role = g.critic ? "critic" : "policy";
    if (g.below_min && now - g.waiting_since >= schedule_.worker_wait) {
      return failed(absl::UnavailableError(absl::StrCat(
          "only ", plural(g.members.size(), role.c_str()), " left, below roles.", role,
          ".elastic.min ", g.elastic->min, ", and no worker joined within ",
          seconds(schedule_.worker_wait),
          " s (cluster.worker_wait_s); start one with `troupe worker --join HEAD`, or relaunch "
          "with --resume RUN_DIR")));
    }
    if (g.asked != request::none && g.all_answered() && !g.failure.ok() && !g.lost_member &&
        now - g.failed_at >= schedule_.loss_wait) {
      return failed(g.failure);  // a failure no lost member explains
    }
    if (!g.stray.ok() && now - g.stray_at >= schedule_.loss_wait) return failed(g.stray);
  }
  return {};
}

}  // namespace troupe::apps::rlhf
