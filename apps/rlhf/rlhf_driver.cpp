#include "apps/rlhf/rlhf_driver.hpp"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/even_split.hpp"
#include "runtime/base/status.hpp"

namespace troupe::apps::rlhf {
namespace {

// A request's sampling seed: a function of the prompt and the sample's place in its group only,
// so that a regenerated (or resumed) sample is the same sample.
uint64_t sample_seed(uint64_t seed, int64_t prompt, int k) {
  uint64_t z = seed ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(prompt + 1));
  z ^= 0xbf58476d1ce4e5b9ull * static_cast<uint64_t>(k + 1);
  return z ^ (z >> 31);
}

constexpr uint64_t validation_stream = 0x7a11da7e;

double mean_of(const std::vector<double>& xs) {
  double sum = 0;
  for (double x : xs)
    sum += x;
  return xs.empty() ? 0.0 : sum / static_cast<double>(xs.size());
}

}  // namespace

rlhf_driver::rlhf_driver(rlhf_schedule schedule, rl_algorithm algorithm, kl_controller kl,
                         rl_task task, std::function<clock::time_point()> now)
    : schedule_(std::move(schedule)),
      algorithm_(algorithm),
      kl_(kl),
      task_(std::move(task)),
      now_(std::move(now)) {
  for (bool critic : {false, true}) {
    trainer_group& g = groups_[critic];
    g.critic = critic;
    g.elastic = critic ? schedule_.critic_elastic : schedule_.policy_elastic;
    if (g.elastic) continue;  // set_members() names them
    for (int r = 0; r < (critic ? schedule_.critic_ranks : schedule_.policy_ranks); ++r)
      g.members.push_back(absl::StrCat(critic ? "critic/" : "policy/", r));
  }
}

std::vector<rlhf_driver::command> rlhf_driver::form_groups_then(
    std::function<std::vector<command>()> then) {
  begin_ = std::move(then);
  std::vector<command> out;
  for (trainer_group& g : groups_) {
    if (!g.elastic) continue;
    ++g.generation;  // the first
    auto asked = regroup(g);
    out.insert(out.end(), asked.begin(), asked.end());
  }
  if (out.empty()) return std::exchange(begin_, nullptr)();
  return out;
}

double rlhf_driver::seconds_since(clock::time_point t) const {
  return std::chrono::duration<double>(now_() - t).count();
}

std::vector<rlhf_driver::command> rlhf_driver::failed(absl::Status why) {
  phase_ = phase::finished;
  return {fail{std::move(why)}};
}

std::vector<rlhf_driver::command> rlhf_driver::on_error(const absl::Status& error) {
  if (phase_ == phase::finished) return {};
  return failed(error);
}

std::vector<rlhf_driver::command> rlhf_driver::start() {
  started_ = now_();
  return form_groups_then([this]() -> std::vector<command> {
    if (!schedule_.init_from.empty()) {
      phase_ = phase::loading_policy;
      answers_ = 0;
      return {load_policy{schedule_.init_from}};
    }
    return warm_up_or_begin();
  });
}

std::vector<rlhf_driver::command> rlhf_driver::on_policy_loaded() {
  if (phase_ != phase::loading_policy) return {};
  if (++answers_ < ranks(false)) return {};
  return warm_up_or_begin();
}

std::vector<rlhf_driver::command> rlhf_driver::warm_up_or_begin() {
  answers_ = 0;
  if (schedule_.warmup_steps > 0) {
    phase_ = phase::warming_up;
    return {warmup_step_all{}};
  }
  if (!schedule_.init_from.empty()) {  // the reference and the critic start from it too
    phase_ = phase::loading_reference;
    return {load_initial{schedule_.init_from}};
  }
  return begin_step();
}

