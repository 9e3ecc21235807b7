#include "kernels/loss_aggregation.hpp"

#include <cstdint>

namespace troupe::kernels {

std::string_view to_string(loss_agg_mode mode) {
  switch (mode) {
    case loss_agg_mode::token_mean:
      return "token-mean";
    case loss_agg_mode::seq_mean_token_sum:
      return "seq-mean-token-sum";
    case loss_agg_mode::seq_mean_token_mean:
      return "seq-mean-token-mean";
    case loss_agg_mode::seq_mean_token_sum_norm:
      return "seq-mean-token-sum-norm";
  }
  return "?";
}

std::optional<loss_agg_mode> parse_loss_agg_mode(std::string_view name) {
  for (auto mode : {loss_agg_mode::token_mean, loss_agg_mode::seq_mean_token_sum,
                    loss_agg_mode::seq_mean_token_mean, loss_agg_mode::seq_mean_token_sum_norm}) {
    if (to_string(mode) == name) return mode;
  }
  return std::nullopt;
}

namespace cpu {

void loss_agg_weights(float* weights, const float* mask, int rows, int cols, loss_agg_mode mode) {
  const int64_t n = int64_t{rows} * cols;
  double tokens = 0;
  for (int64_t i = 0; i < n; ++i)
    tokens += mask[i];
  for (int r = 0; r < rows; ++r) {
    const float* m = mask + int64_t{r} * cols;
    float* w = weights + int64_t{r} * cols;
    double scale = 0;
    switch (mode) {
      case loss_agg_mode::token_mean:
        scale = 1.0 / (tokens + 1e-8);
        break;
      case loss_agg_mode::seq_mean_token_sum:
        scale = 1.0 / rows;
        break;
      case loss_agg_mode::seq_mean_token_mean: {
        double row_tokens = 0;
        for (int t = 0; t < cols; ++t)
          row_tokens += m[t];
        scale = row_tokens > 0 ? 1.0 / (static_cast<double>(rows) * row_tokens) : 0.0;
        break;
      }
      case loss_agg_mode::seq_mean_token_sum_norm:
        scale = 1.0 / cols;
        break;
    }
    for (int t = 0; t < cols; ++t)
      w[t] = static_cast<float>(m[t] * scale);
  }
}

}  // namespace cpu
}  // namespace troupe::kernels
