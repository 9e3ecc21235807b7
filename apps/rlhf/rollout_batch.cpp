#include "apps/rlhf/rollout_batch.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/base/even_split.hpp"
#include "runtime/base/status.hpp"

namespace troupe::apps::rlhf {
namespace {

// {mean, max, min} of `values` under key `name`.
void add_stats(nlohmann::json& out, const std::string& name, const std::vector<double>& values) {
  if (values.empty()) return;
  double sum = 0, hi = -std::numeric_limits<double>::infinity(), lo = -hi;
  for (double v : values) {
    sum += v;
    hi = std::max(hi, v);
    lo = std::min(lo, v);
  }
  out[name + "/mean"] = sum / static_cast<double>(values.size());
  out[name + "/max"] = hi;
  out[name + "/min"] = lo;
}

}  // namespace

absl::StatusOr<rollout_batch> rollout_batch::create(std::vector<rollout_sample> samples,
                                                    int max_len) {
  if (samples.empty()) return absl::InvalidArgumentError("rollout batch: no samples");
  rollout_batch b;
  int longest = 0, response_len = 0;
  for (size_t r = 0; r < samples.size(); ++r) {
    const rollout_sample& s = samples[r];
    if (s.prompt.empty() || s.response.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rollout batch: sample ", r, " has ", s.prompt.size(), " prompt and ",
                       s.response.size(), " response tokens; both must be non-empty"));
    }
    longest = std::max(longest, static_cast<int>(s.prompt.size() + s.response.size()));
    response_len = std::max(response_len, static_cast<int>(s.response.size()));
  }
  if (longest > max_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rollout batch: a sequence of ", longest, " tokens does not fit the model's context of ",
        max_len, "; shorten the prompts or rollout.response_length"));
  }
  b.samples_ = std::move(samples);
  b.seq_len_ = longest;
  b.responses_ = {b.rows(), response_len};
  const int64_t slots = b.responses_.size();
  b.response_mask_.assign(slots, 0.0f);
  for (int r = 0; r < b.rows(); ++r) {
    for (size_t j = 0; j < b.samples_[r].response.size(); ++j)
      b.response_mask_[int64_t{r} * response_len + j] = 1.0f;
  }
  const int64_t positions = int64_t{b.rows()} * b.seq_len_;
  b.old_.assign(positions, 0.0f);
  b.ref_.assign(positions, 0.0f);
  b.advantages_.assign(slots, 0.0f);
  b.returns_.assign(slots, 0.0f);
  b.rewards_.assign(slots, 0.0f);
  b.kl_.assign(slots, 0.0f);
  b.scores_.assign(b.rows(), 0.0);
  return b;
}

int64_t rollout_batch::position(int r, int j) const {
  return int64_t{r} * seq_len_ + static_cast<int64_t>(samples_[r].prompt.size()) - 1 + j;
}

actor::rl_batch rollout_batch::sequences(int first, int count) const {
  actor::rl_batch b;
  b.batch = count;
  b.ctx = seq_len_;
  const int64_t n = int64_t{count} * seq_len_;
  b.tokens.assign(n, 0);
  b.targets.assign(n, -1);
  for (int i = 0; i < count; ++i) {
    const rollout_sample& s = samples_[first + i];
    int32_t* row = b.tokens.data() + int64_t{i} * seq_len_;
    std::copy(s.prompt.begin(), s.prompt.end(), row);
    std::copy(s.response.begin(), s.response.end(), row + s.prompt.size());
    for (size_t j = 0; j < s.response.size(); ++j)
      b.targets[position(first + i, static_cast<int>(j)) - int64_t{first} * seq_len_] =
          s.response[j];
  }
  return b;
}

void rollout_batch::set_log_probs(bool reference, int first, int count,
                                  const std::vector<float>& per_position) {
  copy_rows(reference ? ref_ : old_, first, count, per_position);
}

absl::Status rollout_batch::use_rollout_log_probs() {
  for (int r = 0; r < rows(); ++r) {
    const rollout_sample& s = samples_[r];
    if (s.logprobs.size() != s.response.size()) {
      return absl::InvalidArgumentError(absl::StrCat("rollout batch: sample ", r, " has ",
                                                     s.logprobs.size(), " log-probs for ",
                                                     s.response.size(), " response tokens"));
    }
    for (size_t j = 0; j < s.response.size(); ++j)
      old_[position(r, static_cast<int>(j))] = s.logprobs[j];
  }
  old_from_rollout_ = true;
  return absl::OkStatus();
}