absl::StatusOr<rlhf_driver::resume_point> rlhf_driver::resume_point_of(const nlohmann::json& meta) {
  resume_point p;
  const auto field = [&](const char* key) -> absl::StatusOr<nlohmann::json> {
    if (!meta.contains(key) || !meta[key].is_number()) {
      return absl::DataLossError(absl::StrCat("meta.", key, " is missing or not a number"));
    }
    return meta[key];
  };
  TROUPE_ASSIGN_OR_RETURN(nlohmann::json step, field("rl_step"));
  TROUPE_ASSIGN_OR_RETURN(nlohmann::json cursor, field("prompt_cursor"));
  TROUPE_ASSIGN_OR_RETURN(nlohmann::json version, field("policy_version"));
  TROUPE_ASSIGN_OR_RETURN(nlohmann::json kl, field("kl_coef"));
  p.step = step.get<int64_t>();
  p.cursor = cursor.get<int64_t>();
  p.version = version.get<uint64_t>();
  p.kl_coef = kl.get<double>();
  for (const char* key : {"policy_optimizer_steps", "critic_optimizer_steps"}) {
    if (meta.contains(key) && meta[key].is_number_integer()) {
      p.optimizer_steps[std::string_view(key) == "critic_optimizer_steps"] =
          meta[key].get<int64_t>();
    }
  }
  return p;
}

std::vector<rlhf_driver::command> rlhf_driver::resume(const resume_point& at,
                                                      const std::string& dir) {
  started_ = now_();
  step_ = at.step;
  cursor_ = at.cursor;
  version_ = at.version;
  kl_.restore(at.kl_coef);
  resume_dir_ = dir;
  for (bool critic : {false, true})
    groups_[critic].steps = at.optimizer_steps[critic];
  return form_groups_then([this] { return begin_step(); });
}

std::vector<rlhf_driver::command> rlhf_driver::on_warmup_step(int rank,
                                                              const actor::step_report& report) {
  if (phase_ != phase::warming_up) return {};
  groups_[0].steps = report.step;
  if (++answers_ < ranks(false)) return {};
  answers_ = 0;
  ++warmup_done_;
  std::vector<command> out;
  if (rank >= 0) out.push_back(metrics_row{{{"warmup_step", warmup_done_}, {"loss", report.loss}}});
  if (warmup_done_ < schedule_.warmup_steps) {
    out.push_back(warmup_step_all{});
  } else {
    phase_ = phase::saving_initial;
    out.push_back(save_initial{warmup_done_});
  }
  return out;
}

std::vector<rlhf_driver::command> rlhf_driver::on_initial_saved(const std::string& dir) {
  if (phase_ != phase::saving_initial) return {};
  phase_ = phase::loading_reference;
  answers_ = 0;
  return {load_initial{dir}};
}

std::vector<rlhf_driver::command> rlhf_driver::on_initial_loaded() {
  if (phase_ != phase::loading_reference) return {};
  if (++answers_ < 1 + ranks(true)) return {};
  return begin_step();
}

std::vector<rlhf_driver::command> rlhf_driver::begin_step() {
  step_started_ = now_();
  row_ = nlohmann::json::object();
  const bool last = step_ >= schedule_.end();
  if (last && schedule_.test_freq == 0) return end_run();
  phase_ = phase::syncing;
  phase_started_ = now_();
  rollout_joining_ = false;                    // the sync admits it
  std::vector<command> out = admit_joiners();  // at the step's start, before the sync
  auto sync = resync();
  out.insert(out.end(), sync.begin(), sync.end());
  return out;
}

std::vector<rlhf_driver::command> rlhf_driver::resync() {
  if (phase_ != phase::syncing) return {};
  return when_formed(groups_[0], [this]() -> std::vector<command> {
    if (phase_ != phase::syncing) return {};
    answers_ = 0;  // acks_ keeps an earlier round's: that worker may generate on those weights
    sender_checksum_.clear();
    sync_sender_ = groups_[0].members.front();  // the group's rank 0 sends
    sync_sent_ = now_();
    rollout_swap_s_ = -1;
    return {sync_all{version_ + 1, !sent_ahead() && generates_after_sync(), sync_sent_}};
  });
}

// The training requests from prompt `first_prompt` on, for the policy version after this one:
// each worker starts them as it swaps those weights in, and never on older ones.
rollout_requests rlhf_driver::ahead_of(int64_t first_prompt) const {
  rollout_requests out =
      requests_for(first_prompt, schedule_.prompts, schedule_.n, false, schedule_.seed);
  for (auto& r : out.requests)
    r.min_weights_version = version_ + 1;
  return out;
}

