#include "apps/rlhf/advantages.hpp"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "runtime/base/status.hpp"

namespace troupe::apps::rlhf {
namespace {

// Each row's summed reward (over every slot, as veRL sums).
std::vector<double> row_sums(std::span<const float> values, token_grid g) {
  std::vector<double> out(g.rows, 0.0);
  for (int r = 0; r < g.rows; ++r) {
    for (int t = 0; t < g.cols; ++t)
      out[r] += values[int64_t{r} * g.cols + t];
  }
  return out;
}

// The rows of each group.
std::map<int64_t, std::vector<int>> rows_by_group(std::span<const int64_t> group, int rows) {
  std::map<int64_t, std::vector<int>> out;
  for (int r = 0; r < rows; ++r)
    out[group[r]].push_back(r);
  return out;
}

double mean_of(const std::vector<double>& x, const std::vector<int>& rows) {
  double s = 0;
  for (int r : rows)
    s += x[r];
  return s / rows.size();
}

// One value per row, broadcast over the row's tokens (0 on padding).
std::vector<float> broadcast(const std::vector<double>& per_row, std::span<const float> mask,
                             token_grid g) {
  std::vector<float> out(g.size());
  for (int r = 0; r < g.rows; ++r) {
    for (int t = 0; t < g.cols; ++t) {
      const int64_t i = int64_t{r} * g.cols + t;
      out[i] = static_cast<float>(per_row[r] * mask[i]);
    }
  }
  return out;
}

std::vector<float> times_mask(std::vector<float> x, std::span<const float> mask) {
  for (size_t i = 0; i < x.size(); ++i)
    x[i] *= mask[i];
  return x;
}

}  // namespace

double masked_mean(std::span<const float> values, std::span<const float> mask) {
  double sum = 0, tokens = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (mask[i] != 0) sum += double{values[i]} * mask[i];
    tokens += mask[i];
  }
  return sum / (tokens + 1e-8);
}

absl::StatusOr<double> masked_var(std::span<const float> values, std::span<const float> mask,
                                  bool unbiased) {
  const double mean = masked_mean(values, mask);
  double squares = 0, tokens = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (mask[i] != 0) squares += (values[i] - mean) * (values[i] - mean) * mask[i];
    tokens += mask[i];
  }
  double var = squares / (tokens + 1e-8);
  if (unbiased) {
    if (tokens < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the variance over the batch's response tokens needs at least 2 of them, and there are ",
          tokens, ": raise the mini-batch size"));
    }
    var *= tokens / (tokens - 1);
  }
  return var;
}