void rollout_batch::set_values(int first, int count, const std::vector<float>& per_position) {
  if (values_.empty()) values_.assign(int64_t{rows()} * seq_len_, 0.0f);
  copy_rows(values_, first, count, per_position);
}

void rollout_batch::copy_rows(std::vector<float>& into, int first, int count,
                              const std::vector<float>& per_position) const {
  const int64_t begin = int64_t{first} * seq_len_;
  const int64_t n =
      std::min<int64_t>(int64_t{count} * seq_len_, static_cast<int64_t>(per_position.size()));
  std::copy(per_position.begin(), per_position.begin() + n, into.begin() + begin);
}

absl::StatusOr<double> rollout_batch::compute_advantages(const std::vector<double>& scores,
                                                         const rl_algorithm& algorithm,
                                                         double kl_coef) {
  if (static_cast<int>(scores.size()) != rows()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rollout batch: ", scores.size(), " scores for ", rows(), " responses"));
  }
  scores_ = scores;
  const int64_t slots = responses_.size();
  std::vector<float> score_floats(scores.begin(), scores.end()), old(slots, 0.0f), ref(slots, 0.0f);
  if (!values_.empty()) value_slots_.assign(slots, 0.0f);
  std::vector<int64_t> groups(rows());
  for (int r = 0; r < rows(); ++r) {
    groups[r] = samples_[r].group;
    for (size_t j = 0; j < samples_[r].response.size(); ++j) {
      const int64_t slot = int64_t{r} * responses_.cols + j, at = position(r, static_cast<int>(j));
      old[slot] = old_[at];
      ref[slot] = ref_[at];
      if (!values_.empty()) value_slots_[slot] = values_[at];
    }
  }
  const std::vector<float> token_scores =
      scores_at_last_token(score_floats, response_mask_, responses_);
  kl_penalized_rewards penalized =
      apply_kl_penalty(token_scores, old, ref, response_mask_, responses_,
                       algorithm.use_kl_in_reward ? kl_coef : 0.0, algorithm.kl_penalty);
  rewards_ = std::move(penalized.rewards);
  kernels::cpu::kl_penalty(kl_.data(), nullptr, old.data(), ref.data(), slots,
                           algorithm.kl_penalty);
  using estimator = rl_algorithm::estimator;
  advantage_estimate estimate;
  switch (algorithm.adv_estimator) {
    case estimator::grpo:
      estimate =
          grpo(rewards_, response_mask_, responses_, groups, algorithm.norm_adv_by_std_in_grpo);
      break;
    case estimator::rloo:
      estimate = rloo(rewards_, response_mask_, responses_, groups);
      break;
    case estimator::reinforce_plus_plus: {
      TROUPE_ASSIGN_OR_RETURN(
          estimate, reinforce_plus_plus(rewards_, response_mask_, responses_, algorithm.gamma));
      break;
    }
    case estimator::reinforce_plus_plus_baseline: {
      TROUPE_ASSIGN_OR_RETURN(
          estimate, reinforce_plus_plus_baseline(rewards_, response_mask_, responses_, groups));
      break;
    }
    case estimator::gae: {
      if (values_.empty()) {
        return absl::FailedPreconditionError(
            "rollout batch: adv_estimator gae needs the critic's values, and none were set");
      }
      TROUPE_ASSIGN_OR_RETURN(estimate, gae(rewards_, value_slots_, response_mask_, responses_,
                                            algorithm.gamma, algorithm.lam));
      break;
    }
  }
  advantages_ = std::move(estimate.advantages);
  returns_ = std::move(estimate.returns);
  return penalized.current_kl;
}

