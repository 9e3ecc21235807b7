#include "models/decoder/text_perplexity.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/decoder/decoder_cpu_batch.hpp"

namespace troupe::models {

absl::StatusOr<perplexity> text_perplexity(const decoder_layout& layout, const float* params,
                                           std::span<const int32_t> tokens, int window,
                                           int threads) {
  const decoder_config& c = layout.config();
  if (window < 2 || window > c.ctx) {
    return absl::InvalidArgumentError(absl::StrCat(
        "perplexity window of ", window, " tokens: it must be in [2, ", c.ctx, "] (the context)"));
  }
  if (tokens.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("perplexity of ", tokens.size(), " tokens: it needs at least 2"));
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.vocab) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token ", i, " is ", tokens[i], ", outside the vocabulary [0, ", c.vocab, ")"));
    }
  }
  // Windows of `window` tokens in rows of a [batch, window] batch; a row's targets are its next
  // tokens, -1 (not scored) at its last position and past its end. A lone last token is context
  // for nothing and left out.
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t windows = n / window + (n % window >= 2 ? 1 : 0);
  const int batch = std::max(1, threads);
  decoder_cpu_batch runner(layout, batch, threads);
  std::vector<int32_t> rows(int64_t{batch} * window), targets(rows.size());
  double nll = 0;
  int64_t scored = 0;
  for (int64_t first = 0; first < windows; first += batch) {
    const int count = static_cast<int>(std::min<int64_t>(batch, windows - first));
    std::fill(rows.begin(), rows.end(), 0);
    std::fill(targets.begin(), targets.end(), -1);
    for (int r = 0; r < count; ++r) {
      const int64_t begin = (first + r) * window, length = std::min<int64_t>(window, n - begin);
      for (int64_t i = 0; i < length; ++i) {
        rows[r * window + i] = tokens[begin + i];
        if (i + 1 < length) targets[r * window + i] = tokens[begin + i + 1];
      }
    }
    const loss_sum loss = runner.evaluate(params, count, window, rows.data(), targets.data());
    nll += loss.sum;
    scored += loss.tokens;
  }
  perplexity out;
  out.scored = scored;
  out.windows = windows;
  out.mean_nll = nll / static_cast<double>(scored);
  out.value = std::exp(out.mean_nll);
  return out;
}

}  // namespace troupe::models
