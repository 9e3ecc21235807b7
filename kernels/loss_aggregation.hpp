#pragma once

// How a per-token loss over a batch of responses becomes one number (veRL's `loss_agg_mode`).
// Every mode is linear in the per-token losses, so it is a weight per token: the aggregate is
// sum(weights * losses), and the gradient of the aggregate wrt a token's loss is its weight.

#include <optional>
#include <string_view>

namespace troupe::kernels {

enum class loss_agg_mode {
  token_mean,               ///< "token-mean": sum(m L) / (sum(m) + 1e-8)
  seq_mean_token_sum,       ///< "seq-mean-token-sum": mean over rows of sum_t m L
  seq_mean_token_mean,      ///< "seq-mean-token-mean": mean over rows of sum_t m L / sum_t m
  seq_mean_token_sum_norm,  ///< "seq-mean-token-sum-norm": sum(m L) / cols (Dr.GRPO)
};

/// veRL's name of `mode` ("token-mean", ...).
[[nodiscard]] std::string_view to_string(loss_agg_mode mode);
/// The mode named `name`, or nullopt.
[[nodiscard]] std::optional<loss_agg_mode> parse_loss_agg_mode(std::string_view name);

namespace cpu {
/// weights[r * cols + t] for a [rows x cols] mask (1 on response tokens, 0 on padding). A row
/// without tokens weighs nothing in seq-mean-token-mean (veRL's would be NaN).
void loss_agg_weights(float* weights, const float* mask, int rows, int cols, loss_agg_mode mode);
}  // namespace cpu

}  // namespace troupe::kernels