std::vector<rlhf_driver::command> rlhf_driver::requests_ahead() {
  if (phase_ != phase::syncing || sent_ahead() || !generates_after_sync()) return {};
  requests_ahead_ = ahead_of(cursor_);
  return {generate_all{requests_ahead_.requests}};
}

// Synchronous (one step off policy prefetches instead): the next step's requests leave now, so
// that at its sync a rollout worker starts them the moment it has swapped the weights in, with
// nothing left to make, send or decode: they wait in the worker meanwhile. Not when the next
// step validates first or is past the end (as generates_after_sync will say then), nor when a
// rollout worker waits to join at that sync.
std::vector<rlhf_driver::command> rlhf_driver::next_step_requests() {
  const int64_t next = step_ + 1;  // step_ counts the steps done; this one ends with the updates
  if (sent_ahead() || rollout_joining_ || next >= schedule_.end() || validation_due(next))
    return {};
  requests_ahead_ = ahead_of(cursor_ + schedule_.prompts);
  return {generate_all{requests_ahead_.requests}};
}

bool rlhf_driver::validation_due(int64_t step) const {
  return schedule_.test_freq > 0 && (step >= schedule_.end() || step % schedule_.test_freq == 0);
}

bool rlhf_driver::generates_after_sync() const {
  return step_ < schedule_.end() && !validation_due() && !prefetched_ && !prefetching_;
}

std::vector<rlhf_driver::command> rlhf_driver::on_synced(const std::string& who,
                                                         const actor::weights_ack& ack,
                                                         bool sender) {
  if (phase_ != phase::syncing) return {};
  if (ack.version != version_ + 1) {
    return failed(absl::InternalError(absl::StrCat("weight sync: ", who, " acknowledged version ",
                                                   ack.version, ", not ", version_ + 1)));
  }
  if (sender) {
    sender_checksum_ = ack.checksum;
  } else {
    acks_.emplace_back(who, ack.checksum);
    rollout_swap_s_ = rollout_swap_s_ < 0 ? ack.swap_s : std::min(rollout_swap_s_, ack.swap_s);
  }
  if (++answers_ < sync_participants_) return {};
  for (const auto& [worker, checksum] : acks_) {
    if (checksum != sender_checksum_) {
      return failed(absl::DataLossError(absl::StrCat(
          "weight sync to version ", version_ + 1, ": ", worker, " holds weights with checksum ",
          checksum.substr(0, 12), "..., the policy sent ", sender_checksum_.substr(0, 12),
          "...; the rollout would generate with other weights than the policy's")));
    }
  }
  acks_.clear();
  ++version_;
  row_["timing_s/update_weights"] = seconds_since(phase_started_);
  return after_sync();
}

std::vector<rlhf_driver::command> rlhf_driver::after_sync() {
  const bool last = step_ >= schedule_.end();
  if (validation_due()) {
    phase_ = phase::validating;
    phase_started_ = now_();
    requests_ = requests_for(0, schedule_.val_prompts, 1, true, schedule_.seed ^ validation_stream);
    return {generate_all{requests_.requests}};
  }
  if (last) return end_run();
  return generate();
}

rollout_requests rlhf_driver::requests_for(int64_t first_prompt, int prompts, int n, bool greedy,
                                           uint64_t stream) const {
  rollout_requests out;
  for (int i = 0; i < prompts; ++i) {
    const std::string text = task_.prompt(stream, first_prompt + i);
    // The app has rendered a prompt of the task before the first step, and they differ in their
    // text alone.
    const std::vector<int32_t> prompt =
        task_.codec.prompt_tokens(text).value_or(std::vector<int32_t>{});
    for (int k = 0; k < n; ++k) {
      actor::generation_request r;
      r.id = out.requests.size() + 1;
      r.prompt = prompt;
      r.temperature = greedy ? 0.0f : schedule_.temperature;
      r.top_k = schedule_.top_k;
      r.top_p = schedule_.top_p;
      r.seed = sample_seed(stream, first_prompt + i, k);
      r.max_tokens = schedule_.response_length;
      task_.codec.set_stop(r);  // the response's end is kept: trained on, log-prob and all
      r.stream = false;         // wanted whole: a poll per finished request at most
      out.requests.push_back(std::move(r));
      out.prompts.push_back(text);
    }
  }
  return out;
}