absl::StatusOr<std::vector<float>> masked_whiten(std::span<const float> values,
                                                 std::span<const float> mask) {
  const double mean = masked_mean(values, mask);
  TROUPE_ASSIGN_OR_RETURN(const double var, masked_var(values, mask));
  const double scale = 1.0 / std::sqrt(var + 1e-8);
  std::vector<float> out(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    out[i] = static_cast<float>((values[i] - mean) * scale);
  return out;
}

std::vector<float> scores_at_last_token(std::span<const float> scores, std::span<const float> mask,
                                        token_grid g) {
  std::vector<float> out(g.size(), 0.0f);
  for (int r = 0; r < g.rows; ++r) {
    int last = -1;
    for (int t = 0; t < g.cols; ++t) {
      if (mask[int64_t{r} * g.cols + t] != 0) last = t;
    }
    if (last >= 0) out[int64_t{r} * g.cols + last] = scores[r];
  }
  return out;
}

kl_penalized_rewards apply_kl_penalty(std::span<const float> token_level_scores,
                                      std::span<const float> old_log_prob,
                                      std::span<const float> ref_log_prob,
                                      std::span<const float> mask, token_grid g, double beta,
                                      kernels::kl_estimator estimator) {
  std::vector<float> kl(g.size());
  kernels::cpu::kl_penalty(kl.data(), nullptr, old_log_prob.data(), ref_log_prob.data(), g.size(),
                           estimator);
  kl_penalized_rewards out;
  out.rewards.resize(g.size());
  for (int64_t i = 0; i < g.size(); ++i) {
    kl[i] *= mask[i];
    out.rewards[i] = static_cast<float>(token_level_scores[i] - beta * kl[i]);
  }
  for (int r = 0; r < g.rows; ++r) {
    const auto row = [&](std::span<const float> x) {
      return x.subspan(int64_t{r} * g.cols, g.cols);
    };
    out.current_kl += masked_mean(row(kl), row(mask));
  }
  out.current_kl /= g.rows;
  return out;
}

absl::StatusOr<advantage_estimate> gae(std::span<const float> token_level_rewards,
                                       std::span<const float> values, std::span<const float> mask,
                                       token_grid g, double gamma, double lam) {
  advantage_estimate out;
  std::vector<float> advantages(g.size());
  out.returns.resize(g.size());
  for (int r = 0; r < g.rows; ++r) {
    double next_value = 0, last_gae = 0;
    for (int t = g.cols - 1; t >= 0; --t) {
      const int64_t i = int64_t{r} * g.cols + t;
      const double m = mask[i];
      const double delta = token_level_rewards[i] + gamma * next_value - values[i];
      const double gae_t = delta + gamma * lam * last_gae;
      // Masked slots (observation tokens, padding) carry the next value and advantage through.
      next_value = values[i] * m + (1 - m) * next_value;
      last_gae = gae_t * m + (1 - m) * last_gae;
      advantages[i] = static_cast<float>(last_gae);
      out.returns[i] = static_cast<float>(last_gae + values[i]);
    }
  }
  TROUPE_ASSIGN_OR_RETURN(out.advantages, masked_whiten(advantages, mask));
  return out;
}

advantage_estimate grpo(std::span<const float> token_level_rewards, std::span<const float> mask,
                        token_grid g, std::span<const int64_t> group, bool norm_by_std,
                        double epsilon) {
  std::vector<double> scores = row_sums(token_level_rewards, g);
  std::vector<double> normalized(g.rows);
  for (const auto& [id, rows] : rows_by_group(group, g.rows)) {
    double mean = 0, std = 1;
    if (rows.size() > 1) {
      mean = mean_of(scores, rows);
      double squares = 0;
      for (int r : rows)
        squares += (scores[r] - mean) * (scores[r] - mean);
      std = std::sqrt(squares / (rows.size() - 1));
    }
    for (int r : rows)
      normalized[r] = norm_by_std ? (scores[r] - mean) / (std + epsilon) : scores[r] - mean;
  }
  std::vector<float> a = broadcast(normalized, mask, g);
  return {a, a};
}

advantage_estimate rloo(std::span<const float> token_level_rewards, std::span<const float> mask,
                        token_grid g, std::span<const int64_t> group) {
  std::vector<double> scores = row_sums(token_level_rewards, g);
  for (const auto& [id, rows] : rows_by_group(group, g.rows)) {
    if (rows.size() < 2) continue;
    const double n = rows.size();
    const double mean = mean_of(scores, rows);
    for (int r : rows)
      scores[r] = scores[r] * n / (n - 1) - mean * n / (n - 1);
  }
  std::vector<float> a = broadcast(scores, mask, g);
  return {a, a};
}

absl::StatusOr<advantage_estimate> reinforce_plus_plus(std::span<const float> token_level_rewards,
                                                       std::span<const float> mask, token_grid g,
                                                       double gamma) {
  advantage_estimate out;
  out.returns.resize(g.size());
  for (int r = 0; r < g.rows; ++r) {
    double running = 0;
    for (int t = g.cols - 1; t >= 0; --t) {
      const int64_t i = int64_t{r} * g.cols + t;
      running = token_level_rewards[i] + gamma * running;
      out.returns[i] = static_cast<float>(running);
      running *= mask[i];  // restart after the response's last token
    }
  }
  TROUPE_ASSIGN_OR_RETURN(std::vector<float> whitened, masked_whiten(out.returns, mask));
  out.advantages = times_mask(std::move(whitened), mask);
  return out;
}

absl::StatusOr<advantage_estimate> reinforce_plus_plus_baseline(
    std::span<const float> token_level_rewards, std::span<const float> mask, token_grid g,
    std::span<const int64_t> group) {
  std::vector<double> scores = row_sums(token_level_rewards, g);
  for (const auto& [id, rows] : rows_by_group(group, g.rows)) {
    const double mean = rows.size() > 1 ? mean_of(scores, rows) : 0.0;
    for (int r : rows)
      scores[r] -= mean;
  }
  const std::vector<float> centred = broadcast(scores, mask, g);
  TROUPE_ASSIGN_OR_RETURN(std::vector<float> whitened, masked_whiten(centred, mask));
  std::vector<float> a = times_mask(std::move(whitened), mask);
  return advantage_estimate{a, a};
}

}  // namespace troupe::apps::rlhf