std::vector<actor::rl_batch> rollout_batch::mini_batch(int first, int count, int ranks,
                                                       kernels::loss_agg_mode mode) const {
  // The weights over the whole mini-batch, every rank's rows together.
  std::vector<float> mask(int64_t{count} * seq_len_, 0.0f), weights(mask.size());
  for (int i = 0; i < count; ++i) {
    for (size_t j = 0; j < samples_[first + i].response.size(); ++j)
      mask[position(first + i, static_cast<int>(j)) - int64_t{first} * seq_len_] = 1.0f;
  }
  kernels::cpu::loss_agg_weights(weights.data(), mask.data(), count, seq_len_, mode);
  std::vector<actor::rl_batch> out;
  const even_split split{count, ranks};
  for (int k = 0; k < ranks; ++k) {
    const int per_rank = static_cast<int>(split.size(k));
    const int row = first + static_cast<int>(split.begin(k));
    actor::rl_batch b = sequences(row, per_rank);
    const int64_t begin = int64_t{row} * seq_len_, n = int64_t{per_rank} * seq_len_;
    b.old_log_probs.assign(old_.begin() + begin, old_.begin() + begin + n);
    b.ref_log_probs.assign(ref_.begin() + begin, ref_.begin() + begin + n);
    const int64_t local = split.begin(k) * seq_len_;
    b.weights.assign(weights.begin() + local, weights.begin() + local + n);
    const bool critic = !values_.empty();
    b.advantages.assign(n, 0.0f);
    if (critic) b.values.assign(n, 0.0f), b.returns.assign(n, 0.0f);
    for (int i = 0; i < per_rank; ++i) {
      for (size_t j = 0; j < samples_[row + i].response.size(); ++j) {
        const int64_t at = position(row + i, static_cast<int>(j)) - begin;
        const int64_t slot = int64_t{row + i} * responses_.cols + j;
        b.advantages[at] = advantages_[slot];
        if (critic) b.values[at] = value_slots_[slot], b.returns[at] = returns_[slot];
      }
    }
    out.push_back(std::move(b));
  }
  return out;
}

double rollout_batch::advantage(int r) const {
  return advantages_.at(int64_t{r} * responses_.cols);
}

double rollout_batch::reward(int r) const {
  double sum = 0;
  for (int j = 0; j < responses_.cols; ++j)
    sum += rewards_[int64_t{r} * responses_.cols + j];
  return sum;
}

double rollout_batch::kl(int r) const {
  double sum = 0;
  const size_t n = samples_.at(r).response.size();
  for (size_t j = 0; j < n; ++j)
    sum += kl_[int64_t{r} * responses_.cols + j];
  return sum / static_cast<double>(n);
}

nlohmann::json rollout_batch::data_metrics(int max_response) const {
  nlohmann::json m;
  std::vector<double> rewards, response_lengths, prompt_lengths, advantages, returns, values;
  int clipped = 0;
  double diff_max = 0, diff_sum = 0;
  int64_t diff_count = 0;
  for (int r = 0; r < rows(); ++r) {
    const rollout_sample& s = samples_[r];
    rewards.push_back(reward(r));
    response_lengths.push_back(static_cast<double>(s.response.size()));
    prompt_lengths.push_back(static_cast<double>(s.prompt.size()));
    if (static_cast<int>(s.response.size()) >= max_response) ++clipped;
    for (size_t j = 0; j < s.response.size(); ++j) {
      advantages.push_back(advantages_[int64_t{r} * responses_.cols + j]);
      returns.push_back(returns_[int64_t{r} * responses_.cols + j]);
      if (!value_slots_.empty()) values.push_back(value_slots_[int64_t{r} * responses_.cols + j]);
    }
    for (size_t j = 0; !old_from_rollout_ && j < s.logprobs.size() && j < s.response.size(); ++j) {
      const double d = std::abs(std::exp(double{s.logprobs[j]}) -
                                std::exp(double{old_[position(r, static_cast<int>(j))]}));
      diff_max = std::max(diff_max, d);
      diff_sum += d;
      ++diff_count;
    }
  }
  add_stats(m, "critic/score", scores_);
  add_stats(m, "critic/rewards", rewards);
  add_stats(m, "critic/advantages", advantages);
  add_stats(m, "critic/returns", returns);
  if (!values.empty()) {
    add_stats(m, "critic/values", values);
    // torch.var's unbiased variances over the response tokens, as veRL's compute_data_metrics.
    const auto var = [](const std::vector<double>& x) {
      double mean = 0, sq = 0;
      for (double v : x)
        mean += v;
      mean /= static_cast<double>(x.size());
      for (double v : x)
        sq += (v - mean) * (v - mean);
      return x.size() > 1 ? sq / static_cast<double>(x.size() - 1) : 0.0;
    };
    std::vector<double> diff(values.size());
    for (size_t i = 0; i < values.size(); ++i)
      diff[i] = returns[i] - values[i];
    m["critic/vf_explained_var"] = 1.0 - var(diff) / (var(returns) + 1e-5);
  }
  add_stats(m, "response_length", response_lengths);
  m["response_length/clip_ratio"] = static_cast<double>(clipped) / rows();
  add_stats(m, "prompt_length", prompt_lengths);
  if (!old_from_rollout_) {
    m["training/rollout_probs_diff_max"] = diff_max;
    m["training/rollout_probs_diff_mean"] = diff_count > 0 ? diff_sum / diff_count : 0.0;
  }
  return m;
}

}  // namespace troupe::apps::rlhf