std::vector<rlhf_driver::command> rlhf_driver::generate() {
  phase_ = phase::generating;
  phase_started_ = now_();
  if (sent_ahead()) {
    // Sent ahead: the generation started when the first rollout worker swapped the
    // weights in, which its acknowledgement says: measured from the sync's sending on this
    // host, from the sync's arrival elsewhere (so the sync's way to a worker on another host
    // counts as generation). Not after what has happened since: a worker's clock that is not
    // the one it claims would otherwise make the generation's time negative.
    requests_ = std::exchange(requests_ahead_, {});
    phase_started_ =
        std::min(early_outputs_ ? early_at_ : phase_started_,
                 sync_sent_ + std::chrono::duration_cast<clock::duration>(
                                  std::chrono::duration<double>(std::max(0.0, rollout_swap_s_))));
    if (!early_outputs_) return {};
    std::vector<actor::generation_event> outputs = *std::move(early_outputs_);
    early_outputs_.reset();
    return generated(std::move(outputs), early_at_);
  }
  if (prefetched_) {  // generated while the last step updated, on the weights before it
    requests_ = std::move(prefetch_requests_);
    std::vector<actor::generation_event> outputs = *std::move(prefetched_);
    prefetched_.reset();
    std::vector<command> out = on_generated(std::move(outputs));
    row_["timing_s/gen"] = prefetch_s_;
    return out;
  }
  requests_ = requests_for(cursor_, schedule_.prompts, schedule_.n, false, schedule_.seed);
  return {generate_all{requests_.requests}};
}

absl::Status rlhf_driver::check_outputs(const std::vector<actor::generation_request>& requests,
                                        const std::vector<actor::generation_event>& outputs) const {
  if (outputs.size() != requests.size()) {
    return absl::InternalError(
        absl::StrCat("rollout: ", outputs.size(), " outputs for ", requests.size(), " requests"));
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    // Each request exactly once, ended: none lost with a rollout worker, none twice.
    if (outputs[i].id != requests[i].id || !outputs[i].finished) {
      return absl::DataLossError(absl::StrCat(
          "rollout: output ", i, " is of request ", outputs[i].id,
          outputs[i].finished ? "" : " (unfinished)", ", not of request ", requests[i].id));
    }
    // A response that ended holds its end (include_stop_str_in_output), with a log-prob per
    // token.
    if (outputs[i].reason == actor::finish_reason::stop && !task_.codec.ends(outputs[i].tokens)) {
      return absl::DataLossError(absl::StrCat("rollout: request ", requests[i].id,
                                              " ended without its stop string in the output"));
    }
    if (outputs[i].logprobs.size() != outputs[i].tokens.size()) {
      return absl::DataLossError(absl::StrCat("rollout: request ", requests[i].id, " has ",
                                              outputs[i].logprobs.size(), " log-probs for ",
                                              outputs[i].tokens.size(), " tokens"));
    }
  }
  return absl::OkStatus();
}

std::vector<rlhf_driver::command> rlhf_driver::on_generated(
    std::vector<actor::generation_event> outputs) {
  if (phase_ == phase::syncing && sent_ahead() && !prefetching_) {
    // Before the last acknowledgement: it waits for the checksums' comparison.
    early_outputs_ = std::move(outputs);
    early_at_ = now_();
    return {};
  }
  return generated(std::move(outputs), now_());
}

std::vector<rlhf_driver::command> rlhf_driver::generated(
    std::vector<actor::generation_event> outputs, clock::time_point at) {
  if (prefetching_) {  // the next step's, which waits for it
    if (absl::Status s = check_outputs(prefetch_requests_.requests, outputs); !s.ok()) {
      return failed(s);
    }
    prefetching_ = false;
    prefetched_ = std::move(outputs);
    prefetch_s_ = seconds_since(prefetch_started_);
    if (!waiting_for_prefetch_) return {};
    waiting_for_prefetch_ = false;
    row_["timing_s/wait_prev_gen"] = seconds_since(wait_started_);  // veRL's one-step-off name
    return end_step();
  }
  if (phase_ != phase::generating && phase_ != phase::validating) return {};
  if (absl::Status s = check_outputs(requests_.requests, outputs); !s.ok()) return failed(s);
  const bool validation = phase_ == phase::validating;
  row_[validation ? "timing_s/testing" : "timing_s/gen"] =
      std::chrono::duration<double>(at - phase_started_).count();
  outputs_ = std::move(outputs);
  score_all scoring;
  for (size_t i = 0; i < requests_.requests.size(); ++i) {
    const bool ended = outputs_[i].reason == actor::finish_reason::stop;
    scoring.prompts.push_back(requests_.prompts[i]);
    scoring.responses.push_back(task_.codec.response_text(outputs_[i].tokens, ended));
    scoring.ended.push_back(ended);
  }
  true_scores_.clear();
  if (task_.true_score) {
    for (size_t i = 0; i < scoring.prompts.size(); ++i) {
      true_scores_.push_back(
          task_.true_score(scoring.prompts[i], scoring.responses[i], scoring.ended[i]));
    }
  }
  phase_ = validation ? phase::validation_scoring : phase::scoring;
  phase_started_ = now_();
  return {std::move(scoring)};
}

std::vector<rlhf_driver::command> rlhf_driver::on_scored(std::vector<double> scores) {
  if (phase_ == phase::validation_scoring) {
    last_val_ = mean_of(scores);
    row_[schedule_.val_metric()] = last_val_;
    if (!true_scores_.empty()) row_[schedule_.val_true_metric()] = mean_of(true_scores_);
    if (step_ >= schedule_.end()) return end_run();
    return generate();
  }
  if (phase_ != phase::scoring) return {};
  row_["timing_s/reward"] = seconds_since(phase_started_);
  std::vector<rollout_sample> samples;
  samples.reserve(outputs_.size());
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const actor::generation_event& e = outputs_[i];
    rollout_sample s;
    s.group = cursor_ + static_cast<int64_t>(i) / schedule_.n;
    s.prompt = requests_.requests[i].prompt;
    s.response = e.tokens;  // with the end string when it ended
    s.ended = e.reason == actor::finish_reason::stop;
    s.logprobs = e.logprobs;
    s.version = e.weights_version;
    samples.push_back(std::move(s));
  }
  absl::StatusOr<rollout_batch> batch =
      rollout_batch::create(std::move(samples), schedule_.max_len);
  if (!batch.ok()) return failed(batch.status());
  batch_ = *std::move(batch);
  scores_ = std::move(scores);
  if (!true_scores_.empty()) {
    row_["critic/true_score/mean"] = mean_of(true_scores_);
    row_["critic/true_score/max"] = *std::max_element(true_scores_.begin(), true_scores_.end());
    row_["critic/true_score/min"] = *std::min_element(true_scores_.begin(), true_scores_.end());
  }
  // Old log-probs from the rollout, or on the policy ranks (each its share of the rows); the
  // reference's on it, the values on the critic ranks.
  if (schedule_.bypass_old_log_prob) {
    if (absl::Status s = batch_->use_rollout_log_probs(); !s.ok()) return failed(s);
  }
  phase_ = phase::log_probs;
  phase_started_ = now_();
  reference_done_ = false;
  log_probs_done_[0] = schedule_.bypass_old_log_prob;
  log_probs_done_[1] = !has_critic();
  std::vector<command> out = {log_probs_all{{}, batch_->sequences(0, batch_->rows()), {}}};
  for (bool critic : {false, true}) {
    if (log_probs_done_[critic]) continue;
    auto asked = ask_log_probs(critic);
    out.insert(out.end(), asked.begin(), asked.end());
  }
  return out;
}

std::vector<rlhf_driver::command> rlhf_driver::ask_log_probs(bool critic) {
  return ask_group(groups_[critic], request::log_probs, [this, critic] {
    log_probs_all ask;
    const even_split split{batch_->rows(), ranks(critic)};
    for (int k = 0; k < ranks(critic); ++k) {
      (critic ? ask.critic : ask.policy)
          .push_back(
              batch_->sequences(static_cast<int>(split.begin(k)), static_cast<int>(split.size(k))));
    }
    return std::vector<command>{std::move(ask)};
  });
}

std::vector<rlhf_driver::command> rlhf_driver::on_log_probs(bool reference, int rank,
                                                            const std::vector<float>& values,
                                                            uint64_t generation) {
  if (phase_ != phase::log_probs) return {};
  if (reference) {
    if (reference_done_) return {};
    batch_->set_log_probs(true, 0, batch_->rows(), values);
    row_["timing_s/ref"] = seconds_since(phase_started_);
    reference_done_ = true;
    return after_log_probs();
  }
  return on_group_log_probs(false, rank, values, generation);
}

std::vector<rlhf_driver::command> rlhf_driver::on_values(int rank, const std::vector<float>& values,
                                                         uint64_t generation) {
  if (phase_ != phase::log_probs) return {};
  return on_group_log_probs(true, rank, values, generation);
}

std::vector<rlhf_driver::command> rlhf_driver::on_group_log_probs(bool critic, int rank,
                                                                  const std::vector<float>& values,
                                                                  uint64_t generation) {
  trainer_group& g = groups_[critic];
  if (!take_answer(g, request::log_probs, rank, generation, absl::OkStatus())) return {};
  const even_split split{batch_->rows(), static_cast<int>(g.asked_members.size())};
  const int first = static_cast<int>(split.begin(rank)), count = static_cast<int>(split.size(rank));
  if (critic) {
    batch_->set_values(first, count, values);
  } else {
    batch_->set_log_probs(false, first, count, values);
  }
  row_[critic ? "timing_s/values" : "timing_s/old_log_prob"] = seconds_since(phase_started_);
  if (!g.all_answered()) return {};
  if (auto recovering = settle(g)) return *std::move(recovering);
  log_probs_done_[critic] = true;
  std::vector<command> out = after_log_probs();
  auto waited = run_waiting(g);
  out.insert(out.end(), waited.begin(), waited.end());
  return out;
}

std::vector<rlhf_driver::command> rlhf_driver::after_log_probs() {
  if (!reference_done_ || !log_probs_done_[0] || !log_probs_done_[1]) return {};
  const auto adv_started = now_();
  absl::StatusOr<double> current_kl = batch_->compute_advantages(scores_, algorithm_, kl_.value());
  if (!current_kl.ok()) return failed(current_kl.status());
  row_["actor/reward_kl_penalty"] = *current_kl;
  row_["actor/reward_kl_penalty_coeff"] = algorithm_.use_kl_in_reward ? kl_.value() : 0.0;
  if (algorithm_.use_kl_in_reward) kl_.update(*current_kl, batch_->rows());
  row_.update(batch_->data_metrics(schedule_.response_length));
  row_["timing_s/adv"] = seconds_since(adv_started);
  std::vector<command> out;
  if (schedule_.max_staleness > 0 && step_ + 1 < schedule_.end()) {
    // One step off policy: the next step's prompts go to the rollout now, on the weights this
    // step generated with, while this step's updates run.
    prefetch_requests_ = requests_for(cursor_ + schedule_.prompts, schedule_.prompts, schedule_.n,
                                      false, schedule_.seed);
    prefetching_ = true;
    prefetch_started_ = now_();
    out.push_back(generate_all{prefetch_requests_.requests});
  } else {
    out = next_step_requests();
  }
  std::vector<command> rest = start_updates();
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

// The critic's update and, once the critic has warmed up, the actor's, at once: veRL runs them
// one after the other, but neither reads what the other writes.
std::vector<rlhf_driver::command> rlhf_driver::start_updates() {
  tracks_[0] = {.active = schedule_.updates_actor_at(step_ + 1)};
  tracks_[1] = {.active = has_critic()};
  if (!tracks_[0].active && !tracks_[1].active) return end_step();
  phase_ = phase::updating;
  phase_started_ = now_();
  std::vector<command> out;
  for (bool critic : {true, false}) {
    if (!tracks_[critic].active) continue;
    auto asked = next_update(critic);
    out.insert(out.end(), asked.begin(), asked.end());
  }
  return out;
}

std::vector<rlhf_driver::command> rlhf_driver::next_update(bool critic) {
  return ask_group(groups_[critic], request::update, [this, critic] {
    const int per_epoch = schedule_.prompts / schedule_.mini_batch(critic);
    const int rows = schedule_.mini_batch(critic) * schedule_.n;
    const int m = tracks_[critic].index % per_epoch;
    std::vector<actor::rl_batch> parts =
        batch_->mini_batch(m * rows, rows, ranks(critic), schedule_.loss_agg_mode);
    for (auto& p : parts) {  // each update message carries only what its objective reads
      if (critic) {
        p.old_log_probs.clear(), p.ref_log_probs.clear(), p.advantages.clear();
      } else {
        p.values.clear(), p.returns.clear();
      }
    }
    return std::vector<command>{update_all{std::move(parts), critic}};
  });
}

std::vector<rlhf_driver::command> rlhf_driver::on_updated(int rank,
                                                          const actor::rl_step_report& report,
                                                          bool critic, uint64_t generation) {
  update_track& track = tracks_[critic];
  if (phase_ != phase::updating || !track.active) return {};
  trainer_group& g = groups_[critic];
  if (!take_answer(g, request::update, rank, generation, absl::OkStatus())) return {};
  g.reports[rank] = report;
  if (!g.all_answered()) return {};
  if (auto recovering = settle(g)) return *std::move(recovering);
  g.steps = g.reports.front().step;
  track.reports.push_back(g.reports.front());
  std::vector<command> out;
  if (++track.index < schedule_.updates_per_step(critic)) {
    out = next_update(critic);
  } else {
    track.active = false;
    row_[critic ? "timing_s/update_critic" : "timing_s/update_actor"] =
        seconds_since(phase_started_);
    if (!tracks_[!critic].active) out = end_step();
  }
  auto waited = run_waiting(g);
  out.insert(out.end(), waited.begin(), waited.end());
  return out;
}

std::vector<rlhf_driver::command> rlhf_driver::end_step() {
  if (prefetching_) {  // the next step's generation is still running: it ends the step
    waiting_for_prefetch_ = true;
    wait_started_ = now_();
    return {};
  }
  // veRL's actor and critic metrics: the means over their optimizer steps (lr: the last). The
  // actor's are absent while the critic warms up.
  const auto mean = [](const std::vector<actor::rl_step_report>& reports, auto field) {
    double sum = 0;
    for (const auto& r : reports)
      sum += r.*field;
    return sum / static_cast<double>(std::max<size_t>(1, reports.size()));
  };
  using report = actor::rl_step_report;
  const std::vector<report>& actor_reports = tracks_[0].reports;
  const std::vector<report>& critic_reports = tracks_[1].reports;
  if (!actor_reports.empty()) {
    row_["actor/pg_loss"] = mean(actor_reports, &report::pg_loss);
    row_["actor/pg_clipfrac"] = mean(actor_reports, &report::pg_clipfrac);
    row_["actor/pg_clipfrac_lower"] = mean(actor_reports, &report::pg_clipfrac_lower);
    row_["actor/ppo_kl"] = mean(actor_reports, &report::ppo_kl);
    row_["actor/entropy"] = mean(actor_reports, &report::entropy);
    row_["actor/kl_loss"] = mean(actor_reports, &report::kl_loss);
    row_["actor/grad_norm"] = mean(actor_reports, &report::grad_norm);
    row_["actor/lr"] = actor_reports.back().lr;
  }
  if (!critic_reports.empty()) {
    row_["critic/vf_loss"] = mean(critic_reports, &report::vf_loss);
    row_["critic/vf_clipfrac"] = mean(critic_reports, &report::vf_clipfrac);
    row_["critic/vpred_mean"] = mean(critic_reports, &report::vpred_mean);
    row_["critic/grad_norm"] = mean(critic_reports, &report::grad_norm);
    row_["critic/lr"] = critic_reports.back().lr;
  }
  ++step_;
  const double step_s = seconds_since(step_started_);
  int64_t tokens = 0, stale = 0;
  for (const auto& s : batch_->samples()) {
    tokens += static_cast<int64_t>(s.prompt.size() + s.response.size());
    stale = std::max<int64_t>(stale, static_cast<int64_t>(version_ - s.version));
  }
  row_["step"] = step_;
  row_["policy_version"] = version_;
  row_["staleness/max"] = stale;
  row_["timing_s/step"] = step_s;
  row_["perf/total_num_tokens"] = tokens;
  row_["perf/time_per_step"] = step_s;
  row_["perf/throughput"] = step_s > 0 ? static_cast<double>(tokens) / step_s : 0.0;
  const double score = row_["critic/score/mean"].get<double>();
  if (first_score_ < 0) first_score_ = score;
  best_score_ = std::max(best_score_, score);
  last_score_ = score;

  std::vector<nlohmann::json> samples;
  for (int r = 0; r < std::min(schedule_.samples_per_step, batch_->rows()); ++r) {
    const rollout_sample& s = batch_->samples()[r];
    samples.push_back({{"step", step_},
                       {"prompt", task_.codec.text_of(s.prompt)},
                       {"response", task_.codec.text_of(s.response)},
                       {"score", batch_->score(r)},

                       {"reward", batch_->reward(r)},
                       {"advantage", batch_->advantage(r)},
                       {"kl", batch_->kl(r)},
                       {"policy_version", s.version}});
    if (!true_scores_.empty()) samples.back()["true_score"] = true_scores_[r];
  }
  std::vector<command> out = {metrics_row{row_}, sample_rows{std::move(samples)}};
  cursor_ += schedule_.prompts;
  const bool save_due =
      schedule_.save_freq > 0 && (step_ % schedule_.save_freq == 0 || step_ >= schedule_.end());
  if (save_due) {
    phase_ = phase::saving_checkpoint;
    resave_pending_ = false;
    auto save = save_again();
    out.insert(out.end(), save.begin(), save.end());
    return out;
  }
  auto next = begin_step();
  out.insert(out.end(), next.begin(), next.end());
  return out;
}

std::vector<rlhf_driver::command> rlhf_driver::save_again() {
  if (phase_ != phase::saving_checkpoint) return {};
  // Every rank of both groups saves its part: an elastic group that is forming saves once formed.
  for (trainer_group& g : groups_) {
    if (g.elastic && (g.formed != g.generation || g.asked != request::none)) {
      if (!resave_pending_) g.waiting.push_back([this] { return save_again(); });
      resave_pending_ = true;
      return {};
    }
  }
  resave_pending_ = false;
  return {save_checkpoint{step_,
                          {{"rl_step", step_},
                           {"prompt_cursor", cursor_},
                           {"policy_version", version_},
                           {"kl_coef", kl_.value()},
                           {"policy_optimizer_steps", groups_[0].steps},
                           {"critic_optimizer_steps", groups_[1].steps}},
                          ++save_round_}};
}

std::vector<rlhf_driver::command> rlhf_driver::on_checkpoint_saved(uint64_t round) {
  if (phase_ != phase::saving_checkpoint || (round != 0 && round != save_round_)) return {};
  return begin_step();
}

std::vector<rlhf_driver::command> rlhf_driver::end_run() {
  phase_ = phase::finished;
  std::vector<command> out;
  if (row_.contains(schedule_.val_metric())) {
    row_["step"] = step_;
    out.push_back(metrics_row{row_});
  }
  nlohmann::json summary = {{"app", "rlhf"},
                            {"steps", step_},
                            {"policy_version", version_},
                            {"score_first", first_score_},
                            {"score_best", best_score_},
                            {"score_last", last_score_},
                            {"kl_coef", kl_.value()},
                            {"time_s", seconds_since(started_)}};
  if (last_val_ >= 0) summary["val_score"] = last_val_;
  if (step_ < schedule_.steps) summary["stopped_after"] = step_;
  out.push_back(finish{std::move(summary)});
  return out;
}

}  // namespace troupe::apps::rlhf
